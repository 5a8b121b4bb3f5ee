package daemon

import (
	"net"
	"os/exec"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A process that is not the task's cannot speak for it: a Goodbye or a
// LaunchRequest under another task's ID, from a socket of another process,
// used to remove that task or be granted as it. Now such datagrams are
// dropped and counted, while the task's own sockets — the one it
// registered from and the others its process has open (a hook's request
// sockets, one per thread) — are heard as before.
func TestForgedMessagesAreDropped(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter = int64(10 * time.Second)
	s := startServer(t, store.NewMemory(), cfg, "")
	ctrl, thread := newFakeHook(t, s), newFakeHook(t, s)
	victim := childHolding(t, ctrl.conn, thread.conn) // the task's process
	ctrl.send(&udp.Register{Seq: 1, TaskKey: "victim", PID: uint32(victim.Process.Pid), Priority: 5,
		DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	ack, ok := ctrl.recv(2 * time.Second).(*udp.RegisterAck)
	if !ok {
		t.Fatal("no RegisterAck")
	}
	id := scheduler.TaskID(ack.TaskID)
	// The check that the registering pid owns the socket runs in the
	// background.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		proven := s.tasks[id] != nil && s.tasks[id].proven
		s.mu.Unlock()
		if proven {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's process was never shown to own its socket")
		}
	}

	attacker := newFakeHook(t, s) // a socket of this process, not the task's
	attacker.send(&udp.Goodbye{TaskID: ack.TaskID})
	attacker.send(&udp.LaunchRequest{TaskID: ack.TaskID, Seq: 1, KernelID: 5})
	if m := attacker.recv(200 * time.Millisecond); m != nil {
		t.Errorf("the forger got an answer: %#v", m)
	}
	s.mu.Lock()
	_, alive := s.tasks[id]
	s.mu.Unlock()
	if !alive {
		t.Fatal("a forged Goodbye removed the task")
	}
	if got := forgedCount(t, s); got != 2 {
		t.Errorf("fikit_forged_messages_total = %v, want 2", got)
	}

	// The task's own request socket is heard: its request is answered.
	thread.send(&udp.LaunchRequest{TaskID: ack.TaskID, Seq: 1, KernelID: 5})
	switch m := thread.recv(2 * time.Second).(type) {
	case *udp.Grant, *udp.Hold:
	default:
		t.Fatalf("the task's own request socket got %#v, want a Grant or Hold", m)
	}
	ctrl.send(&udp.Goodbye{TaskID: ack.TaskID})
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		_, alive = s.tasks[id]
		s.mu.Unlock()
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's own Goodbye did not remove it")
		}
	}
	if got := forgedCount(t, s); got != 2 {
		t.Errorf("fikit_forged_messages_total = %v after the task's own messages, want 2", got)
	}
}

// childHolding starts `sleep` holding copies of conns' sockets, as a hooked
// process holds its sockets.
func childHolding(t *testing.T, conns ...*net.UDPConn) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	for _, c := range conns {
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func forgedCount(t *testing.T, s *Server) float64 {
	t.Helper()
	var m dto.Metric
	if err := s.met.forged.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A task that asks for more launches at once than a hook has threads is
// refused past scheduler.MaxWaitingPerTask: a process that sent 30,000
// requests drew 267,588 Holds, and the daemon remembered every one.
func TestRequestFloodIsBounded(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter, cfg.HolderTTL = int64(10*time.Second), int64(10*time.Second)
	s := startServer(t, store.NewMemory(), cfg, "")
	hp, lp := newFakeHook(t, s), newFakeHook(t, s)
	hp.register("hp", 0) // profiling at the top priority: the others wait
	id := lp.register("flood", 5).TaskID
	const sent = scheduler.MaxWaitingPerTask + 100
	for seq := uint32(1); seq <= sent; seq++ {
		lp.send(&udp.LaunchRequest{TaskID: id, Seq: seq, KernelID: 5})
		if seq%64 == 0 {
			time.Sleep(5 * time.Millisecond) // within the socket's buffer
		}
	}
	// The profiling holder holds them all the while.
	overloaded := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		m := lp.recv(50 * time.Millisecond)
		if e, ok := m.(*udp.Error); ok && e.Code == udp.CodeOverloaded && e.TaskID == id {
			overloaded++
		}
	}
	s.mu.Lock()
	stats, reqs := s.core.Stats(), len(s.tasks[scheduler.TaskID(id)].reqs)
	s.mu.Unlock()
	t.Logf("%d requests: %d waiting (the daemon remembers %d), %d refused (%d told), %d granted",
		sent, stats.Waiting, reqs, stats.Refused, overloaded, stats.Grants)
	if stats.Grants != 0 {
		t.Fatalf("%d requests were granted: the test's holder did not hold", stats.Grants)
	}
	if stats.Waiting != scheduler.MaxWaitingPerTask || reqs != scheduler.MaxWaitingPerTask || stats.Refused != sent-scheduler.MaxWaitingPerTask {
		t.Errorf("want %d waiting and remembered, %d refused", scheduler.MaxWaitingPerTask, sent-scheduler.MaxWaitingPerTask)
	}
	if overloaded == 0 {
		t.Error("no refused request was told so (Error: overloaded)")
	}
}
