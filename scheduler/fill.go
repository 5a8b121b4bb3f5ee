package scheduler

// This file is the FIKIT policy proper: predicting the holders' idle gaps
// and filling them with waiting low-priority kernels (BestPrioFit).

// notified handles a launch a task made without asking: a holder's, or one
// covered by credit.
func (n *Node) notified(t *task, seq uint32, kernel uint64) {
	n.countSeq(t, seq)
	n.noteForeignLaunch(t)
	if t.role == RoleHolder {
		n.holderLaunch(t, kernel)
		n.schedule(t.gpu)
		return
	}
	g := t.gpu
	if t.credit > 0 {
		// The launch turns its reservation into predicted work.
		t.credit--
		g.reservedNs = maxi(0, g.reservedNs-n.perCredit(t))
		g.lpBusyUntil = maxi(g.lpBusyUntil, n.now) + n.meanDuration(t, kernel)
		n.topUp(t)
	} else {
		// A fail-open launch, or one the hook made before it learned its
		// role: account for it all the same.
		n.stats.UnscheduledLaunches++
		g.lpBusyUntil = maxi(g.lpBusyUntil, n.now) + n.estimate(t, kernel)
		g.lpInWindow = true
	}
	t.lastLaunch = n.now
	t.busyUntil = g.lpBusyUntil
	n.waiterRunStart(t)
}

// waiterRunStart starts a waiter's run at its first launch after a run end.
func (n *Node) waiterRunStart(t *task) {
	if !t.inRun {
		t.inRun = true
		t.runStart = n.now
		n.runStarted(t)
	}
}

// requested handles a waiter's request to launch.
func (n *Node) requested(t *task, seq uint32, kernel uint64) {
	n.countSeq(t, seq)
	g := t.gpu
	if t.prio < n.holderPrio(g) || t.role == RoleHolder {
		// A better task than the holders is back (or a holder that had not
		// learned its role yet): it holds from now on.
		t.lastActive = n.now
		if t.role != RoleHolder {
			n.electHolders(g, nil)
		}
		n.noteForeignLaunch(t)
		n.out.Grants = append(n.out.Grants, Grant{Task: t.id, Seq: seq})
		n.stats.Grants++
		n.holderLaunch(t, kernel)
		n.schedule(g)
		return
	}
	for _, r := range g.queues[t.prio] {
		if r.t == t && r.seq == seq {
			return // a duplicate
		}
	}
	t.lastActive = n.now
	n.waiterRunStart(t)
	g.queues[t.prio] = append(g.queues[t.prio], &request{
		t: t, seq: seq, kernel: kernel, est: n.estimate(t, kernel), arrived: n.now, lastHold: n.now,
	})
	n.schedule(g)
}

func (n *Node) countSeq(t *task, seq uint32) {
	if t.seq != 0 && seq > t.seq+1 {
		lost := uint64(seq - t.seq - 1)
		t.lostSeq += lost
		n.stats.LostNotifies += lost
	}
	if seq > t.seq {
		t.seq = seq
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

// holderLaunch updates the predictions after a holder launched kernel k.
func (n *Node) holderLaunch(h *task, k uint64) {
	g := h.gpu
	now := n.now
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
		actual := maxi(0, now-h.busyUntil)
		prev, ok := h.gapCorr[h.lastKernel]
		if !ok {
			prev = n.gapOf(h, h.lastKernel)
		}
		if h.gapCorr == nil {
			h.gapCorr = map[uint64]int64{}
		}
		w := n.cfg.GapEWMA
		h.gapCorr[h.lastKernel] = int64((1-w)*float64(prev) + w*float64(actual))
	}
	if !h.inRun {
		h.inRun = true
		h.runStart = now
		if h.runEnd > 0 {
			h.learnRunGap(now - h.runEnd)
		}
		h.delayUsed = h.delayPending
		h.delayPending = 0
		n.runStarted(h)
	}
	// Early stop: whatever window was open has ended now.
	if g.window.open && now < g.window.end {
		n.stats.EarlyStops++
	}
	g.window.open = false
	g.idle = false
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
	h.busyUntil = start + n.duration(h, k)
	h.nextLaunch, h.predicted = 0, 0
	if ke, ok := h.est.kernel(k); ok && ke.HasGap {
		gap := n.gapOf(h, k)
		h.predicted = h.busyUntil + gap
		if gap >= n.cfg.MinGap {
			h.nextLaunch = h.predicted
		}
	}
	n.updateWindow(g)
}

// gapOf is SG[k] for holder h, corrected online when enabled.
func (n *Node) gapOf(h *task, k uint64) int64 {
	if c, ok := h.gapCorr[k]; ok {
		return c
	}
	ke, _ := h.est.kernel(k)
	return ke.GapNs
}

// duration is the predicted duration of a holder's kernel (its mean).
func (n *Node) duration(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok {
		return ke.MeanNs
	}
	return n.estimate(t, k)
}

// meanDuration is the expected duration of a low-priority kernel that was
// launched: its mean, else the task's mean, else the conservative estimate.
func (n *Node) meanDuration(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok && ke.MeanNs > 0 {
		return ke.MeanNs
	}
	if t.est != nil && t.est.MeanNs > 0 {
		return t.est.MeanNs
	}
	return n.estimate(t, k)
}

// perCredit is the GPU time reserved for one launch on credit, whose kernel
// is not known yet: the task's mean kernel duration. Each credited launch
// then accounts its own kernel's mean.
func (n *Node) perCredit(t *task) int64 {
	if t.est != nil && t.est.MeanNs > 0 {
		return t.est.MeanNs
	}
	return n.estimate(t, 0)
}

// estimate is the conservative duration of a waiting kernel: its p90, else
// its task's p90, else the configured default.
func (n *Node) estimate(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok && ke.P90Ns > 0 {
		return ke.P90Ns
	}
	if t.est != nil && t.est.P90Ns > 0 {
		return t.est.P90Ns
	}
	return n.cfg.DefaultKernel
}

// learnRunGap keeps a conservative estimate of the time from a run end to
// the holder's next launch: the least of the recent observations.
func (t *task) learnRunGap(observed int64) {
	copy(t.runGaps[1:], t.runGaps[:len(t.runGaps)-1])
	t.runGaps[0] = observed
	if t.runGapN < len(t.runGaps) {
		t.runGapN++
	}
	t.runGap = t.runGaps[0]
	for _, v := range t.runGaps[:t.runGapN] {
		t.runGap = mini(t.runGap, v)
	}
}

// holderRunEnded: a holder's run ended, so until its next launch the GPU is
// free of it; a learned inter-run gap becomes a fill window.
func (n *Node) holderRunEnded(h *task) {
	h.inRun = false
	h.runEnd = n.now
	h.nextLaunch = 0
	if h.runGap >= n.cfg.MinGap && h.runGapN > 0 {
		h.nextLaunch = n.now + h.runGap
		h.busyUntil = mini(h.busyUntil, n.now)
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
	if w.open && w.end-w.start >= n.cfg.MinGap {
		if !g.window.open || g.window.end != w.end {
			n.stats.Windows++
			g.opp++
		}
		g.window = w
	} else {
		g.window = fillWindow{}
	}
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
		if h.nextLaunch > 0 {
			ref = maxi(ref, h.nextLaunch) // a predicted window comes first
		}
		ready := maxi(ref+n.idleThreshold(h), h.busyUntil)
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
	if g.waiting() == 0 {
		return
	}
	for _, h := range g.tasks {
		if h.role == RoleHolder && h.phase == PhaseProfiling {
			return // the holder is being measured: hold everyone else
		}
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
	if g.idle && g.idleCap > 0 {
		n.fillIdle(g)
	}
}

// startIdle begins an idle period. Its backlog cap is decided once: the
// in-flight budget, or less if the holders' run budget cannot absorb that
// much delay (plus a switch back) when they return; the worst case is
// charged to their next run up front.
func (n *Node) startIdle(g *gpu) {
	g.idle = true
	g.opp++
	n.stats.IdlePeriods++
	sw := n.cfg.SwitchCost
	if g.lpInWindow {
		sw = 0 // the switch back is already charged
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
		b := int64(n.cfg.DelayBudget * float64(h.meanJCT()))
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

// fillWindow is FIKIT's gap filling (Algorithm 1) with BestPrioFit
// (Algorithm 2): grant the best-fitting waiting kernels of the highest
// priority into the predicted gap.
func (n *Node) fillWindow(g *gpu) {
	w := g.window
	if !g.lpInWindow {
		// The first low-priority kernel in this window costs the holders a
		// context switch back when they return.
		if n.budgetLeft(g) < n.cfg.SwitchCost {
			n.passOver(g)
			return
		}
	}
	for {
		start := maxi(maxi(n.now, w.start), g.lpBusyUntil) + g.reservedNs
		if !g.lpInWindow {
			start += n.cfg.SwitchCost // switching to the low-priority context
		}
		room := w.end - start
		r := n.bestPrioFit(g, room)
		if r == nil {
			n.passOver(g)
			return
		}
		if !g.lpInWindow {
			n.charge(g, n.cfg.SwitchCost)
			g.lpInWindow = true
		}
		g.lpBusyUntil = start - g.reservedNs + r.est
		credit := n.creditFor(r.t, w.end-g.lpBusyUntil-g.reservedNs)
		n.grant(r, credit)
	}
}

// fillIdle lets waiting kernels run while the holders are idle, keeping the
// predicted low-priority backlog within the idle period's cap.
func (n *Node) fillIdle(g *gpu) {
	for {
		backlog := maxi(0, g.lpBusyUntil-n.now) + g.reservedNs
		r := n.firstFit(g, g.idleCap-backlog, backlog == 0)
		if r == nil {
			n.passOver(g)
			return
		}
		g.lpBusyUntil = maxi(g.lpBusyUntil, n.now) + r.est
		credit := n.creditFor(r.t, g.idleCap-(g.lpBusyUntil-n.now)-g.reservedNs)
		n.grant(r, credit)
	}
}

// bestPrioFit picks from the highest non-empty priority the waiting kernel
// with the longest predicted duration that fits room; a kernel passed over
// more than SkipLimit times goes first if it fits. It removes the choice
// from its queue, and counts a skip for every kernel left behind.
func (n *Node) bestPrioFit(g *gpu, room int64) *request {
	hp := n.holderPrio(g)
	var best *request
	bestP, bestI := 0, 0
	for p := int(hp) + 1; p < len(g.queues) && best == nil; p++ {
		for i, r := range g.queues[p] {
			if r.est > room {
				continue
			}
			urgent := r.skips > n.cfg.SkipLimit
			switch {
			case best == nil:
			case urgent && best.skips <= n.cfg.SkipLimit:
			case urgent == (best.skips > n.cfg.SkipLimit) && r.est > best.est:
			default:
				continue
			}
			best, bestP, bestI = r, p, i
		}
	}
	// A starving kernel of lower priority that fits beats the rest.
	if best == nil || best.skips <= n.cfg.SkipLimit {
		for p := int(hp) + 1; p < len(g.queues); p++ {
			for i, r := range g.queues[p] {
				if r.skips > n.cfg.SkipLimit && r.est <= room && (best == nil || best.skips <= n.cfg.SkipLimit) {
					best, bestP, bestI = r, p, i
				}
			}
		}
	}
	if best == nil {
		return nil
	}
	n.take(g, bestP, bestI)
	return best
}

// firstFit picks, in priority order and arrival order within a priority
// (starving kernels first), the first waiting kernel that fits room. With
// idleGPU, a starving kernel goes even if it does not fit: otherwise a kernel
// longer than any budget would never run.
func (n *Node) firstFit(g *gpu, room int64, idleGPU bool) *request {
	hp := n.holderPrio(g)
	for pass := 0; pass < 2; pass++ {
		for p := int(hp) + 1; p < len(g.queues); p++ {
			for i, r := range g.queues[p] {
				starving := r.skips > n.cfg.SkipLimit
				if pass == 0 && !starving {
					continue
				}
				if r.est <= room || (idleGPU && starving) {
					n.take(g, p, i)
					return r
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

// creditFor is how many more launches of t fit room without asking.
func (n *Node) creditFor(t *task, room int64) uint32 {
	if n.cfg.MaxCredit == 0 || room <= 0 {
		return 0
	}
	per := n.perCredit(t)
	c := room / per
	if c > int64(n.cfg.MaxCredit) {
		c = int64(n.cfg.MaxCredit)
	}
	return uint32(c)
}

// topUp renews a waiter's credit while the current idle period or window
// still has room, so a task running on credit does not stall for a round
// trip each time its credit runs out. It is sent as a Grant for the task's
// latest launch: "launches after seq may go without asking", which stays
// exact however many launches are in flight. Waiting requests of others
// come first.
func (n *Node) topUp(t *task) {
	g := t.gpu
	var room int64
	switch {
	case g.idle && g.idleCap > 0:
		room = g.idleCap - maxi(0, g.lpBusyUntil-n.now) - g.reservedNs
	case g.window.open && n.now < g.window.end:
		room = g.window.end - maxi(n.now, g.lpBusyUntil) - g.reservedNs
	default:
		return
	}
	if g.waiting() > 0 || n.cfg.MaxCredit == 0 {
		return
	}
	per := n.perCredit(t)
	k := room / per
	if k > int64(n.cfg.MaxCredit)-int64(t.credit) {
		k = int64(n.cfg.MaxCredit) - int64(t.credit)
	}
	// Renew only when it matters: the new credit is at least half the total.
	if k <= 0 || 2*k < int64(t.credit)+k {
		return
	}
	g.reservedNs += k * per
	t.credit += uint32(k)
	n.stats.Credited += uint64(k)
	n.stats.TopUps++
	n.out.Grants = append(n.out.Grants, Grant{Task: t.id, Seq: t.seq, Credit: t.credit})
}

// grant lets request r go with credit further launches, reserving their
// predicted time.
func (n *Node) grant(r *request, credit uint32) {
	g := r.t.gpu
	if credit > 0 {
		g.reservedNs += int64(credit) * n.perCredit(r.t)
		r.t.credit += credit
		n.stats.Credited += uint64(credit)
	}
	n.out.Grants = append(n.out.Grants, Grant{Task: r.t.id, Seq: r.seq, Credit: credit})
	n.stats.Grants++
	n.stats.GrantedNs += r.est
	r.t.lastLaunch = n.now
	r.t.busyUntil = g.lpBusyUntil
	n.noteForeignLaunch(r.t)
}

// revokeCredit takes back every waiter's unused credit when the holders
// return, and frees the time reserved for it.
func (n *Node) revokeCredit(g *gpu) {
	for _, t := range g.tasks {
		if t.role == RoleWaiter && t.credit > 0 {
			g.reservedNs = maxi(0, g.reservedNs-int64(t.credit)*n.perCredit(t))
			n.stats.Revoked += uint64(t.credit)
			t.credit = 0
			n.out.States = append(n.out.States, StateChange{Task: t.id, Role: t.role, Phase: t.phase})
		}
	}
}

// meanJCT is the holder's typical run time: observed in the sharing phase,
// else measured while profiling.
func (t *task) meanJCT() int64 {
	if t.jct > 0 {
		return t.jct
	}
	if t.est != nil {
		return t.est.MeanJCTNs
	}
	return 0
}
