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
	early := &task{prediction: prediction{runStart: 100 * ms}}
	early.learnRunEvery(10 * ms)
	early.learnRunGap(5 * ms)
	if got, want := early.nextRunStart(103*ms), 108*ms; got != want {
		t.Errorf("one observation each: next run at %d, want %d", got, want)
	}
	if got := (&task{}).nextRunStart(5 * ms); got != 0 {
		t.Errorf("nothing learned: next run at %d, want 0 (unknown)", got)
	}
}

// A periodic service's starts are late by varying amounts, never early: the
// latest start plus the least of the last 16 intervals is no later than the
// clock's next tick, where the last four intervals' least is not.
func TestPeriodicNextOnClock(t *testing.T) {
	const period = 8_000_000
	late := []int64{0, 90_000, 0, 20_000, 40_000, 10_000, 30_000, 60_000, 20_000, 50_000, 40_000, 70_000}
	var tk task
	var last int64
	for i, l := range late {
		at := int64(i+1)*period + l
		tk.runStarted(at)
		if last > 0 {
			tk.learnRunEvery(at - last)
		}
		last = at
	}
	tk.runStart = last
	tk.runGaps.add(period - 1_000_000) // a run of 1 ms
	if tk.arr.class() != ArrivalsPeriodic {
		t.Fatalf("class %s", tk.arr.class())
	}
	tick := int64(len(late)+1) * period
	if four := last + tk.runStarts.least(); four <= tick {
		t.Fatalf("the test's premise: the last four intervals predict %d, not after the tick %d", four, tick)
	}
	if at, late := tk.nextRunWindow(last + 1_000_000); at > tick || late < at {
		t.Errorf("next run window [%d, %d], want it to open by the tick %d", at, late, tick)
	}
}
