package profiler_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fikit/fikit/profiler"
)

// buildRuns folds n one-kernel runs of duration dur into b, committing all.
func buildRuns(t *testing.T, b *profiler.Builder, first uint32, n int, dur uint64) uint32 {
	t.Helper()
	run := first
	for i := 0; i < n; i++ {
		b.AddRecords(run, []profiler.Record{rec(7, dur, 0, profiler.FlagGapSpansRunEnd)})
		if out, why := b.EndRunWhy(run, 1, 2*dur, 0); out != profiler.RunCommitted || why != 0 {
			t.Fatalf("run %d: %v %v", run, out, why)
		}
		run++
	}
	return run
}

func TestDiscardReasonsCounted(t *testing.T) {
	b, _ := profiler.NewBuilder("svc", "GPU", 10)
	b.AddRecords(1, []profiler.Record{rec(7, 100, 0, profiler.FlagGapSpansRunEnd)})
	if out, why := b.EndRunWhy(1, 1, 200, profiler.DiscardUncertain); out != profiler.RunDiscarded || why != profiler.DiscardUncertain {
		t.Fatalf("run 1: %v %v", out, why)
	}
	if out, why := b.EndRunWhy(2, 2, 200, 0); out != profiler.RunIncomplete || why != profiler.DiscardRecordsLost {
		t.Fatalf("run 2 without records: %v %v", out, why)
	}
	b.AddRecords(3, []profiler.Record{rec(7, 100, 0, 0)})
	b.AddRecords(4, []profiler.Record{rec(7, 100, 0, profiler.FlagGapSpansRunEnd)})
	b.EndRunWhy(4, 1, 50, 0) // run 3 never ended; run 4 is implausible
	if out := b.EndRun(5, 0, 10, false); out != profiler.RunEmpty {
		t.Fatalf("empty run: %v", out)
	}
	b.AddRecords(6, []profiler.Record{rec(7, 100, 0, profiler.FlagGapSpansRunEnd)})
	b.EndRun(6, 1, 200, false)
	p := b.Profile()
	want := map[string]uint32{"hook_uncertain": 1, "records_lost": 1, "run_end_lost": 1, "implausible": 1, "overlap": 1}
	got := p.Discards.Map()
	if len(got) != len(want) || p.DiscardedRuns != 5 || p.Unclassified() != 0 {
		t.Fatalf("discards %v (%d in all), want %v", got, p.DiscardedRuns, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("discards %v, want %v", got, want)
		}
	}
	for _, r := range profiler.DiscardReasons() {
		if q, ok := profiler.ParseDiscardReason(r.String()); !ok || q != r {
			t.Fatalf("reason %v does not parse back", r)
		}
	}
}

func TestVersions(t *testing.T) {
	b, _ := profiler.NewBuilder("svc", "GPU", 10)
	b.AddKernelInfo(profiler.KernelInfo{ID: 7, Name: "k"})
	buildRuns(t, b, 1, 10, 1000)
	v1 := b.Profile()
	if v1.Version != 1 || v1.Reason != profiler.ReasonNew || len(v1.History) != 1 || v1.History[0].Runs != 10 {
		t.Fatalf("first version: %d %q %+v", v1.Version, v1.Reason, v1.History)
	}
	if !v1.StampHistory(42) || v1.StampHistory(43) || v1.History[0].UnixNs != 42 {
		t.Fatalf("stamp: %+v", v1.History)
	}
	b2, err := profiler.NewVersion(v1, "drift: durations +30%", 10)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Complete() || b2.Runs() != 0 {
		t.Fatal("a new version starts empty")
	}
	buildRuns(t, b2, 1, 9, 1300)
	mid := b2.Profile()
	if mid.Version != 2 || len(mid.History) != 1 {
		t.Fatalf("version 2 under way: %d, history %+v", mid.Version, mid.History)
	}
	buildRuns(t, b2, 10, 1, 1300)
	v2 := b2.Profile()
	if v2.Version != 2 || len(v2.History) != 2 || v2.History[1].Reason != "drift: durations +30%" ||
		v2.History[0].UnixNs != 42 || v2.History[1].UnixNs != 0 {
		t.Fatalf("version 2: %+v", v2.History)
	}
	if k, _ := v2.Kernel(7); k.Name != "k" || k.Duration.Mean != 1300 {
		t.Fatalf("kernel of version 2: %+v", k)
	}
	for _, enc := range []func(*profiler.Profile) (*profiler.Profile, error){
		func(p *profiler.Profile) (*profiler.Profile, error) {
			b, err := p.MarshalBinary()
			if err != nil {
				return nil, err
			}
			return profiler.DecodeBinary(b)
		},
		func(p *profiler.Profile) (*profiler.Profile, error) {
			j, err := p.MarshalJSON()
			if err != nil {
				return nil, err
			}
			return profiler.DecodeJSON(bytes.NewReader(j))
		},
	} {
		q, err := enc(v2)
		if err != nil {
			t.Fatal(err)
		}
		mustEqualProfiles(t, v2, q)
		if q.Version != 2 || len(q.History) != 2 || q.History[0].UnixNs != 42 {
			t.Fatalf("decoded: %d %+v", q.Version, q.History)
		}
	}
	// A history longer than MaxHistory keeps the newest.
	p := v2
	for i := 0; i < profiler.MaxHistory+3; i++ {
		nb, _ := profiler.NewVersion(p, "again", 10)
		buildRuns(t, nb, 1, 10, 1000)
		p = nb.Profile()
	}
	if len(p.History) != profiler.MaxHistory || p.History[len(p.History)-1].Version != p.Version {
		t.Fatalf("history of %d, last %+v, version %d", len(p.History), p.History[len(p.History)-1], p.Version)
	}
}

// A profile written before versions and discard reasons (12 elements)
// reads as version 1 with its discards unclassified; the new elements are
// skipped by older readers as any extra element is.
func TestVersionsOldFormat(t *testing.T) {
	b, _ := profiler.NewBuilder("svc", "GPU", 10)
	b.AddRecords(1, []profiler.Record{rec(7, 1, 0, profiler.FlagGapSpansRunEnd)})
	b.EndRun(1, 1, 10, false)
	buildRuns(t, b, 2, 10, 1000)
	p := b.Profile()
	enc, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Cut the array to its first 12 elements.
	d := msgpack.NewDecoder(bytes.NewReader(enc))
	var all []msgpack.RawMessage
	if err := d.Decode(&all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 15 {
		t.Fatalf("%d elements", len(all))
	}
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(12)
	for _, el := range all[:12] {
		buf.Write(el)
	}
	old, err := profiler.DecodeBinary(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != 1 || old.Reason != "" || len(old.History) != 0 || old.DiscardedRuns != 1 || old.Unclassified() != 1 {
		t.Fatalf("old profile: version %d %q %+v, %d discarded, %d unclassified", old.Version, old.Reason, old.History,
			old.DiscardedRuns, old.Unclassified())
	}
	if _, err := profiler.ResumeBuilder(old, 10); err != nil {
		t.Fatal(err)
	}
}

func TestVersionsInvalid(t *testing.T) {
	b, _ := profiler.NewBuilder("svc", "GPU", 10)
	buildRuns(t, b, 1, 10, 1000)
	good := b.Profile()
	for name, spoil := range map[string]func(p *profiler.Profile){
		"version 0":               func(p *profiler.Profile) { p.Version = 0 },
		"history newer":           func(p *profiler.Profile) { p.History[0].Version = 2 },
		"history not in order":    func(p *profiler.Profile) { p.History = append(p.History, p.History[0]) },
		"more discards by reason": func(p *profiler.Profile) { p.Discards[profiler.DiscardOverlap] = 1 },
		"negative time":           func(p *profiler.Profile) { p.History[0].UnixNs = -1 },
	} {
		p := good.Clone()
		spoil(p)
		if err := profiler.ValidateProfile(p); !errors.Is(err, profiler.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
