//go:build k8s

package k8s

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	psapi "k8s.io/pod-security-admission/api"
	pspolicy "k8s.io/pod-security-admission/policy"
)

const (
	release = "fikit"
	system  = "fikit-system"
	node    = "gpu-node-a"
)

// TestAgainstAPIServer is `make test-k8s`: the chart, the webhook, the
// daemon's informer and a simulated pod against a real kube-apiserver and
// etcd (docs/kubernetes.md "Tested here").
func TestAgainstAPIServer(t *testing.T) {
	bins := requireBins(t)
	c := StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cs := c.Client

	mustNS(t, ctx, c, system, nil)
	// 1. The chart's manifests, rendered as helm template with the server
	// for its lookup, applied server-side: the server validates them.
	ms, err := Render(release, system, nil, c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, c.Config, system, ms); err != nil {
		t.Fatalf("the server refused the chart: %v", err)
	}
	sec, err := cs.CoreV1().Secrets(system).Get(ctx, "fikit-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An upgrade renders again: the lookup keeps the certificate.
	ms2, err := Render(release, system, nil, c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, c.Config, system, ms2); err != nil {
		t.Fatal(err)
	}
	sec2, _ := cs.CoreV1().Secrets(system).Get(ctx, "fikit-webhook-tls", metav1.GetOptions{})
	if string(sec2.Data["tls.crt"]) != string(sec.Data["tls.crt"]) {
		t.Error("a second render replaced the webhook's certificate: the caBundle and the Secret would part")
	}
	t.Logf("chart applied server-side: %d objects", len(ms))

	// 2. The webhook, with the chart's certificate, reached through the
	// chart's MutatingWebhookConfiguration and Service: the API server
	// routes to the Service's endpoints (--enable-aggregator-routing), and
	// this test makes the EndpointSlice no controller makes here.
	wh := startWebhook(t, bins, c, sec)
	makeSlice(t, ctx, c, wh.port)
	for _, ns := range []string{"infer", "batch", "strict"} {
		labels := map[string]string{"fikit.io/inject": "enabled"}
		if ns == "strict" {
			labels["pod-security.kubernetes.io/enforce"] = "baseline"
		}
		mustNS(t, ctx, c, ns, labels)
	}
	hp := waitMutated(t, ctx, c, gpuPod("infer", "hp", "0", nil))
	checkMutated(t, hp, "0")
	lp := mustCreate(t, ctx, c, gpuPod("batch", "lp", "0", nil))
	checkMutated(t, lp, "0")

	// The mutated pod strict-decodes, and Pod Security says which levels
	// admit it: privileged only (hostPath volumes).
	judge(t, hp)
	if _, err := cs.CoreV1().Pods("strict").Create(ctx, gpuPod("strict", "s", "1", nil), metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "hostPath") {
		t.Errorf("a mutated pod in a baseline namespace: %v, want refused for hostPath", err)
	}

	// 3. Bad input the webhook sees (issue 35 item 6), through the server.
	noGPU := gpuPod("infer", "cpu-only", "", nil)
	noGPU.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	if p := mustCreate(t, ctx, c, noGPU); p.Annotations["fikit.io/injected"] != "no-gpu" || hasEnv(p, "LD_PRELOAD") {
		t.Errorf("pod without a GPU: %v", p.Annotations)
	}
	out := gpuPod("infer", "opted-out", "", map[string]string{"fikit.io/inject": "false"})
	if p := mustCreate(t, ctx, c, out); p.Annotations["fikit.io/injected"] != "opted-out" || hasEnv(p, "LD_PRELOAD") {
		t.Errorf("opted-out pod: %v", p.Annotations)
	}
	own := gpuPod("infer", "own-preload", "", nil)
	own.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LD_PRELOAD", Value: "/usr/lib/libjemalloc.so"}}
	if p := mustCreate(t, ctx, c, own); envOf(p, "LD_PRELOAD") != "/usr/lib/libjemalloc.so:/run/fikit/lib/$LIB/libfikit_hook.so" {
		t.Errorf("pod with its own LD_PRELOAD: %q", envOf(p, "LD_PRELOAD"))
	}

	// 4. The daemon, with the chart's DaemonSet arguments, its service
	// account's token (RBAC: pods only) and its informer, and two
	// simulated pods on this machine.
	d := startDaemon(t, ctx, c, bins, ms)
	infer := startPod(t, bins, d, hp, "resnet-hp")
	batch := startPod(t, bins, d, lp, "bert-lp")
	tasks := waitTasks(t, d, 2)
	for _, ts := range tasks {
		switch ts.Namespace {
		case "infer":
			if ts.Priority != 0 || ts.Pod != "hp" || ts.PodUID != string(hp.UID) || !ts.Verified || !inPod(ts.PID, hp) {
				t.Errorf("infer pod's task: %+v", ts)
			}
		case "batch":
			// Its annotation and its environment ask 0; its namespace's
			// rule caps it at 5.
			if ts.Priority != 5 || ts.Pod != "lp" || !inPod(ts.PID, lp) {
				t.Errorf("batch pod's task: %+v", ts)
			}
		default:
			t.Errorf("task of no namespace: %+v", ts)
		}
	}
	forge(t, d, tasks)
	r := infer.wait(t, 2*time.Minute)
	if !strings.Contains(r, "sharing the scheduler's board fd:scm_rights") {
		t.Errorf("the infer pod (rule board) did not get the board:\n%s", tailString(r, 15))
	}
	if strings.Contains(batch.log(), "sharing the scheduler's board") {
		t.Error("the batch pod (no board in its rule) got the board")
	}
	if m := d.metrics(t); m["fikit_grants_total"] == 0 || m["fikit_forged_messages_total"] < 2 {
		t.Errorf("grants %v, forged %v", m["fikit_grants_total"], m["fikit_forged_messages_total"])
	}
	// A pod deleted while its process runs: the task it has stays; what
	// registers for that pod later is not known (lowest priority).
	if err := cs.CoreV1().Pods("batch").Delete(ctx, "lp", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := d.task(t, "ns:batch/bert-lp"); got == nil {
		t.Error("deleting the pod dropped its running process's task")
	}
	batch.stop()

	// An injected pod that runs and never registers (a musl image: the
	// hook is not loaded) is counted by the daemon, from what the informer
	// says of it. No kubelet here: the test reports it running for an hour.
	musl := mustCreate(t, ctx, c, gpuPod("infer", "musl", "3", nil))
	musl.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: time.Now().Add(-time.Hour)}}
	if _, err := cs.CoreV1().Pods("infer").UpdateStatus(ctx, musl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var unhooked float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if unhooked = d.metrics(t)["fikit_pods_injected_unregistered"]; unhooked == 1 {
			break
		}
	}
	if unhooked != 1 {
		t.Errorf("fikit_pods_injected_unregistered = %v, want 1 (the running injected pod that never registered)", unhooked)
	}

	// 5. The webhook down: failurePolicy Ignore lets the pod in un-hooked,
	// and the API server counts the fail-open.
	wh.stop()
	p := mustCreate(t, ctx, c, gpuPod("infer", "while-down", "1", nil))
	if hasEnv(p, "LD_PRELOAD") {
		t.Error("a pod created while the webhook was down was mutated")
	}
	if n := apiMetric(t, c, `apiserver_admission_webhook_fail_open_count{name="pods.fikit.io"`); n < 1 {
		t.Errorf("apiserver_admission_webhook_fail_open_count for pods.fikit.io = %v", n)
	}
}

func mustNS(t *testing.T, ctx context.Context, c *Cluster, name string, labels map[string]string) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller manager: the default service account is the test's.
	if _, err := c.Client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func gpuPod(ns, name, prio string, ann map[string]string) *corev1.Pod {
	if ann == nil {
		ann = map[string]string{}
	}
	if prio != "" {
		ann["fikit.io/priority"] = prio
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "infer", Image: "example.invalid/infer:1",
			Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu}}}},
	}
}

func mustCreate(t *testing.T, ctx context.Context, c *Cluster, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return got
}

// waitMutated creates p until the webhook mutated it: the API server's
// view of the EndpointSlice may lag its creation, and meanwhile
// failurePolicy Ignore admits the pod as it is.
func waitMutated(t *testing.T, ctx context.Context, c *Cluster, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := mustCreate(t, ctx, c, p.DeepCopy())
		if hasEnv(got, "LD_PRELOAD") || time.Now().After(deadline) {
			return got
		}
		_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		time.Sleep(500 * time.Millisecond)
	}
}

func checkMutated(t *testing.T, p *corev1.Pod, prio string) {
	t.Helper()
	want := map[string]string{"LD_PRELOAD": "/run/fikit/lib/$LIB/libfikit_hook.so", "FIKIT_SCHEDULER": "unix:/run/fikit/sock/hooks.sock",
		"FIKIT_PRIORITY": prio}
	for k, v := range want {
		if got := envOf(p, k); got != v {
			t.Errorf("pod %s/%s: %s=%q, want %q", p.Namespace, p.Name, k, got, v)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	if !mounts["/run/fikit/lib"].ReadOnly || !mounts["/run/fikit/sock"].ReadOnly || mounts["/run/fikit/c"].ReadOnly ||
		mounts["/run/fikit/c"].Name == "" || p.Annotations["fikit.io/injected"] != "true" {
		t.Errorf("pod %s/%s: mounts %v, annotations %v", p.Namespace, p.Name, mounts, p.Annotations)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/var/lib/fikit") {
			t.Errorf("pod mounts the daemon's data directory: %v", v)
		}
	}
}

// judge strict-decodes the pod as the server returned it and runs the Pod
// Security evaluator at each level.
func judge(t *testing.T, p *corev1.Pod) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back corev1.Pod
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	if _, _, err := strict.Decode(append([]byte(`{"apiVersion":"v1","kind":"Pod",`), b[1:]...), nil, &back); err != nil {
		t.Fatalf("the mutated pod does not strict-decode: %v", err)
	}
	ev, err := pspolicy.NewEvaluator(pspolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		level psapi.Level
		ok    bool
	}{{psapi.LevelPrivileged, true}, {psapi.LevelBaseline, false}, {psapi.LevelRestricted, false}} {
		res := pspolicy.AggregateCheckResults(ev.EvaluatePod(psapi.LevelVersion{Level: c.level, Version: psapi.LatestVersion()},
			&back.ObjectMeta, &back.Spec))
		if res.Allowed != c.ok {
			t.Errorf("Pod Security %s: allowed %v, want %v (%s)", c.level, res.Allowed, c.ok, res.ForbiddenDetail())
		} else {
			t.Logf("Pod Security %s: allowed %v %s", c.level, res.Allowed, res.ForbiddenDetail())
		}
	}
}

func envOf(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hasEnv(p *corev1.Pod, name string) bool {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// makeSlice points the webhook's Service at the test's webhook: a host name
// the API server alone resolves to 127.0.0.1 (an EndpointSlice may not
// name a loopback address).
func makeSlice(t *testing.T, ctx context.Context, c *Cluster, port int) {
	t.Helper()
	name, p := "https", int32(port)
	ready := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "fikit-webhook-test", Labels: map[string]string{discoveryv1.LabelServiceName: "fikit-webhook"}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.WebhookHost}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(system).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// daemonToken is a token of the chart's daemon service account: what the
// DaemonSet's pod would mount.
func daemonToken(t *testing.T, ctx context.Context, c *Cluster) string {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(system).CreateToken(ctx, "fikit-daemon",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// Where the test's files for the "node" live.
func nodeDir(t *testing.T) string {
	d := filepath.Join(os.TempDir(), "fikit-k8s-"+filepath.Base(t.TempDir()))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// inPod reports whether host pid pid is a process of the simulated pod:
// in the pod's cgroup, and in a pid namespace of its own (its NSpid has
// two levels: the task's pid is the kernel's, not the one it claimed).
func inPod(pid int, pod *corev1.Pod) bool {
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || !strings.Contains(string(cg), "pod"+strings.ReplaceAll(string(pod.UID), "-", "_")) {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "NSpid:" {
			return len(f) == 3
		}
	}
	return false
}
