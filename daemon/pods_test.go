package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/k8s/pods"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

const (
	podA = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	podB = "11111111-2222-3333-4444-555555555555"
)

// unixHook is a fake hook on the daemon's unix socket; this test process
// is its sender, and a fake /proc (procRoot) says which cgroup it is in.
type unixHook struct {
	t      *testing.T
	conn   *net.UnixConn
	regSeq uint32
	fds    []int // descriptors that came with answers
}

func newUnixHook(t *testing.T, sock string) *unixHook {
	t.Helper()
	local := filepath.Join(t.TempDir(), "reply")
	c, err := net.DialUnix("unixgram", &net.UnixAddr{Name: local, Net: "unixgram"}, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	h := &unixHook{t: t, conn: c}
	t.Cleanup(func() {
		c.Close()
		for _, fd := range h.fds {
			unix.Close(fd)
		}
	})
	return h
}

func (h *unixHook) send(m udp.Message) {
	h.t.Helper()
	b, err := udp.Append(nil, m)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.conn.Write(b); err != nil {
		h.t.Fatal(err)
	}
}

func (h *unixHook) recv(timeout time.Duration) udp.Message {
	h.t.Helper()
	buf, oob := make([]byte, 2048), make([]byte, 128)
	h.conn.SetReadDeadline(time.Now().Add(timeout))
	n, oobn, _, _, err := h.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil
	}
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				h.fds = append(h.fds, fds...)
			}
		}
	}
	m, err := udp.Decode(buf[:n])
	if err != nil {
		h.t.Fatalf("undecodable answer: %v", err)
	}
	return m
}

// register sends a Register and returns its ack and the Error that came
// before it, if any.
func (h *unixHook) register(key string, prio uint8) (*udp.RegisterAck, *udp.Error) {
	h.t.Helper()
	h.regSeq++
	// The pid it claims is not believed: the kernel's is.
	h.send(&udp.Register{Seq: h.regSeq, TaskKey: key, PID: 1, Priority: prio, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu",
		HookFlags: udp.HookSendsToken})
	var e *udp.Error
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		switch m := h.recv(time.Until(deadline)).(type) {
		case *udp.RegisterAck:
			return m, e
		case *udp.Error:
			e = m
		}
	}
	h.t.Fatal("no RegisterAck")
	return nil, nil
}

// setCgroup writes this process's cgroup in the fake /proc: in pod uid, or
// a host service's where uid is "".
func setCgroup(t *testing.T, proc, uid string) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := "0::/system.slice/fikit-test.service\n"
	if uid != "" {
		line = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") +
			".slice/cri-containerd-3b7f2c9d1e8a4f6b5c0d2e9f8a7b6c5d.scope\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

func startPodServer(t *testing.T, policy string, lookup pods.Lookup, board bool) (*Server, string, string) {
	t.Helper()
	pol, err := ParsePolicy(strings.NewReader(policy))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "hooks.sock")
	proc := filepath.Join(dir, "proc")
	c := Config{Listen: "127.0.0.1:0", ListenUnix: []string{sock}, Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(),
		Policy: pol, Pods: lookup, ProcRoot: proc}
	if board {
		c.Board = filepath.Join(dir, "board")
	}
	return startServerWith(t, c), sock, proc
}

func counter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPodPriorityByNamespace: a pod gets what its namespace's rule allows,
// whatever it claims; the fikit.io/priority annotation is its claim; a
// host service on the same socket keeps the uid rules; the task key and
// tenant carry the namespace; the board's descriptor comes with the answer
// only where the rule says board.
func TestPodPriorityByNamespace(t *testing.T) {
	lookup := pods.NewStatic(
		pods.Pod{UID: podA, Namespace: "infer", Name: "hp", ServiceAccount: "default"},
		pods.Pod{UID: podB, Namespace: "batch", Name: "lp", ServiceAccount: "default",
			Annotations: map[string]string{pods.PriorityAnnotation: "0"}},
	)
	s, sock, proc := startPodServer(t, "namespace:infer 0 board\nnamespace:batch 5\nuid:0 0\n* 9\n", lookup, true)

	setCgroup(t, proc, podA)
	hp := newUnixHook(t, sock)
	a, e := hp.register("resnet", 0)
	if e != nil {
		t.Errorf("infer pod claiming 0 told %q", e.Message)
	}
	if a.Board != udp.BoardInAnswer || len(hp.fds) != 1 {
		t.Errorf("infer pod (rule board): board %q, %d descriptors", a.Board, len(hp.fds))
	}

	// Another namespace's pod, whose annotation asks 0, gets 5: the
	// namespace's rule caps it, and it is told so.
	setCgroup(t, proc, podB)
	lp := newUnixHook(t, sock)
	a2, e2 := lp.register("bert", 0)
	if e2 == nil || e2.Code != udp.CodeInvalidValue || !strings.Contains(e2.Message, "registered at 5") {
		t.Errorf("batch pod claiming 0: error %+v", e2)
	}
	if a2.Board != "" || len(lp.fds) != 0 {
		t.Errorf("batch pod (no board in its rule) was given the board: %q, %d descriptors", a2.Board, len(lp.fds))
	}

	// A host service over the unix socket (root: uid:0 0) keeps uid rules.
	setCgroup(t, proc, "")
	host := newUnixHook(t, sock)
	if _, e := host.register("host-svc", 0); e != nil {
		t.Errorf("host service as root claiming 0 told %q", e.Message)
	}

	st := s.Status()
	got := map[string]string{}
	for _, ts := range st.Tasks {
		got[ts.Key] = strconv.Itoa(int(ts.Priority)) + " " + ts.Tenant + " " + ts.Namespace + "/" + ts.Pod + " pid " + strconv.Itoa(int(ts.PID))
	}
	me := strconv.Itoa(os.Getpid())
	want := map[string]string{
		"ns:infer/resnet": "0 namespace:infer infer/hp pid " + me,
		"ns:batch/bert":   "5 namespace:batch batch/lp pid " + me,
		"host-svc":        "0 uid:0 / pid " + me,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("task %s: %q, want %q (all %v)", k, got[k], w, got)
		}
	}
}

// TestUnknownPodRaisedWhenLearned: a pod the informer does not know yet
// registers at the lowest priority; once it is learned its hook is told to
// register again, and gets its namespace's priority.
func TestUnknownPodRaisedWhenLearned(t *testing.T) {
	lookup := pods.NewStatic()
	s, sock, proc := startPodServer(t, "namespace:infer 1\n* 5\n", lookup, false)
	setCgroup(t, proc, podA)
	h := newUnixHook(t, sock)
	a, e := h.register("svc", 1)
	if e == nil || !strings.Contains(e.Message, "not known yet") {
		t.Errorf("unknown pod: error %+v", e)
	}
	if st := s.Status(); len(st.Tasks) != 1 || st.Tasks[0].Priority != 9 || st.Tasks[0].Key != "pod:"+podA+"/svc" {
		t.Fatalf("unknown pod's task: %+v", st.Tasks)
	}
	lookup.Set(pods.Pod{UID: podA, Namespace: "infer", Name: "svc-0"})
	var told *udp.Error
	for deadline := time.Now().Add(3 * time.Second); told == nil && time.Now().Before(deadline); {
		if m, ok := h.recv(time.Until(deadline)).(*udp.Error); ok && m.Code == udp.CodeUnknownTask && m.TaskID == a.TaskID {
			told = m
		}
	}
	if told == nil {
		t.Fatal("the hook was not told to register again once its pod was known")
	}
	if _, e := h.register("svc", 1); e != nil {
		t.Errorf("known pod claiming its namespace's 1: %+v", e)
	}
	st := s.Status()
	if len(st.Tasks) != 1 || st.Tasks[0].Priority != 1 || st.Tasks[0].Namespace != "infer" {
		t.Errorf("after learning: %+v", st.Tasks)
	}
	if n := counter(t, s.met.podsRaised); n != 1 {
		t.Errorf("fikit_pod_tasks_raised_total = %v", n)
	}
}

// TestUnixSpeakerIsTheKernelsPid: over the unix socket a datagram speaks
// for a task only if the kernel names the task's process as its sender; a
// task registered by one process is not spoken for from another's socket
// even with its token (here: the daemon is told the task's process is
// another pid, as if this process had stolen the token).
func TestUnixSpeakerIsTheKernelsPid(t *testing.T) {
	s, sock, proc := startPodServer(t, "* 5\n", pods.NewStatic(pods.Pod{UID: podA, Namespace: "infer"}), false)
	setCgroup(t, proc, podA)
	h := newUnixHook(t, sock)
	a, _ := h.register("svc", 5)
	s.mu.Lock()
	s.tasks[scheduler.TaskID(a.TaskID)].pid++ // the task is another process's
	s.mu.Unlock()
	before := counter(t, s.met.forged)
	h.send(&udp.Goodbye{TaskID: a.TaskID, Token: a.Token})
	deadline := time.Now().Add(3 * time.Second)
	for counter(t, s.met.forged) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if counter(t, s.met.forged) != before+1 {
		t.Error("a Goodbye from another process's socket was not counted as forged")
	}
	if st := s.Status(); len(st.Tasks) != 1 {
		t.Errorf("the forged Goodbye removed the task: %+v", st.Tasks)
	}
}

// TestInjectedPodsThatNeverRegister (issue 35, bad input: an image whose
// libc is musl starts un-hooked): a running pod the webhook put under the
// hook that has not registered within silentAfter is counted, until its
// process registers; pods not injected, or just started, are not.
func TestInjectedPodsThatNeverRegister(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	injected := map[string]string{pods.InjectedAnnotation: "true"}
	lookup := pods.NewStatic(
		pods.Pod{UID: podA, Namespace: "infer", Name: "musl", Annotations: injected, Running: true, RunningSince: long},
		pods.Pod{UID: podB, Namespace: "infer", Name: "fresh", Annotations: injected, Running: true, RunningSince: time.Now()},
		pods.Pod{UID: "22222222-2222-3333-4444-555555555555", Namespace: "infer", Name: "cpu", Running: true, RunningSince: long,
			Annotations: map[string]string{pods.InjectedAnnotation: "no-gpu"}},
	)
	s, sock, proc := startPodServer(t, "* 5\n", lookup, false)
	gauge := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.unhookedPods(time.Now())
	}
	if n := gauge(); n != 1 {
		t.Fatalf("%d un-hooked pods, want 1 (the injected one running for an hour)", n)
	}
	setCgroup(t, proc, podA)
	newUnixHook(t, sock).register("svc", 5)
	if n := gauge(); n != 0 {
		t.Errorf("%d un-hooked pods after its process registered, want 0", n)
	}
}

// TestUnixWakeNotLost: a unix datagram queued while the loop is between a
// read that returned at its deadline and the clearing of that deadline
// (its wake-up is cleared with it) is still taken at once, not when some
// other datagram or timer next wakes the loop.
func TestUnixWakeNotLost(t *testing.T) {
	pol, _ := ParsePolicy(strings.NewReader("* 5\n"))
	dir := t.TempDir()
	sock := filepath.Join(dir, "hooks.sock")
	proc := filepath.Join(dir, "proc")
	setCgroup(t, proc, "")
	s, err := New(Config{Listen: "127.0.0.1:0", ListenUnix: []string{sock}, Store: store.NewMemory(),
		Scheduler: scheduler.DefaultConfig(), Policy: pol, ProcRoot: proc})
	if err != nil {
		t.Fatal(err)
	}
	h := newUnixHook(t, sock)
	var once sync.Once
	s.onDeadlineRead = func() {
		once.Do(func() {
			h.regSeq++
			h.send(&udp.Register{Seq: h.regSeq, TaskKey: "svc", PID: 1, Priority: 5, DeviceUUID: [16]byte{1}, DeviceName: "g"})
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				s.unixIn.mu.Lock()
				n := len(s.unixIn.queue)
				s.unixIn.mu.Unlock()
				if n > 0 {
					return // queued, and its wake-up given
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond)
	_ = s.conn.SetReadDeadline(aLongTimeAgo) // a deadline read, as the timer's
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if _, ok := h.recv(time.Until(deadline)).(*udp.RegisterAck); ok {
			return
		}
	}
	t.Fatal("the Register queued during a deadline read was not answered")
}
