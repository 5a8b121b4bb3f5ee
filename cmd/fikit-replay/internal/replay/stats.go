package replay

import (
	"math"
	"slices"

	"github.com/fikit/fikit/internal/stats"
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
	s := slices.Sorted(slices.Values(jcts))
	mean, cv := stats.MeanCV(s)
	return Summary{Runs: n, P50Ns: stats.QuantileSorted(s, 0.5), P90Ns: stats.QuantileSorted(s, 0.9),
		P99Ns: stats.QuantileSorted(s, 0.99), MeanNs: int64(math.Round(mean)), CV: cv, MinNs: s[0], MaxNs: s[n-1]}
}
