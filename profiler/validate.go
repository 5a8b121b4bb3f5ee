package profiler

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ValidateProfile checks the invariants every profile the Builder makes
// holds; the decoders apply it to what they read.
//
//   - TaskKey is non-empty valid UTF-8 of at most MaxTaskKeyLen bytes, GPU
//     valid UTF-8 of at most MaxGPULen bytes.
//   - Phase is PhaseSharing exactly when Runs ≥ TargetRuns, and TargetRuns
//     is within MinProfileRuns–MaxProfileRuns.
//   - RunTime has one value per committed run not measured beside a
//     better priority (BesideRuns ≤ Runs).
//   - Every Dist has a sketch holding Count values, a finite non-negative
//     mean and M2, and mean 0 when empty.
//   - Every kernel has at least one execution (none, its duration
//     unknown, only in a profile with BesideRuns), no more gaps than
//     executions, and is filed under its own ID; the task-level Duration
//     and Gap hold exactly the kernels' values, at most MaxRunRecords
//     executions per committed run.
//   - No measurement (run time, duration, gap) exceeds MaxRunNs.
//   - Version is at least 1 and newer than its History's, which increase;
//     the discards by reason add up to no more than DiscardedRuns.
func ValidateProfile(p *Profile) error {
	if p.TaskKey == "" {
		return fmt.Errorf("empty task key: %w", ErrInvalid)
	}
	if len(p.TaskKey) > MaxTaskKeyLen || !utf8.ValidString(p.TaskKey) {
		return fmt.Errorf("task key: %w", ErrInvalid)
	}
	if len(p.GPU) > MaxGPULen || !utf8.ValidString(p.GPU) {
		return fmt.Errorf("gpu model: %w", ErrInvalid)
	}
	if !p.Phase.Valid() {
		return fmt.Errorf("phase %d: %w", uint8(p.Phase), ErrInvalid)
	}
	if err := ValidateProfileRuns(int(p.TargetRuns)); err != nil {
		return fmt.Errorf("target runs: %w", errors.Join(ErrInvalid, err))
	}
	if (p.Phase == PhaseSharing) != (p.Runs >= p.TargetRuns) {
		return fmt.Errorf("phase %s with %d of %d runs: %w", p.Phase, p.Runs, p.TargetRuns, ErrInvalid)
	}
	if err := validateDist("run time", &p.RunTime); err != nil {
		return err
	}
	if p.BesideRuns > p.Runs {
		return fmt.Errorf("%d of %d runs beside others: %w", p.BesideRuns, p.Runs, ErrInvalid)
	}
	if p.RunTime.Count != uint64(p.Runs-p.BesideRuns) {
		return fmt.Errorf("%d run times for %d runs (%d beside others): %w", p.RunTime.Count, p.Runs, p.BesideRuns, ErrInvalid)
	}
	if err := validateDist("duration", &p.Duration); err != nil {
		return err
	}
	if err := validateDist("gap", &p.Gap); err != nil {
		return err
	}
	var durations, gaps uint64
	for id, k := range p.Kernels {
		if k == nil || k.ID != id {
			return fmt.Errorf("kernel %016x filed wrongly: %w", id, ErrInvalid)
		}
		if len(k.Name) > MaxNameLen || !utf8.ValidString(k.Name) {
			return fmt.Errorf("kernel %016x name: %w", id, ErrInvalid)
		}
		if err := validateDist(fmt.Sprintf("kernel %016x duration", id), &k.Duration); err != nil {
			return err
		}
		if err := validateDist(fmt.Sprintf("kernel %016x gap", id), &k.Gap); err != nil {
			return err
		}
		if (k.Duration.Count == 0 && p.BesideRuns == 0) || k.Gap.Count > k.Duration.Count {
			return fmt.Errorf("kernel %016x: %d executions, %d gaps: %w", id, k.Duration.Count, k.Gap.Count, ErrInvalid)
		}
		durations += k.Duration.Count
		gaps += k.Gap.Count
		if durations < k.Duration.Count {
			return fmt.Errorf("kernel counts overflow: %w", ErrInvalid)
		}
	}
	if durations > uint64(p.Runs)*MaxRunRecords {
		return fmt.Errorf("%d kernel executions in %d runs: more than %d a run: %w", durations, p.Runs, MaxRunRecords, ErrInvalid)
	}
	if durations != p.Duration.Count || gaps != p.Gap.Count {
		return fmt.Errorf("task totals %d/%d disagree with kernels %d/%d: %w",
			p.Duration.Count, p.Gap.Count, durations, gaps, ErrInvalid)
	}
	if err := validateSequence(p); err != nil {
		return err
	}
	return validateVersions(p)
}

func validateDist(what string, d *Dist) error {
	if d.Sketch == nil {
		return fmt.Errorf("%s: no sketch: %w", what, ErrInvalid)
	}
	if n := d.Sketch.Count(); n != d.Count {
		return fmt.Errorf("%s: sketch holds %d values, count %d: %w", what, n, d.Count, ErrInvalid)
	}
	if !finite(d.Mean) || !finite(d.M2) || d.Mean < 0 || d.M2 < 0 {
		return fmt.Errorf("%s: mean %v, m2 %v: %w", what, d.Mean, d.M2, ErrInvalid)
	}
	if d.Max > MaxRunNs {
		return fmt.Errorf("%s: %d ns, longer than a run can be (%d): %w", what, d.Max, MaxRunNs, ErrInvalid)
	}
	if d.Count == 0 {
		if d.Mean != 0 || d.M2 != 0 || d.Min != 0 || d.Max != 0 {
			return fmt.Errorf("%s: empty with mean %v: %w", what, d.Mean, ErrInvalid)
		}
		return nil
	}
	// The mean lies within min–max up to rounding.
	lo, hi := float64(d.Min), float64(d.Max)
	if d.Min > d.Max || d.Mean < lo-1e-9*lo-1e-6 || d.Mean > hi+1e-9*hi+1e-6 {
		return fmt.Errorf("%s: mean %v outside %d–%d: %w", what, d.Mean, d.Min, d.Max, ErrInvalid)
	}
	if (d.Sketch.ZeroCount() > 0) != (d.Min == 0) {
		return fmt.Errorf("%s: minimum %d with %d zeros: %w", what, d.Min, d.Sketch.ZeroCount(), ErrInvalid)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// refresh recomputes every cached quantile.
func (p *Profile) refresh() {
	p.RunTime.refresh()
	p.Duration.refresh()
	p.Gap.refresh()
	for _, k := range p.Kernels {
		k.Duration.refresh()
		k.Gap.refresh()
	}
}

// validateSequence: a sequence exists exactly when it averages runs, no more
// runs than committed; its kernels are the profile's; its means are finite
// and non-negative.
func validateSequence(p *Profile) error {
	if (len(p.Sequence) == 0) != (p.SeqRuns == 0) || p.SeqRuns > p.Runs || len(p.Sequence) > MaxSequence {
		return fmt.Errorf("sequence of %d kernels over %d of %d runs: %w", len(p.Sequence), p.SeqRuns, p.Runs, ErrInvalid)
	}
	for i, s := range p.Sequence {
		if _, ok := p.Kernels[s.ID]; !ok {
			return fmt.Errorf("sequence position %d: unknown kernel %016x: %w", i, s.ID, ErrInvalid)
		}
		if !finiteNonNeg(s.DurationNs) || !finiteNonNeg(s.GapNs) {
			return fmt.Errorf("sequence position %d: %w", i, ErrInvalid)
		}
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
