package replay

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMonoNsIsClockMonotonic: MonoNs reads CLOCK_MONOTONIC, the time base of
// simgpu's timeline, to within a few microseconds.
func TestMonoNsIsClockMonotonic(t *testing.T) {
	best := int64(1 << 62)
	for i := 0; i < 20; i++ {
		var ts unix.Timespec
		a := MonoNs()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Skip(err)
		}
		b := MonoNs()
		// ts lies in [a, b] up to the calibration error.
		d := max(a-ts.Nano(), ts.Nano()-b, 0)
		best = min(best, d)
	}
	if best > 20_000 {
		t.Errorf("MonoNs off CLOCK_MONOTONIC by %d ns", best)
	}
}

func TestSpinUntil(t *testing.T) {
	start := MonoNs()
	got := spinUntil(start + 200_000)
	if got < start+200_000 || got > start+200_000+int64(50*time.Millisecond) {
		t.Errorf("spinUntil returned at +%d ns", got-start)
	}
	// A deadline missed by more than the slack: pace counts from the late time.
	if p := pace(start - 5*lateSlackNs); p < start {
		t.Errorf("pace of a missed deadline returned %d, before %d", p, start)
	}
	// A deadline met: pace counts from the deadline itself (or, if this
	// thread was descheduled at that moment, from later).
	if due := MonoNs() + 100_000; pace(due) < due {
		t.Error("pace returned before its deadline")
	}
	done := make(chan struct{})
	close(done)
	if _, ok := waitUntil(MonoNs()+int64(time.Hour), done); ok {
		t.Error("waitUntil ignored done")
	}
	at, ok := waitUntil(MonoNs()+int64(5*time.Millisecond), make(chan struct{}))
	if !ok || at < start+int64(5*time.Millisecond) {
		t.Error("waitUntil returned early")
	}
}
