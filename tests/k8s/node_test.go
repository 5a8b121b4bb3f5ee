//go:build k8s

package k8s

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fikit/fikit/udp"
)

// bins are the binaries under test: FIKIT_BIN's fikit, fikit-replay, the
// hook and simgpu, and fikit built with the k8s tag (FIKIT_K8S_BIN, or
// FIKIT_BIN/fikit-k8s).
type bins struct{ dir, fikit, fikitK8s, replay, hook, simgpu string }

func requireBins(t *testing.T) bins {
	t.Helper()
	dir := os.Getenv("FIKIT_BIN")
	if dir == "" {
		t.Skip("FIKIT_BIN unset: make test-k8s sets it")
	}
	b := bins{dir: dir, fikit: filepath.Join(dir, "fikit"), fikitK8s: filepath.Join(dir, "fikit-k8s"), replay: filepath.Join(dir, "fikit-replay"),
		hook: filepath.Join(dir, "libfikit_hook.so"), simgpu: filepath.Join(dir, "simgpu")}
	if k := os.Getenv("FIKIT_K8S_BIN"); k != "" {
		b.fikitK8s = k
	}
	for _, p := range []string{b.fikit, b.fikitK8s, b.replay, b.hook, b.simgpu} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%v (make test-k8s builds them)", err)
		}
	}
	return b
}

// proc is a process the test started, in a process group of its own.
type proc struct {
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan struct{}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	out := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

func (p *proc) Pid() int    { return p.cmd.Process.Pid }
func (p *proc) log() string { return p.out.String() }

// stop ends the process group (SIGTERM, then SIGKILL) and waits.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// wait waits for the process to exit 0 and returns its output.
func (p *proc) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.stop()
		t.Fatalf("%s did not finish in %v:\n%s", p.cmd.Path, timeout, tailString(p.log(), 20))
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("%s: %v\n%s", p.cmd.Path, p.cmd.ProcessState, tailString(p.log(), 20))
	}
	return p.log()
}

type webhookProc struct {
	*proc
	port int
}

// startWebhook runs `fikit webhook` with the chart's certificate.
func startWebhook(t *testing.T, b bins, c *Cluster, sec *corev1.Secret) *webhookProc {
	t.Helper()
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write(t, crt, string(sec.Data["tls.crt"]))
	write(t, key, string(sec.Data["tls.key"]))
	port := freePort(t)
	p := start(t, os.Environ(), b.fikit, "webhook", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--tls-cert", crt, "--tls-key", key)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := hc.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook did not come up: %v\n%s", err, p.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &webhookProc{proc: p, port: port}
}

// daemonProc is `fikit serve` run with the chart's DaemonSet arguments.
type daemonProc struct {
	*proc
	b                      bins
	root, dataDir, sock    string
	replyDir, hookDir, shm string
}

// startDaemon runs the chart's init container (install-hook) and daemon
// with its arguments, the node's paths under a directory of the test's,
// and its service account's token.
func startDaemon(t *testing.T, ctx context.Context, c *Cluster, b bins, ms []Manifest) *daemonProc {
	t.Helper()
	var ds *appsv1.DaemonSet
	for _, m := range ms {
		if d, ok := m.Object.(*appsv1.DaemonSet); ok {
			ds = d
		}
	}
	root := nodeDir(t)
	policy := filepath.Join(root, "policy")
	write(t, policy, "namespace:infer 0 board\nnamespace:batch 5\n* 9\n")
	kc := c.KubeconfigFor(t, "daemon", daemonToken(t, ctx, c))
	// The token may read pods (of any namespace: the informer's list is
	// cluster-wide, by node) and nothing else.
	if err := leastPrivilege(ctx, kc); err != nil {
		t.Error(err)
	}
	// The daemon sees the node's /run/fikit at /run/fikit, as the
	// DaemonSet's hostPath mount puts it: a hook names its reply socket
	// by its path in the pod, the same path there.
	rewrite := func(a string) string {
		a = strings.ReplaceAll(a, "/var/lib/fikit", root+"/data")
		a = strings.ReplaceAll(a, "/etc/fikit/policy", policy)
		a = strings.ReplaceAll(a, "$(NODE_NAME)", node)
		// Other tests on this machine may hold the default UDP port.
		return strings.ReplaceAll(a, "--listen=127.0.0.1:7070", "--listen=127.0.0.1:0")
	}
	if err := os.MkdirAll(root+"/run", 0o755); err != nil {
		t.Fatal(err)
	}
	inNodeNS := func(bin string, args ...string) []string {
		return append([]string{"--mount", "--propagation", "private", "--", "sh", "-c",
			`mount -t tmpfs tmpfs /run && mkdir /run/fikit && mount --bind "$0/run" /run/fikit && exec "$@"`, root, bin}, args...)
	}
	var initArgs, args []string
	for _, a := range ds.Spec.Template.Spec.InitContainers[0].Args {
		initArgs = append(initArgs, rewrite(a))
	}
	if out, err := exec.Command("unshare", inNodeNS(b.fikit, initArgs...)...).CombinedOutput(); err != nil {
		t.Fatalf("install-hook: %v\n%s", err, out)
	}
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		args = append(args, rewrite(a))
	}
	args = append(args, "--kubeconfig="+kc, "--log-format=text", "--profile-runs=10")
	p := start(t, os.Environ(), "unshare", inNodeNS(b.fikitK8s, args...)...)
	d := &daemonProc{proc: p, b: b, root: root, dataDir: root + "/data", sock: root + "/run/sock/hooks.sock",
		replyDir: root + "/run/c", hookDir: root + "/run/lib", shm: fmt.Sprintf("/fikit-k8s-%d", os.Getpid())}
	t.Cleanup(func() { os.Remove("/dev/shm" + d.shm) })
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := d.statusErr(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not come up:\n%s", tailString(p.log(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

// taskStatus is what the test reads of `fikit status --json`.
type taskStatus struct {
	ID        uint32 `json:"id"`
	Key       string `json:"task_key"`
	Priority  int    `json:"priority"`
	PID       int    `json:"pid"`
	Verified  bool   `json:"pid_verified"`
	PodUID    string `json:"pod_uid"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Tenant    string `json:"tenant"`
}

func (d *daemonProc) statusErr() ([]taskStatus, error) {
	out, err := exec.Command(d.b.fikit, "status", "--data-dir", d.dataDir, "--json").Output()
	if err != nil {
		return nil, err
	}
	var st struct {
		Tasks []taskStatus `json:"tasks"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, err
	}
	return st.Tasks, nil
}

func (d *daemonProc) task(t *testing.T, key string) *taskStatus {
	t.Helper()
	ts, err := d.statusErr()
	if err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		if ts[i].Key == key {
			return &ts[i]
		}
	}
	return nil
}

func waitTasks(t *testing.T, d *daemonProc, n int) []taskStatus {
	t.Helper()
	var ts []taskStatus
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ts, _ = d.statusErr()
		if len(ts) >= n {
			return ts
		}
	}
	t.Fatalf("%d tasks, want %d: %+v\n%s", len(ts), n, ts, tailString(d.log(), 30))
	return nil
}

func (d *daemonProc) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(d.dataDir, "fikit.sock"))
	}}}
	resp, err := hc.Get("http://fikit/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body, "")
}

func parseMetrics(r io.Reader, prefix string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || (prefix != "" && !strings.HasPrefix(line, prefix)) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 && prefix == "" {
			name = name[:j]
		}
		m[name] += v
	}
	return m
}

// apiMetric sums the API server's metric lines that start with prefix.
func apiMetric(t *testing.T, c *Cluster, prefix string) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, c.Config.Host+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	for _, v := range parseMetrics(resp.Body, prefix) {
		sum += v
	}
	return sum
}

// podProc is a simulated pod: a hooked fikit-replay in its own pid,
// network and mount namespaces, in a cgroup named as the kubelet names it
// (systemd driver, containerd), that sees the node's fikit directories
// only as the webhook's mounts put them, with the environment the webhook
// gave the pod's container.
type podProc struct {
	*proc
	cgroup string
}

func cgroupRoot(t *testing.T) string {
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st syscall.Statfs_t
		if syscall.Statfs(d, &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
			return d
		}
	}
	t.Skip("no cgroup v2 hierarchy to name a pod's cgroup in")
	return ""
}

func startPod(t *testing.T, b bins, d *daemonProc, pod *corev1.Pod, key string) *podProc {
	t.Helper()
	uid := strings.ReplaceAll(string(pod.UID), "-", "_")
	cg := filepath.Join(cgroupRoot(t), "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+uid+".slice",
		"cri-containerd-"+strings.Repeat("ab", 32)+".scope")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for p := cg; strings.Contains(p, "kubepods"); p = filepath.Dir(p) {
			_ = os.Remove(p) // the outer slices only once empty
		}
	})
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CG=" + cg, "NODE=" + filepath.Join(d.root, "run"),
		"LD_LIBRARY_PATH=" + b.simgpu, "FIKIT_SIMGPU_SHM=" + d.shm, "FIKIT_LOG=info", "FIKIT_TASK_KEY=" + key}
	preload := ""
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "LD_PRELOAD" {
			preload = e.Value
			continue
		}
		env = append(env, e.Name+"="+e.Value)
	}
	env = append(env, "PRELOAD="+preload)
	runs, interval := "100000", ""
	if pod.Annotations["fikit.io/priority"] == "0" && pod.Namespace == "infer" {
		runs, interval = "500", "--interval=10ms"
	}
	script := `echo $$ > "$CG/cgroup.procs" && exec unshare --pid --net --mount --fork --propagation private -- sh -c '
mount -t tmpfs tmpfs /run &&
mkdir -p /run/fikit/lib /run/fikit/sock /run/fikit/c &&
mount --bind "$NODE/lib" /run/fikit/lib && mount -o remount,bind,ro /run/fikit/lib &&
mount --bind "$NODE/sock" /run/fikit/sock && mount -o remount,bind,ro /run/fikit/sock &&
mount --bind "$NODE/c" /run/fikit/c &&
exec env LD_PRELOAD="$PRELOAD" "$@"' sh "$@"`
	args := []string{"-c", script, "sh", b.replay, "--trace", "h100/mobilenet_4_fwd", "--runs", runs, "--cpu-ns", "5000", "--json", "--quiet"}
	if interval != "" {
		args = append(args, interval)
	}
	p := start(t, env, "/bin/sh", args...)
	return &podProc{proc: p, cgroup: cg}
}

// forge sends, from this process (no pod's), a Goodbye for each task
// without its token, and Registers claiming priority 0 in another's name:
// the daemon counts and drops the first; the second is this host
// process's own registration, judged by the * rule.
func forge(t *testing.T, d *daemonProc, tasks []taskStatus) {
	t.Helper()
	c, err := net.DialUnix("unixgram", &net.UnixAddr{Name: filepath.Join(d.replyDir, "forger"), Net: "unixgram"},
		&net.UnixAddr{Name: d.sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ts := range tasks {
		b, _ := udp.Append(nil, &udp.Goodbye{TaskID: ts.ID, Token: 12345})
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, ts := range tasks {
		if d.task(t, ts.Key) == nil {
			t.Errorf("a forged Goodbye removed task %s", ts.Key)
		}
	}
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// leastPrivilege checks what the daemon's token may do: list pods, not
// secrets, not create pods.
func leastPrivilege(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}); err != nil {
		return fmt.Errorf("the daemon's token cannot list its node's pods: %w", err)
	}
	if _, err := cs.CoreV1().Secrets(system).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("the daemon's token listing secrets: %v, want forbidden", err)
	}
	if _, err := cs.CoreV1().Pods("infer").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("the daemon's token creating a pod: %v, want forbidden", err)
	}
	return nil
}
