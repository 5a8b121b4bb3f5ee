package trace

import (
	"fmt"
	"math/rand/v2"
)

// UniformOptions shape a trace whose kernel durations are uniform in
// [MinNs, MaxNs]: the services of fair-share measurements, one of short
// kernels and one of long ones (docs/scheduler.md "Equals").
type UniformOptions struct {
	Name     string // kernel name prefix; the kernels are Name_k0 … Name_k<Distinct-1>
	Kernels  int    // launches per run
	Distinct int    // distinct kernel IDs (grids), launched in turn
	MinNs    int64
	MaxNs    int64
}

// Uniform returns a trace of opts, fully determined by seed: kernel i is
// Name_k(i mod Distinct) with a duration drawn once for its position.
func Uniform(seed uint64, o UniformOptions) (*Trace, error) {
	switch {
	case o.Name == "":
		return nil, fmt.Errorf("uniform: %w: no name", ErrInvalid)
	case o.Kernels < 1 || o.Kernels > MaxKernels:
		return nil, fmt.Errorf("uniform: %w: kernels %d not in 1..%d", ErrInvalid, o.Kernels, MaxKernels)
	case o.Distinct < 1 || o.Distinct > o.Kernels:
		return nil, fmt.Errorf("uniform: %w: distinct %d not in 1..%d", ErrInvalid, o.Distinct, o.Kernels)
	case o.MinNs < 1 || o.MaxNs < o.MinNs || o.MaxNs > MaxDurationNs:
		return nil, fmt.Errorf("uniform: %w: durations [%d, %d] ns", ErrInvalid, o.MinNs, o.MaxNs)
	}
	r := genRand{rand.NewPCG(seed, 0x756e69666f726d) /* "uniform" */}
	t := &Trace{Source: fmt.Sprintf("uniform:%s:seed=%d", o.Name, seed), Format: FormatFikit,
		Kernels: make([]Kernel, o.Kernels)}
	for i := range t.Kernels {
		k := i % o.Distinct
		t.Kernels[i] = Kernel{Name: fmt.Sprintf("%s_k%d", o.Name, k),
			DurationNs: o.MinNs + int64(r.float()*float64(o.MaxNs-o.MinNs+1)),
			Grid:       [3]uint32{uint32(k + 1), 1, 1}, Block: [3]uint32{256, 1, 1}, Profile: ProfileUnknown}
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("uniform: %w", err)
	}
	return t, nil
}

// The two services of the equal-priority fair-share measurements
// (`fikit bench fair`, bench/sim and tests/fair_e2e_test.go): both
// continuous, one of short kernels (2–60 µs), one of long ones (150–900 µs).
var (
	EqualsShort = UniformOptions{Name: "short", Kernels: 200, Distinct: 40, MinNs: 2_000, MaxNs: 60_000}
	EqualsLong  = UniformOptions{Name: "long", Kernels: 40, Distinct: 10, MinNs: 150_000, MaxNs: 900_000}
)
