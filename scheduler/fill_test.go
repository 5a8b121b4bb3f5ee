package scheduler

import (
	"testing"
	"time"
)

// A holder that comes back while low-priority work is predicted to run
// pays one switch back, before its first kernel: its later kernels queue
// behind that one in its own context. Charged a switch for every kernel
// launched while that work was predicted to run (all of a run's, for a
// holder that launches a run at once), its predicted work ran tens of
// milliseconds past the device's, and the backlog it was demoted with
// (electHolders) with it.
func TestHolderPaysOneSwitchBack(t *testing.T) {
	const us = int64(time.Microsecond)
	cfg := DefaultConfig()
	cfg.SwitchCost = 140 * us
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step(TaskRegistered{Now: 1, Task: 1, Key: "H", PID: 1, GPU: "g"}); err != nil {
		t.Fatal(err)
	}
	h := n.tasks[1]
	g := h.gpu
	// Low-priority work predicted to run 1 ms past now.
	now := int64(10_000 * us)
	g.lpBusyUntil, g.lpInWindow = now+1000*us, true
	for i := range 3 {
		n.now = now + int64(i)*5*us
		n.holderLaunch(h, 7, n.now, uint32(i+1))
	}
	dur := n.estimate(h, 7)
	if want := g.lpBusyUntil + cfg.SwitchCost + 3*dur; h.busyUntil != want {
		t.Errorf("the holder's work predicted to end %v after the low-priority work, want %v (one switch, three kernels of %v)",
			time.Duration(h.busyUntil-g.lpBusyUntil), time.Duration(want-g.lpBusyUntil), time.Duration(dur))
	}
}

// A holder's run end says its work is done, also when the board showed
// its next run under way before the report came (a busy host's reports
// come late): what was predicted of it past the end no longer holds.
// Kept, a prediction that ran ahead of the device grew run after run.
func TestHolderRunEndSightedClampsWork(t *testing.T) {
	const ms = int64(time.Millisecond)
	n, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step(TaskRegistered{Now: 1, Task: 1, Key: "H", PID: 1, GPU: "g"}); err != nil {
		t.Fatal(err)
	}
	h := n.tasks[1]
	n.now = 20 * ms
	h.inRun, h.runStart, h.lastLaunch = true, 10*ms, 11*ms
	h.busyUntil = 500 * ms // predicted far past the device's
	h.sighted = 19 * ms    // the board shows its next run under way
	n.holderRunEnded(h, 5*ms)
	if h.busyUntil > 19*ms {
		t.Errorf("after its run ended (at 15 ms, the next sighted at 19 ms) the holder's work is predicted to %v", time.Duration(h.busyUntil))
	}
}
