package scheduler

import "github.com/fikit/fikit/profiler"

// A task that profiles as a waiter — a better priority holds the GPU — has
// runs that the holder's work overlaps as a rule: a busy periodic holder
// leaves it no run of its own, and its profile never completed while the
// holder lived. Such a run is not thrown away: its records still say some
// things truly, and those are folded (profiler.Builder.DecideBeside):
//
//   - A kernel's duration, when no other task's work was on the GPU from
//     the end of the task's previous kernel to the end of this one. The
//     hook's events time a kernel from when its stream reached it; others'
//     work in between, or the switch back from it, would be inside.
//   - The gap after a kernel, when the next launch did not ask for a grant
//     (it went on credit) and no other task's work fell in it: a waiter's
//     request stretches the gap by its round trip at least.
//
// The rest is unknown and stays so — the run's time is the holder's as
// much as its own, a kernel never measured alone has no duration in the
// profile — rather than made up. Such a run counts towards T, so the
// profile completes after T runs either way.
//
// Others' work is known from their reports, which come late on a busy
// host: a run's verdict waits for them (reportWait), at most
// maxVerdictDelay.
//
// Where a kernel ran is known from the hook's records within the run
// (each kernel's duration and the gap after it, timed on the device) up
// to one offset: when the run's first kernel started, s0, on the core's
// clock. It started after it was let go — granted, or launched on credit
// or on the board's word —, and the run's last kernel ended before its run
// end (or the next run's first launch) came in. (Every later launch's
// release bounds s0 from below too, and more tightly, but one wrong by a
// lost report would shift the whole run: the first's alone is used.) A
// kernel is judged over every placement that range allows, so that a late
// report or a busy host makes fewer kernels known rather than a stretched
// one known.

// besideKnown says, for each record of a run measured beside others' work
// (r.beside), whether its duration and the gap after it are true.
func (n *Node) besideKnown(t *task, r *endedRun) profiler.Known {
	none := func(int) (bool, bool) { return false, false }
	recs := r.prof.Records()
	if len(recs) == 0 || len(r.launches) != len(recs) {
		return none
	}
	// Each kernel's start and end within the run, from the run's first
	// kernel's start. A gap the hook read negative (FlagOverlapped: sent as
	// 0) puts the kernels after it later than they were, by at most the
	// kernel before it (one stream's kernels start in order): early[i]
	// is how much earlier kernel i may have started than off[i] says, and
	// the kernels either side of such a gap are not known.
	off := make([]int64, len(recs)+1)
	end := make([]int64, len(recs))
	early := make([]int64, len(recs)+1)
	unsure := make([]bool, len(recs)+1)
	for i, rec := range recs {
		if rec.Flags&profiler.FlagGapSpansRunEnd != 0 && i < len(recs)-1 {
			return none // a run end cut the run short: its kernels are not placed
		}
		end[i] = off[i] + int64(rec.DurationNs)
		off[i+1] = end[i] + int64(rec.GapNs)
		early[i+1] = early[i]
		if rec.Flags&profiler.FlagOverlapped != 0 {
			early[i+1] += int64(rec.DurationNs)
			unsure[i], unsure[i+1] = true, true
		}
	}
	lo := r.launches[0].released
	hi := r.heard - end[len(recs)-1] + early[len(recs)-1]
	if lo <= 0 || hi < lo {
		return none
	}
	clear := func(from, to int64) bool {
		if from > to {
			return false
		}
		all, _ := t.meas.overlap(from, to)
		return all == 0
	}
	return func(i int) (bool, bool) {
		dur := i > 0 && !unsure[i] && clear(lo+end[i-1]-early[i-1], hi+end[i])
		gap := i+1 < len(recs) && !unsure[i] && !unsure[i+1] && !r.launches[i+1].asked &&
			clear(lo+end[i]-early[i], hi+off[i+1])
		return dur, gap
	}
}

// reportWait is how long after a run measured beside others' work ended
// the other tasks on its GPU may still be reporting work done while it ran:
// twice the longest any of them has lately taken to report a launch, and
// at least besideReportFloor. Work reported later than that is not seen by
// the run's verdict.
func (n *Node) reportWait(t *task) int64 {
	lag := int64(0)
	for _, o := range t.gpu.tasks {
		if o != t {
			lag = maxi(lag, o.lag)
		}
	}
	return maxi(2*lag, besideReportFloor)
}

// besideReportFloor is the least reportWait: a hook's sender batches its
// reports, and its batch may be under way.
const besideReportFloor = int64(1e6)

// noteUnreported: x's hook runs work the core asked for that x does not
// report as launches (a pre-switch's warm-up, a switch calibration's
// probes): every profiling task on the GPU counts [from, to] as others'
// work, as predicted, for good — with the switch to and from it, it would
// be inside a kernel measured then. A sharing task's sampled runs are
// judged with two switches' tolerance for such work (overlapTolerance).
func (n *Node) noteUnreported(x *task, from, to int64) {
	for _, t := range x.gpu.tasks {
		if t != x && t.meas != nil && t.phase == PhaseProfiling {
			t.meas.addForeign(span{from: from, to: maxi(to, from), owner: x.id, settled: true})
		}
	}
}

// launchAsked marks t's launch seq as a request waiting for its grant.
func (t *task) launchAsked(seq uint32) {
	if l := t.launchRec(seq); l != nil {
		l.asked, l.released = true, 0
	}
}

// launchReleased notes that t's launch seq was granted at at.
func (t *task) launchReleased(seq uint32, at int64) {
	if l := t.launchRec(seq); l != nil && l.released == 0 {
		l.released = at
	}
}

// launchRec is t's record of launch seq, nil if there is none among the
// newest few (grants go to recent requests, and a launch reported after
// its request follows it closely): a launch on credit, never asked for,
// must not cost a search of the whole run.
func (t *task) launchRec(seq uint32) *launchRec {
	for i := len(t.recent) - 1; i >= max(0, len(t.recent)-4*reorderWindow); i-- {
		if t.recent[i].seq == seq {
			return &t.recent[i]
		}
	}
	return nil
}

// runLaunches copies t's records of the launches first… of a run of k
// kernels, in seq order (their reports may have come in another: a
// waiter's requests overtake its launches on credit); nil unless every one
// is there.
func (t *task) runLaunches(first, k uint32) []launchRec {
	if k == 0 || k > maxRecent {
		return nil
	}
	out := make([]launchRec, k)
	found := uint32(0)
	for _, l := range t.recent {
		if d := l.seq - first; d < k && out[d].seq == 0 && l.seq != 0 {
			out[d] = l
			found++
		}
	}
	if found != k {
		return nil
	}
	return out
}
