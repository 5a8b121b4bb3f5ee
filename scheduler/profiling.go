package scheduler

import (
	"github.com/fikit/fikit/profiler"
)

// profiling is a task's measurement state: the profiler folding its clean
// runs, and the other tasks' work that may make one unclean.
//
// Cleanliness is decided when a run's end is reported, from times rather
// than from the order reports arrive in: a profiling hook ships a run's end
// only after reading the run's events, so the next run's launches usually
// arrive first. The run spans [its first launch, + its run time]; it is
// clean when no other task's predicted device work on the GPU intersects
// that span.
type profiling struct {
	b *profiler.Builder
	// foreign is other tasks' predicted device work that may still
	// intersect a run of this task not yet ended.
	foreign []span
}

type span struct{ from, to int64 }

// maxForeignSpans bounds a profiling task's record of others' work.
const maxForeignSpans = 4096

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

// checkpointEvery is how many committed runs pass between persisted
// snapshots of an incomplete profile.
const checkpointEvery = 10

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

// seedForeign records the work already on t's GPU when t starts profiling.
func (n *Node) seedForeign(t *task) {
	g := t.gpu
	for _, o := range g.tasks {
		if o != t && o.busyUntil > n.now {
			t.prof.addForeign(n.now, o.busyUntil)
		}
	}
	if g.lpBusyUntil > n.now {
		t.prof.addForeign(n.now, g.lpBusyUntil)
	}
}

// noteLaunch records t's launch seq at time at, predicted to run dur.
func (n *Node) noteLaunch(t *task, seq uint32, at, dur int64) {
	if len(t.recent) == maxRecent {
		t.recent = append(t.recent[:0], t.recent[maxRecent/2:]...)
	}
	t.recent = append(t.recent, launchRec{seq, at, dur})
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

// noteWork: x's device work is predicted to occupy [from, to]; every other
// profiling task on the GPU must not count a run it intersects.
func (n *Node) noteWork(x *task, from, to int64) {
	for _, t := range x.gpu.tasks {
		if t != x && t.prof != nil {
			t.prof.addForeign(from, maxi(to, from))
		}
	}
}

func (p *profiling) addForeign(from, to int64) {
	if k := len(p.foreign); k > 0 && from >= p.foreign[k-1].from && from <= p.foreign[k-1].to {
		p.foreign[k-1].to = maxi(p.foreign[k-1].to, to) // the common case: extends the latest
		return
	}
	if len(p.foreign) == maxForeignSpans {
		// Too many to keep apart: cover the older half with one span, which
		// can only make runs look less clean, never cleaner.
		h := maxForeignSpans / 2
		all := p.foreign[0]
		for _, f := range p.foreign[1:h] {
			all.from, all.to = mini(all.from, f.from), maxi(all.to, f.to)
		}
		p.foreign = append(append(p.foreign[:0], all), p.foreign[h:]...)
	}
	p.foreign = append(p.foreign, span{from, to})
}

// clean reports whether a run of the task that spanned [start, end] met no
// foreign work.
func (p *profiling) clean(start, end int64) bool {
	for _, f := range p.foreign {
		if f.from < end && f.to > start {
			return false
		}
	}
	return true
}

// forget drops foreign work over before end: later runs start after it.
func (p *profiling) forget(end int64) {
	k := 0
	for _, f := range p.foreign {
		if f.to > end {
			p.foreign[k] = f
			k++
		}
	}
	p.foreign = p.foreign[:k]
}

func (n *Node) measured(t *task, e MeasurementsReceived) {
	n.billMeasured(t, e)
	if t.prof != nil {
		t.prof.b.AddRecords(e.Run, e.Records)
	}
}

func (n *Node) kernelInfo(t *task, e KernelInfoReceived) {
	if t.prof != nil {
		t.prof.b.AddKernelInfo(e.Info)
	}
}

// runEnded closes a run: a profiling task commits or discards it, a holder's
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
	t.forgetLaunches(t.runStartSeq)
	if t.phase == PhaseSharing && e.RunNs > 0 {
		if t.jct == 0 {
			t.jct = e.RunNs
		} else {
			t.jct += (e.RunNs - t.jct) / 8 // EWMA, weight 1/8
		}
	}
	if p := t.prof; p != nil {
		commit := placed && p.clean(start, end)
		p.forget(end)
		out := p.b.EndRun(e.Run, e.Kernels, uint64(maxi(e.RunNs, 0)), commit)
		n.out.Runs = append(n.out.Runs, RunVerdict{Task: t.id, Run: e.Run, Outcome: out.String(), Runs: p.runs()})
		switch out {
		case profiler.RunCommitted:
			n.stats.RunsCommitted++
		case profiler.RunDiscarded, profiler.RunIncomplete, profiler.RunImplausible:
			n.stats.RunsDiscarded++
		}
		if out == profiler.RunCommitted && (p.b.Complete() || p.runs()%checkpointEvery == 0) {
			n.out.Profiles = append(n.out.Profiles, ProfileUpdate{
				Task: t.id, Key: t.key, Model: t.model, Runs: p.runs(),
				Complete: p.b.Complete(), Profile: p.b.Profile(),
			})
		}
		if p.b.Complete() {
			n.finishProfiling(t)
		}
	}
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
	t.est = EstimatesFromProfile(prof)
	n.stats.ProfilesCompleted++
	n.out.States = append(n.out.States, StateChange{Task: t.id, Role: t.role, Phase: t.phase, Credit: t.credit,
		Gate: n.gate(t, 0)})
	n.sendKernelTimes(t)
	n.electHolders(t.gpu, nil)
	n.schedule(t.gpu)
}
