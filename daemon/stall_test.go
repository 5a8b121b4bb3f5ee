package daemon

import (
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A daemon that could not read for a while (waiting for a CPU, or for its
// lock) must not take the heartbeats queued in its socket for silence: it
// used to step a Tick before the first datagram it read after the stall and
// drop every task whose last message it had read longer than dead-after
// ago (the 64-client fault scenario: 8 live tasks dropped).
func TestStalledDaemonDoesNotDropLiveTasks(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter, cfg.DeadAfterWatched = int64(50*time.Millisecond), int64(50*time.Millisecond)
	cfg.HeartbeatInterval = int64(10 * time.Millisecond)
	s := startServer(t, store.NewMemory(), cfg, "")
	h := newFakeHook(t, s)
	id := h.register("stalled", 5).TaskID

	// The daemon stalls for six dead-afters while the task keeps sending
	// heartbeats, then reads them.
	s.mu.Lock()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		h.send(&udp.Heartbeat{TaskID: id})
	}
	s.mu.Unlock()
	// The task goes on as before; the daemon catches up.
	for range 5 {
		time.Sleep(10 * time.Millisecond)
		h.send(&udp.Heartbeat{TaskID: id})
	}
	s.mu.Lock()
	_, alive := s.tasks[scheduler.TaskID(id)]
	dropped := s.core.Stats().Dropped
	s.mu.Unlock()
	if !alive || dropped != 0 {
		t.Fatalf("a live task was dropped after the daemon stalled (registered: %v, drops: %d)", alive, dropped)
	}

	// A task that really falls silent is still dropped.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		_, alive = s.tasks[scheduler.TaskID(id)]
		s.mu.Unlock()
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a silent task was never dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
