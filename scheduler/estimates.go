package scheduler

import "github.com/fikit/fikit/profiler"

// KernelEstimate is what the core predicts for one kernel ID of a task.
type KernelEstimate struct {
	MeanNs int64 // SK: mean duration
	P90Ns  int64 // p90 duration (conservative estimate when this task waits)
	GapNs  int64 // SG: mean idle gap after it; meaningful only if HasGap
	HasGap bool  // false when every measured gap after it spanned a run end
	// Unmeasured: the profile saw the kernel but never measured it alone
	// (it profiled beside a better priority): its durations are 0 here
	// and the task-level ones stand in, as for a kernel it lacks.
	Unmeasured bool
}

// SeqEstimate is one position of a task's run.
type SeqEstimate struct {
	ID    uint64
	DurNs int64 // mean duration at this position
	GapNs int64 // mean gap after it (0 for a run's last kernel)
}

// Estimates is a task's profile reduced to what scheduling needs, so the
// hot path does map lookups of plain integers only.
type Estimates struct {
	Kernels map[uint64]KernelEstimate
	// Seq is the run's kernel order when the profile found one (see
	// profiler.Profile.StableSequence); nil otherwise.
	Seq          []SeqEstimate
	MeanNs       int64 // task-level mean kernel duration
	P90Ns        int64 // task-level p90 kernel duration
	TypicalGapNs int64 // task-level typical inter-kernel gap
	MeanJCTNs    int64 // mean run time while profiled
}

// EstimatesFromProfile reduces a profile to estimates.
func EstimatesFromProfile(p *profiler.Profile) *Estimates {
	e := &Estimates{
		Kernels:      make(map[uint64]KernelEstimate, len(p.Kernels)),
		MeanNs:       int64(p.Duration.Mean),
		P90Ns:        int64(p.P90Duration()),
		TypicalGapNs: int64(p.TypicalGap()),
		MeanJCTNs:    int64(p.MeanJCT()),
	}
	if p.StableSequence() {
		e.Seq = make([]SeqEstimate, len(p.Sequence))
		for i, s := range p.Sequence {
			e.Seq[i] = SeqEstimate{ID: s.ID, DurNs: int64(s.DurationNs), GapNs: int64(s.GapNs)}
		}
	}
	for id, k := range p.Kernels {
		if !k.DurationKnown() {
			e.Kernels[id] = KernelEstimate{Unmeasured: true}
			continue
		}
		e.Kernels[id] = KernelEstimate{
			MeanNs: int64(k.Duration.Mean),
			P90Ns:  int64(k.Duration.P90),
			GapNs:  int64(k.Gap.Mean),
			HasGap: k.Gap.Count > 0,
		}
	}
	return e
}

func (e *Estimates) kernel(id uint64) (KernelEstimate, bool) {
	if e == nil {
		return KernelEstimate{}, false
	}
	k, ok := e.Kernels[id]
	return k, ok
}
