package replay

import (
	"math"
	"slices"
)

// Summary describes the JCTs of the measured runs.
type Summary struct {
	Runs   int     `json:"runs"`
	P50Ns  int64   `json:"p50_ns"`
	P90Ns  int64   `json:"p90_ns"`
	P99Ns  int64   `json:"p99_ns"`
	MeanNs int64   `json:"mean_ns"`
	CV     float64 `json:"cv"` // population standard deviation / mean
	MinNs  int64   `json:"min_ns"`
	MaxNs  int64   `json:"max_ns"`
}

// Summarize computes a Summary; percentiles are nearest-rank.
func Summarize(jcts []int64) Summary {
	n := len(jcts)
	if n == 0 {
		return Summary{}
	}
	s := slices.Clone(jcts)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range s {
		d := float64(v) - mean
		ss += d * d
	}
	cv := 0.0
	if mean > 0 {
		cv = math.Sqrt(ss/float64(n)) / mean
	}
	return Summary{Runs: n, P50Ns: Percentile(s, 50), P90Ns: Percentile(s, 90), P99Ns: Percentile(s, 99),
		MeanNs: int64(math.Round(mean)), CV: cv, MinNs: s[0], MaxNs: s[n-1]}
}

// Percentile is the nearest-rank p-th percentile of sorted (ascending), 0 if empty.
func Percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}
