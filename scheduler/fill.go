package scheduler

import (
	"fmt"
	"math"
	"math/bits"
)

// This file is the FIKIT policy proper: predicting the holders' idle gaps
// and filling them with waiting low-priority kernels (BestPrioFit).

// notified handles a launch a task made without asking at time at (≤ now:
// a notification arrives after the launch, and hooks on the daemon's machine
// say when it happened): a holder's, or one covered by credit.
func (n *Node) notified(t *task, seq uint32, kernel uint64, at int64) {
	n.countSeq(t, seq)
	n.fairTouch(t, at)
	t.gpu.calibrationSeen(t, at)
	if t.role == RoleHolder {
		t.gpu.noteLevel(t.prio, at)
		dur := n.holderLaunch(t, kernel, at, seq)
		n.billLaunch(t, dur)
		n.noteLaunch(t, seq, at, dur, kernel)
		n.noteWork(t, seq, at, t.busyUntil)
		return
	}
	if l := t.launchRec(seq); l != nil {
		// It was asked for, and went before its grant (on the board's
		// word, or failing open): it was let go at at.
		granted := l.asked && l.released != 0
		l.released = mini(l.released, at)
		if l.released == 0 {
			l.released = at
		}
		if granted {
			// Its grant and this report crossed: the hook launched it
			// before the grant reached it, and the grant already billed
			// it and counted it as predicted work. The same launch, not
			// one on credit (scenario account_grant_crosses_report).
			t.gpu.lpLast = t
			n.waiterRunStart(t, seq, at)
			t.lastLaunch = maxi(t.lastLaunch, at)
			return
		}
	} else {
		n.noteLaunch(t, seq, at, 0, kernel)
	}
	g := t.gpu
	g.lpLast = t
	n.waiterRunStart(t, seq, at)
	if n.resumed(t, seq) {
		// Its launch went on the board's word (board-resume): the GPU
		// time is accounted as any launch's below; the request is not to
		// be granted again.
		n.stats.BoardResumes++
	}
	if t.credit > 0 {
		// The launch turns its reservation into predicted work.
		n.useCredit(t)
		d := n.launched(t, kernel, seq)
		n.billLaunch(t, d)
		g.lpBusyUntil = maxi(g.lpBusyUntil, at) + d
		n.topUp(t)
	} else {
		// A fail-open launch, or one the hook made before it learned its
		// role: account for it all the same.
		n.stats.UnscheduledLaunches++
		n.billLaunch(t, n.launched(t, kernel, seq))
		g.lpBusyUntil = maxi(g.lpBusyUntil, at) + n.estimate(t, kernel)
		g.lpInWindow = true
	}
	t.lastLaunch = at
	t.busyUntil = g.lpBusyUntil
	n.noteWork(t, seq, at, t.busyUntil)
}

// waiterRunStart starts a waiter's run at its first launch (seq) after a run
// end.
func (n *Node) waiterRunStart(t *task, seq uint32, at int64) {
	t.anchorRun(seq)
	if !t.inRun {
		t.inRun = true
		t.runStart = n.now
		t.runStarted(at)
	}
}

// MaxWaitingPerTask bounds a task's waiting launch requests. A hook has one
// outstanding per thread; a flood of requests drew Holds for every one and
// made each duplicate check longer (docs/security.md, "Bounded requests").
const MaxWaitingPerTask = 256

// requested handles a waiter's request to launch.
func (n *Node) requested(t *task, seq uint32, kernel uint64) error {
	prev := t.seq
	n.countSeq(t, seq)
	n.fairTouch(t, n.now)
	g := t.gpu
	g.noteLevel(t.prio, n.now)
	if (t.prio < n.holderPrio(g) && t.prio <= g.awaitedPrio()) || t.role == RoleHolder {
		// A better task than the holders is back (or a holder that had not
		// learned its role yet): it holds from now on. Not one worse than
		// a place held after a restart (rejoin.go): it waits.
		t.lastActive = n.now
		if t.role != RoleHolder {
			n.electHolders(g, nil)
		} else {
			// A holder asks when its hook saw a better priority launch
			// on the board (or had not learned its role): it holds still,
			// against what the core knows now.
			n.out.States = append(n.out.States, n.stateOf(t))
		}
		n.out.Grants = append(n.out.Grants, Grant{Task: t.id, Seq: seq, Gate: n.gate(t, 0)})
		n.stats.Grants++
		dur := n.holderLaunch(t, kernel, n.now, seq)
		n.billLaunch(t, dur)
		n.noteLaunch(t, seq, n.now, dur, kernel)
		n.noteWork(t, seq, n.now, t.busyUntil)
		n.schedule(g)
		return nil
	}
	waiting := 0
	for _, r := range g.queues[t.prio] {
		if r.t == t {
			if r.seq == seq {
				return nil // a duplicate
			}
			waiting++
		}
	}
	if waiting >= MaxWaitingPerTask {
		n.stats.Refused++
		return fmt.Errorf("%w: task %d has %d", ErrOverloaded, t.id, waiting)
	}
	if t.credit > 0 && t.role == RoleWaiter && seq > prev {
		n.settleCredit(t, seq-prev-1)
	}
	t.lastActive = n.now
	n.noteLaunch(t, seq, n.now, 0, kernel)
	t.launchAsked(seq)
	n.waiterRunStart(t, seq, n.now)
	g.queues[t.prio] = append(g.queues[t.prio], &request{
		t: t, seq: seq, kernel: kernel, est: n.estimateAt(t, kernel, seq), arrived: n.now, lastHold: n.now,
	})
	n.schedule(g)
	return nil
}

// reorderWindow is how many later seqs may arrive before a missing one is
// counted as lost: notifications are datagrams, and a waiter's requests
// overtake its granted launches' reports.
const reorderWindow = 64

// countSeq tracks which of t's seqs have arrived. t.missing bit i is set
// while seq t.seq-1-i has not arrived; a bit pushed out of the window is a
// lost notification, a bit cleared by a late arrival a reordered one.
func (n *Node) countSeq(t *task, seq uint32) {
	switch {
	case t.seq == 0:
		t.seq = seq
	case seq > t.seq:
		d := uint64(seq - t.seq)
		var lost uint64
		if d >= reorderWindow {
			lost = uint64(bits.OnesCount64(t.missing))
			t.missing = 0
		} else {
			lost = uint64(bits.OnesCount64(t.missing >> (reorderWindow - d)))
			t.missing <<= d
		}
		// The skipped seqs t.seq+1 … seq-1 are missing for now; those
		// already outside the window are lost at once.
		if skipped := d - 1; skipped >= reorderWindow {
			lost += skipped - reorderWindow
			t.missing = ^uint64(0)
		} else {
			t.missing |= 1<<skipped - 1
		}
		t.lostSeq += lost
		n.stats.LostNotifies += lost
		t.seq = seq
	case seq < t.seq:
		if i := t.seq - 1 - seq; i < reorderWindow && t.missing&(1<<i) != 0 {
			t.missing &^= 1 << i
			n.stats.ReorderedNotifies++
		}
	}
}

// holderPrio is the priority of g's holders (10 if none).
func (n *Node) holderPrio(g *gpu) uint8 {
	for _, t := range g.tasks {
		if t.role == RoleHolder {
			return t.prio
		}
	}
	return 10
}

// holderLaunch updates the predictions after a holder launched kernel k as
// seq at time now (its launch time, possibly before the core's current
// time), and returns the kernel's predicted duration.
func (n *Node) holderLaunch(h *task, k uint64, now int64, seq uint32) int64 {
	g := h.gpu
	if h.predicted > 0 {
		// Compare device-side: the kernel starts when it arrives or when
		// the holder's earlier work ends, whichever is later.
		err := maxi(now, h.busyUntil) - h.predicted
		n.stats.PredictionSamples++
		n.stats.PredictionErrNs += err
		if err < 0 {
			err = -err
		}
		n.stats.PredictionAbsErrNs += err
	}
	if n.cfg.GapEWMA > 0 && h.lastKernel != 0 && h.lastLaunch > 0 && h.inRun {
		// The gap actually left after the previous kernel, as far as the
		// daemon can see it: from its predicted end to this launch.
		n.correctGap(h, maxi(0, now-h.busyUntil))
	}
	h.anchorRun(seq)
	resident := false // a warm-up made its context resident (pre-switch)
	if !h.inRun {
		resident = n.preSwitchArrived(h, now)
		h.inRun = true
		h.offSequence = false
		if h.runStart > 0 {
			h.learnRunEvery(now - h.runStart)
		}
		h.runStart = now
		h.runStarted(now)
		if h.runEnd > 0 {
			h.learnRunGap(now - h.runEnd)
		}
		h.delayUsed = h.delayPending
		h.delayPending = 0
	}
	n.endFill(g, now)
	// Another context ran since the holder's last launch: low-priority work
	// was granted, or is predicted to run past the holder's own work (a
	// lower holder's). Not past its last launch: its kernels launched
	// while that work is predicted to run queue behind the first, which
	// pays the switch back (TestHolderPaysOneSwitchBack).
	otherRan := (g.lpInWindow || g.lpBusyUntil > maxi(h.lastLaunch, h.busyUntil)) && !resident
	if g.lpInWindow {
		// Whatever the low-priority tasks may still launch on credit would
		// now delay the holder: take it back.
		n.revokeCredit(g)
	}
	g.lpInWindow = false
	h.lastLaunch = now
	h.lastActive = now
	h.lastKernel = k
	start := maxi(now, h.busyUntil)
	// Low-priority work granted earlier runs first; the switch back is paid.
	start = maxi(start, g.lpBusyUntil)
	if n.cfg.SwitchAware && otherRan {
		// … and so is the switch back, before the holder's kernel starts:
		// predicted without it, the holder's work seemed done a switch
		// early, and the idle period that followed filled into its run.
		start += n.switchCost(g)
	}
	dur, gap, hasGap, last := n.holderKernel(h, k, seq)
	h.busyUntil = start + dur
	h.nextLaunch, h.predicted = 0, 0
	switch {
	case hasGap:
		h.predicted = h.busyUntil + gap
		if gap >= n.cfg.MinGap {
			h.nextLaunch = h.predicted
		}
	case last:
		// The run's last kernel: the inter-run gap starts when it ends,
		// without waiting for the run end's report (it comes after the
		// service's synchronization returns, and a poll of its hook later).
		// The holder is between runs from here: its next launch starts one,
		// and what is filled meanwhile is charged to that one.
		h.inRun = false
		h.runEnd = h.busyUntil
		if next := h.nextRunStart(h.busyUntil); next-h.busyUntil >= n.cfg.MinGap {
			h.nextLaunch = next
		}
	}
	n.updateWindow(g)
	return dur
}

// endFill: a holder is back at time at (its launch, or the board's sight of
// it), so whatever window or idle period g had is over — an early stop if
// the window still had time left.
func (n *Node) endFill(g *gpu, at int64) {
	if g.window.open && at < g.window.end {
		n.stats.EarlyStops++
	}
	if g.window.open && g.windowGrants > 0 && at < g.lpBusyUntil {
		// The holder is back while the low-priority work granted into its
		// gap was predicted still to run: the gap was shorter than
		// predicted, and the holder waits for that work.
		n.stats.ShortGapWindows++
		n.stats.ShortGapFills += g.windowGrants
	}
	g.windowGrants = 0
	g.window.open = false
	g.idle = false
}

// holderRunEnded: a holder's run ended, so until its next launch the GPU is
// free of it; a learned inter-run gap becomes a fill window.
func (n *Node) holderRunEnded(h *task, runNs int64) {
	// When the run really ended: its first launch plus the run's length as
	// the hook measured it. Run-end reports arrive after a varying delay;
	// anchoring the next window at the arrival would let it overrun the
	// holder's return whenever this report came later than the ones the
	// inter-run gap was learned from.
	end := n.now
	if runNs > 0 && h.runStart > 0 && h.runStart+runNs < end {
		end = h.runStart + runNs
	}
	if h.sighted > h.lastLaunch && h.sighted > h.runStart {
		// The board showed a launch after this run's last: the next run
		// is under way (its reports come after this one), and no window
		// opens into it. Its start is the sighting.
		end = mini(end, h.sighted)
		h.runEnd = end
		// The launches reported so far were the ended run's: done.
		h.busyUntil = mini(h.busyUntil, end)
		h.learnRunGap(h.sighted - end)
		h.learnRunEvery(h.sighted - h.runStart)
		h.runStart = h.sighted
		h.runStarted(h.sighted)
		h.nextLaunch = 0
		n.updateWindow(h.gpu)
		return
	}
	h.inRun = false
	h.runEnd = end
	// A run ends when its work is done, whatever was predicted: kernels of
	// unknown length (a profiling holder's) are assumed long.
	h.busyUntil = mini(h.busyUntil, end)
	h.nextLaunch = 0
	// The next run starts after the learned gap, or one learned interval
	// after this run's start, whichever is sooner: a run that ran long
	// leaves a shorter gap before a request that arrives on a clock.
	if next := h.nextRunStart(end); next-end >= n.cfg.MinGap {
		h.nextLaunch = next
	}
	n.updateWindow(h.gpu)
	n.schedule(h.gpu)
}

// updateWindow recomputes g's fill window from its holders' predictions: a
// window exists when every holder has a predicted next launch far enough
// after the end of its launched work.
func (n *Node) updateWindow(g *gpu) {
	w := fillWindow{}
	first := true
	for _, h := range g.tasks {
		if h.role != RoleHolder {
			continue
		}
		if h.nextLaunch == 0 {
			g.window = fillWindow{}
			return
		}
		if first {
			w = fillWindow{open: true, start: h.busyUntil, end: h.nextLaunch}
			first = false
			continue
		}
		w.start = maxi(w.start, h.busyUntil)
		w.end = mini(w.end, h.nextLaunch)
	}
	if stop, _ := n.stopAt(g); w.open && stop > 0 {
		w.end = mini(w.end, stop) // a gate wants the low priority off the device
	}
	// A window whose end has passed is none: the holder is late, not idle
	// (counting it would add an opportunity, and a record, per report).
	if w.open && w.end-w.start >= n.cfg.MinGap && w.end > n.now {
		if !g.window.open || g.window.end != w.end {
			n.stats.Windows++
			g.opp++
		}
		g.window = w
	} else {
		g.window = fillWindow{}
	}
}

// windowStarting reports whether g's window is within the grant lead of its
// start: kernels granted into it from now on reach the GPU after the
// holders' launched work, not while it still runs.
func (n *Node) windowStarting(g *gpu) bool {
	return g.window.start-n.now <= n.cfg.GrantLead
}

// idleAt is when g's holders count as idle if none launches before.
func (n *Node) idleAt(g *gpu) int64 {
	at := int64(0)
	for _, h := range g.tasks {
		if h.role != RoleHolder {
			continue
		}
		if h.phase == PhaseProfiling {
			return 0 // never idle-fill around a profiling holder
		}
		ref := maxi(maxi(h.lastLaunch, h.runEnd), h.registered)
		th := n.idleThreshold(h)
		sighted := h.sighted > ref
		ref = maxi(ref, h.sighted)
		if h.nextLaunch > 0 {
			ref = maxi(ref, h.nextLaunch) // a predicted window comes first
		}
		if h.inRun || sighted {
			// Silence is evidence only once the holder's launch reports
			// could have arrived: add how late they have been coming.
			th = maxi(th, n.cfg.RunIdle+h.lag)
		}
		ready := maxi(ref+th, h.busyUntil)
		if h.inRun && h.refreshing() {
			// Its predicted durations are known stale (drift.go): its
			// run's work is done when its run end says so, and low-priority
			// work granted sooner would run inside the run, which its new
			// profile must measure alone. A run end that never comes is
			// waited for a holder TTL.
			ready = maxi(ready, h.lastLaunch+n.holderTTL(h))
		}
		at = maxi(at, ready)
	}
	return at
}

func (n *Node) idleThreshold(h *task) int64 {
	th := int64(0)
	if h.est != nil {
		th = int64(n.cfg.IdleAlpha * float64(h.est.TypicalGapNs))
	}
	return maxi(th, n.cfg.IdleFloor)
}

// schedule grants what g's state allows now.
func (n *Node) schedule(g *gpu) {
	n.stepGates(g)
	if g.waiting() == 0 || n.shut(g) {
		return
	}
	now := n.now
	if g.window.open && now >= g.window.end {
		g.window.open = false
	}
	if g.window.open {
		n.fillWindow(g)
		return
	}
	if !g.idle {
		if at := n.idleAt(g); at > 0 && now >= at {
			n.startIdle(g)
		}
	}
	if g.idle && (g.idleCap > 0 || n.idleStarves(g)) {
		n.fillIdle(g)
	}
}

// startIdle begins an idle period. Its backlog cap is decided once: the
// in-flight budget, or less if the holders' run budget cannot absorb that
// much delay (plus a switch back) when they return; the worst case is
// charged to their next run up front.
func (n *Node) startIdle(g *gpu) {
	g.idle = true
	g.idleSince = n.now
	g.opp++
	n.stats.IdlePeriods++
	sw := n.switchCost(g)
	if g.lpInWindow {
		sw = 0 // the switch back is already charged
	}
	if n.cfg.SwitchAware && n.cfg.DelayBudget > 0 {
		// The backlog is bounded by the in-flight budget (which the
		// hooks keep too, hook-bound): what a returning holder finds is at
		// most that and a switch, whatever the delay budget says.
		g.idleCap = n.cfg.InflightBudget
		if n.holdersInRun(g) {
			n.charge(g, sw) // a switch inside a run is an extra one
		}
		g.lpInWindow = true
		return
	}
	g.idleCap = mini(n.cfg.InflightBudget, n.budgetLeft(g)-sw)
	if g.idleCap <= 0 {
		g.idleCap = 0
		n.passOver(g)
		return
	}
	n.charge(g, sw+g.idleCap)
	g.lpInWindow = true
}

// budgetLeft is the expected holder delay the current window may still
// cause: the least of the holders' remaining run budgets.
func (n *Node) budgetLeft(g *gpu) int64 {
	left := int64(1) << 62
	for _, h := range g.tasks {
		if h.role != RoleHolder {
			continue
		}
		b := int64(n.cfg.DelayBudget * float64(h.budgetJCT()))
		used := h.delayUsed
		if !h.inRun {
			used = h.delayPending
		}
		left = mini(left, b-used)
	}
	return left
}

// charge records an expected delay against every holder's run budget.
func (n *Node) charge(g *gpu, delay int64) {
	for _, h := range g.tasks {
		if h.role != RoleHolder {
			continue
		}
		if h.inRun {
			h.delayUsed += delay
		} else {
			h.delayPending += delay
		}
	}
}

// profilingRun finds the waiter of g whose profiling run is under way —
// the best priority's, the earliest run of those — while the run is
// younger than ProfileTurn. A task is measured with the GPU to itself
// against tasks of its own or lower priority (paper §3): granting their
// kernels into the same gaps interleaved them with its run, which was then
// discarded, and low-priority services profiled one after another, each
// waiting for a moment nobody else wanted the gaps (docs/scheduler.md,
// "Roles", has the measurement). The bound keeps a run that never ends (a
// squatter) from holding the others off.
func (n *Node) profilingRun(g *gpu) *task {
	var m *task
	for _, t := range g.tasks {
		if t.role != RoleWaiter || t.phase != PhaseProfiling || !t.inRun || n.now-t.runStart > n.cfg.ProfileTurn {
			continue
		}
		if m == nil || t.prio < m.prio || t.prio == m.prio && t.runStart < m.runStart {
			m = t
		}
	}
	return m
}

// fillWindow is FIKIT's gap filling (Algorithm 1): grant the waiting kernels
// the fill policy picks (BestPrioFit, Algorithm 2, by default) into the
// predicted gap.
func (n *Node) fillWindow(g *gpu) {
	n.armGates(g)
	w := g.window
	if !n.windowStarting(g) {
		return // the holders' work still runs: wait for it to drain (deadline)
	}
	sw := n.switchCost(g)
	// The first low-priority kernel in this window costs the holders a
	// context switch back when they return (charged).
	charged := sw
	if n.cfg.SwitchAware {
		if n.holdersInRun(g) {
			// A gap inside a run: the holders' next kernel would not have
			// paid a switch at all, so the fill must be off the device a
			// switch before it, and the gap pay for both switches.
			w.end -= sw
		} else {
			// Before the holders' next run: the one switch back is the
			// price of filling there at all, not a delay the budget
			// limits (docs/scheduler.md "Switch-aware fills").
			charged = 0
		}
	}
	if !g.lpInWindow && (n.budgetLeft(g) < charged || n.cfg.DelayBudget == 0) {
		n.passOver(g)
		return
	}
	for {
		start := maxi(maxi(n.now, w.start), g.lpBusyUntil) + g.reservedNs
		if !g.lpInWindow {
			start += sw // switching to the low-priority context
		}
		room := w.end - start
		r := n.rank(g, n.policy.window, room, false)
		if r == nil {
			n.passOver(g)
			return
		}
		if !g.lpInWindow {
			n.charge(g, charged)
			g.lpInWindow = true
		}
		g.lpBusyUntil = start - g.reservedNs + r.est
		g.windowGrants++
		n.grant(r, n.creditOf(r, w.end-g.lpBusyUntil-g.reservedNs), w.end)
	}
}

// holdersInRun reports whether some holder of g is inside a run (the gap
// ahead is between two of its kernels, not before its next run).
func (n *Node) holdersInRun(g *gpu) bool {
	for _, h := range g.tasks {
		if h.role == RoleHolder && h.inRun {
			return true
		}
	}
	return false
}

// resumed reports whether t's launch seq was a request still queued —
// launched on the board's word without a grant (board-resume) — and takes
// it out of the queue.
func (n *Node) resumed(t *task, seq uint32) bool {
	g := t.gpu
	for i, r := range g.queues[t.prio] {
		if r.t == t && r.seq == seq {
			n.take(g, int(t.prio), i)
			return true
		}
	}
	return false
}

// fillIdle lets waiting kernels run while the holders are idle, keeping the
// predicted low-priority backlog within the idle period's cap. A kernel too
// long for the cap goes alone once the GPU has idled IdleStarve: the
// skip count cannot help it, an idle period being one opportunity however
// long it lasts, and a holder idle between bursts of runs stopped
// everyone whose kernels were longer than the cap (scenario idle_oversize).
func (n *Node) fillIdle(g *gpu) {
	n.armGates(g)
	for {
		backlog := maxi(0, g.lpBusyUntil-n.now) + g.reservedNs
		room := g.idleCap - backlog
		stop, _ := n.stopAt(g)
		if stop > 0 {
			room = mini(room, stop-maxi(n.now, g.lpBusyUntil)-g.reservedNs)
		}
		r := n.rank(g, n.policy.idle, room, backlog == 0)
		if r == nil && backlog == 0 && stop == 0 && n.idleStarves(g) {
			r = n.rank(g, n.policy.idle, math.MaxInt64, true)
		}
		if r == nil && backlog == 0 && n.cfg.HookBound {
			// A kernel longer than the cap runs alone (as a hook's
			// bound lets it), where no holder is predicted back within
			// its time.
			r = n.rank(g, n.policy.idle, n.roomBeforeNext(g), true)
		}
		if r == nil {
			n.passOver(g)
			return
		}
		g.lpBusyUntil = maxi(g.lpBusyUntil, n.now) + r.est
		n.grant(r, n.creditOf(r, g.idleCap-(g.lpBusyUntil-n.now)-g.reservedNs), n.now+n.cfg.GrantLease)
	}
}

// roomBeforeNext is the GPU time left before g's holders are predicted
// back (less a switch): none while one's run is due (inside its predicted
// window, nextRunWindow) or while an active one's arrivals are still being
// learned, no limit when none is predicted ahead or due.
func (n *Node) roomBeforeNext(g *gpu) int64 {
	next := int64(math.MaxInt64)
	for _, h := range g.tasks {
		if h.role != RoleHolder {
			continue
		}
		at, late, ok := n.predictedNext(h)
		switch {
		case ok && at > n.now:
			next = mini(next, at)
		case ok && late >= n.now:
			return 0 // its run is due: nothing fits before it
		case h.phase == PhaseSharing && n.wants(h) && h.arr.class() == ArrivalsUnknown:
			// Its arrivals are still being learned: no prediction yet,
			// or one from a few intervals that has passed. A long kernel
			// waits for the idle period's starvation guard instead.
			return 0
		}
	}
	room := int64(math.MaxInt64)
	if next != math.MaxInt64 {
		room = next - n.now - n.switchCost(g)
	}
	if stop, _ := n.stopAt(g); stop > 0 {
		room = mini(room, stop-n.now) // a gate wants the low priority off the device
	}
	return room
}

// idleStarveAt is when an idle period's GPU, without low-priority work,
// lets a kernel longer than the period's cap go; 0 never (a delay budget of
// 0 means the holders are never to wait for anyone).
func (n *Node) idleStarveAt(g *gpu) int64 {
	if !g.idle || n.cfg.DelayBudget == 0 {
		return 0
	}
	return maxi(g.idleSince, g.lpBusyUntil) + n.cfg.IdleStarve
}

func (n *Node) idleStarves(g *gpu) bool {
	at := n.idleStarveAt(g)
	return at > 0 && n.now >= at
}

// bestPrioFit picks from the highest priority with an admitted kernel that
// fits room the one with the longest predicted duration; a starving kernel
// goes first if it fits.
func (n *Node) bestPrioFit(l *lineup, room int64, _ bool) *cand {
	var best *cand
	for p := l.hp + 1; p < len(l.q) && best == nil; p++ {
		for k := range l.q[p] {
			c := &l.q[p][k]
			if c.r.est > room {
				continue
			}
			switch {
			case best == nil:
			case c.starving && !best.starving:
			case c.starving == best.starving && c.r.est > best.r.est:
			default:
				continue
			}
			best = c
		}
	}
	// A starving kernel of lower priority that fits beats the rest.
	if best == nil || !best.starving {
		for p := l.hp + 1; p < len(l.q); p++ {
			for k := range l.q[p] {
				if c := &l.q[p][k]; c.starving && c.r.est <= room && (best == nil || !best.starving) {
					best = c
				}
			}
		}
	}
	return best
}

// firstFit picks, in priority order and arrival order within a priority
// (starving kernels first), the first admitted kernel that fits room. With
// idleGPU, a starving kernel goes even if it does not fit: otherwise a kernel
// longer than any budget would never run.
func (n *Node) firstFit(l *lineup, room int64, idleGPU bool) *cand {
	for pass := 0; pass < 2; pass++ {
		for p := l.hp + 1; p < len(l.q); p++ {
			for k := range l.q[p] {
				c := &l.q[p][k]
				if pass == 0 && !c.starving {
					continue
				}
				if c.r.est <= room || (idleGPU && c.starving) {
					return c
				}
			}
		}
	}
	return nil
}

// take removes request i of priority p from its queue.
func (n *Node) take(g *gpu, p, i int) {
	q := g.queues[p]
	g.queues[p] = append(q[:i:i], q[i+1:]...)
}

// passOver counts one skip for every request still waiting after a fill
// opportunity (a window or an idle period), once per opportunity.
func (n *Node) passOver(g *gpu) {
	for p := range g.queues {
		for _, r := range g.queues[p] {
			if r.lastOpp != g.opp {
				r.lastOpp = g.opp
				r.skips++
			}
		}
	}
}
