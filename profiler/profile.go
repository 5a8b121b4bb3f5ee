package profiler

import (
	"fmt"
	"math"
	"sort"
)

// Phase is where a task stands in its life (paper §3.2). The values match
// the phase field of the wire protocol (docs/design.md).
type Phase uint8

const (
	// PhaseProfiling: every launch is measured; the task has fewer than T
	// committed runs.
	PhaseProfiling Phase = 1
	// PhaseSharing: the profile is complete and the scheduler fills the
	// task's gaps with other tasks' kernels.
	PhaseSharing Phase = 2
)

// String returns "profiling" or "sharing".
func (p Phase) String() string {
	switch p {
	case PhaseProfiling:
		return "profiling"
	case PhaseSharing:
		return "sharing"
	}
	if p == 0 {
		return "none"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Valid reports whether p is one of the defined phases.
func (p Phase) Valid() bool { return p == PhaseProfiling || p == PhaseSharing }

// MarshalText encodes p as "profiling" or "sharing".
func (p Phase) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("phase %d: %w", uint8(p), ErrInvalid)
	}
	return []byte(p.String()), nil
}

// UnmarshalText parses "profiling" or "sharing".
func (p *Phase) UnmarshalText(b []byte) error {
	switch string(b) {
	case "profiling":
		*p = PhaseProfiling
	case "sharing":
		*p = PhaseSharing
	default:
		return fmt.Errorf("phase %q: %w", b, ErrInvalid)
	}
	return nil
}

// Record flags, as in the wire protocol's measurement records.
const (
	// FlagGapSpansRunEnd: the gap after this kernel runs past a run end, so
	// it is not an inter-kernel gap and is left out of the gap statistics.
	FlagGapSpansRunEnd = 1 << 0
	// FlagOverlapped: this kernel overlapped another kernel of the same task
	// (several streams); its gap was clamped to 0 and is folded as 0.
	FlagOverlapped = 1 << 1
)

// Record is one measured kernel execution of a profiling run.
type Record struct {
	KernelID   uint64
	DurationNs uint64
	// GapNs is the idle time from the end of this kernel to the start of
	// the task's next kernel.
	GapNs uint64
	Flags uint8
}

// KernelInfo names a kernel ID: the mangled name as the driver reports it,
// and the launch geometry that together with the name makes the ID.
type KernelInfo struct {
	ID    uint64
	Name  string
	Grid  [3]uint32
	Block [3]uint32
}

// Dist summarises a set of nanosecond values: exact count, mean and sum of
// squared deviations (Welford), minimum and maximum, and a sketch for
// quantiles. P50 and P90 are derived from Sketch (clamped to Min–Max, so a
// constant value reads back exactly); the Builder and the decoders keep them
// current so that reading them costs nothing.
type Dist struct {
	Count uint64
	Mean  float64
	// M2 is the sum of squared deviations from the mean.
	M2       float64
	Min, Max uint64
	P50, P90 float64
	Sketch   *Sketch
}

func newDist() Dist { return Dist{Sketch: NewSketch()} }

// add folds one value (Welford's online update).
func (d *Dist) add(ns uint64) {
	x := float64(ns)
	if d.Count == 0 || ns < d.Min {
		d.Min = ns
	}
	if d.Count == 0 || ns > d.Max {
		d.Max = ns
	}
	d.Count++
	delta := x - d.Mean
	d.Mean += delta / float64(d.Count)
	d.M2 += delta * (x - d.Mean)
	d.Sketch.Add(ns)
}

// refresh recomputes the cached quantiles from the sketch.
func (d *Dist) refresh() {
	d.P50 = d.Quantile(0.5)
	d.P90 = d.Quantile(0.9)
}

// Stddev is the population standard deviation, sqrt(M2/Count); 0 for fewer
// than two values.
func (d *Dist) Stddev() float64 {
	if d.Count < 2 || d.M2 <= 0 {
		return 0
	}
	return math.Sqrt(d.M2 / float64(d.Count))
}

// Quantile returns the value at quantile q from the sketch (1 % relative
// accuracy) clamped to Min–Max, 0 when empty. Prefer the cached P50 and P90
// on hot paths.
func (d *Dist) Quantile(q float64) float64 {
	if d.Count == 0 {
		return 0
	}
	return min(max(d.Sketch.Quantile(q), float64(d.Min)), float64(d.Max))
}

func (d *Dist) clone() Dist {
	c := *d
	c.Sketch = d.Sketch.Clone()
	return c
}

// KernelStats is the profile of one kernel ID: the paper's SK (Duration.Mean)
// and SG (Gap.Mean) with their spread. Gap leaves out gaps flagged
// FlagGapSpansRunEnd, so Gap.Count ≤ Duration.Count.
type KernelStats struct {
	ID    uint64
	Name  string // mangled, as the driver reports it; "" if never named
	Grid  [3]uint32
	Block [3]uint32

	Duration Dist
	Gap      Dist
}

// Count is the number of measured executions.
func (k *KernelStats) Count() uint64 { return k.Duration.Count }

// TotalNs is the measured time spent in this kernel over all committed runs
// (count × mean duration).
func (k *KernelStats) TotalNs() float64 { return float64(k.Duration.Count) * k.Duration.Mean }

// Profile is what a task's profiling phase learnt about it on one GPU model.
// It is plain data: once built it is not modified, and any number of
// goroutines may read it.
type Profile struct {
	TaskKey string
	GPU     string // GPU model, the device name the hook reports
	Phase   Phase
	// Runs is the number of committed runs, TargetRuns the T the profile
	// was built for, DiscardedRuns the runs left out (overlapped other
	// tasks, lost records, or ended without a RunEnd).
	Runs          uint32
	TargetRuns    uint32
	DiscardedRuns uint32
	// Discards counts DiscardedRuns by reason (profiles from before
	// reasons were kept count fewer: Unclassified).
	Discards Discards
	// BesideRuns of the Runs were measured beside a better priority's work
	// (the daemon's scheduler decides which): only what the run's own
	// measurements still say truly was folded — the durations of kernels
	// that ran alone on the device, the gaps not stretched by waiting for
	// a grant or for others' work — and not its run time nor its place in
	// Sequence. A kernel such runs saw but never measured alone is in
	// Kernels with no duration (unknown).
	BesideRuns uint32

	// Version numbers the task key's profiles on this GPU model: 1 for the
	// first, one more each time the service drifted from its profile and
	// was measured again. Reason says why this version came; History
	// lists the completed versions, this one last once it is complete.
	Version uint32
	Reason  string
	History []VersionInfo

	// RunTime is the job completion time of committed runs.
	RunTime Dist
	// Duration and Gap merge every kernel's durations and (non run-end)
	// gaps: the task-level view for kernels the profile does not know.
	Duration Dist
	Gap      Dist

	// Kernels maps kernel ID to its statistics.
	Kernels map[uint64]*KernelStats

	// Sequence is the kernel order of the profile's runs, with each
	// position's mean duration and following gap, when runs repeat one order
	// (inference does): what lets a scheduler predict a task's next kernels
	// from its position in a run. It averages SeqRuns committed runs, those
	// in the order of the first; runs in another order are left out of it.
	Sequence []SeqKernel
	SeqRuns  uint32
}

// SeqKernel is one position of a Profile's Sequence.
type SeqKernel struct {
	ID         uint64
	DurationNs float64 // mean duration at this position
	GapNs      float64 // mean idle gap to the next position (0 for the last)
}

// MaxSequence bounds the run length a Sequence is kept for.
const MaxSequence = 1 << 16

// NewProfile returns an empty profile in the profiling phase.
func NewProfile(taskKey, gpu string, targetRuns uint32) *Profile {
	return &Profile{
		TaskKey:    taskKey,
		GPU:        gpu,
		Phase:      PhaseProfiling,
		TargetRuns: targetRuns,
		Version:    1,
		Reason:     ReasonNew,
		RunTime:    newDist(),
		Duration:   newDist(),
		Gap:        newDist(),
		Kernels:    make(map[uint64]*KernelStats),
	}
}

// Kernel returns the statistics of one kernel ID.
func (p *Profile) Kernel(id uint64) (*KernelStats, bool) {
	k, ok := p.Kernels[id]
	return k, ok
}

// P90Duration is the task-level p90 of kernel durations in nanoseconds: a
// conservative size for a kernel of this task that the profile does not know.
func (p *Profile) P90Duration() float64 { return p.Duration.P90 }

// TypicalGap is the median (p50) of all the task's inter-kernel gaps that
// do not span a run end, in nanoseconds: the gap to expect after a kernel
// the profile does not know. The median rather than a high quantile, so
// that filling such a gap errs towards leaving idle time rather than
// delaying the task's next kernel. Gap.P90 is there for callers that want
// the other side.
func (p *Profile) TypicalGap() float64 { return p.Gap.P50 }

// MeanJCT is the mean job completion time of committed runs in nanoseconds.
func (p *Profile) MeanJCT() float64 { return p.RunTime.Mean }

// P90JCT is the p90 job completion time of committed runs in nanoseconds.
func (p *Profile) P90JCT() float64 { return p.RunTime.P90 }

// SortedKernels returns the kernels ordered by ID.
func (p *Profile) SortedKernels() []*KernelStats {
	ks := make([]*KernelStats, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].ID < ks[j].ID })
	return ks
}

// Clone returns a deep copy of p.
func (p *Profile) Clone() *Profile {
	c := *p
	c.RunTime = p.RunTime.clone()
	c.Duration = p.Duration.clone()
	c.Gap = p.Gap.clone()
	c.Kernels = make(map[uint64]*KernelStats, len(p.Kernels))
	for id, k := range p.Kernels {
		kc := *k
		kc.Duration = k.Duration.clone()
		kc.Gap = k.Gap.clone()
		c.Kernels[id] = &kc
	}
	c.Sequence = append([]SeqKernel(nil), p.Sequence...)
	c.History = append([]VersionInfo(nil), p.History...)
	return &c
}

// StableSequence reports whether the Sequence describes the task's runs: at
// least two runs, and at least half of the committed ones, had its order.
func (p *Profile) StableSequence() bool {
	return len(p.Sequence) > 0 && p.SeqRuns >= 2 && 2*p.SeqRuns >= p.Runs-p.BesideRuns
}

// DurationKnown reports whether k's duration was ever measured (a kernel
// that runs beside a better priority's work only may not have been).
func (k *KernelStats) DurationKnown() bool { return k.Duration.Count > 0 }
