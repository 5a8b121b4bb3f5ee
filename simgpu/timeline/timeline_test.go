package timeline

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestReadVector(t *testing.T) {
	recs, err := Read("testdata/records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	// Sorted by start: 3000, 5000, 6000, 20000.
	if recs[1].PID != 8 || recs[1].Name != `lp "k"` || !recs[1].Last || !recs[1].Dropped || recs[1].ArriveNs != 4500 {
		t.Errorf("record 1: %+v", recs[1])
	}
	if r := recs[0]; r.Stream != 3 || r.Seq != 17 || r.Grid != [3]uint32{4, 1, 1} || r.Block != [3]uint32{128, 1, 1} || r.Last || r.BlockedNs != 2000 {
		t.Errorf("record 0: %+v", r)
	}
	if got := BusyNs(recs, 7, 0, 6500); got != 2000+500 {
		t.Errorf("busy of pid 7 within [0, 6500]: %d", got)
	}
	if got := BusyNs(recs, -1, 0, 1<<40); got != 2000+1000+1000+1000 {
		t.Errorf("busy of all: %d", got)
	}
	// The kernel arriving at 1000 belongs to the first span with both its
	// segments' blocked time; the one arriving at 19000 to the second.
	got := BlockedPerSpan(recs, 7, []Span{{0, 10000}, {10000, 30000}, {30000, 40000}})
	if want := []int64{3000, 500, 0}; !equal(got, want) {
		t.Errorf("blocked per span %v, want %v", got, want)
	}
	// Unsorted spans give the same answer.
	got = BlockedPerSpan(recs, 7, []Span{{10000, 30000}, {0, 10000}})
	if want := []int64{500, 3000}; !equal(got, want) {
		t.Errorf("blocked per unsorted span %v, want %v", got, want)
	}
	if p := Pids(recs); p[7] != 3 || p[8] != 1 {
		t.Errorf("pids %v", p)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMalformed(t *testing.T) {
	for _, line := range []string{
		`{"pid":1,`,
		`{"pid":1,"last":"yes"}`,
		`{"pid":1,"start_ns":10,"end_ns":5}`,
		`{"pid":1,"start_ns":1,"end_ns":5,"blocked_ns":-1}`,
		`[1,2]`,
	} {
		_, err := Parse(strings.NewReader("\n"+line+"\n"), "x.jsonl")
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "x.jsonl:2") {
			t.Errorf("%s: error %v, want ErrFormat at x.jsonl:2", line, err)
		}
	}
	if _, err := Read("testdata/none.jsonl"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestInterferencePct(t *testing.T) {
	blocked := []int64{0, 0, 10, 20, 1000}
	p50, p99 := InterferencePct(blocked, 1000)
	if p50 != 1 || p99 != 100 {
		t.Errorf("p50 %v p99 %v", p50, p99)
	}
	if a, b := InterferencePct(nil, 1000); a != 0 || b != 0 {
		t.Error("no runs")
	}
	if a, b := InterferencePct(blocked, 0); a != 0 || b != 0 {
		t.Error("no alone JCT")
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/records.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"last":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := Parse(strings.NewReader(string(data)), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		for i, r := range recs {
			if r.EndNs < r.StartNs || r.BlockedNs < 0 || (i > 0 && recs[i-1].StartNs > r.StartNs) {
				t.Fatalf("record %d accepted: %+v", i, r)
			}
		}
		_ = BusyNs(recs, -1, -1<<62, 1<<62)
		_ = BlockedPerSpan(recs, 1, []Span{{0, 1 << 40}})
	})
}

func TestLongestGap(t *testing.T) {
	recs := []Record{
		{PID: 1, StartNs: 10, EndNs: 20},
		{PID: 2, StartNs: 20, EndNs: 90}, // another process
		{PID: 1, StartNs: 15, EndNs: 30}, // overlaps the first
		{PID: 1, StartNs: 60, EndNs: 70},
		{PID: 1, Name: HookProbe, StartNs: 35, EndNs: 55}, // the probe is not the service's work
	}
	for _, c := range []struct {
		pid             int
		from, to        int64
		wantGap, wantAt int64
	}{
		{1, 0, 105, 35, 70}, // 70–105 after the last segment
		{1, 0, 80, 30, 30},  // 30–60 between them
		{1, 12, 65, 30, 30}, // clipped to the range
		{2, 0, 100, 20, 0},  // 0–20 before the first
		{3, 0, 100, 100, 0}, // never ran
		{1, 40, 40, 0, 0},   // an empty range
	} {
		if gap, at := LongestGap(recs, c.pid, c.from, c.to); gap != c.wantGap || at != c.wantAt {
			t.Errorf("LongestGap(pid %d, %d–%d) = %d at %d, want %d at %d", c.pid, c.from, c.to, gap, at, c.wantGap, c.wantAt)
		}
	}
}
