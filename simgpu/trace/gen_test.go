package trace

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/fikit/fikit/internal/stats"
)

func TestGenDeterministic(t *testing.T) {
	a, err := Gen(42, GenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Gen(42, GenOptions{})
	if !sameKernels(a, b) {
		t.Error("same seed, different traces")
	}
	c, _ := Gen(43, GenOptions{})
	if sameKernels(a, c) {
		t.Error("different seeds, same trace")
	}
	if len(a.Kernels) != DefaultGenKernels || !a.HasHostTime || a.Validate() != nil {
		t.Errorf("default trace: %d kernels, host %v, validate %v", len(a.Kernels), a.HasHostTime, a.Validate())
	}
	if got := roundTrip(t, a); !sameKernels(got, a) {
		t.Error("generated trace does not round trip")
	}
}

func TestGenLayerStructure(t *testing.T) {
	o := GenOptions{Kernels: 2 + 3*40, LayerKernels: 5, Stages: 3}
	tr, err := Gen(7, o)
	if err != nil {
		t.Fatal(err)
	}
	body := tr.Kernels[1 : len(tr.Kernels)-1]
	// Within a stage the layer repeats: same name and geometry every
	// LayerKernels launches, durations within the jitter.
	for i := o.LayerKernels; i < len(body); i++ {
		if i%40 < o.LayerKernels { // first layer of a stage
			continue
		}
		p, k := body[i-o.LayerKernels], body[i]
		if p.Name != k.Name || p.Grid != k.Grid || p.Block != k.Block {
			t.Fatalf("launch %d (%s %v) does not repeat launch %d (%s %v)", i, k.Name, k.Grid, i-o.LayerKernels, p.Name, p.Grid)
		}
		if r := float64(k.DurationNs) / float64(p.DurationNs); r < 0.9 || r > 1.1 {
			t.Fatalf("launch %d duration %d vs %d, beyond 2×3%% jitter", i, k.DurationNs, p.DurationNs)
		}
	}
	// A few distinct kernels: stem, head and at most LayerKernels names.
	if n := len(tr.Names()); n > o.LayerKernels+2 || n < 3 {
		t.Errorf("%d distinct names", n)
	}
	// Stages differ in shape.
	shape := func(k Kernel) [2][3]uint32 { return [2][3]uint32{k.Grid, k.Block} }
	if slices.Equal(kernShapes(body[:o.LayerKernels], shape), kernShapes(body[40:40+o.LayerKernels], shape)) &&
		slices.Equal(kernShapes(body[:o.LayerKernels], shape), kernShapes(body[80:80+o.LayerKernels], shape)) {
		t.Error("all stages have the same shapes")
	}
}

func kernShapes(ks []Kernel, f func(Kernel) [2][3]uint32) [][2][3]uint32 {
	var out [][2][3]uint32
	for _, k := range ks {
		out = append(out, f(k))
	}
	return out
}

func TestGenDistributions(t *testing.T) {
	tr, err := Gen(1, GenOptions{Kernels: 20000, LayerKernels: 1000, Stages: 1, HostMedianNs: 10_000, DurationMedianNs: 50_000})
	if err != nil {
		t.Fatal(err)
	}
	median := func(f func(Kernel) int64, ks []Kernel) float64 {
		v := make([]float64, len(ks))
		for i, k := range ks {
			v[i] = float64(f(k))
		}
		return stats.Quantile(v, 0.5)
	}
	if m := median(func(k Kernel) int64 { return k.HostNs }, tr.Kernels); math.Abs(m-10_000) > 500 {
		t.Errorf("host median %v, want ≈ 10000", m)
	}
	// Durations: the median of the 1000 per-slot base durations.
	if m := median(func(k Kernel) int64 { return k.DurationNs }, tr.Kernels[1:1001]); m < 40_000 || m > 62_500 {
		t.Errorf("duration median %v, want ≈ 50000", m)
	}
	// Zero host time on request.
	tr, _ = Gen(1, GenOptions{Kernels: 10, HostMedianNs: -1, Jitter: -1})
	for _, k := range tr.Kernels {
		if k.HostNs != 0 {
			t.Fatalf("host %d with HostMedianNs -1", k.HostNs)
		}
	}
}

func TestGenOptionsInvalid(t *testing.T) {
	for _, o := range []GenOptions{
		{Kernels: -1}, {Kernels: MaxKernels + 1}, {LayerKernels: -2}, {Stages: 5000},
		{DurationMedianNs: 10}, {HostMedianNs: MaxDurationNs}, {DurationSigma: 4},
		{Jitter: 1}, {HostSigma: math.NaN()},
	} {
		if _, err := Gen(1, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Gen(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	for _, n := range []int{1, 2, 3} {
		tr, err := Gen(1, GenOptions{Kernels: n})
		if err != nil || len(tr.Kernels) != n {
			t.Errorf("Gen(kernels=%d): %v", n, err)
		}
	}
}
