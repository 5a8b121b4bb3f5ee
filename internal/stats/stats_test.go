package stats

import (
	"math"
	"testing"
)

func TestQuantileNearestRank(t *testing.T) {
	xs := []int64{50, 10, 40, 20, 30} // unsorted: Quantile sorts a copy
	for _, c := range []struct {
		q    float64
		want int64
	}{{0, 10}, {0.2, 10}, {0.21, 20}, {0.5, 30}, {0.9, 50}, {0.99, 50}, {1, 50}} {
		if got := Quantile(xs, c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if xs[0] != 50 {
		t.Error("Quantile sorted its argument")
	}
	// 100 values 1..100: the p-th percentile is p.
	var h []int64
	for i := range 100 {
		h = append(h, int64(i+1))
	}
	for _, p := range []int64{1, 10, 50, 90, 99, 100} {
		if got := QuantileSorted(h, float64(p)/100); got != p {
			t.Errorf("p%d of 1..100 = %d", p, got)
		}
	}
	if Quantile([]int64(nil), 0.5) != 0 || Quantile([]float64{}, 0.99) != 0 {
		t.Error("quantile of nothing is not 0")
	}
	if got := Quantile([]float64{2.5, 0.5, 1.5}, 0.5); got != 1.5 {
		t.Errorf("float median = %v", got)
	}
}

func TestMedianMeanStd(t *testing.T) {
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median of 1..4 = %v, want 2.5", got)
	}
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median of 1..3 = %v, want 2", got)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is a number")
	}
	m, s := MeanStd([]int64{2, 4, 4, 4, 5, 5, 7, 9})
	if m != 5 || s != 2 {
		t.Errorf("MeanStd = %v, %v, want 5, 2", m, s)
	}
	if m, cv := MeanCV([]int64{2, 4, 4, 4, 5, 5, 7, 9}); m != 5 || cv != 0.4 {
		t.Errorf("MeanCV = %v, %v, want 5, 0.4", m, cv)
	}
	if m, cv := MeanCV(nil); m != 0 || cv != 0 {
		t.Errorf("MeanCV of nothing = %v, %v", m, cv)
	}
}
