package profiler

import (
	"bytes"
	"testing"
)

func seqRun(ids []uint64, dur, gap uint64) []Record {
	recs := make([]Record, len(ids))
	for i, id := range ids {
		recs[i] = Record{KernelID: id, DurationNs: dur * id, GapNs: gap}
	}
	recs[len(recs)-1].Flags = FlagGapSpansRunEnd
	return recs
}

// The sequence averages the runs in the first run's order, position by
// position, and leaves runs in another order out.
func TestSequence(t *testing.T) {
	b, err := NewBuilder("k", "g", 10)
	if err != nil {
		t.Fatal(err)
	}
	order := []uint64{1, 2, 1, 3}
	for run := uint32(1); run <= 10; run++ {
		recs := seqRun(order, 1000*uint64(run), 500*uint64(run))
		if run == 4 {
			recs = seqRun([]uint64{2, 1, 1, 3}, 1000, 500) // another order
		}
		if run == 6 {
			recs = seqRun([]uint64{1, 2, 1}, 1000, 500) // another length
		}
		b.AddRecords(run, recs)
		if out := b.EndRun(run, uint32(len(recs)), 1e6, true); out != RunCommitted {
			t.Fatalf("run %d: %v", run, out)
		}
	}
	p := b.Profile()
	if p.SeqRuns != 8 || len(p.Sequence) != 4 || !p.StableSequence() {
		t.Fatalf("sequence over %d runs, %d positions, stable %v", p.SeqRuns, len(p.Sequence), p.StableSequence())
	}
	// Runs 1,2,3,5,7,8,9,10: mean multiplier 45/8.
	const m = 45.0 / 8
	for i, id := range order {
		s := p.Sequence[i]
		if s.ID != id || s.DurationNs != 1000*m*float64(id) {
			t.Errorf("position %d: %+v, want kernel %d duration %v", i, s, id, 1000*m*float64(id))
		}
		wantGap := 500 * m
		if i == len(order)-1 {
			wantGap = 0 // the gap after a run's last kernel spans its end
		}
		if s.GapNs != wantGap {
			t.Errorf("position %d gap %v, want %v", i, s.GapNs, wantGap)
		}
	}
	// Both encodings keep it.
	bin, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Profile{q, r} {
		if x.SeqRuns != p.SeqRuns || len(x.Sequence) != len(p.Sequence) {
			t.Fatalf("round trip lost the sequence: %d runs, %d positions", x.SeqRuns, len(x.Sequence))
		}
		for i := range p.Sequence {
			if x.Sequence[i] != p.Sequence[i] {
				t.Errorf("position %d: %+v, want %+v", i, x.Sequence[i], p.Sequence[i])
			}
		}
	}
}

// A sequence that names a kernel the profile does not have is invalid.
func TestSequenceValidation(t *testing.T) {
	b, _ := NewBuilder("k", "g", 10)
	for run := uint32(1); run <= 10; run++ {
		b.AddRecords(run, seqRun([]uint64{1, 2}, 10, 10))
		b.EndRun(run, 2, 1e6, true)
	}
	p := b.Profile()
	if err := ValidateProfile(p); err != nil {
		t.Fatal(err)
	}
	p.Sequence[1].ID = 99
	if err := ValidateProfile(p); err == nil {
		t.Error("unknown kernel in the sequence accepted")
	}
	p.Sequence[1].ID = 2
	p.SeqRuns = p.Runs + 1
	if err := ValidateProfile(p); err == nil {
		t.Error("sequence over more runs than committed accepted")
	}
}
