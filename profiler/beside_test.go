package profiler_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fikit/fikit/profiler"
)

// A run measured beside a better priority's work folds only what the
// caller says is true: those durations, those gaps (of kernels whose
// durations are), no run time and no sequence; it counts towards T, and
// the kernels it saw but never measured alone are there, unknown. The
// profile survives both encodings and completes after T runs.
func TestDecideBeside(t *testing.T) {
	b, _ := profiler.NewBuilder("lp", "GPU", 10)
	recs := []profiler.Record{rec(1, 100, 50, 0), rec(2, 900, 40, 0), rec(3, 30, 0, profiler.FlagGapSpansRunEnd)}
	// Kernel 2 was stretched by others' work: unknown. The gap after
	// kernel 1 waited for a grant: unknown.
	known := func(i int) (bool, bool) { return i != 1, i == 1 || i == 2 }
	for run := uint32(1); run <= 9; run++ {
		b.AddRecords(run, recs)
		if out, why := b.DecideBeside(b.Detach(run), 3, 5000, known, profiler.DiscardOverlap); out != profiler.RunBeside || why != 0 {
			t.Fatalf("run %d: %v %v", run, out, why)
		}
	}
	p := b.Profile()
	if p.Runs != 9 || p.BesideRuns != 9 || p.RunTime.Count != 0 || p.SeqRuns != 0 || p.Phase != profiler.PhaseProfiling {
		t.Fatalf("runs %d beside %d run times %d seq runs %d phase %v", p.Runs, p.BesideRuns, p.RunTime.Count, p.SeqRuns, p.Phase)
	}
	k1, k2, k3 := p.Kernels[1], p.Kernels[2], p.Kernels[3]
	if k1 == nil || k1.Duration.Count != 9 || k1.Duration.Mean != 100 || k1.Gap.Count != 0 {
		t.Fatalf("kernel 1: %+v", k1)
	}
	if k2 == nil || k2.DurationKnown() || k2.Gap.Count != 0 {
		t.Fatalf("kernel 2 must be there, unknown: %+v", k2)
	}
	if k3 == nil || k3.Duration.Count != 9 || k3.Gap.Count != 0 {
		t.Fatalf("kernel 3 (its gap spans the run end): %+v", k3)
	}
	if p.Duration.Count != 18 {
		t.Fatalf("task-level durations %d, want 18", p.Duration.Count)
	}
	for name, round := range map[string]func(*profiler.Profile) (*profiler.Profile, error){
		"binary": func(p *profiler.Profile) (*profiler.Profile, error) {
			enc, err := p.MarshalBinary()
			if err != nil {
				return nil, err
			}
			return profiler.DecodeBinary(enc)
		},
		"json": func(p *profiler.Profile) (*profiler.Profile, error) {
			enc, err := p.MarshalJSON()
			if err != nil {
				return nil, err
			}
			return profiler.DecodeJSON(bytes.NewReader(enc))
		},
	} {
		q, err := round(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if q.BesideRuns != 9 || q.Kernels[2] == nil || q.Kernels[2].DurationKnown() {
			t.Fatalf("%s: beside %d, kernel 2 %+v", name, q.BesideRuns, q.Kernels[2])
		}
	}
	// A run with nothing true in it does not count.
	b.AddRecords(10, recs)
	none := func(int) (bool, bool) { return false, false }
	if out, why := b.DecideBeside(b.Detach(10), 3, 5000, none, profiler.DiscardOverlap); out != profiler.RunDiscarded || why != profiler.DiscardOverlap {
		t.Fatalf("a run with nothing known: %v %v", out, why)
	}
	// A clean run is the T-th.
	b.AddRecords(11, recs)
	if out, _ := b.EndRunWhy(11, 3, 5000, 0); out != profiler.RunCommitted || !b.Complete() {
		t.Fatalf("the T-th run: %v, complete %v", out, b.Complete())
	}
	p = b.Profile()
	if p.Runs != 10 || p.BesideRuns != 9 || p.RunTime.Count != 1 || p.Kernels[2].Duration.Count != 1 {
		t.Fatalf("complete: runs %d beside %d run times %d kernel 2 %d", p.Runs, p.BesideRuns, p.RunTime.Count, p.Kernels[2].Duration.Count)
	}
	if err := profiler.ValidateProfile(p); err != nil {
		t.Fatal(err)
	}
	// More beside runs than runs is invalid.
	q := p.Clone()
	q.BesideRuns = 11
	if err := profiler.ValidateProfile(q); !errors.Is(err, profiler.ErrInvalid) {
		t.Errorf("beside > runs: %v", err)
	}
}
