package harness

import (
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/simgpu/timeline"
)

// Interference splits a high-priority service's wall-clock slowdown into
// what the GPU did to it and what the host did: the figure users read.
type Interference struct {
	// P50Pct and P99Pct are HP GPU interference: a run's blocked time (its
	// kernels ready but waiting for other contexts' kernels or context
	// switches, simgpu ground truth) over the service's p50 JCT alone, in
	// percent, at the 50th and 99th percentile over runs.
	P50Pct float64 `json:"p50_pct"`
	P99Pct float64 `json:"p99_pct"`
	// WallRatio is the p50 JCT over the p50 JCT alone. HostRatio is the same
	// with each run's blocked time taken out of its JCT: the slowdown that
	// is not the GPU's (CPU contention, notification lag). WallRatio − 1 ≈
	// (HostRatio − 1) + GPU interference at the median.
	WallRatio float64 `json:"wall_ratio"`
	HostRatio float64 `json:"host_ratio"`
	// Runs counts the runs with blocked time (0: the device could not say).
	Runs int `json:"runs"`
}

// InterferenceOf computes r's Interference against aloneP50Ns.
func InterferenceOf(r *Result, aloneP50Ns int64) Interference {
	var in Interference
	if aloneP50Ns <= 0 || r == nil || len(r.Runs) == 0 {
		return in
	}
	in.WallRatio = float64(stats.Quantile(r.JCTs(), 0.5)) / float64(aloneP50Ns)
	blocked := r.Blocked()
	in.Runs = len(blocked)
	if len(blocked) != len(r.Runs) {
		return in
	}
	in.P50Pct, in.P99Pct = timeline.InterferencePct(blocked, aloneP50Ns)
	net := make([]int64, len(r.Runs))
	for i, x := range r.Runs {
		net[i] = x.JCTNs - *x.BlockedNs
	}
	in.HostRatio = float64(stats.Quantile(net, 0.5)) / float64(aloneP50Ns)
	return in
}
