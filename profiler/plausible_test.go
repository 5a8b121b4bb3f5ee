package profiler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fikit/fikit/profiler"
)

// Measurements no run could hold are not folded: a forged or corrupt run of
// 2^64−1 ns kernels once became a "complete" profile with a mean run time
// of 4.6e9 s.
func TestImplausibleRunsAreNotFolded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		recs  []profiler.Record
		runNs uint64
	}{
		{"kernel longer than its run", []profiler.Record{rec(1, 2000, 5, 0), rec(2, 10, 0, profiler.FlagGapSpansRunEnd)}, 1000},
		{"in-run gap longer than its run", []profiler.Record{rec(1, 10, 5000, 0), rec(2, 10, 0, profiler.FlagGapSpansRunEnd)}, 1000},
		{"all ones", []profiler.Record{rec(1, math.MaxUint64, math.MaxUint64, 0)}, math.MaxUint64},
		{"run longer than an hour", []profiler.Record{rec(1, 10, 0, profiler.FlagGapSpansRunEnd)}, profiler.MaxRunNs + 1},
		{"zero-length run", []profiler.Record{rec(1, 0, 0, profiler.FlagGapSpansRunEnd)}, 0},
	} {
		b, _ := profiler.NewBuilder("k", "g", 10)
		b.AddRecords(1, tc.recs)
		if got := b.EndRun(1, uint32(len(tc.recs)), tc.runNs, true); got != profiler.RunImplausible {
			t.Errorf("%s: EndRun = %v, want implausible", tc.name, got)
		}
		if p := b.Profile(); p.Runs != 0 || p.DiscardedRuns != 1 {
			t.Errorf("%s: %d runs, %d discarded", tc.name, p.Runs, p.DiscardedRuns)
		}
	}
	// A gap spanning the run end reaches into the next run: it may be longer.
	b, _ := profiler.NewBuilder("k", "g", 10)
	b.AddRecords(1, []profiler.Record{rec(1, 10, 5_000_000, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(1, 1, 1000, true); got != profiler.RunCommitted {
		t.Errorf("a long gap past the run end: %v", got)
	}
}

// ValidateProfile (and so every decoder and `fikit profile import`) refuses
// a profile holding a measurement longer than MaxRunNs, or more kernel
// executions than its runs could hold.
func TestValidateRefusesAbsurdMagnitudes(t *testing.T) {
	good := func() *profiler.Profile {
		b, _ := profiler.NewBuilder("k", "g", 10)
		for run := uint32(1); run <= 10; run++ {
			b.AddRecords(run, []profiler.Record{rec(1, 100, 20, 0), rec(2, 50, 0, profiler.FlagGapSpansRunEnd)})
			if got := b.EndRun(run, 2, 1000, true); got != profiler.RunCommitted {
				t.Fatal(got)
			}
		}
		return b.Profile()
	}
	if err := profiler.ValidateProfile(good()); err != nil {
		t.Fatal(err)
	}
	p := good()
	p.RunTime.Max = profiler.MaxRunNs + 1
	if err := profiler.ValidateProfile(p); !errors.Is(err, profiler.ErrInvalid) {
		t.Errorf("run time beyond an hour: %v", err)
	}
	// An exported profile edited to claim 10^12 executions of a kernel in
	// its 10 runs (its sketch and the task totals edited to agree) is
	// refused on import.
	js, err := good().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	const huge = 1e12
	inflate := func(d map[string]any) {
		old := d["count"].(float64)
		d["count"] = huge
		bins := d["sketch"].(map[string]any)["bins"].([]any)
		bin := bins[0].([]any)
		bin[1] = bin[1].(float64) + huge - old
	}
	for _, k := range doc["kernels"].([]any) {
		if k := k.(map[string]any); k["id"] == profiler.FormatKernelID(1) {
			inflate(k["duration"].(map[string]any))
		}
	}
	d := doc["duration"].(map[string]any)
	d["count"] = d["count"].(float64) + huge - 10
	bins := d["sketch"].(map[string]any)["bins"].([]any)
	bins[0].([]any)[1] = bins[0].([]any)[1].(float64) + huge - 10
	edited, _ := json.Marshal(doc)
	_, err = profiler.DecodeJSON(bytes.NewReader(edited))
	if !errors.Is(err, profiler.ErrInvalid) || !strings.Contains(err.Error(), "executions") {
		t.Errorf("10^12 executions in 10 runs imported: %v", err)
	}
}
