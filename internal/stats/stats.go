// Package stats is the one home of the quantiles and summaries the bench,
// the simulator (bench/sim), the replayer's summary, simgpu's interference
// figures and the tests report. One definition (nearest rank) everywhere
// keeps their figures comparable: a p99 from `fikit sim`, `fikit bench` and
// fikit-replay means the same thing.
//
// It lives under internal/ at the module's root, not under bench/: simgpu
// and the replayer, below the bench, use it too, and it is no API.
package stats

import (
	"cmp"
	"math"
	"slices"
)

// Quantile is the nearest-rank q-quantile (0 ≤ q ≤ 1) of xs: the smallest
// value with at least a share q of xs at or below it (the smallest for
// q = 0); the zero value for an empty xs. xs is left as it is.
func Quantile[T cmp.Ordered](xs []T, q float64) T {
	return QuantileSorted(slices.Sorted(slices.Values(xs)), q)
}

// QuantileSorted is Quantile of sorted, which is sorted ascending (not
// checked): several quantiles of one sample sort it once.
func QuantileSorted[T cmp.Ordered](sorted []T, q float64) T {
	n := len(sorted)
	if n == 0 {
		var zero T
		return zero
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Median is the middle of xs, the mean of the middle two for an even count
// (not a quantile of the sample: for a trend or a table's typical value);
// NaN if xs is empty.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MeanStd is the mean and the (population) standard deviation of xs; 0, 0
// if it is empty.
func MeanStd(xs []int64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		d := float64(x) - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(len(xs)))
}

// MeanCV is the mean and the coefficient of variation (standard deviation
// over the mean; 0 for a mean ≤ 0) of xs.
func MeanCV(xs []int64) (mean, cv float64) {
	mean, std := MeanStd(xs)
	if mean > 0 {
		cv = std / mean
	}
	return mean, cv
}
