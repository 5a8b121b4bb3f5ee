package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// GenOptions shape a synthetic trace. Zero fields take the defaults noted; a
// negative HostMedianNs, DurationSigma, Jitter or HostSigma asks for zero.
//
// The trace imitates a real model's forward pass: a stem kernel, a body of
// Stages stages, each repeating one layer of LayerKernels distinct kernels
// (as a ResNet stage repeats its bottleneck block), and a head kernel. A layer
// slot keeps its name across stages but has a per-stage grid and base
// duration, so, as in real traces, one name appears with several shapes.
type GenOptions struct {
	Kernels          int     // launches in the trace (default 300)
	LayerKernels     int     // distinct kernels per layer (default 6)
	Stages           int     // body stages, each with its own shapes (default 3)
	DurationMedianNs int64   // median of the per-kernel base durations (default 20 µs)
	DurationSigma    float64 // log-normal σ of base durations across kernels (default 0.8)
	Jitter           float64 // per-launch relative duration jitter, uniform ± (default 0.03)
	HostMedianNs     int64   // median host time before a launch (default 8 µs)
	HostSigma        float64 // log-normal σ of host times (default 0.3)
}

// Default values of GenOptions.
const (
	DefaultGenKernels       = 300
	DefaultGenLayerKernels  = 6
	DefaultGenStages        = 3
	DefaultGenDurationNs    = 20_000
	DefaultGenDurationSigma = 0.8
	DefaultGenJitter        = 0.03
	DefaultGenHostNs        = 8_000
	DefaultGenHostSigma     = 0.3
	minGenDurationNs        = 1_000
)

// withDefaults fills zero fields and checks the rest.
func (o GenOptions) withDefaults() (GenOptions, error) {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&o.Kernels, DefaultGenKernels)
	setInt(&o.LayerKernels, DefaultGenLayerKernels)
	setInt(&o.Stages, DefaultGenStages)
	if o.DurationMedianNs == 0 {
		o.DurationMedianNs = DefaultGenDurationNs
	}
	switch {
	case o.HostMedianNs == 0:
		o.HostMedianNs = DefaultGenHostNs
	case o.HostMedianNs < 0:
		o.HostMedianNs = 0
	}
	setFloat := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	setFloat(&o.DurationSigma, DefaultGenDurationSigma)
	setFloat(&o.Jitter, DefaultGenJitter)
	setFloat(&o.HostSigma, DefaultGenHostSigma)
	switch {
	case o.Kernels < 1 || o.Kernels > MaxKernels:
		return o, fmt.Errorf("%w: kernels %d not in 1..%d", ErrInvalid, o.Kernels, MaxKernels)
	case o.LayerKernels < 1 || o.LayerKernels > 1000:
		return o, fmt.Errorf("%w: layer kernels %d not in 1..1000", ErrInvalid, o.LayerKernels)
	case o.Stages < 1 || o.Stages > 1000:
		return o, fmt.Errorf("%w: stages %d not in 1..1000", ErrInvalid, o.Stages)
	case o.DurationMedianNs < minGenDurationNs || o.DurationMedianNs > MaxDurationNs/100:
		return o, fmt.Errorf("%w: duration median %d ns not in %d..%d", ErrInvalid,
			o.DurationMedianNs, minGenDurationNs, int64(MaxDurationNs/100))
	case o.HostMedianNs > MaxDurationNs/100:
		return o, fmt.Errorf("%w: host median %d ns above %d", ErrInvalid, o.HostMedianNs, int64(MaxDurationNs/100))
	case !(o.DurationSigma <= 3) || !(o.HostSigma <= 3):
		return o, fmt.Errorf("%w: sigma above 3", ErrInvalid)
	case !(o.Jitter < 1):
		return o, fmt.Errorf("%w: jitter %g not in [0, 1)", ErrInvalid, o.Jitter)
	}
	return o, nil
}

// genKinds are the kernel names a synthetic layer draws from; they contain the
// spaces, colons and template brackets of real names.
var genKinds = []string{
	"void gen::conv2d_fprop<float>",
	"void gen::batch_norm_infer<float>",
	"void gen::relu<float>",
	"void gen::elementwise_add<float>",
	"gen_sgemm_128x64_tn",
	"void gen::softmax_warp_forward<float, 4>",
	"void gen::layer_norm<float>",
	"void gen::gelu<float>",
	"void gen::reduce_mean<float>",
	"void gen::depthwise_conv<float>",
}

type genShape struct {
	name     string
	baseNs   float64
	grid     [3]uint32
	block    [3]uint32
	profile  Profile
	smUsage  uint32
	memBytes int64
}

// genRand turns a PCG stream into the few distributions Gen needs, with
// arithmetic of its own so that a seed gives the same trace on every Go
// release.
type genRand struct{ src *rand.PCG }

func (r genRand) float() float64 { return float64(r.src.Uint64()>>11) / (1 << 53) }

func (r genRand) intn(n int) int { return int(r.src.Uint64() % uint64(n)) }

// normal is a standard normal variate (Box–Muller).
func (r genRand) normal() float64 {
	u1 := 1 - r.float() // (0, 1]
	u2 := r.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

func (r genRand) logNormal(median, sigma float64) float64 {
	return median * math.Exp(sigma*r.normal())
}

// Gen returns a synthetic trace with host times, fully determined by seed and
// opts.
func Gen(seed uint64, opts GenOptions) (*Trace, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	r := genRand{rand.NewPCG(seed, 0x66696b6974) /* "fikit" */}
	shape := func(name string, median float64) genShape {
		gx := uint32(1) << r.intn(11) // 1 … 1024 blocks
		bx := uint32(128) << r.intn(3)
		base := min(max(r.logNormal(median, o.DurationSigma), minGenDurationNs), median*50)
		return genShape{name: name, baseNs: base, grid: [3]uint32{gx, 1, 1},
			block: [3]uint32{bx, 1, 1}, profile: Profile(r.intn(3) - 1), smUsage: gx,
			memBytes: int64(r.intn(64)) << 20}
	}
	median := float64(o.DurationMedianNs)
	stem := shape("void gen::stem_conv<float>", median*2)
	head := shape("gen_sgemm_head_nn", median)
	// Each layer slot draws its kind once; each stage draws its own shapes.
	names := make([]string, o.LayerKernels)
	for j := range names {
		names[j] = genKinds[r.intn(len(genKinds))]
		if j >= len(genKinds) {
			names[j] = fmt.Sprintf("%s_%d", names[j], j)
		}
	}
	stages := make([][]genShape, o.Stages)
	for s := range stages {
		stages[s] = make([]genShape, o.LayerKernels)
		for j := range stages[s] {
			stages[s][j] = shape(names[j], median)
		}
	}
	body := max(o.Kernels-2, 0)
	perStage := max(1, (body+o.Stages-1)/o.Stages)
	launch := func(sh genShape) Kernel {
		d := sh.baseNs * (1 + o.Jitter*(2*r.float()-1))
		h := min(r.logNormal(float64(o.HostMedianNs), o.HostSigma), float64(o.HostMedianNs)*20)
		return Kernel{Name: sh.name, DurationNs: int64(math.Round(d)), Grid: sh.grid, Block: sh.block,
			SMUsage: sh.smUsage, Profile: sh.profile, MemoryFootprint: sh.memBytes, HostNs: int64(math.Round(h))}
	}
	t := &Trace{Source: fmt.Sprintf("gen:seed=%d", seed), Format: FormatFikit, HasHostTime: true,
		Kernels: make([]Kernel, 0, o.Kernels)}
	t.Kernels = append(t.Kernels, launch(stem))
	for i := 0; i < body; i++ {
		s := min(i/perStage, o.Stages-1)
		t.Kernels = append(t.Kernels, launch(stages[s][(i-s*perStage)%o.LayerKernels]))
	}
	if o.Kernels >= 2 {
		t.Kernels = append(t.Kernels, launch(head))
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	return t, nil
}
