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
	// Dead-after well above how long a loaded host keeps this test's own
	// sender from running (10 ms heartbeats): a gap of its own that long
	// would drop the task rightly.
	const deadAfter = 200 * time.Millisecond
	cfg.DeadAfter, cfg.DeadAfterWatched = int64(deadAfter), int64(deadAfter)
	cfg.HeartbeatInterval = int64(10 * time.Millisecond)
	s := startServer(t, store.NewMemory(), cfg, "")
	h := newFakeHook(t, s)
	id := h.register("stalled", 5).TaskID

	// The daemon stalls for six dead-afters while the task keeps sending
	// heartbeats, then reads them.
	var maxGap time.Duration
	last := time.Now()
	beat := func() {
		h.send(&udp.Heartbeat{TaskID: id})
		maxGap, last = max(maxGap, time.Since(last)), time.Now()
	}
	s.mu.Lock()
	for end := time.Now().Add(6 * deadAfter); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		beat()
	}
	s.mu.Unlock()
	// The task goes on as before; the daemon catches up.
	for range 5 {
		time.Sleep(10 * time.Millisecond)
		beat()
	}
	s.mu.Lock()
	_, alive := s.tasks[scheduler.TaskID(id)]
	dropped := s.core.Stats().Dropped
	s.mu.Unlock()
	if !alive || dropped != 0 {
		t.Fatalf("a live task was dropped after the daemon stalled (registered: %v, drops: %d; the test's own longest gap between heartbeats %v, dead-after %v)",
			alive, dropped, maxGap, deadAfter)
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
