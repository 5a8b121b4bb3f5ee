package harness

import (
	"sort"

	"github.com/fikit/fikit/simgpu/timeline"
)

// EarlyStopWindow is how long after an HP run's start a low-priority
// kernel's arrival counts as one the gate should have stopped: an HP run's
// first in-run gap worth filling comes later than this.
const EarlyStopWindow = 500_000

// EarlyStop measures how fast the low-priority service stopped launching
// when a high-priority run began, from simgpu's ground truth: for each HP
// run (start = its host start), the LP kernels that arrived on the device
// within EarlyStopWindow after it (and before the run ended), and the
// latest such arrival after the start (0 when none: the LP had stopped
// before). Fills the scheduler granted into the run's first gaps count
// too; compare modes, not against zero.
type EarlyStop struct {
	Runs int `json:"runs"`
	// LateP50Ns and LateP99Ns are quantiles over runs of the latest LP
	// arrival after the run's start.
	LateP50Ns int64 `json:"late_p50_ns"`
	LateP99Ns int64 `json:"late_p99_ns"`
	// LPKernelsPerRun is the mean count of such LP kernels per HP run.
	LPKernelsPerRun float64 `json:"lp_kernels_per_run"`
}

// EarlyStopOf measures runs of the HP (pid hpPid) against the LP (pid
// lpPid) on recs; lates and counts are per run, for pooling.
func EarlyStopOf(recs []timeline.Record, runs []Run, lpPid int) (lates []int64, counts []int) {
	var arr []int64 // LP arrivals, first segment of each kernel
	for _, r := range recs {
		if r.PID == lpPid && r.Seg == 0 {
			arr = append(arr, r.ArriveNs)
		}
	}
	sort.Slice(arr, func(i, j int) bool { return arr[i] < arr[j] })
	for _, run := range runs {
		s := run.StartNs
		i := sort.Search(len(arr), func(i int) bool { return arr[i] >= s })
		var late int64
		n := 0
		end := s + min(EarlyStopWindow, run.JCTNs)
		for ; i < len(arr) && arr[i] < end; i++ {
			late = arr[i] - s
			n++
		}
		lates = append(lates, late)
		counts = append(counts, n)
	}
	return lates, counts
}

// SummarizeEarlyStop pools per-run lates and counts.
func SummarizeEarlyStop(lates []int64, counts []int) *EarlyStop {
	if len(lates) == 0 {
		return nil
	}
	e := &EarlyStop{Runs: len(lates), LateP50Ns: Quantile(lates, 0.5), LateP99Ns: Quantile(lates, 0.99)}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	e.LPKernelsPerRun = float64(sum) / float64(len(counts))
	return e
}
