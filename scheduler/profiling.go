package scheduler

import (
	"github.com/fikit/fikit/profiler"
)

// profiling is a profile being built: a new task's (PhaseProfiling), or
// the next version of a sharing task's after it drifted (refresh, drift.go).
type profiling struct {
	b       *profiler.Builder
	refresh bool
}

// ProfileUpdate is a profile to persist: a task finished profiling, or made
// progress worth keeping across a daemon restart.
type ProfileUpdate struct {
	Task     TaskID
	Key      string
	Model    string
	Runs     int
	Complete bool
	Profile  *profiler.Profile
}

func (n *Node) newProfiling(t *task, prior *profiler.Profile) (*profiling, error) {
	var b *profiler.Builder
	var err error
	if prior != nil {
		b, err = profiler.ResumeBuilder(prior, n.cfg.ProfileRuns)
	} else {
		b, err = profiler.NewBuilder(t.key, t.model, n.cfg.ProfileRuns)
	}
	if err != nil {
		return nil, err
	}
	return &profiling{b: b}, nil
}

func (p *profiling) runs() int { return int(p.b.Runs()) }

// measured is the state of a task whose runs are measured — a profiling
// task's, a refreshing one's, a sharing one's sampled runs (drift.go) — that
// decides whether each was clean: no other task's work on the GPU while it
// ran.
//
// Whether a run was clean is decided from times rather than from the order
// reports arrive in: a hook ships a run's end only after reading the run's
// events, so the next run's launches usually arrive first. The run spans
// [its first launch, + its run time]; it is clean when no other task's
// device work intersects that span. Other tasks' work is known first as a
// prediction (from their profiles; for kernels nobody measured yet,
// DefaultKernel each), then as the truth: a task's run end says that all of
// that run's kernels were done by then, so each span of its work is cut to
// its run's end and settled. A run that met only settled work is decided
// at once; one that meets work not settled yet waits for it, at most
// maxVerdictDelay after it ended, and is then decided on the prediction.
type measured struct {
	// foreign is other tasks' device work that may still intersect a run
	// of this task not yet decided.
	foreign []span
	// waiting are the ended runs not decided yet, in the order they ended.
	waiting []endedRun
}

// span is device work of task owner up to its launch seq, predicted to
// occupy [from, to]; settled once the run it belongs to has ended (to is
// then the truth's bound).
type span struct {
	from, to int64
	owner    TaskID
	seq      uint32
	settled  bool
}

// endedRun is a measured run waiting for its verdict.
type endedRun struct {
	run, kernels  uint32
	runNs         int64
	start, end    int64
	placed        bool
	unmeasured    profiler.DiscardReason // the hook sent it without records, and why
	prof          *profiler.EndedRun     // a profiling or refresh run's records (nil: a drift sample)
	b             *profiler.Builder      // … detached from this builder
	sample        []profiler.Record      // a drift sample's records
	sampleMatches bool                   // a drift sample ended in the sequence order: compare by position
	mismatched    bool                   // a drift sample that did not match the profile …
	next          *profiler.Builder      // … and the next version its drift started
	// beside: a profiling run of a waiter, measured while a better
	// priority held the GPU; launches are its launches, in order, for
	// what it can still tell truly if others' work overlapped it
	// (beside.go).
	beside   bool
	launches []launchRec
	heard    int64 // when its end was reported
}

// Limits of the verdicts.
const (
	// maxForeignSpans bounds a measured task's record of others' work.
	maxForeignSpans = 4096
	// maxWaitingRuns bounds the runs waiting for a verdict: the oldest is
	// decided on the prediction when one more ends.
	maxWaitingRuns = 64
	// maxVerdictDelay is how long an ended run waits for other tasks' runs
	// to end before it is decided on their predicted work.
	maxVerdictDelay = int64(250e6)
)

// seedForeign records the work already on t's GPU when t starts being
// measured.
func (n *Node) seedForeign(t *task) {
	g := t.gpu
	for _, o := range g.tasks {
		if o != t && o.busyUntil > n.now {
			t.meas.addForeign(span{from: n.now, to: o.busyUntil, owner: o.id, seq: o.seq})
		}
	}
	if g.lpBusyUntil > n.now {
		// Granted work of tasks unknown here: as predicted, for good.
		t.meas.addForeign(span{from: n.now, to: g.lpBusyUntil, settled: true})
	}
}

// noteLaunch records t's launch seq of kernel k at time at, predicted to run
// dur.
func (n *Node) noteLaunch(t *task, seq uint32, at, dur int64, k uint64) {
	if len(t.recent) == maxRecent {
		t.recent = append(t.recent[:0], t.recent[maxRecent/2:]...)
	}
	unknown := false
	if t.phase == PhaseSharing && t.est != nil {
		_, known := t.est.Kernels[k]
		unknown = !known
	}
	t.recent = append(t.recent, launchRec{seq: seq, at: at, dur: dur, unknown: unknown, released: at})
}

// launchTime is when t's launch seq happened, if its report arrived and the
// run it belongs to has not been reported ended.
func (t *task) launchTime(seq uint32) (int64, bool) {
	for _, l := range t.recent {
		if l.seq == seq {
			return l.at, true
		}
	}
	return 0, false
}

// forgetLaunches drops t's launches before seq next (their run has ended).
func (t *task) forgetLaunches(next uint32) {
	k := 0
	for _, l := range t.recent {
		if int32(l.seq-next) >= 0 {
			t.recent[k] = l
			k++
		}
	}
	t.recent = t.recent[:k]
}

// noteWork: x's device work up to its launch seq is predicted to occupy
// [from, to]; every measured task on the GPU must not count a run it
// intersects.
func (n *Node) noteWork(x *task, seq uint32, from, to int64) {
	for _, t := range x.gpu.tasks {
		if t != x && t.meas != nil {
			t.meas.addForeign(span{from: from, to: maxi(to, from), owner: x.id, seq: seq})
		}
	}
}

func (m *measured) addForeign(s span) {
	if k := len(m.foreign); k > 0 {
		l := &m.foreign[k-1]
		if l.owner == s.owner && s.from >= l.from && s.from <= l.to {
			// The common case: the same task's next kernel extends its work.
			l.to, l.seq = maxi(l.to, s.to), max(l.seq, s.seq)
			l.settled = l.settled && s.settled
			return
		}
	}
	if len(m.foreign) == maxForeignSpans {
		// Too many to keep apart: cover the older half with one settled
		// span, which can only make runs look less clean, never cleaner.
		h := maxForeignSpans / 2
		all := m.foreign[0]
		for _, f := range m.foreign[1:h] {
			all.from, all.to = mini(all.from, f.from), maxi(all.to, f.to)
		}
		all.owner, all.settled = 0, true
		m.foreign = append(append(m.foreign[:0], all), m.foreign[h:]...)
	}
	m.foreign = append(m.foreign, s)
}

// settleWork: x's run whose launches end at seq last ended at end, so its
// work up to last was done by then: every measured task's spans of it are
// cut there and settled.
func (n *Node) settleWork(x *task, last uint32, end int64) {
	for _, t := range x.gpu.tasks {
		if t == x || t.meas == nil {
			continue
		}
		for i := range t.meas.foreign {
			f := &t.meas.foreign[i]
			if f.owner == x.id && !f.settled && int32(f.seq-last) <= 0 {
				f.to, f.settled = maxi(f.from, mini(f.to, end)), true
			}
		}
	}
}

// settleAll: x is gone; what it left on the GPU stays as predicted.
func (n *Node) settleAll(x *task) {
	for _, t := range x.gpu.tasks {
		if t == x || t.meas == nil {
			continue
		}
		for i := range t.meas.foreign {
			if t.meas.foreign[i].owner == x.id {
				t.meas.foreign[i].settled = true
			}
		}
	}
}

// overlap is how much of [start, end] other tasks' work covered: all of
// it, and the settled part (spans may overlap each other: the sum bounds
// the union from above). Work that touches the run counts 1 ns at least (a
// launch whose work is predicted to take no time is still work).
func (m *measured) overlap(start, end int64) (all, settled int64) {
	for _, f := range m.foreign {
		if f.from < end && f.to > start {
			d := maxi(mini(f.to, end)-maxi(f.from, start), 1)
			all += d
			if f.settled {
				settled += d
			}
		}
	}
	return all, settled
}

// forget drops foreign work over before t: the runs still to be decided
// start after it.
func (m *measured) forget(t int64) {
	if len(m.waiting) > 0 {
		t = mini(t, m.waiting[0].start)
	}
	k := 0
	for _, f := range m.foreign {
		if f.to > t {
			m.foreign[k] = f
			k++
		}
	}
	m.foreign = m.foreign[:k]
}

func (n *Node) measuredRecords(t *task, e MeasurementsReceived) {
	n.billMeasured(t, e)
	switch {
	case t.prof != nil:
		t.prof.b.AddRecords(e.Run, e.Records)
	case t.drift != nil:
		t.drift.addSample(e.Run, e.Records)
	}
}

func (n *Node) kernelInfo(t *task, e KernelInfoReceived) {
	if t.prof != nil {
		t.prof.b.AddKernelInfo(e.Info)
	}
}

// hookDiscard is the reason of a run the hook measured but sent without
// records (the wire's RunEnd unmeasured).
func hookDiscard(u uint8) profiler.DiscardReason {
	switch u {
	case 0:
		return 0
	case 1:
		return profiler.DiscardStalled
	case 2:
		return profiler.DiscardUncertain
	case 3:
		return profiler.DiscardNoEvents
	}
	return profiler.DiscardStopped
}

// runEnded closes a run: a measured one waits for its verdict, a holder's
// GPU may open an inter-run window.
func (n *Node) runEnded(t *task, e RunEnded) {
	t.lastRunEnd, t.turnLost = n.now, false
	first := t.runStartSeq
	ahead := false
	switch {
	case e.LastSeq != 0 && e.Kernels > 0:
		// The hook says which launches the run was: re-anchor on them, so
		// a wrong anchor (the first launch seen was mid-run) lasts one run.
		first = e.LastSeq - e.Kernels + 1
		t.runStartSeq = e.LastSeq + 1
		ahead = t.seq != 0 && int32(t.seq-t.runStartSeq) >= 0
	case first != 0 && e.Kernels > 0:
		// The next run starts right after this one's launches; if the core
		// has seen launches from there on, that run is under way already.
		t.runStartSeq += e.Kernels
		ahead = int32(t.seq-t.runStartSeq) >= 0
	}
	// When the run really started and ended. A run whose first launch the
	// core never saw cannot be placed in time.
	start, placed := t.launchTime(first)
	placed = placed && first != 0 && e.RunNs > 0
	end := n.now
	if placed {
		end = mini(end, start+e.RunNs)
	}
	// A measured run waits for its verdict: what it was is decided now,
	// before a drift found by this run starts a refresh.
	r := endedRun{run: e.Run, kernels: e.Kernels, runNs: maxi(e.RunNs, 0), start: start, end: end, placed: placed,
		unmeasured: hookDiscard(e.Unmeasured)}
	keep := false
	switch {
	case t.meas == nil:
	case t.prof != nil:
		r.prof, r.b, keep = t.prof.b.Detach(e.Run), t.prof.b, true
		if t.phase == PhaseProfiling && t.role == RoleWaiter && placed {
			r.beside, r.launches, r.heard = true, t.runLaunches(first, e.Kernels), n.now
			if at, ok := t.launchTime(t.runStartSeq); ok && ahead {
				// The next run's first launch came before this run's
				// end was reported: this run was over by then.
				r.heard = mini(r.heard, at)
			}
		}
	case t.drift != nil:
		var sampled bool
		r.sample, sampled = t.drift.takeSample(e.Run)
		r.sampleMatches = t.drift.inOrder(t, r.sample)
		if sampled || r.unmeasured != 0 {
			r.mismatched = n.checkTiming(t, &r)
			keep = r.mismatched // its verdict decides whether it joins the next version
			if r.mismatched && t.refreshing() {
				r.next = t.prof.b // this run found the drift
			}
		}
	}
	if t.drift != nil && t.prof == nil && first != 0 && e.Kernels > 0 {
		n.checkKernels(t, first, t.runStartSeq)
	}
	t.forgetLaunches(t.runStartSeq)
	if first != 0 && e.Kernels > 0 {
		n.settleWork(t, t.runStartSeq-1, end)
	}
	if t.phase == PhaseSharing && e.RunNs > 0 {
		if t.jct == 0 {
			t.jct = e.RunNs
		} else {
			t.jct += (e.RunNs - t.jct) / 8 // EWMA, weight 1/8
		}
	}
	if m := t.meas; m != nil {
		if keep {
			if len(m.waiting) == maxWaitingRuns {
				n.decideRun(t, m.waiting[0], profiler.DiscardOverlap)
				m.waiting = m.waiting[1:]
			}
			m.waiting = append(m.waiting, r)
		}
		m.forget(end)
	}
	n.decideRuns(t.gpu)
	if ahead {
		n.nextRunUnderWay(t, end)
		return
	}
	if t.role == RoleHolder {
		n.holderRunEnded(t, e.RunNs)
		return
	}
	t.inRun = false
	t.runEnd = n.now
	t.busyUntil = mini(t.busyUntil, n.now) // a run ends when its work is done
	n.recountLowWork(t.gpu)
}

// decideRuns decides, for every measured task of g, the runs waiting for
// a verdict that can be decided now, in the order they ended.
func (n *Node) decideRuns(g *gpu) {
	for i := 0; i < len(g.tasks); i++ {
		t := g.tasks[i]
		for t.meas != nil && len(t.meas.waiting) > 0 {
			r := t.meas.waiting[0]
			why, ok := n.verdict(t, &r)
			if !ok {
				break
			}
			t.meas.waiting = t.meas.waiting[1:]
			n.decideRun(t, r, why)
		}
	}
}

// verdict is why r is left out (0: it was clean), and whether that can be
// said now.
func (n *Node) verdict(t *task, r *endedRun) (profiler.DiscardReason, bool) {
	switch {
	case !r.placed:
		return profiler.DiscardUnplaced, true
	case r.unmeasured != 0:
		return r.unmeasured, true
	}
	all, settled := t.meas.overlap(r.start, r.end)
	tol := n.overlapTolerance(t, r)
	switch {
	case all <= tol:
		return 0, true
	case n.now >= r.end+maxVerdictDelay:
		return profiler.DiscardOverlap, true
	case r.beside && (settled < all || n.now < r.heard+n.reportWait(t)):
		// What it can still tell is judged kernel by kernel against
		// others' work as it really ended, once their reports of work
		// done while it ran have had time to come in.
		return 0, false
	case settled > tol:
		return profiler.DiscardOverlap, true
	}
	return 0, false
}

// overlapTolerance is how much of a measured run other tasks' work may
// cover and the run still count as clean. None while a task profiles for
// the first time (it holds the GPU alone: nothing should). A sharing task's
// runs (drift samples, the next version after a drift) are filled around
// by design: the low-priority work granted into the gap before a run often
// still runs as it starts, and that only delays its first kernel's start —
// the context switch back — which the hook's events do not count as any
// kernel's time. Up to two switches (as the policy prices one on the
// task's GPU: the measured switch, the prior until measured, when the
// setting is auto) and a fiftieth of the run are tolerated, and where hooks bound their GPU time in flight (HookBound) the
// most that bound lets them have queued as the run starts; more, and a
// kernel may have been time-sliced with foreign work.
func (n *Node) overlapTolerance(t *task, r *endedRun) int64 {
	if t.phase == PhaseProfiling {
		return 0
	}
	tol := 2*n.switchCost(t.gpu) + (r.end-r.start)/50
	if n.cfg.HookBound {
		tol += n.cfg.InflightBudget
	}
	return tol
}

// verdictAt is when the oldest run of g waiting for a verdict is decided
// anyway (0: none waits).
func (n *Node) verdictAt(g *gpu) int64 {
	at := int64(0)
	for _, t := range g.tasks {
		if t.meas != nil && len(t.meas.waiting) > 0 {
			r := &t.meas.waiting[0]
			d := r.end + maxVerdictDelay
			if r.beside {
				d = mini(d, r.heard+n.reportWait(t))
			}
			if at == 0 || d < at {
				at = d
			}
		}
	}
	return at
}

// decideRun applies a verdict: a profiling (or refresh) run is folded or
// counted discarded, a drift sample is compared with the profile.
func (n *Node) decideRun(t *task, r endedRun, why profiler.DiscardReason) {
	if r.prof == nil {
		n.sampleDecided(t, r, why)
		return
	}
	p := t.prof
	if p == nil || p.b != r.b {
		return // the profile completed before this run's verdict
	}
	var out profiler.RunOutcome
	var reason profiler.DiscardReason
	if why == profiler.DiscardOverlap && r.beside {
		out, reason = p.b.DecideBeside(r.prof, r.kernels, uint64(r.runNs), n.besideKnown(t, &r), why)
	} else {
		out, reason = p.b.Decide(r.prof, r.kernels, uint64(r.runNs), why)
	}
	v := RunVerdict{Task: t.id, Run: r.run, Outcome: out.String(), Runs: p.runs(), Kind: "profiling"}
	if p.refresh {
		v.Kind = "refresh"
	}
	if reason != 0 {
		v.Reason = reason.String()
	}
	n.out.Runs = append(n.out.Runs, v)
	switch out {
	case profiler.RunCommitted:
		n.stats.RunsCommitted++
	case profiler.RunBeside:
		n.stats.RunsBeside++
	case profiler.RunDiscarded, profiler.RunIncomplete, profiler.RunImplausible:
		n.stats.RunsDiscarded++
		n.stats.RunsDiscardedBy.add(reason)
	}
	// Every committed run is kept: a daemon restarted (or killed) while a
	// task profiles continues from the runs it had. A refresh is kept once
	// complete: until then the version in use stays the stored one.
	kept := out == profiler.RunCommitted || out == profiler.RunBeside
	if kept && (!p.refresh || p.b.Complete()) {
		n.out.Profiles = append(n.out.Profiles, ProfileUpdate{
			Task: t.id, Key: t.key, Model: t.model, Runs: p.runs(),
			Complete: p.b.Complete(), Profile: p.b.Profile(),
		})
	}
	if p.b.Complete() {
		if p.refresh {
			n.finishRefresh(t)
		} else {
			n.finishProfiling(t)
		}
	}
}

// nextRunUnderWay handles a run end reported after the next run's first
// launches (a profiling hook ships run ends late): the task is not between
// runs. What its next launch would have taught about run starts is learned
// now, and a holder's predicted work is only the next run's: the ended
// run's work was done at end.
func (n *Node) nextRunUnderWay(t *task, end int64) {
	at, ok := t.launchTime(t.runStartSeq)
	if ok && t.runStart == at {
		return // the core saw that run start (its previous run's last kernel was known)
	}
	t.runEnd = end
	// The run's launches seen so far were placed by the old anchor.
	t.offSequence = false
	if !ok || t.role != RoleHolder {
		return
	}
	t.learnRunGap(at - end)
	if t.runStart > 0 {
		t.learnRunEvery(at - t.runStart)
	}
	t.runStart = at
	t.runStarted(at)
	busy := end
	for _, l := range t.recent {
		busy = maxi(busy, l.at) + l.dur
	}
	t.busyUntil = busy
}

// finishProfiling moves a task to the sharing phase with its new profile.
func (n *Node) finishProfiling(t *task) {
	prof := t.prof.b.Profile()
	t.prof = nil
	t.phase = PhaseSharing
	n.useProfile(t, prof)
	n.stats.ProfilesCompleted++
	n.out.States = append(n.out.States, n.stateOf(t))
	n.sendKernelTimes(t)
	n.electHolders(t.gpu, nil)
	n.schedule(t.gpu)
}

// useProfile makes prof the profile a sharing task is scheduled by, and
// starts watching it for drift (drift.go).
func (n *Node) useProfile(t *task, prof *profiler.Profile) {
	t.profile = prof
	t.est = EstimatesFromProfile(prof)
	t.gapCorr, t.posCorr = nil, nil
	n.watchDrift(t)
}

// stateOf is t's role, phase, credit, gate and sample as a State tells it.
func (n *Node) stateOf(t *task) StateChange {
	return StateChange{Task: t.id, Role: t.role, Phase: t.phase, Credit: t.credit, Gate: n.gate(t, 0), Sample: t.sample}
}

// ProfilingCounters: profiling runs kept and discarded.
type ProfilingCounters struct {
	RunsCommitted uint64 `json:"runs_committed"`
	RunsDiscarded uint64 `json:"runs_discarded"`
	// RunsBeside: profiling runs of a lower priority measured beside a
	// better one's work, kept for what they still told truly (beside.go).
	RunsBeside        uint64 `json:"runs_beside"`
	ProfilesCompleted uint64 `json:"profiles_completed"`
	// RunsDiscardedBy counts RunsDiscarded by reason (profiler.DiscardReason).
	RunsDiscardedBy DiscardCounts `json:"runs_discarded_by_reason"`
}

var profilingMetrics = []Metric{
	{Name: "fikit_profiling_runs_total", Help: "Profiling runs committed.", Value: func(s *Stats) float64 { return count(s.RunsCommitted) }},
	{Name: "fikit_profiling_runs_discarded_total", Help: "Profiling runs discarded (any reason: fikit_profiling_discards_total has them by reason).",
		Value: func(s *Stats) float64 { return count(s.RunsDiscarded) }},
}
