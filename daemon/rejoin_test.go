package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// runUntilStopped starts a daemon and returns it with a function that stops
// it (as SIGTERM does) and waits for Run to return.
func runUntilStopped(t *testing.T, st store.Store, cfg scheduler.Config) (*Server, func()) {
	t.Helper()
	s, err := New(Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("daemon did not shut down")
		}
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			stop()
		}
	})
	return s, stop
}

// A restarted daemon holds the places of the tasks the previous one had
// (its roster, in the store): the low priority's hook, back first, waits —
// its request is held, not granted — until the high priority returns.
// With --rejoin-grace 0 it is the best priority the daemon knows and holds
// at once (the priority inversion of issue 38).
func TestRestartHoldsPlacesOfKnownTasks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"grace", time.Minute}, {"off", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			st := keptStore{store.NewMemory()}
			cfg := scheduler.DefaultConfig()
			cfg.DeadAfter = int64(10 * time.Second) // no drops while the test runs
			cfg.HeartbeatInterval = int64(time.Second)
			cfg.RejoinGrace = int64(tc.grace) // longer than the test: only a return ends a place

			d1, stop := runUntilStopped(t, st, cfg)
			newFakeHook(t, d1).register("hp", 0)
			newFakeHook(t, d1).register("lp", 5)
			if !waitUntil(5*time.Second, func() bool { ks, _ := st.Roster(); return len(ks) == 2 }) {
				ks, err := st.Roster()
				t.Fatalf("the roster was not written: %+v, %v", ks, err)
			}
			stop()

			d2, _ := runUntilStopped(t, st, cfg)
			lp := newFakeHook(t, d2)
			ack := lp.register("lp", 5)
			if tc.grace == 0 {
				if ack.Role != udp.RoleHolder {
					t.Errorf("without a grace the low priority, alone, registered as %v, want holder", ack.Role)
				}
				return
			}
			if ack.Role != udp.RoleWaiter {
				t.Fatalf("the low priority back first registered as %v, want waiter (the high priority's place is held)", ack.Role)
			}
			lp.send(&udp.LaunchRequest{TaskID: ack.TaskID, Seq: 1, KernelID: 5})
			holds := 0
			for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
				switch m := lp.recv(time.Until(deadline)).(type) {
				case *udp.Grant:
					t.Fatalf("the low priority was granted %+v while the high priority's place was held", m)
				case *udp.Hold:
					holds++
				}
			}
			if holds == 0 {
				t.Error("the held request was never told to keep waiting")
			}
			if aw := d2.Status().Awaited; len(aw) != 1 || aw[0].TaskKey != "hp" || aw[0].Priority != 0 {
				t.Errorf("awaited %+v, want the high priority's place", aw)
			}
			hp := newFakeHook(t, d2)
			if a := hp.register("hp", 0); a.Role != udp.RoleHolder {
				t.Errorf("the high priority back registered as %v, want holder", a.Role)
			}
			s := d2.Status()
			if len(s.Awaited) != 0 || s.Stats.PlacesHeld != 2 || s.Stats.PlacesReturned != 2 {
				t.Errorf("after both returned: awaited %+v, stats held %d returned %d; want none, 2, 2",
					s.Awaited, s.Stats.PlacesHeld, s.Stats.PlacesReturned)
			}
			for _, ta := range s.Tasks {
				if ta.RegisteredAfterStartNs <= 0 || ta.RegisteredAfterStartNs > s.UptimeNs {
					t.Errorf("task %s registered %d ns after the start of a daemon up %d ns", ta.Key, ta.RegisteredAfterStartNs, s.UptimeNs)
				}
			}
		})
	}
}
