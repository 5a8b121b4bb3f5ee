package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals says when measured runs start.
type Arrivals struct {
	// Interval > 0: open loop, run j arrives j×Interval after the first
	// (with Burst: the idle time between bursts).
	Interval time.Duration
	// Rate > 0: open loop, Poisson arrivals at Rate per second (exponential
	// inter-arrival times drawn from Seed); the first run arrives at once.
	Rate float64
	Seed uint64
	// Burst > 0 (with Interval): runs come in bursts of Burst, back to back
	// within a burst (each starts when the previous one and its
	// post-processing are done); after a burst's last run the host idles
	// Interval before the next burst starts.
	Burst int
}

// Closed reports the default closed loop: each run starts when the previous
// one (and its post-processing) is done.
func (a Arrivals) Closed() bool { return a.Interval <= 0 && a.Rate <= 0 }

func (a Arrivals) String() string {
	switch {
	case a.Burst > 0 && a.Interval > 0:
		return fmt.Sprintf("bursts of %d back to back, idle %v between bursts", a.Burst, a.Interval)
	case a.Interval > 0:
		return fmt.Sprintf("open loop, every %v", a.Interval)
	case a.Rate > 0:
		return fmt.Sprintf("open loop, Poisson %g/s (seed %d)", a.Rate, a.Seed)
	}
	return "closed loop"
}

// Offsets returns each of n runs' arrival time in ns after the first run's,
// nil unless runs arrive on a schedule (an interval or Poisson arrivals;
// bursts are paced by IdleBefore instead).
func (a Arrivals) Offsets(n int) []int64 {
	if a.Closed() || a.Burst > 0 || n <= 0 {
		return nil
	}
	off := make([]int64, n)
	if a.Interval > 0 {
		for j := range off {
			off[j] = int64(j) * int64(a.Interval)
		}
		return off
	}
	r := rand.New(rand.NewPCG(a.Seed, 0x706f6973736f6e)) // "poisson"
	var t float64
	for j := 1; j < n; j++ {
		u := 1 - float64(r.Uint64()>>11)/(1<<53) // (0, 1]
		t += -math.Log(u) / a.Rate * 1e9
		off[j] = int64(math.Round(t))
	}
	return off
}

// IdleBefore is how long the host idles before measured run j, after the
// previous run and its post-processing: Interval before the first run of
// every burst but the first, else 0.
func (a Arrivals) IdleBefore(j int) time.Duration {
	if a.Burst <= 0 || a.Interval <= 0 || j <= 0 || j%a.Burst != 0 {
		return 0
	}
	return a.Interval
}
