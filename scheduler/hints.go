package scheduler

import (
	"math"
	"sort"
)

// This file is what the core tells hooks beside grants: their tasks' kernel
// durations, which bound their work in flight (hook-bound), and, for the
// hooks on the daemon's host, what the board carries for each GPU — the
// switch, the better priorities' next predicted run, who may resume
// (docs/design.md "Board"; docs/scheduler.md "Switches, bounds and
// arrivals").

// KernelTime is one kernel ID's predicted duration.
type KernelTime struct {
	ID uint64
	Ns int64
}

// KernelTimes gives a task's hook the predicted durations of its kernels
// (its profile's mean by kernel ID; DefaultNs, the task's mean, for one
// not in it) and the bound on its predicted GPU time in flight (BoundNs; 0:
// none, the hook bounds a holder by count), which it keeps while a better
// priority is registered on its GPU: a device-time cursor, advanced by
// each launch's predicted duration. Sent with hook-bound or board-resume (a
// resume needs to know whether a kernel fits before the better priority's
// next run).
type KernelTimes struct {
	Task      TaskID
	BoundNs   int64
	DefaultNs int64
	Kernels   []KernelTime
}

// sendKernelTimes queues t's kernel durations for its hook, once it has a
// profile.
func (n *Node) sendKernelTimes(t *task) {
	if !n.cfg.HookBound && !n.cfg.BoardResume || t.est == nil {
		return
	}
	def := t.est.MeanNs
	if def <= 0 {
		def = n.estimate(t, 0)
	}
	kt := KernelTimes{Task: t.id, DefaultNs: def, Kernels: make([]KernelTime, 0, len(t.est.Kernels))}
	if n.cfg.HookBound {
		kt.BoundNs = n.cfg.InflightBudget
	}
	for id, k := range t.est.Kernels {
		if k.Unmeasured {
			continue // DefaultNs stands in for it, as for an ID not listed
		}
		// The mean, not the p90 a waiting kernel is granted by: the
		// cursor adds the durations up, and one biased long holds the
		// GPU idle by the bias at every launch that waits (an ID of
		// varied durations lost much of its throughput to the p90:
		// docs/scheduler.md "The µs bound"). What a returning holder meets is then the
		// bound on average, more where one ID's durations vary.
		kt.Kernels = append(kt.Kernels, KernelTime{ID: id, Ns: max(k.MeanNs, 1)})
	}
	sort.Slice(kt.Kernels, func(i, j int) bool { return kt.Kernels[i].ID < kt.Kernels[j].ID })
	n.out.KernelTimes = append(n.out.KernelTimes, kt)
}

// NoneExpected is BoardHint.NextNs when no better task is expected back.
const NoneExpected = math.MaxInt64

// BoardHint is what the board says of one GPU for its hooks to act on
// without asking the daemon.
type BoardHint struct {
	GPU string
	// NextNs: the earliest predicted start of the next run, after the one
	// under way, of the GPU's tasks better than its worst registered
	// priority; 0 unknown (a hook then takes no liberty), NoneExpected
	// when none is expected. NextLateNs is the latest start its recent
	// intervals allow (nextRunWindow): from NextNs until then the run is
	// imminent; a window already past is as unknown.
	NextNs, NextLateNs int64
	// SwitchNs is the switch the policy assumes (switchCost).
	SwitchNs int64
	// Resume: task ResumeTask (0: none) may resume on the board when its
	// better priorities' runs have ended (board-resume): a waiter of the
	// best waiting priority, the one whose turn it is among its equals
	// (resumeTask).
	Resume     bool
	ResumeTask TaskID
	// Slack: the hooks bound their work by FillUntilNs and BoundNs, the
	// bound that follows the slack (slack.go); without it, by the fixed
	// rule. FillUntilNs is the end lower-priority work may be queued to
	// while the better priorities are predicted away (0: no prediction to
	// go by); BoundNs what their arrival may meet.
	Slack       bool
	FillUntilNs int64
	BoundNs     int64
}

// BoardHints appends every GPU's hint to dst, by GPU UUID, and returns it.
// It only reads the core.
func (n *Node) BoardHints(dst []BoardHint) []BoardHint {
	for _, g := range n.order {
		// No resume while a waiter's probes are due or timed (switchcost.go).
		h := BoardHint{GPU: g.uuid, SwitchNs: n.switchCost(g), Resume: n.cfg.BoardResume && !n.calibrationDue(g)}
		hp := n.holderPrio(g)
		worst, best := uint8(0), uint8(len(g.queues))
		for _, t := range g.tasks {
			worst = max(worst, t.prio)
			if t.role == RoleWaiter && t.prio > hp && t.prio < best {
				best = t.prio
			}
		}
		if int(best) < len(g.queues) {
			h.ResumeTask = resumeTask(g, best)
		}
		h.NextNs = NoneExpected
		for _, t := range g.tasks {
			if t.prio >= worst {
				continue
			}
			at, late, ok := n.predictedNext(t)
			switch {
			case ok && late >= n.now:
				if at < h.NextNs {
					h.NextNs, h.NextLateNs = at, late
				}
			case n.wants(t):
				// Active and unpredictable, or later than its window:
				// nothing to go by.
				h.NextNs, h.NextLateNs = 0, 0
			}
			if h.NextNs == 0 {
				break
			}
		}
		n.boardStops(g, &h)
		n.slackHint(g, worst, &h)
		dst = append(dst, h)
	}
	return dst
}

// predictedNext is when t is predicted to start its next run after the one
// under way (or the coming one, between runs), and the latest its recent
// intervals allow (nextRunWindow): false when the core cannot say (no
// profile, too few runs seen, profiling).
func (n *Node) predictedNext(t *task) (at, late int64, ok bool) {
	if t.phase != PhaseSharing {
		return 0, 0, false
	}
	switch {
	case t.inRun && t.runStart > 0:
		at, late = t.nextRunWindow(t.runStart + t.meanJCT())
	case t.runEnd > 0:
		// Between runs: nextLaunch, if set, is the window's start.
		at, late = t.nextRunWindow(t.runEnd)
	case t.nextLaunch > 0 && !t.inRun:
		at, late = t.nextLaunch, t.nextLaunch
	}
	return at, late, at > 0
}

// resumeTask is the waiter of priority p that may resume on g's board: the
// task whose fair turn it is (fair.go; the others of p wait for it there
// too), else the one whose request has waited longest, else the first.
// One task, not the priority: equals resuming side by side would share the
// GPU by time slices, unbalanced by turns.
func resumeTask(g *gpu, p uint8) TaskID {
	if t := g.turn[p]; t != nil && t.role == RoleWaiter && t.prio == p {
		return t.id
	}
	if q := g.queues[p]; len(q) > 0 {
		return q[0].t.id
	}
	for _, t := range g.tasks {
		if t.role == RoleWaiter && t.prio == p {
			return t.id
		}
	}
	return 0
}
