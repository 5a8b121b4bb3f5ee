package daemon

import (
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
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
