package daemon

import (
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// TestRegistrationToken: a hook that says it sends its registration's
// token is heard only with it, from whatever socket, even where the daemon
// cannot tie the task to a process (here: a made-up pid): a Goodbye or a
// request without the token, or with another, is dropped and counted.
func TestRegistrationToken(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter, cfg.HeartbeatInterval = int64(10*time.Second), int64(time.Second)
	s := startServer(t, store.NewMemory(), cfg, "")
	h, other := newFakeHook(t, s), newFakeHook(t, s)
	h.send(&udp.Register{Seq: 1, TaskKey: "svc", PID: 999999, Priority: 0, DeviceUUID: [16]byte{1},
		DeviceName: "test-gpu", HookFlags: udp.HookSendsToken})
	a := recvType[*udp.RegisterAck](t, h, 2*time.Second)
	if a.Token == 0 {
		t.Fatal("no token for a hook that sends it")
	}
	// An old-style hook gets none.
	old := newFakeHook(t, s)
	if oa := old.register("old", 5); oa.Token != 0 {
		t.Fatalf("token %d for a hook that does not send it", oa.Token)
	}
	tasks := func() int { return len(s.Status().Tasks) }
	for _, tok := range []uint64{0, a.Token + 1} {
		other.send(&udp.Goodbye{TaskID: a.TaskID, Token: tok})
		h.send(&udp.Goodbye{TaskID: a.TaskID, Token: tok}) // even from its own socket
	}
	for other.recv(50*time.Millisecond) != nil {
	} // the answers to the goodbyes
	other.send(&udp.LaunchRequest{TaskID: a.TaskID, Seq: 1, KernelID: 5})
	if m := other.recv(100 * time.Millisecond); m != nil {
		t.Fatalf("a request without the token was answered: %#v", m)
	}
	// With another registration's token: not granted, told to register
	// again (a hook of a previous daemon whose task ID is now another's).
	other.send(&udp.LaunchRequest{TaskID: a.TaskID, Seq: 1, KernelID: 5, Token: a.Token + 1})
	if e, ok := other.recv(time.Second).(*udp.Error); !ok || e.Code != udp.CodeUnknownTask || e.TaskID != a.TaskID {
		t.Fatalf("a request with a stale token drew %#v, want Error(unknown task)", e)
	}
	if n := tasks(); n != 2 {
		t.Fatalf("%d tasks after forged goodbyes, want 2", n)
	}
	if n := forgedCount(t, s); n != 6 {
		t.Errorf("forged messages counted %v, want 6", n)
	}
	// With the token, from another socket of the hook (a thread's), it is
	// heard.
	other.send(&udp.LaunchRequest{TaskID: a.TaskID, Seq: 1, KernelID: 5, Token: a.Token})
	if g := recvType[*udp.Grant](t, other, 2*time.Second); g.Seq != 1 {
		t.Fatalf("grant %+v", g)
	}
	h.send(&udp.Goodbye{TaskID: a.TaskID, Token: a.Token})
	deadline := time.Now().Add(2 * time.Second)
	for tasks() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := tasks(); n != 1 {
		t.Fatalf("%d tasks after the real goodbye, want 1", n)
	}
}
