package fairbench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fikit/fikit/simgpu/timeline"
)

func TestParseMode(t *testing.T) {
	for spec, want := range map[string]Mode{
		"fair-prio-fit":     {Policy: "fair-prio-fit", WeightShort: 1, WeightLong: 1},
		"best-prio-fit:3:1": {Policy: "best-prio-fit", WeightShort: 3, WeightLong: 1},
		"fifo:holders":      {Policy: "fifo", WeightShort: 1, WeightLong: 1, Holders: true},
		"fifo:1:2:holders":  {Policy: "fifo", WeightShort: 1, WeightLong: 2, Holders: true},
	} {
		if m, err := ParseMode(spec); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", spec, m, err, want)
		}
	}
	for _, bad := range []string{"", "lottery", "fifo:2", "fifo:0:1", "fifo:1:101", "fifo:a:b", "fifo:1:1:1", "fifo:holders:1:1", "holders"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
}

// Switches are changes of process between consecutive segments in the
// span; those between the two low-priority services are counted apart.
func TestSwitches(t *testing.T) {
	seg := func(pid int, start int64) timeline.Record {
		return timeline.Record{PID: pid, StartNs: start, EndNs: start + 5}
	}
	recs := []timeline.Record{seg(3, 60), seg(1, 10), seg(2, 20), seg(2, 30), seg(3, 40), seg(1, 50), seg(2, 5), seg(3, 200)}
	// In [10, 100): 1 2 2 3 1 3, 4 changes, one of them from 2 to 3.
	if all, lp := switches(recs, 10, 100, 2, 3); all != 4 || lp != 1 {
		t.Errorf("switches = %d, %d; want 4, 1", all, lp)
	}
}

func TestWrite(t *testing.T) {
	r := &Result{Device: "simgpu", HPAloneNs: 2_600_000, Modes: []ModeResult{
		{Mode: Mode{Policy: "best-prio-fit", WeightShort: 1, WeightLong: 1}, ShortNs: 100e6, LongNs: 1300e6, Ratio: 13, SpanNs: 4e9, Switches: 400, LPSwitches: 8},
		{Mode: Mode{Policy: "fair-prio-fit", WeightShort: 2, WeightLong: 1}, ShortNs: 900e6, LongNs: 450e6, Ratio: 1, SpanNs: 4e9},
		{Mode: Mode{Policy: "fair-prio-fit", WeightShort: 2, WeightLong: 1, Holders: true}, ShortNs: 900e6, LongNs: 450e6, Ratio: 1, SpanNs: 4e9, ShortAccountedNs: 1, ShortLifeNs: 1},
	}}
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fair-prio-fit, weights 2:1, holders (no HP)", "1400.0 ms", "96%", "100", "1.000"} {
		// 96%: the second against the first; the holders mode is
		// compared with holders modes alone (100%).
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
