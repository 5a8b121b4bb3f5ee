package daemon

import (
	"net/netip"
	"testing"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// What intake makes of datagrams, the stage the transports feed: each
// event knows its task and source, a registration is admitted (the task it
// replaces leaves first, a copy of it is a sign of life), a datagram it
// refuses goes no further, and nothing reaches the core but through step.
func TestIntakeEvents(t *testing.T) {
	s := recordServer(t, store.NewMemory(), nil, nil)
	src := netip.MustParseAddrPort("127.0.0.1:40001")
	other := netip.MustParseAddrPort("127.0.0.1:40002")
	s.mu.Lock()
	defer s.mu.Unlock()
	take := func(from netip.AddrPort, m udp.Message) []event {
		t.Helper()
		b, err := udp.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		evs := append([]event(nil), s.intake(b, from)...)
		for _, ev := range evs {
			s.step(ev)
		}
		return evs
	}
	reg := &udp.Register{Seq: 1, TaskKey: "svc", Priority: 3, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu",
		HookFlags: udp.HookSendsToken}
	evs := take(src, reg)
	if len(evs) != 1 || evs[0].adm == nil || evs[0].src != src {
		t.Fatalf("Register: %+v", evs)
	}
	first := evs[0].task
	if r, ok := evs[0].core.(scheduler.TaskRegistered); !ok || r.Task != first || s.tasks[first] == nil {
		t.Fatalf("Register: %+v, task kept: %v", evs[0].core, s.tasks[first] != nil)
	}
	token := s.tasks[first].token

	// The same Register again (its ack was late): a heartbeat, no new task.
	if evs := take(src, reg); len(evs) != 1 || evs[0].then != afterReack || evs[0].task != first {
		t.Errorf("the same Register again: %+v", evs)
	}
	// A new registration from the same socket replaces the task.
	reg2 := *reg
	reg2.Seq = 2
	evs = take(src, &reg2)
	if len(evs) != 2 || evs[0].then != afterReplaced || evs[0].task != first {
		t.Fatalf("a new Register from the same socket: %+v", evs)
	}
	second := evs[1].task
	if _, ok := evs[1].core.(scheduler.TaskRegistered); !ok || second == first || s.tasks[first] != nil || s.tasks[second] == nil {
		t.Fatalf("the replacement: %+v; tasks %v", evs[1], s.tasks)
	}
	token = s.tasks[second].token

	// Messages about the task carry it; a request with the board off is
	// one event.
	if evs := take(src, &udp.LaunchRequest{TaskID: uint32(second), Seq: 1, KernelID: 7, Token: token}); len(evs) != 1 ||
		evs[0].task != second || evs[0].src != src {
		t.Errorf("LaunchRequest: %+v", evs)
	}
	if evs := take(other, &udp.RunEnd{TaskID: uint32(second), Run: 1, Kernels: 1, Reason: udp.ReasonStreamSync, Token: token}); len(evs) != 1 ||
		evs[0].task != second || evs[0].src != other {
		t.Errorf("RunEnd from another socket of the task: %+v", evs)
	}
	// Refused at intake: the wrong token, a daemon-to-hook message.
	if evs := take(src, &udp.Heartbeat{TaskID: uint32(second), Token: token + 1}); len(evs) != 0 {
		t.Errorf("a heartbeat with another registration's token: %+v", evs)
	}
	if evs := take(src, &udp.Grant{TaskID: uint32(second), Seq: 1}); len(evs) != 0 {
		t.Errorf("a Grant sent to the daemon: %+v", evs)
	}
	// A Goodbye: the task leaves, and the daemon forgets it.
	if evs := take(src, &udp.Goodbye{TaskID: uint32(second), Token: token}); len(evs) != 1 || evs[0].then != afterGoodbye ||
		s.tasks[second] != nil {
		t.Errorf("Goodbye: %+v; task kept: %v", evs, s.tasks[second] != nil)
	}
}
