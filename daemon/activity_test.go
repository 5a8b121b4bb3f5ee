package daemon

import (
	"math"
	"testing"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
)

const ms = int64(1e6)

// feed notes n runs of runNs, one ending every everyNs from start.
func feed(a *activity, start, everyNs, runNs int64, n int) (end int64) {
	for i := 0; i < n; i++ {
		end = start + int64(i)*everyNs
		a.runEnded(end, runNs)
	}
	return end
}

// The windowed figures: runs and their median over the last 10 s, the
// share of time in runs telling a closed loop from a periodic service,
// and the GPU share from samples of the GPU time used.
func TestActivityWindow(t *testing.T) {
	// Back to back: 40 ms runs, one ending every 40.5 ms, for 20 s.
	var a activity
	end := feed(&a, 40*ms, 40*ms+ms/2, 40*ms, 494)
	w := a.window(end, 0)
	if w.WindowNs != statusWindow || w.WindowRuns != 247 {
		t.Errorf("window %d ns, %d runs; want %d ns and the 247 runs in it", w.WindowNs, w.WindowRuns, statusWindow)
	}
	if w.P50RunNs != 40*ms || !w.BackToBack || w.InRunFraction < 0.95 {
		t.Errorf("back to back: p50 %d, in runs %.2f, back-to-back %v", w.P50RunNs, w.InRunFraction, w.BackToBack)
	}
	// A faster service: its last runs, over the time they cover, give
	// its rate.
	a = activity{}
	end = feed(&a, ms, ms, ms, 30000)
	w = a.window(end, 0)
	if w.WindowRuns < maxWindowRuns/2 || w.WindowRuns > maxWindowRuns || w.WindowNs >= statusWindow ||
		w.WindowNs != int64(w.WindowRuns)*ms {
		t.Errorf("1000 runs/s: window %d ns, %d runs; want %d to %d runs over the time they cover", w.WindowNs, w.WindowRuns,
			maxWindowRuns/2, maxWindowRuns)
	}

	// Periodic: a 3 ms run every 10 ms, 2 s after registering.
	a = activity{sinceNs: 0}
	end = feed(&a, 3*ms, 10*ms, 3*ms, 200)
	w = a.window(end, 0)
	if w.WindowNs != end || w.WindowRuns != 200 || w.BackToBack || math.Abs(w.InRunFraction-0.3) > 0.01 {
		t.Errorf("periodic: window %d ns (want %d), %d runs, in runs %.3f, back-to-back %v", w.WindowNs, end, w.WindowRuns, w.InRunFraction, w.BackToBack)
	}
	if rate := float64(w.WindowRuns) / (float64(w.WindowNs) / 1e9); math.Abs(rate-100) > 1 {
		t.Errorf("periodic: %.1f runs/s, want 100", rate)
	}
	// Runs older than the window leave it; the median is of those left.
	a.runEnded(end+statusWindow+1, 7*ms)
	if w = a.window(end+statusWindow+1, 0); w.WindowRuns != 1 || w.P50RunNs != 7*ms || w.BackToBack {
		t.Errorf("after 10 s: %d runs, p50 %d", w.WindowRuns, w.P50RunNs)
	}
	// Too few runs say nothing of the pattern.
	a = activity{}
	end = feed(&a, 3*ms, 3*ms, 3*ms, minPatternRuns-1)
	if w = a.window(end, 0); w.BackToBack {
		t.Errorf("%d runs called back to back", minPatternRuns-1)
	}

	// GPU share: a quarter of the time, sampled every 0.5 s for 30 s; the
	// window starts at the oldest sample within it.
	a = activity{sinceNs: 0}
	now := int64(0)
	for ; now < 30e9; now += 100 * ms {
		a.sampleUsage(now, now/4)
	}
	if w = a.window(now, now/4+int64(statusWindow)/2); math.Abs(w.GPUShare-0.75) > 1e-9 {
		t.Errorf("GPU share %.3f, want 0.75 (half the window's time added in the last sample)", w.GPUShare)
	}
	if len(a.usage) > maxUsageSamples {
		t.Errorf("%d usage samples kept, at most %d", len(a.usage), maxUsageSamples)
	}
	// Within the window of its registration, from the registration.
	a = activity{sinceNs: 1e9}
	if w = a.window(3e9, 1e9); math.Abs(w.GPUShare-0.5) > 1e-9 || w.WindowNs != 2e9 {
		t.Errorf("2 s after registering with 1 s of GPU time: share %.3f, window %d", w.GPUShare, w.WindowNs)
	}
}

// Discarded profiling runs are counted by the reason the core gave.
func TestActivityVerdicts(t *testing.T) {
	var a activity
	for _, v := range []scheduler.RunVerdict{{Outcome: "committed"}, {Outcome: "discarded", Reason: "overlap"},
		{Outcome: "discarded", Reason: "overlap"}, {Outcome: "discarded", Reason: "hook_stalled"}, {Outcome: "ignored"}} {
		a.verdict(v)
	}
	if a.discards[profiler.DiscardOverlap] != 2 || a.discards[profiler.DiscardStalled] != 1 {
		t.Errorf("discards %v", a.discards)
	}
}
