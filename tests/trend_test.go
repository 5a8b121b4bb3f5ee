package tests

// How the soak (soak_test.go) judges whether a resource still grows: a
// Theil–Sen slope (the median of the slopes between every pair of samples)
// over the second half of the run, times that half's length, is the rise
// the trend predicts across it. It shrugs off outliers (a GC cycle's RSS
// spike, one sample taken while a killed service's pidfd was still open)
// that would tilt a least-squares fit. docs/operations.md ("Soak") says the
// same for users.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fikit/fikit/internal/stats"
)

// theilSen is the median pairwise slope of ys over xs (0 with fewer than two
// distinct xs).
func theilSen(xs, ys []float64) float64 {
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	return stats.Median(slopes)
}

// secondHalfRise is the rise the second half's Theil–Sen trend predicts
// across the second half (xs in any unit, typically seconds), and the
// half's median level.
func secondHalfRise(xs, ys []float64) (rise, level float64) {
	h := len(xs) / 2
	x, y := xs[h:], ys[h:]
	if len(x) < 2 {
		return 0, stats.Median(y)
	}
	return theilSen(x, y) * (x[len(x)-1] - x[0]), stats.Median(y)
}

// stillRising reports whether the second half rises by more than
// max(abs, rel × its median level).
func stillRising(xs, ys []float64, abs, rel float64) (bool, float64) {
	rise, level := secondHalfRise(xs, ys)
	return rise > math.Max(abs, rel*level), rise
}

// TestTrendJudge: the soak's judge flags a steady leak under noise and
// outliers, and passes a flat series with the same noise, one that grew
// only in its first half (warm-up), and a sawtooth (a GC's rhythm).
func TestTrendJudge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i) * 5 // a sample every 5 s
	}
	series := func(f func(i int) float64) []float64 {
		ys := make([]float64, n)
		for i := range ys {
			ys[i] = f(i) + rng.NormFloat64()*2e6 // ±2 MB noise
			if i%17 == 0 {
				ys[i] += 40e6 // an outlier
			}
		}
		return ys
	}
	base := 60e6
	cases := []struct {
		name string
		ys   []float64
		want bool
	}{
		{"flat", series(func(int) float64 { return base }), false},
		{"warm-up then flat", series(func(i int) float64 { return base + 30e6*math.Min(1, float64(i)/(n/2)) }), false},
		{"sawtooth", series(func(i int) float64 { return base + float64(i%10)*3e6 }), false},
		{"leak 100 kB per sample", series(func(i int) float64 { return base + float64(i)*100e3 }), true},
		{"leak in the second half only", series(func(i int) float64 { return base + math.Max(0, float64(i-n/2))*80e3 }), true},
	}
	for _, c := range cases {
		got, rise := stillRising(xs, c.ys, 4<<20, 0.05)
		if got != c.want {
			t.Errorf("%s: still rising %v (second-half rise %.1f MB), want %v", c.name, got, rise/1e6, c.want)
		}
	}
	if s := theilSen([]float64{0, 1, 2, 3, 4, 5, 6}, []float64{1, 3, 5, 100, 9, 11, 13}); s != 2 {
		t.Errorf("theilSen = %v, want 2 (the outlier ignored)", s)
	}
}
