package harness

import (
	"math"
	"sort"
)

// Quantile is the q-quantile (0..1) of xs by the nearest-rank method; 0 for
// an empty slice.
func Quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// MeanCV returns the mean and coefficient of variation of xs.
func MeanCV(xs []int64) (mean, cv float64) {
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
	if mean > 0 {
		cv = math.Sqrt(ss/float64(len(xs))) / mean
	}
	return mean, cv
}
