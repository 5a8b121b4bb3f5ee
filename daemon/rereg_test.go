package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A burst of Registers from one hook socket for one GPU (a hook
// re-registering after a restart or a drop, each stale datagram drawing an
// Error(unknown task)) leaves one task, the newest; another socket's task on
// the same GPU, or the same socket on another GPU, is left alone.
func TestReRegistrationReplacesOlderTask(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter = int64(10 * time.Second) // no drops while the test runs
	cfg.HeartbeatInterval = int64(time.Second)
	s := startServer(t, store.NewMemory(), cfg, "")
	h, other := newFakeHook(t, s), newFakeHook(t, s)
	keep := other.register("other", 5)
	var last uint32
	for i := 0; i < 4; i++ {
		last = h.register("svc", 0).TaskID
	}
	tasks := s.Status().Tasks
	if len(tasks) != 2 {
		t.Fatalf("%d tasks after 4 registrations from one socket and 1 from another: %+v", len(tasks), tasks)
	}
	ids := map[uint32]bool{}
	for _, ta := range tasks {
		ids[uint32(ta.ID)] = true
	}
	if !ids[last] || !ids[keep.TaskID] {
		t.Errorf("tasks %v, want the newest (%d) and the other socket's (%d)", ids, last, keep.TaskID)
	}
}

// An empty task key, or one longer than a hook ever sends, is refused with
// a clear Error and registers nothing.
func TestRegisterRefusesBadTaskKeys(t *testing.T) {
	s := startServer(t, store.NewMemory(), scheduler.DefaultConfig(), "")
	h := newFakeHook(t, s)
	for _, key := range []string{"", strings.Repeat("k", kernelid.MaxTaskKeyLen+1), strings.Repeat("k", 1300)} {
		h.send(&udp.Register{Seq: 1, TaskKey: key, PID: 1, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
		e, ok := h.recv(2 * time.Second).(*udp.Error)
		if !ok || e.Code != udp.CodeInvalidValue || !strings.Contains(e.Message, "task key") {
			t.Errorf("key of %d bytes: got %#v, want an invalid-value Error about the task key", len(key), e)
		}
	}
	if n := len(s.Status().Tasks); n != 0 {
		t.Errorf("%d tasks registered", n)
	}
	if a := h.register(strings.Repeat("k", kernelid.MaxTaskKeyLen), 1); a.TaskID == 0 {
		t.Error("a key of exactly the maximum length was refused")
	}
}

// A Register sent again with the same seq (the hook's retry after no answer
// in time: the daemon was waiting for a CPU) is the same registration: the
// same ack, one task. With 64 clients on 2 cores, treating it as a new one
// registered tasks twice, and the hook ignored the first ack.
func TestRegisterRetransmissionIsIdempotent(t *testing.T) {
	s := startServer(t, store.NewMemory(), scheduler.DefaultConfig(), "")
	h := newFakeHook(t, s)
	var acks []*udp.RegisterAck
	for i := 0; i < 3; i++ {
		h.send(&udp.Register{Seq: 7, TaskKey: "svc", PID: 1, Priority: 0, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
		a, ok := h.recv(2 * time.Second).(*udp.RegisterAck)
		if !ok {
			t.Fatalf("copy %d: no RegisterAck", i+1)
		}
		acks = append(acks, a)
	}
	for _, a := range acks[1:] {
		if *a != *acks[0] {
			t.Errorf("acks differ: %+v, first %+v", a, acks[0])
		}
	}
	if n := len(s.Status().Tasks); n != 1 {
		t.Errorf("%d tasks after one registration sent three times", n)
	}
}
