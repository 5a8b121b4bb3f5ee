package scheduler

import "testing"

// The next run is predicted from whichever interval has been steadier:
// run starts for requests on a clock, the gap after a run for a service
// that takes the next request when done.
func TestNextRunStart(t *testing.T) {
	const ms = int64(1e6)
	periodic := &task{}
	closedLoop := &task{}
	for i, jct := range []int64{2, 3, 2, 4, 3} { // run times vary
		// Periodic: a run every 10 ms, whatever it took.
		if i > 0 {
			periodic.learnRunEvery(10 * ms)
			periodic.learnRunGap(10*ms - jct*ms)
		}
		// Closed loop: 5 ms of host work after each run.
		if i > 0 {
			closedLoop.learnRunEvery(jct*ms + 5*ms)
			closedLoop.learnRunGap(5 * ms)
		}
	}
	periodic.runStart, closedLoop.runStart = 100*ms, 100*ms
	if got, want := periodic.nextRunStart(100*ms+2*ms), 110*ms; got != want {
		t.Errorf("periodic: next run at %d, want %d", got, want)
	}
	if got, want := closedLoop.nextRunStart(100*ms+2*ms), 107*ms; got != want {
		t.Errorf("closed loop: next run at %d, want %d", got, want)
	}
	// Too few observations to tell: the sooner of both.
	early := &task{runStart: 100 * ms}
	early.learnRunEvery(10 * ms)
	early.learnRunGap(5 * ms)
	if got, want := early.nextRunStart(103*ms), 108*ms; got != want {
		t.Errorf("one observation each: next run at %d, want %d", got, want)
	}
	if got := (&task{}).nextRunStart(5 * ms); got != 0 {
		t.Errorf("nothing learned: next run at %d, want 0 (unknown)", got)
	}
}
