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
// waits that must not burn a core (open-loop arrivals: a real service waits
// for its next request in the kernel, leaving the CPU to others). It sleeps
// in clock_nanosleep with a 1 ns timer slack on this (locked) thread: Go's
// timers fire most of a millisecond late for short waits here, which would
// need that much spinning instead.
func waitUntil(deadline int64, done <-chan struct{}) (int64, bool) {
	const (
		spinNs  = 150_000    // clock_nanosleep overshoots by tens of µs
		chunkNs = 10_000_000 // how often done is looked at while sleeping
	)
	setTimerSlack()
	for {
		select {
		case <-done:
			return MonoNs(), false
		default:
		}
		d := deadline - MonoNs()
		if d <= spinNs {
			return spinUntil(deadline), true
		}
		ts := unix.NsecToTimespec(min(d-spinNs, chunkNs))
		_ = unix.Nanosleep(&ts, nil)
	}
}

var slackSet bool

// setTimerSlack makes this thread's sleeps end on time (the replay's
// goroutine is locked to its thread).
func setTimerSlack() {
	if !slackSet {
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		slackSet = true
	}
}
