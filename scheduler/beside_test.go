package scheduler

import (
	"testing"

	"github.com/fikit/fikit/profiler"
)

// besideRig is a profiling waiter's run of four kernels, each 100 µs with
// 100 µs gaps, its first launch released at 1 ms: on the device its
// kernels run [1, 1.1], [1.2, 1.3], [1.4, 1.5], [1.6, 1.7] ms when it
// started at once.
func besideRig(t *testing.T, flags [4]uint8, heard int64, asked [4]bool) (*Node, *task, *endedRun) {
	t.Helper()
	n, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{
		TaskRegistered{Now: 0, Task: 1, Key: "hp", PID: 1, Priority: 0, GPU: "G", Model: "m"},
		TaskRegistered{Now: 0, Task: 2, Key: "lp", PID: 2, Priority: 5, GPU: "G", Model: "m"},
	} {
		if err := n.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	tk := n.tasks[2]
	tk.meas = &measured{}
	b, err := profiler.NewBuilder("lp", "m", 10)
	if err != nil {
		t.Fatal(err)
	}
	var recs []profiler.Record
	r := &endedRun{run: 1, kernels: 4, runNs: 700_000, start: 1_000_000, end: 1_700_000, placed: true, beside: true, heard: heard}
	for i := range 4 {
		recs = append(recs, profiler.Record{KernelID: uint64(10 + i), DurationNs: 100_000, GapNs: 100_000, Flags: flags[i]})
		r.launches = append(r.launches, launchRec{seq: uint32(i + 1), at: 1_000_000 + int64(i)*200_000,
			released: 1_000_000 + int64(i)*200_000, asked: asked[i]})
	}
	recs[3].GapNs, recs[3].Flags = 0, recs[3].Flags|profiler.FlagGapSpansRunEnd
	b.AddRecords(1, recs)
	r.prof, r.b = b.Detach(1), b
	return n, tk, r
}

func knownOf(k profiler.Known) (dur, gap [4]bool) {
	for i := range 4 {
		dur[i], gap[i] = k(i)
	}
	return dur, gap
}

// TestBesideKnown: what a run measured beside others' work still tells.
func TestBesideKnown(t *testing.T) {
	credit := [4]bool{}
	// The holder's work [1.32, 1.38] ms fell in the gap before kernel 2:
	// kernel 2 (which pays the switch back) is unknown, kernels 1 and 3
	// known, kernel 0 never (what ran before it is not known). The gaps
	// after kernels 0 and 2 went on credit and met nothing: known; the one
	// kernel 2 waited through is not.
	n, tk, r := besideRig(t, [4]uint8{}, 1_700_000, credit)
	tk.meas.addForeign(span{from: 1_320_000, to: 1_380_000, owner: 1, settled: true})
	dur, gap := knownOf(n.besideKnown(tk, r))
	if dur != [4]bool{false, true, false, true} || gap != [4]bool{true, false, true, false} {
		t.Fatalf("durations known %v, gaps %v", dur, gap)
	}
	// A pre-switch's warm-up of the holder's there, unreported, is the same.
	n, tk, r = besideRig(t, [4]uint8{}, 1_700_000, credit)
	n.noteUnreported(n.tasks[1], 1_320_000, 1_380_000)
	if dur, _ := knownOf(n.besideKnown(tk, r)); dur != [4]bool{false, true, false, true} {
		t.Fatalf("beside a warm-up: durations known %v", dur)
	}
	// Asked launches: no gap is known.
	n, tk, r = besideRig(t, [4]uint8{}, 1_700_000, [4]bool{true, true, true, true})
	tk.meas.addForeign(span{from: 1_320_000, to: 1_380_000, owner: 1, settled: true})
	if _, gap := knownOf(n.besideKnown(tk, r)); gap != [4]bool{} {
		t.Fatalf("gaps of asked launches known: %v", gap)
	}
	// The run's end came in 300 µs late: it may have started up to 300 µs
	// later, and the holder's work at [1.62, 1.65] ms may have been inside
	// kernel 2 as well as 3 (kernel 1 ended by 1.6 ms in any case).
	n, tk, r = besideRig(t, [4]uint8{}, 2_000_000, credit)
	tk.meas.addForeign(span{from: 1_620_000, to: 1_650_000, owner: 1, settled: true})
	if dur, _ := knownOf(n.besideKnown(tk, r)); dur != [4]bool{false, true, false, false} {
		t.Fatalf("a late end report: durations known %v", dur)
	}
	// On time, the same work met kernel 3 only.
	n, tk, r = besideRig(t, [4]uint8{}, 1_700_000, credit)
	tk.meas.addForeign(span{from: 1_620_000, to: 1_650_000, owner: 1, settled: true})
	if dur, _ := knownOf(n.besideKnown(tk, r)); dur != [4]bool{false, true, true, false} {
		t.Fatalf("durations known %v", dur)
	}
	// A gap read negative (Overlapped) after kernel 1: kernels 1 and 2 and
	// the gap between are unknown.
	n, tk, r = besideRig(t, [4]uint8{0, profiler.FlagOverlapped, 0, 0}, 1_700_000, credit)
	dur, gap = knownOf(n.besideKnown(tk, r))
	if dur[1] || dur[2] || gap[1] || !dur[3] {
		t.Fatalf("around an overlapped gap: durations known %v, gaps %v", dur, gap)
	}
	// The end reported before the run could have started: nothing.
	n, tk, r = besideRig(t, [4]uint8{}, 1_500_000, credit)
	if dur, gap := knownOf(n.besideKnown(tk, r)); dur != [4]bool{} || gap != [4]bool{} {
		t.Fatalf("inconsistent bounds: durations known %v, gaps %v", dur, gap)
	}
	// Launches the core did not all see: nothing.
	n, tk, r = besideRig(t, [4]uint8{}, 1_700_000, credit)
	r.launches = nil
	if dur, _ := knownOf(n.besideKnown(tk, r)); dur != [4]bool{} {
		t.Fatalf("no launches: durations known %v", dur)
	}
}
