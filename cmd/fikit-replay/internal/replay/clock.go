package replay

import (
	"time"

	"golang.org/x/sys/unix"
)

// The clock is CLOCK_MONOTONIC in nanoseconds, the time base of simgpu's
// timeline. Reading it through the runtime's monotonic clock (vDSO, ~25 ns)
// instead of a clock_gettime system call per reading keeps the spin loops
// tight; the two are one clock, so only the offset is calibrated once.
var (
	clockBase   time.Time
	clockBaseNs int64
)

func init() { calibrateClock() }

func calibrateClock() {
	best := int64(1 << 62)
	for i := 0; i < 8; i++ {
		var a, b unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &a) != nil {
			break
		}
		t := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &b) != nil {
			break
		}
		if d := b.Nano() - a.Nano(); d < best {
			best, clockBase, clockBaseNs = d, t, a.Nano()+d/2
		}
	}
	if best == 1<<62 { // no clock_gettime: keep a consistent, if unanchored, clock
		clockBase, clockBaseNs = time.Now(), 0
	}
}

// MonoNs is the current CLOCK_MONOTONIC time in nanoseconds.
func MonoNs() int64 { return clockBaseNs + int64(time.Since(clockBase)) }

// spinUntil busy-waits until MonoNs() ≥ deadline and returns the time it saw.
func spinUntil(deadline int64) int64 {
	for {
		if now := MonoNs(); now >= deadline {
			return now
		}
	}
}

// waitUntil sleeps most of the way to deadline and spins the rest, for
// waits that need not burn a core (open-loop arrivals).
func waitUntil(deadline int64, done <-chan struct{}) (int64, bool) {
	const spinNs = 2_000_000 // sleep overshoot is well under this
	for {
		d := deadline - MonoNs()
		if d <= spinNs {
			return spinUntil(deadline), true
		}
		t := time.NewTimer(time.Duration(d - spinNs))
		select {
		case <-done:
			t.Stop()
			return MonoNs(), false
		case <-t.C:
		}
	}
}
