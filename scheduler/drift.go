package scheduler

import (
	"fmt"
	"math"
	"slices"

	"github.com/fikit/fikit/profiler"
)

// This file watches a sharing task's profile for drift (docs/scheduler.md
// "Drift"): the same kernel IDs running longer (a clock or driver change),
// or other kernel IDs (a new batch size: new grids), make its predictions
// wrong, and gaps filled by a stale profile are shorter than predicted.
//
// Two checks, each over consecutive runs:
//
//   - kernels, every run: the share of the run's launches whose kernel ID
//     the profile does not know (from the launch reports);
//   - timing, sampled runs: the hook measures one run in DriftSample with
//     events as while profiling, and the run is compared with the profile:
//     the median over its kernels of measured over predicted duration
//     (device time; the median, so that the few kernels other tasks' work
//     delayed do not decide it). After a mismatch every run is sampled
//     until the streak ends or becomes a drift.
//
// Gaps are not compared: they are host time, and a profile's mean gap at a
// position holds the rare long host delays of its runs (a preempted
// launching thread: on a busy host single gaps of milliseconds made means
// many times the gap of most runs, docs/scheduler.md "Drift"), so a sampled
// run's gaps differ from it without anything having changed. The online
// correction (GapEWMA) learns the gaps the daemon sees instead.
//
// A run mismatches when the unknown share, or the median's relative error,
// is above DriftThreshold. A drift is DriftRuns consecutive
// checked runs of one check mismatching; a run of that check that matches
// ends the streak, so one outlier never makes a drift. Then the task is
// profiled again — in the sharing phase, every run sampled, its clean runs
// folded into the next version (the clean mismatching samples that found
// the drift too, once their verdicts come) — while
// it keeps its role; only its in-run gaps, which the stale profile
// predicts, are not filled until the new version is complete.

// driftState is a sharing task's drift watch.
type driftState struct {
	// samples buffers the measurement records of runs not ended yet.
	samples []sample
	// kernelStreak and timingStreak count consecutive mismatching runs.
	kernelStreak, timingStreak int
	// suspect: a sampled run mismatched: every run is sampled until the
	// streak ends or makes a drift.
	suspect bool
	// kept are the timing streak's mismatching samples found clean: the
	// first runs of the next version if the streak makes a drift.
	kept []endedRun
	// why describe the latest mismatch of each check.
	kernelWhy, timingWhy string
}

type sample struct {
	run  uint32
	recs []profiler.Record
}

// maxSamples bounds the runs whose records are buffered at once.
const maxSamples = 4

// Drift kinds (DriftEvent.Kind).
const (
	DriftKernels = "kernels"
	DriftTiming  = "timing"
)

// DriftEvent says that a task's profile no longer describes it: it is
// being profiled again, as version Version.
type DriftEvent struct {
	Task    TaskID
	Key     string
	Kind    string // DriftKernels or DriftTiming
	Reason  string
	Version uint32
}

func (d *driftState) addSample(run uint32, recs []profiler.Record) {
	for i := range d.samples {
		if d.samples[i].run == run {
			d.samples[i].recs = append(d.samples[i].recs, recs...)
			return
		}
	}
	if len(d.samples) == maxSamples {
		d.samples = d.samples[1:]
	}
	d.samples = append(d.samples, sample{run: run, recs: append([]profiler.Record(nil), recs...)})
}

// takeSample returns the records of run, and forgets them and those of
// older runs.
func (d *driftState) takeSample(run uint32) ([]profiler.Record, bool) {
	var recs []profiler.Record
	found := false
	k := 0
	for _, s := range d.samples {
		switch {
		case s.run == run:
			recs, found = s.recs, true
		case int32(s.run-run) > 0:
			d.samples[k] = s
			k++
		}
	}
	d.samples = d.samples[:k]
	return recs, found
}

// inOrder reports whether a sampled run launched the profile's sequence:
// then it is compared position by position.
func (d *driftState) inOrder(t *task, recs []profiler.Record) bool {
	if t.est == nil || len(t.est.Seq) != len(recs) || len(recs) == 0 {
		return false
	}
	for i, r := range recs {
		if t.est.Seq[i].ID != r.KernelID {
			return false
		}
	}
	return true
}

// driftOn reports whether drift detection is enabled.
func (n *Node) driftOn() bool { return n.cfg.DriftRuns > 0 }

// watchDrift starts (or restarts) the drift watch of a sharing task.
func (n *Node) watchDrift(t *task) {
	if !n.driftOn() {
		t.drift, t.sample = nil, 0
		if t.prof == nil {
			t.meas = nil
		}
		return
	}
	t.drift = &driftState{}
	t.sample = uint32(n.cfg.DriftSample)
	if t.meas == nil {
		t.meas = &measured{}
		n.seedForeign(t)
	}
}

// setSample tells t's hook to sample one run in s.
func (n *Node) setSample(t *task, s uint32) {
	if t.sample != s {
		t.sample = s
		n.out.States = append(n.out.States, n.stateOf(t))
	}
}

// checkKernels is the kernels check of t's run of launches first … next-1.
func (n *Node) checkKernels(t *task, first, next uint32) {
	d := t.drift
	var launches, unknown int
	for _, l := range t.recent {
		if int32(l.seq-first) >= 0 && int32(l.seq-next) < 0 {
			launches++
			if l.unknown {
				unknown++
			}
		}
	}
	if launches == 0 {
		return
	}
	share := float64(unknown) / float64(launches)
	if share <= n.cfg.DriftThreshold {
		d.kernelStreak = 0
		return
	}
	d.kernelStreak++
	n.stats.DriftMismatches++
	d.kernelWhy = fmt.Sprintf("%.0f%% of a run's launches of kernel IDs the profile lacks", 100*share)
	if d.kernelStreak >= n.cfg.DriftRuns {
		n.startRefresh(t, DriftKernels, fmt.Sprintf("drift: %s, %d runs in a row", d.kernelWhy, d.kernelStreak))
	}
}

// checkTiming is the timing check of a sampled run, as soon as it ends:
// the median kernel is not one of the few that other tasks' work delayed,
// so it need not wait for the verdict on whether the run was clean. It
// reports whether the run mismatched.
func (n *Node) checkTiming(t *task, r *endedRun) bool {
	d := t.drift
	if r.unmeasured != 0 || uint32(len(r.sample)) != r.kernels {
		n.stats.DriftSamplesUnclean++
		return false
	}
	n.stats.DriftSamples++
	var why string
	if durErr, ok := n.compareSample(t, r.sample, r.sampleMatches); ok && math.Abs(durErr) > n.cfg.DriftThreshold {
		why = fmt.Sprintf("kernel durations %+.0f%%", 100*durErr)
	}
	if why == "" {
		d.timingStreak, d.kept = 0, nil
		if d.suspect {
			d.suspect = false
			n.setSample(t, uint32(n.cfg.DriftSample))
		}
		return false
	}
	n.stats.DriftMismatches++
	d.timingStreak++
	d.timingWhy = why
	if d.timingStreak >= n.cfg.DriftRuns {
		n.startRefresh(t, DriftTiming, fmt.Sprintf("drift: %s, %d sampled runs in a row", why, d.timingStreak))
	} else if !d.suspect {
		d.suspect = true
		n.setSample(t, 1)
	}
	return true
}

// sampleDecided: a sampled run's verdict (why it is not clean, 0 if it
// is) came. A clean one that mismatched its profile is a run of the next
// version if its drift started one (the refresh starts from the sampled
// runs that found it).
func (n *Node) sampleDecided(t *task, r endedRun, why profiler.DiscardReason) {
	if why != 0 || !r.mismatched {
		return
	}
	if d := t.drift; d != nil && d.timingStreak > 0 {
		d.kept = append(d.kept, r) // the streak goes on
		if len(d.kept) > n.cfg.DriftRuns {
			d.kept = d.kept[1:]
		}
		return
	}
	if p := t.prof; p != nil && p.refresh && p.b == r.next {
		n.joinVersion(t, r)
	}
}

// joinVersion folds a clean sampled run into the version being built.
func (n *Node) joinVersion(t *task, r endedRun) {
	b := t.prof.b
	b.AddRecords(r.run, r.sample)
	n.decideRun(t, endedRun{run: r.run, kernels: r.kernels, runNs: r.runNs, prof: b.Detach(r.run), b: b}, 0)
}

// compareSample is how much longer a sampled run's kernels ran than t's
// profile says — the median over its kernels of the measured duration over
// the predicted, less 1 — and whether there was anything to compare: by
// position when the run launched the profile's sequence, else by kernel
// ID (IDs the profile lacks are left out). The median, so that the few
// kernels another task's work delayed (the first of a run, after a fill)
// do not decide it.
func (n *Node) compareSample(t *task, recs []profiler.Record, byPos bool) (float64, bool) {
	ratios := make([]float64, 0, len(recs))
	for i, r := range recs {
		pd := int64(0)
		if byPos {
			pd = t.est.Seq[i].DurNs
		} else if ke, ok := t.est.kernel(r.KernelID); ok {
			pd = ke.MeanNs
		}
		if pd > 0 {
			ratios = append(ratios, float64(r.DurationNs)/float64(pd))
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2] - 1, true
}

// startRefresh profiles a drifted task again: the next version, from its
// clean mismatching samples on (sampleDecided), every run sampled. The
// task keeps sharing.
func (n *Node) startRefresh(t *task, kind, reason string) {
	b, err := profiler.NewVersion(t.profile, reason, n.cfg.ProfileRuns)
	if err != nil {
		return // cannot happen: ProfileRuns is validated
	}
	n.stats.DriftEvents++
	if kind == DriftKernels {
		n.stats.DriftKernelEvents++
	} else {
		n.stats.DriftTimingEvents++
	}
	p := b.Profile()
	n.out.Drifts = append(n.out.Drifts, DriftEvent{Task: t.id, Key: t.key, Kind: kind, Reason: reason, Version: p.Version})
	t.prof = &profiling{b: b, refresh: true}
	// The streak's mismatching samples found clean are its first runs;
	// those still waiting for their verdicts join it if they were clean.
	kept := t.drift.kept
	t.drift = nil
	for i := range t.meas.waiting {
		if w := &t.meas.waiting[i]; w.mismatched && w.prof == nil {
			w.next = b
		}
	}
	for _, r := range kept {
		n.joinVersion(t, r)
		if t.prof == nil {
			return // complete already (ProfileRuns ≤ the samples kept)
		}
	}
	n.setSample(t, 1)
	n.updateWindow(t.gpu)
}

// finishRefresh: the next version is complete; the task is scheduled by it.
func (n *Node) finishRefresh(t *task) {
	prof := t.prof.b.Profile()
	t.prof = nil
	n.useProfile(t, prof)
	n.stats.ProfilesRefreshed++
	n.out.States = append(n.out.States, n.stateOf(t))
	n.updateWindow(t.gpu)
	n.schedule(t.gpu)
}

// refreshing reports whether t is being profiled again after a drift: its
// in-run gaps, predicted by the stale profile, are not filled meanwhile.
func (t *task) refreshing() bool { return t.prof != nil && t.prof.refresh }

// DriftCounters (drift.go): sampled runs compared with their profiles,
// sampled runs not clean enough to compare, checked runs (sampled or by
// their kernel IDs) that mismatched, drifts found (by check), and profiles
// built again after one.
type DriftCounters struct {
	DriftSamples        uint64 `json:"drift_samples"`
	DriftSamplesUnclean uint64 `json:"drift_samples_unclean"`
	DriftMismatches     uint64 `json:"drift_mismatches"`
	DriftEvents         uint64 `json:"drift_events"`
	DriftKernelEvents   uint64 `json:"drift_kernel_events"`
	DriftTimingEvents   uint64 `json:"drift_timing_events"`
	ProfilesRefreshed   uint64 `json:"profiles_refreshed"`
}

const driftEventsHelp = "Tasks found drifting from their profiles (then profiled again), by check."

var driftMetrics = []Metric{
	{Name: "fikit_drift_samples_total", Help: "Sampled sharing-phase runs compared with their profiles.", Value: func(s *Stats) float64 { return count(s.DriftSamples) }},
	{Name: "fikit_drift_mismatches_total", Help: "Checked runs that did not match their profiles (kernel IDs, durations or fillable gaps).",
		Value: func(s *Stats) float64 { return count(s.DriftMismatches) }},
	{Name: "fikit_drift_events_total", Help: driftEventsHelp, Labels: map[string]string{"kind": DriftKernels},
		Value: func(s *Stats) float64 { return count(s.DriftKernelEvents) }},
	{Name: "fikit_drift_events_total", Help: driftEventsHelp, Labels: map[string]string{"kind": DriftTiming},
		Value: func(s *Stats) float64 { return count(s.DriftTimingEvents) }},
	{Name: "fikit_profiles_refreshed_total", Help: "Profile versions completed after a drift.", Value: func(s *Stats) float64 { return count(s.ProfilesRefreshed) }},
}
