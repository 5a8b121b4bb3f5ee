package scheduler

import (
	"github.com/fikit/fikit/profiler"
)

// profiling is a task's measurement state: the profiler folding its clean
// runs, and whether the current run saw anyone else's work on the GPU.
type profiling struct {
	b     *profiler.Builder
	dirty bool // the current run overlapped another task's work
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

// runStarted marks a profiling task's new run dirty if anybody else's work
// may still be on the GPU.
func (n *Node) runStarted(t *task) {
	if t.prof == nil {
		return
	}
	t.prof.dirty = false
	for _, o := range t.gpu.tasks {
		if o != t && o.busyUntil > n.now {
			t.prof.dirty = true
		}
	}
	if t.gpu.lpBusyUntil > n.now && t.role == RoleHolder {
		t.prof.dirty = true
	}
}

// noteForeignLaunch: x launched (or was granted) a kernel; every other
// profiling task on the GPU that is inside a run measured it unclean.
func (n *Node) noteForeignLaunch(x *task) {
	for _, t := range x.gpu.tasks {
		if t != x && t.prof != nil && t.inRun {
			t.prof.dirty = true
		}
	}
}

func (n *Node) measured(t *task, e MeasurementsReceived) {
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
	if t.runStartSeq != 0 && e.Kernels > 0 {
		// The next run starts right after this one's launches.
		t.runStartSeq += e.Kernels
	}
	if !t.inRun {
		// A run whose launches the core never saw (notifications lost, or
		// launched before registration): nothing to attribute.
		n.runStarted(t)
	}
	if t.phase == PhaseSharing && e.RunNs > 0 {
		if t.jct == 0 {
			t.jct = e.RunNs
		} else {
			t.jct += (e.RunNs - t.jct) / 8 // EWMA, weight 1/8
		}
	}
	if p := t.prof; p != nil {
		commit := !p.dirty && t.inRun
		out := p.b.EndRun(e.Run, e.Kernels, uint64(maxi(e.RunNs, 0)), commit)
		n.out.Runs = append(n.out.Runs, RunVerdict{Task: t.id, Run: e.Run, Outcome: out.String(), Runs: p.runs()})
		switch out {
		case profiler.RunCommitted:
			n.stats.RunsCommitted++
		case profiler.RunDiscarded, profiler.RunIncomplete:
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
	if t.role == RoleHolder {
		n.holderRunEnded(t, e.RunNs)
		return
	}
	t.inRun = false
	t.runEnd = n.now
}

// finishProfiling moves a task to the sharing phase with its new profile.
func (n *Node) finishProfiling(t *task) {
	prof := t.prof.b.Profile()
	t.prof = nil
	t.phase = PhaseSharing
	t.est = EstimatesFromProfile(prof)
	n.stats.ProfilesCompleted++
	n.out.States = append(n.out.States, StateChange{Task: t.id, Role: t.role, Phase: t.phase, Credit: t.credit})
	n.electHolders(t.gpu, nil)
	n.schedule(t.gpu)
}
