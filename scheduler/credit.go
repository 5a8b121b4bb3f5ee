package scheduler

// This file is credit: launches a waiter may make without asking, and the
// GPU time reserved for them. Credit given with a grant of launch seq covers
// seq+1, seq+2, …; each credited launch reserves its expected duration (by
// its position in the run when the profile knows the kernel order), and the
// reservation turns into predicted work when the launch is reported.

// creditFor returns the expected durations of the launches after seq that
// fit room, at most MaxCredit of them (nil: no credit); pending is GPU time
// about to be charged to t (the launch granted with them).
func (n *Node) creditFor(t *task, seq uint32, room, pending int64) []int64 {
	room = n.fairCredit(t, room, pending)
	var ds []int64
	for len(ds) < n.cfg.MaxCredit {
		d := n.upcoming(t, seq+uint32(len(ds))+1)
		if d > room {
			break
		}
		room -= d
		ds = append(ds, d)
	}
	return ds
}

// creditOf is the credit a grant of request r carries: what fits room
// after it (creditFor), none for a kernel granted out of its task's turn.
func (n *Node) creditOf(r *request, room int64) []int64 {
	if r.solo {
		return nil
	}
	return n.creditFor(r.t, r.seq, room, n.launched(r.t, r.kernel, r.seq))
}

// reserve gives t credit for launches expected to take ds.
func (n *Node) reserve(t *task, ds []int64) {
	for _, d := range ds {
		t.resv = append(t.resv, d)
		t.resvSum += d
		t.gpu.reservedNs += d
		t.acct.GrantedNs += d
	}
	t.credit += uint32(len(ds))
	n.stats.Credited += uint64(len(ds))
}

// useCredit: t made its next credited launch; its reservation is released
// (the launch itself is accounted as predicted work).
func (n *Node) useCredit(t *task) {
	if len(t.resv) == 0 {
		return
	}
	d := t.resv[0]
	t.resv = t.resv[1:]
	t.resvSum -= d
	t.gpu.reservedNs = maxi(0, t.gpu.reservedNs-d)
	t.credit--
}

// settleCredit: waiter t asks to launch, so it holds no credit; of what
// the core still reserves for it, the first unreported launches (the seqs
// between the last it heard of and the request: made on credit, their
// reports still on the way) become predicted work, and the rest — credit
// the hook never used (a renewal it ignored as older than a revocation) —
// is dropped. Kept, that rest counted as backlog for as long as the task
// lived, and idle periods had little room left beside an idle GPU.
func (n *Node) settleCredit(t *task, unreported uint32) {
	g := t.gpu
	for len(t.resv) > 0 && unreported > 0 {
		d := t.resv[0]
		n.useCredit(t)
		g.lpBusyUntil = maxi(g.lpBusyUntil, n.now) + d
		t.busyUntil = g.lpBusyUntil
		unreported--
	}
	n.dropCredit(t)
}

// recountLowWork bounds g's low-priority backlog (lpBusyUntil, the
// predicted end of the work granted or launched below the holders) by
// what its waiters' own work is predicted to take: each waiter's
// busyUntil is the backlog's end as of its latest launch or grant, and
// a run end (its work done) or its leaving takes it back to now. The
// backlog only ever grew, by predictions: a prediction past what ran — a
// throttled equal's launches reported late, a holder demoted with work
// predicted behind it — stayed until time caught up with it, and every
// waiter on the GPU waited for it (scenario lp_busy_run_end).
func (n *Node) recountLowWork(g *gpu) {
	end := n.now
	for _, o := range g.tasks {
		if o.role == RoleWaiter {
			end = maxi(end, o.busyUntil)
		}
	}
	g.lpBusyUntil = mini(g.lpBusyUntil, end)
}

// dropCredit forgets a task's unused credit and its reservation.
func (n *Node) dropCredit(t *task) {
	t.gpu.reservedNs = maxi(0, t.gpu.reservedNs-t.resvSum)
	t.resv = t.resv[:0]
	t.resvSum = 0
	t.credit = 0
}

// topUp renews a waiter's credit while the current idle period or window
// still has room, so a task running on credit does not stall for a round
// trip each time its credit runs out. It is sent as a Grant for the task's
// latest launch: "launches after seq may go without asking", which stays
// exact however many launches are in flight. Waiting requests of others
// come first.
func (n *Node) topUp(t *task) {
	g := t.gpu
	var room, expires int64
	switch {
	case g.idle && g.idleCap > 0:
		room = g.idleCap - maxi(0, g.lpBusyUntil-n.now) - g.reservedNs
		expires = n.now + n.cfg.GrantLease
	case g.window.open && n.now < g.window.end && n.windowStarting(g):
		room = g.window.end - maxi(n.now, g.lpBusyUntil) - g.reservedNs
		expires = g.window.end
	default:
		return
	}
	if g.waiting() > 0 || n.cfg.MaxCredit <= int(t.credit) || !n.fairRenews(t) {
		return
	}
	if m := n.profilingRun(g); m != nil && t != m && t.prio >= m.prio {
		return // no more launches beside a profiling run (profilingRun)
	}
	if t == n.calibrating(g) {
		return // its probes are being timed
	}
	ds := n.creditFor(t, t.seq+t.credit, room, 0)
	if max := n.cfg.MaxCredit - int(t.credit); len(ds) > max {
		ds = ds[:max]
	}
	// Renew only when it matters: the new credit is at least half the total.
	k := uint32(len(ds))
	if k == 0 || 2*k < t.credit+k {
		return
	}
	n.reserve(t, ds)
	n.stats.TopUps++
	n.out.Grants = append(n.out.Grants, Grant{Task: t.id, Seq: t.seq, Credit: t.credit, Gate: n.gate(t, expires)})
}

// grant lets request r go, with credit for launches expected to take ds,
// good until expires (0: no expiry).
func (n *Node) grant(r *request, ds []int64, expires int64) {
	g := r.t.gpu
	n.reserve(r.t, ds)
	n.out.Grants = append(n.out.Grants, Grant{Task: r.t.id, Seq: r.seq, Credit: uint32(len(ds)), Gate: n.gate(r.t, expires)})
	n.stats.Grants++
	n.stats.GrantedNs += r.est
	r.t.acct.GrantedNs += r.est
	g.lpLast = r.t
	// A granted launch is not reported again: it is used when granted.
	n.billLaunch(r.t, n.launched(r.t, r.kernel, r.seq))
	r.t.lastLaunch = n.now
	r.t.busyUntil = g.lpBusyUntil
	r.t.launchReleased(r.seq, n.now)
	n.noteWork(r.t, r.seq, n.now, g.lpBusyUntil)
}

// revokeCredit takes back every waiter's unused credit when the holders
// return, and frees the time reserved for it.
func (n *Node) revokeCredit(g *gpu) {
	for _, t := range g.tasks {
		if t.role == RoleWaiter && t.credit > 0 {
			n.stats.Revoked += uint64(t.credit)
			n.dropCredit(t)
			n.out.States = append(n.out.States, n.stateOf(t))
		}
	}
}

// gate is what t's permission is given against: the latest launch of a
// better priority than t's the core knows of, and the expiry.
func (n *Node) gate(t *task, expires int64) Gate {
	var seen int64
	for _, at := range t.gpu.levelAt[:t.prio] {
		seen = maxi(seen, at)
	}
	return Gate{Seen: seen, Expires: expires}
}

// noteLevel: a holder of priority p launched, or a task of priority p asked
// to, at time at.
func (g *gpu) noteLevel(p uint8, at int64) {
	g.levelAt[p] = maxi(g.levelAt[p], at)
}

// boardObserved takes in what the board shows of g's levels: a level whose
// latest launch is newer than the core knew has active tasks, which may
// make them the holders at once (the lower holder's hook, seeing the same
// launch, has stopped launching unasked and asks; it must not be told to
// go on as a holder before the better task's reports arrive); a holder's
// launch newer than its reports is an early stop (holderSighted). Times
// after now are not believed.
func (n *Node) boardObserved(g *gpu, levels [10]int64) {
	changed, stopped := false, false
	for p, at := range levels {
		at = mini(at, n.now)
		if at <= g.levelAt[p] {
			continue
		}
		g.levelAt[p] = at
		// A throttled holder (fair.go) asks at its holders' level: what
		// the board shows there may be its request, not their launch.
		shared := false
		for _, u := range g.tasks {
			shared = shared || int(u.prio) == p && u.throttled
		}
		for _, u := range g.tasks {
			if int(u.prio) != p {
				continue
			}
			if u.lastActive < at {
				u.lastActive = at
				changed = changed || u.role != RoleHolder && !u.throttled
			}
			if u.role == RoleHolder && !shared && at > maxi(u.lastLaunch, u.sighted) {
				n.holderSighted(u, at)
				stopped = true
			}
		}
	}
	if changed {
		n.stats.BoardElections++
		n.electHolders(g, nil)
	}
	if changed || stopped {
		n.schedule(g)
	}
}

// holderSighted: the board shows holder h launched at at, later than any
// launch of h the core has heard of. The report is on its way (on a busy
// host, hundreds of µs behind); until it comes the sighting is the early
// stop. Without it a waiter that asks because its hook saw the launch was
// granted against that very launch — the grant's gate is the latest launch
// the core knows, the board's — and its kernels joined the holder's run.
func (n *Node) holderSighted(h *task, at int64) {
	h.sighted = at
	h.nextLaunch = 0 // what was predicted has come
	n.stats.BoardStops++
	n.endFill(h.gpu, n.now)
	n.revokeCredit(h.gpu)
}
