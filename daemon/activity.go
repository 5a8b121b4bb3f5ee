package daemon

import (
	"slices"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
)

// What a task did lately, for the status (docs/status-api.md): its runs as
// its hook reported them (RunEnd: the length it measured, at the daemon's
// clock when it came), the core's verdicts on its profiling runs, and
// samples of the GPU time the core accounts to it. The core is pure (no
// clock); these figures need one, so the daemon keeps them beside it.

// statusWindow is the span the windowed figures cover: long enough for a
// few runs of a slow service, short enough to follow a change.
const statusWindow = int64(10e9)

// Bounds on what is kept per task: runs ended within the window (a faster
// service's figures are over its last maxWindowRuns/2 to maxWindowRuns
// runs, a shorter window), and GPU time samples, one per usageSampleEvery
// at most.
const (
	maxWindowRuns    = 2048
	usageSampleEvery = int64(500e6)
	maxUsageSamples  = int(statusWindow/usageSampleEvery) + 2
)

// backToBackInRun is the share of the window's wall time spent inside runs
// from which a task's runs are called back to back (closed loop): what is
// left is the host time between a run's end and the next one's first
// launch, and the reports' delivery jitter.
const backToBackInRun = 0.8

// minPatternRuns is how many runs in the window the back-to-back
// judgement needs.
const minPatternRuns = 8

type runSample struct{ endNs, runNs int64 }

type usageSample struct{ atNs, usedNs int64 }

// activity is one task's recent history (taskAddr.act).
type activity struct {
	sinceNs  int64  // registered
	runsDone uint64 // RunEnds received
	runs     []runSample
	// droppedEndNs is when the latest run dropped to make room ended:
	// within the window, the window is shortened to the runs kept.
	droppedEndNs int64
	discards     scheduler.DiscardCounts
	usage        []usageSample
}

// runEnded notes a RunEnd that came at now for a run of runNs.
func (a *activity) runEnded(now, runNs int64) {
	a.runsDone++
	if len(a.runs) == maxWindowRuns {
		// Drop the older half at once: each run is copied once on average.
		a.droppedEndNs = a.runs[maxWindowRuns/2-1].endNs
		a.runs = slices.Delete(a.runs, 0, maxWindowRuns/2)
	}
	a.runs = append(a.runs, runSample{endNs: now, runNs: max(runNs, 0)})
	a.trimRuns(now)
}

func (a *activity) trimRuns(now int64) {
	i := 0
	for i < len(a.runs) && a.runs[i].endNs < now-statusWindow {
		i++
	}
	if i > 0 {
		a.runs = slices.Delete(a.runs, 0, i)
	}
}

// verdict notes the core's verdict on one of the task's profiling runs.
func (a *activity) verdict(v scheduler.RunVerdict) {
	if v.Reason == "" {
		return
	}
	r, ok := profiler.ParseDiscardReason(v.Reason)
	if !ok {
		return
	}
	a.discards[r]++
}

// sampleUsage notes the GPU time the core accounts to the task at now.
func (a *activity) sampleUsage(now, usedNs int64) {
	if n := len(a.usage); n > 0 && now-a.usage[n-1].atNs < usageSampleEvery {
		return
	}
	if len(a.usage) == maxUsageSamples {
		a.usage = slices.Delete(a.usage, 0, 1)
	}
	a.usage = append(a.usage, usageSample{atNs: now, usedNs: usedNs})
}

// WindowStats are the windowed figures of TaskStatus (the rate of runs is
// WindowRuns over WindowNs).
type WindowStats struct {
	WindowNs      int64   `json:"window_ns"`
	WindowRuns    int     `json:"window_runs"`
	P50RunNs      int64   `json:"p50_run_ns"`
	InRunFraction float64 `json:"in_run_fraction"`
	GPUShare      float64 `json:"gpu_share"`
	BackToBack    bool    `json:"back_to_back"`
}

// window computes the figures at now, the task's GPU time used being
// usedNs.
func (a *activity) window(now, usedNs int64) WindowStats {
	a.trimRuns(now)
	w := WindowStats{WindowNs: min(statusWindow, max(now-a.sinceNs, 0)), WindowRuns: len(a.runs)}
	if a.droppedEndNs > now-w.WindowNs {
		w.WindowNs = now - a.droppedEndNs // the runs kept ended after it
	}
	if n := len(a.runs); n > 0 {
		lens := make([]int64, n)
		var inRun int64
		for i, r := range a.runs {
			lens[i] = r.runNs
			inRun += r.runNs
		}
		slices.Sort(lens)
		w.P50RunNs = lens[(n-1)/2] // nearest rank
		// Wall time from the first run's start to now, or to the last
		// run's end for a service that has stopped.
		first := a.runs[0].endNs - a.runs[0].runNs
		if span := now - first; span > 0 {
			w.InRunFraction = min(float64(inRun)/float64(span), 1)
		}
		w.BackToBack = n >= minPatternRuns && w.InRunFraction >= backToBackInRun
	}
	// The GPU time used since the registration when it is within the
	// window, else since the oldest sample within it, over the time since.
	base, ok := usageSample{atNs: a.sinceNs}, a.sinceNs >= now-statusWindow
	for _, s := range a.usage {
		if ok {
			break
		}
		if s.atNs >= now-statusWindow {
			base, ok = s, true
		}
	}
	if ok && now > base.atNs {
		w.GPUShare = max(float64(usedNs-base.usedNs), 0) / float64(now-base.atNs)
	}
	return w
}

// sampleUsage samples every task's GPU time used, at most once per
// usageSampleEvery. Called with mu held.
func (s *Server) sampleUsage(now int64) {
	if now-s.usageSampledAt < usageSampleEvery {
		return
	}
	s.usageSampledAt = now
	for _, t := range s.core.Tasks() {
		if ta := s.tasks[t.ID]; ta != nil {
			ta.act.sampleUsage(now, t.Account.UsedNs)
		}
	}
}

// noteVerdicts counts the discarded profiling runs per task.
func (s *Server) noteVerdicts(vs []scheduler.RunVerdict) {
	for _, v := range vs {
		if ta := s.tasks[v.Task]; ta != nil {
			ta.act.verdict(v)
		}
	}
}
