package bound

import "testing"

// The predicates are the hook's, tested in hookclient/test/test_bound.c;
// these check what the binding adds: the sentinels and the conversions.
func TestBinding(t *testing.T) {
	const us = 1000
	now := int64(1000 * us)
	if got, want := CursorAfter(0, now, 100*us, 140*us), now+LaunchLatencyNs+240*us; got != want {
		t.Errorf("CursorAfter = %d, want %d", got, want)
	}
	// 150 µs of the task's own in flight: 100 µs more waits until 100 µs
	// are left under a 200 µs bound.
	cur := now + 150*us
	if got, want := Until(View{GPU: cur, Own: cur}, now, 100*us, 200*us), cur-100*us; got != want {
		t.Errorf("Until = %d, want %d", got, want)
	}
	// A better priority back in 180 µs: 50 µs behind 150 µs would still run.
	if got, want := Until(View{GPU: cur, Own: cur, Next: now + 180*us, Late: now + 180*us}, now, 50*us, 200*us), now+180*us+1; got != want {
		t.Errorf("Until before a return = %d, want %d", got, want)
	}
	// A negative time is 0, not a huge unsigned one.
	if got := Until(View{GPU: -5, Own: -5}, now, 50*us, 200*us); got != now {
		t.Errorf("Until with negative cursors = %d, want %d", got, now)
	}
	r := Resume{On: true, TaskOK: true, Next: NextNone}
	if !ResumeOK(r, 0, now, 300*us) {
		t.Error("ResumeOK with none expected = false")
	}
	r.Next = now + 300*us
	r.SwitchNs = 140 * us
	if ResumeOK(r, 0, now, 100*us) {
		t.Error("ResumeOK: 100 µs and two switches in a 300 µs gap")
	}
	if !ResumeOK(r, now+10*us, now, 100*us) {
		t.Error("ResumeOK: 100 µs behind 10 µs in flight in a 300 µs gap")
	}
	r.BetterInRun = true
	if ResumeOK(r, now+10*us, now, 100*us) {
		t.Error("ResumeOK with a better priority in its run")
	}
}
