//go:build k8s

package k8s

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Cluster is an etcd and a kube-apiserver on 127.0.0.1, nothing else: no
// controller manager, scheduler, kubelet, DNS or kube-proxy. Objects a
// controller would make (service accounts, endpoint slices) the tests make.
type Cluster struct {
	Config     *rest.Config
	Client     kubernetes.Interface
	Kubeconfig string
	Dir        string
	// WebhookHost is the name the API server resolves to 127.0.0.1 (its own
	// /etc/hosts, in a mount namespace of its own): an EndpointSlice may
	// not name a loopback address, but may name a host (FQDN).
	WebhookHost string
	Token       string
}

// toolsDir is where tools.sh cached kube-apiserver and etcd: built there
// once per machine (about 25 minutes on 2 cores), found again after.
func toolsDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("FIKIT_K8S_TOOLS"); d != "" {
		return d
	}
	out, err := exec.Command(filepath.Join(Here(), "tools.sh")).Output()
	if err != nil {
		t.Fatalf("tools.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartCluster starts etcd and kube-apiserver; the test's cleanup stops
// them.
func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the API server runs in a mount namespace of its own: needs root")
	}
	tools := toolsDir(t)
	dir := t.TempDir()
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	etcd := exec.Command(filepath.Join(tools, "etcd"), "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peerPort), "--log-level", "warn")
	startLogged(t, etcd, filepath.Join(dir, "etcd.log"))

	token := "fikit-test-admin-token"
	tokens := filepath.Join(dir, "tokens.csv")
	write(t, tokens, token+",admin,admin,system:masters\n")
	saKey := filepath.Join(dir, "sa.key")
	write(t, saKey, string(ecKeyPEM(t)))
	hosts := filepath.Join(dir, "hosts")
	const webhookHost = "webhook.fikit.test"
	write(t, hosts, "127.0.0.1 localhost "+webhookHost+"\n::1 localhost\n")
	args := []string{
		"--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort), "--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens, "--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		// Addresses are only allocated from it: no packet goes there.
		"--service-cluster-ip-range=192.0.2.0/24",
		"--enable-aggregator-routing=true", "--allow-privileged=true",
		// No endpoints for the kubernetes Service: a loopback address may
		// not be one.
		"--endpoint-reconciler-type=none",
		"--enable-admission-plugins=PodSecurity",
	}
	// Its own /etc/hosts: the webhook's endpoint name resolves to loopback
	// for the API server alone.
	api := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts, filepath.Join(tools, "kube-apiserver"))
	api.Args = append(api.Args, args...)
	startLogged(t, api, filepath.Join(dir, "apiserver.log"))

	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	cfg := &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}
	if err := waitReady(cfg, 3*time.Minute); err != nil {
		t.Fatalf("kube-apiserver not ready: %v\n%s", err, tailFile(filepath.Join(dir, "apiserver.log"), 30))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	write(t, kc, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, host, token))
	return &Cluster{Config: cfg, Client: cs, Kubeconfig: kc, Dir: dir, WebhookHost: webhookHost, Token: token}
}

// KubeconfigFor writes a kubeconfig that authenticates with token.
func (c *Cluster) KubeconfigFor(t *testing.T, name, token string) string {
	t.Helper()
	kc := filepath.Join(c.Dir, name+".kubeconfig")
	write(t, kc, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: u}}]
current-context: test
`, c.Config.Host, token))
	return kc
}

func waitReady(cfg *rest.Config, timeout time.Duration) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		resp, err := hc.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

// startLogged starts cmd with its output in log; the test's cleanup ends
// it (SIGTERM, then SIGKILL) and waits.
func startLogged(t *testing.T, cmd *exec.Cmd, log string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		f.Close()
		if t.Failed() {
			t.Logf("%s:\n%s", filepath.Base(log), tailFile(log, 15))
		}
	})
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ecKeyPEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
