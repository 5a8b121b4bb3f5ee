package harness

import (
	"slices"

	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/simgpu/timeline"
)

// EarlyStopWindow is how long after an HP run's start a low-priority
// kernel's arrival counts as one the gate should have stopped: an HP run's
// first in-run gap worth filling comes later than this.
const EarlyStopWindow = 500_000

// StopChainNs is how close successive low-priority arrivals must be to be
// one stream launched without asking (on credit, or as a holder): a launch
// that asked first waits for a round trip to the daemon, longer than this.
const StopChainNs = 30_000

// EarlyStop measures how fast the low-priority service stopped launching
// when a high-priority run began, from simgpu's ground truth. Per HP run:
//
//   - the stop latency: from the arrival of the run's first HP kernel to
//     the arrival of the last LP kernel of the stream that was under way
//     then (LP arrivals less than StopChainNs apart, from the last one
//     before the HP's); 0 when the LP was not launching. This is the
//     issue's "HP launch → LP gate closed", seen on the device;
//   - the LP kernels that arrived within EarlyStopWindow after the run's
//     start (and before it ended): fills the scheduler granted into the
//     run's first gaps count too, so compare modes, not against zero.
type EarlyStop struct {
	Runs int `json:"runs"`
	// StopP50Ns and StopP99Ns are quantiles over runs of the stop latency.
	StopP50Ns int64 `json:"stop_p50_ns"`
	StopP99Ns int64 `json:"stop_p99_ns"`
	// LPKernelsPerRun is the mean count of LP kernels in a run's first
	// EarlyStopWindow, per HP run.
	LPKernelsPerRun float64 `json:"lp_kernels_per_run"`
}

// EarlyStopOf measures runs of the HP (pid hpPid) against the LP (pid
// lpPid) on recs; stops and counts are per run, for pooling.
func EarlyStopOf(recs []timeline.Record, runs []Run, hpPid, lpPid int) (stops []int64, counts []int) {
	var lp, hp []int64 // arrivals, first segment of each kernel
	for _, r := range recs {
		switch {
		case r.Seg != 0 || r.IsHookProbe():
		case r.PID == lpPid:
			lp = append(lp, r.ArriveNs)
		case r.PID == hpPid:
			hp = append(hp, r.ArriveNs)
		}
	}
	slices.Sort(lp)
	slices.Sort(hp)
	for _, run := range runs {
		s := run.StartNs
		i, _ := slices.BinarySearch(lp, s)
		n := 0
		for end := s + min(EarlyStopWindow, run.JCTNs); i+n < len(lp) && lp[i+n] < end; n++ {
		}
		counts = append(counts, n)
		var stop int64
		if h, _ := slices.BinarySearch(hp, s); h < len(hp) && hp[h] < s+run.JCTNs {
			t0 := hp[h]
			j, _ := slices.BinarySearch(lp, t0) // first LP arrival at or after t0
			if j > 0 && j < len(lp) && t0-lp[j-1] < StopChainNs && lp[j]-lp[j-1] < StopChainNs {
				for j+1 < len(lp) && lp[j+1]-lp[j] < StopChainNs {
					j++
				}
				stop = lp[j] - t0
			}
		}
		stops = append(stops, stop)
	}
	return stops, counts
}

// SummarizeEarlyStop pools per-run stop latencies and counts.
func SummarizeEarlyStop(stops []int64, counts []int) *EarlyStop {
	if len(stops) == 0 {
		return nil
	}
	e := &EarlyStop{Runs: len(stops), StopP50Ns: stats.Quantile(stops, 0.5), StopP99Ns: stats.Quantile(stops, 0.99)}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	e.LPKernelsPerRun = float64(sum) / float64(len(counts))
	return e
}
