package scheduler

// This file is fair shares among equal priorities (docs/scheduler.md
// "Equals") and the GPU-time accounts they are computed from.
//
// Fair queuing in the manner of MQFQ-Sticky (a flow per task, a bounded
// lag, anticipation) charged by GPU time as KaaS charges its clients: each
// task has a virtual time, the GPU time it used divided by its weight.
// Among the tasks of one priority on one GPU, none runs more than FairLag
// ahead of the slowest active one. Two rules apply it:
//
//   - fairPrioFit and fairFirstFit, the fair policy's window and idle rows:
//     among waiters of one priority it is one task's turn at a time; the
//     turn moves to the task furthest behind once its task runs FairLag
//     ahead (so turns change once per 2·FairLag of virtual time, not per
//     kernel: each change costs the GPU a context switch between them),
//     and an equal's kernel is granted only as the other's queued work is
//     predicted to end (fairDefers), not to share the GPU beside it. Within
//     its turn a task's kernels are chosen as BestPrioFit chooses.
//   - throttleHolders, for holders of equal priority (they launch without
//     asking): one that runs FairLag ahead becomes a waiter until the others
//     caught up.
//
// "Active" is what anticipation means here (fairActive): a task with a
// request waiting, or seen lately, or inside a run, still counts, so a task
// between two launches does not lose its turn.

// Account is one task's GPU time.
type Account struct {
	Task  TaskID
	Key   string
	Owner string
	// UsedNs is the GPU time of its launches: measured (the hook times
	// every launch of a profiling task with a pair of events) while it
	// profiles, predicted from its profile (the mean duration at the
	// launch's position in its run, else of its kernel ID) once it shares.
	// MeasuredNs is the measured part. Launches whose reports never came
	// are not in it.
	UsedNs, MeasuredNs int64
	// GrantedNs is the GPU time the core let it launch as a waiter,
	// predicted when it let it: each granted request at its conservative
	// estimate (p90), and the credit it was given, used or not.
	GrantedNs int64
}

// weightOf is a registration's weight (0 counts as 1).
func weightOf(w uint32) int64 { return max(int64(w), 1) }

// bill charges t with dur of GPU time: its account, and its virtual time.
func (n *Node) bill(t *task, dur int64, measured bool) {
	if dur <= 0 {
		return
	}
	t.acct.UsedNs += dur
	if measured {
		t.acct.MeasuredNs += dur
	}
	t.vt += dur / t.weight
}

// billLaunch charges t with a launch predicted to take dur. A profiling
// task's launches are charged by their measurements instead (billMeasured):
// it has no profile to predict them from.
func (n *Node) billLaunch(t *task, dur int64) {
	if t.phase == PhaseSharing {
		n.bill(t, dur, false)
	}
}

// billMeasured charges t with the measured durations of its kernels, where
// its launches were not charged when launched: a sharing task's were
// (billLaunch), and the runs its hook samples for drift, or measures again
// for a refreshed profile, are of those launches.
func (n *Node) billMeasured(t *task, e MeasurementsReceived) {
	if t.phase == PhaseSharing {
		return
	}
	for _, r := range e.Records {
		n.bill(t, int64(min(r.DurationNs, uint64(1)<<40)), true)
	}
}

// account is t's account now.
func (t *task) account() Account {
	a := t.acct
	a.Task, a.Key, a.Owner = t.id, t.key, t.owner
	return a
}

// vtEff is t's virtual time counting the credit it holds as used: credit
// is GPU time it may take without asking, so credit is bounded by it.
// Turns go by vt alone: credit is given and taken back (when a better
// priority returns) too often to decide turns by.
func (n *Node) vtEff(t *task) int64 { return t.vt + t.resvSum/t.weight }

// fairActive reports whether t counts among its equals: a request of it
// waits; or it launched, asked, ended a run or had launched work predicted
// to run within FairIdle; or it is inside a run (its first launch seen,
// its run end not) and launched within twice its typical run time — a task
// that queued a run's kernels and waits for them launches nothing for as
// long as they run, longer than predicted while it shares the GPU.
func (n *Node) fairActive(t *task) bool {
	if t.fairSeen == 0 {
		return t.gpu.queued(t)
	}
	return n.now <= n.fairUntil(t) || t.gpu.queued(t)
}

// fairUntil is until when t counts as active without a request waiting.
func (n *Node) fairUntil(t *task) int64 {
	until := maxi(maxi(t.fairSeen, t.busyUntil), t.runEnd) + n.cfg.FairIdle
	if t.inRun {
		until = maxi(until, t.fairSeen+mini(n.cfg.HolderTTL, 2*t.meanJCT()))
	}
	return until
}

// fairAnticipated reports whether the turn's task t, with nothing
// waiting, is waited for by its equals: it launched or asked within
// FairIdle, or work it launched is predicted to run then (anticipation:
// its next request is near, and granting an equal meanwhile would switch
// the GPU between the two kernel by kernel). Being inside a run is not
// enough (fairActive counts it, for the lag): a task whose run goes
// slowly — its hook waiting on its own, for the µs bound or a host gap —
// would keep its equals off an idle GPU for as long as it took to catch
// up with them (scenario fair_turn_quiet).
func (n *Node) fairAnticipated(t *task) bool {
	return t != nil && n.now <= maxi(t.fairSeen, t.busyUntil)+n.cfg.FairIdle
}

// fairTouch: t launched or asked at time at. A task that was not active
// joins its equals no further behind than FairLag: idle time banks no GPU
// time (MQFQ starts a flow that turns active at the global virtual time;
// this leaves it the lag, so a task whose reports came late loses little).
func (n *Node) fairTouch(t *task, at int64) {
	if !n.fairActive(t) {
		if m, ok := n.minVT(t.gpu, t.prio, t); ok {
			t.vt = maxi(t.vt, m-n.cfg.FairLag)
		}
	}
	t.fairSeen = maxi(t.fairSeen, at)
}

// minVT is the least virtual time of the active tasks of priority p on g
// but except.
func (n *Node) minVT(g *gpu, p uint8, except *task) (int64, bool) {
	var m int64
	ok := false
	for _, o := range g.tasks {
		if o == except || o.prio != p || !n.fairActive(o) {
			continue
		}
		if v := o.vt; !ok || v < m {
			m, ok = v, true
		}
	}
	return m, ok
}

// fairTurn is whose turn it is to fill among the tasks of priority p on g,
// and the least virtual time of its active tasks: the task whose turn it
// was while it is active and at most FairLag ahead of that, else the
// active task furthest behind.
func (n *Node) fairTurn(g *gpu, p int) (*task, int64) {
	var slow *task
	var least int64
	for _, t := range g.tasks {
		if int(t.prio) != p || !n.fairActive(t) {
			continue
		}
		if v := t.vt; slow == nil || v < least {
			slow, least = t, v
		}
	}
	if cur := g.turn[p]; cur != nil && n.fairActive(cur) && cur.vt <= least+n.cfg.FairLag {
		return cur, least
	}
	if prev := g.turn[p]; slow != prev && slow != nil {
		n.stats.FairTurns++
		if prev != nil && prev.role == RoleWaiter && prev.credit > 0 {
			// Its turn is over: what it may still launch unasked would
			// run beside the next turn's kernels, and the GPU would
			// switch between them kernel by kernel.
			n.stats.Revoked += uint64(prev.credit)
			n.dropCredit(prev)
			n.out.States = append(n.out.States, n.stateOf(prev)) // credit 0: dropped above
		}
	}
	g.turn[p] = slow
	return slow, least
}

// fairPrioFit is the fair policy's window row: BestPrioFit across
// priorities, turns among equals.
func (n *Node) fairPrioFit(l *lineup, room int64, idle bool) *cand {
	return n.fairFit(l, room, idle, true)
}

// fairFirstFit is the fair policy's idle row: first fit in priority and
// arrival order, turns among equals.
func (n *Node) fairFirstFit(l *lineup, room int64, idle bool) *cand {
	return n.fairFit(l, room, idle, false)
}

// fairFit picks from the highest priority below the holders' whose turn
// task has an admitted kernel that fits room: its longest such kernel
// (longest) or its earliest. A turn task with waiting kernels none of which
// fits (or none of which the gates admit) lets another task of its priority
// within the lag (or beyond, once the turn's kernels starve) go out of
// turn, one kernel without credit (r.solo), in room it could not use; a
// turn task with nothing waiting (between launches, or running on credit)
// is waited for, by the tasks of its priority. A starving kernel goes
// first, unless its task is more than the lag ahead (then it waits its
// turn, which comes).
func (n *Node) fairFit(l *lineup, room int64, idleGPU, longest bool) *cand {
	g := l.g
	for p := l.hp + 1; p < len(l.q); p++ {
		for k := range l.q[p] {
			c := &l.q[p][k]
			if c.starving && (c.r.est <= room || idleGPU) && n.withinLag(c.r.t) {
				return c
			}
		}
	}
	for p := l.hp + 1; p < len(g.queues); p++ {
		if len(g.queues[p]) == 0 {
			continue
		}
		turn, least := n.fairTurn(g, p)
		// Whether the turn's task waits, and starves, is over all its
		// waiting kernels, admitted or not: its turn is its own.
		waits, starving := false, false
		for _, r := range g.queues[p] {
			if r.t == turn {
				waits = true
				starving = starving || n.starving(r)
			}
		}
		var best *cand
		for k := range l.q[p] {
			c := &l.q[p][k]
			if c.r.t == turn && c.r.est <= room && (best == nil || longest && c.r.est > best.r.est) {
				best = c
			}
		}
		// The turn's task asks for nothing, and is not expected to soon:
		// its equals use the room, however far ahead (work conserving).
		quiet := !waits && !n.fairAnticipated(turn)
		if best == nil && (waits || quiet) {
			// Out of turn: room the turn's kernels do not fit. Within the
			// lag; beyond it too once they have not fitted for SkipLimit
			// opportunities (kernels longer than the gaps on offer): the
			// room would go unused while its task waits for room that
			// fits, which the others do not take from it.
			for k := range l.q[p] {
				c := &l.q[p][k]
				if c.r.t == turn || c.r.est > room || !starving && !quiet && c.r.t.vt > least+n.cfg.FairLag {
					continue
				}
				if best == nil || c.r.t.vt < best.r.t.vt {
					best = c
				}
			}
			if best != nil {
				best.r.solo = true
			}
		}
		if best != nil {
			if n.fairDefers(g, best.r.t) {
				return nil
			}
			return best
		}
	}
	return nil
}

// fairDefers reports whether a kernel of t is held back because an equal
// waiter's work is predicted to run (or its credit unused) for longer than
// the grant lead: granted now, it would reach the GPU beside that work,
// and the GPU would switch between the two (its time slices) until one is
// done, a context switch each time — with turns, twice as many switches
// between equals as without. It goes when that work is predicted to end
// (g.fairAt, a deadline).
func (n *Node) fairDefers(g *gpu, t *task) bool {
	if g.lpLast == nil || g.lpLast == t || g.lpLast.prio != t.prio {
		return false
	}
	end := g.lpBusyUntil + g.lpLast.resvSum
	if end-n.now <= n.cfg.GrantLead {
		return false
	}
	g.fairAt = end - n.cfg.GrantLead
	return true
}

// withinLag reports whether t is at most FairLag ahead of the slowest
// active task of its priority.
func (n *Node) withinLag(t *task) bool {
	m, ok := n.minVT(t.gpu, t.prio, nil)
	return !ok || t.vt <= m+n.cfg.FairLag
}

// fairCredit bounds the GPU time t may be given credit for (room) by the
// lag: credit may not take it further than FairLag ahead of the slowest
// active task of its priority (itself included), counting pending, GPU
// time about to be charged to it. Only under a fair policy, and only
// beside an active equal: alone, it is credited as before.
func (n *Node) fairCredit(t *task, room, pending int64) int64 {
	if !n.policy.fair {
		return room
	}
	m, ok := n.minVT(t.gpu, t.prio, t)
	if !ok {
		return room
	}
	m = mini(m, t.vt)
	return mini(room, maxi(0, (m+n.cfg.FairLag-n.vtEff(t))*t.weight-pending))
}

// fairRenews reports whether t's credit may be renewed without a request
// (topUp): under a fair policy only when it is t's turn, or no other task
// of its priority is active, else its equals would take turns kernel by
// kernel.
func (n *Node) fairRenews(t *task) bool {
	if !n.policy.fair || t.gpu.turn[t.prio] == t {
		return true
	}
	_, others := n.minVT(t.gpu, t.prio, t)
	return !others
}

// throttleHolders is the fair policy's rule for holders: the holders of a
// GPU are its active tasks of the best priority, and they launch without
// asking, so equals among them (several services of one priority once a
// better one has been idle past the holder TTL) shared the GPU by launch
// order, which favours long kernels. A holder whose virtual time runs more
// than FairLag ahead of the slowest active one of priority best is
// throttled: it becomes a waiter (its hook asks before each launch from
// then on; the others' launch paths stay as they were), and its requests
// wait — fill policies serve priorities below the holders' — until the
// others have caught up with it (it leads by nothing) or gone idle. Tasks
// profiling at that priority take turns instead (electHolders); nobody is
// throttled beside one. It reports whether a task's throttle changed.
func (n *Node) throttleHolders(g *gpu, best uint8) bool {
	changed := false
	set := func(t *task, v bool) {
		if t.throttled != v {
			t.throttled, changed = v, true
			if v {
				n.stats.FairThrottles++
			}
		}
	}
	profiling, equals := false, 0
	for _, t := range g.tasks {
		profiling = profiling || t.prio == best && t.phase == PhaseProfiling
		if t.prio == best || t.throttled {
			equals++
		}
	}
	if equals < 2 {
		for _, t := range g.tasks {
			set(t, false)
		}
		return changed
	}
	least, ok := n.minVT(g, best, nil)
	for _, t := range g.tasks {
		if t.prio != best || profiling || !ok || t.phase != PhaseSharing {
			set(t, false)
			continue
		}
		lead := t.vt - least
		switch {
		case !t.throttled && lead > n.cfg.FairLag:
			set(t, true)
		case t.throttled && lead <= 0:
			set(t, false)
		}
	}
	return changed
}

// rebalance re-elects g's holders if the holders rule changed a throttle.
func (n *Node) rebalance(g *gpu) {
	if n.policy.holders != nil && n.policy.holders(n, g, n.holderPrio(g)) {
		n.electHolders(g, nil)
	}
}

// fairDeadline is when time alone may change a fair decision on g: an
// active task whose going idle releases a throttled holder, or passes the
// turn of a priority whose turn task has nothing waiting. 0: none.
func (n *Node) fairDeadline(g *gpu) int64 {
	d := int64(0)
	at := func(t *task) {
		if t.fairSeen == 0 || t.gpu.queued(t) {
			return
		}
		if x := n.fairUntil(t) + 1; x > n.now && (d == 0 || x < d) {
			d = x
		}
	}
	for _, t := range g.tasks {
		if !t.throttled {
			continue
		}
		for _, o := range g.tasks {
			if o.prio == t.prio && !o.throttled {
				at(o)
			}
		}
	}
	if n.policy.fair {
		for p := range g.queues {
			if len(g.queues[p]) > 0 && g.turn[p] != nil {
				at(g.turn[p])
			}
		}
		if g.fairAt > n.now && g.waiting() > 0 && (d == 0 || g.fairAt < d) {
			d = g.fairAt
		}
	}
	return d
}

// FairCounters: turns and throttles among equals (fair.go).
type FairCounters struct {
	FairTurns     uint64 `json:"fair_turns"`     // the turn among waiters of one priority moved
	FairThrottles uint64 `json:"fair_throttles"` // a holder ran the lag ahead of its equals and waited
}

var fairMetrics = []Metric{
	{Name: "fikit_fair_turns_total", Help: "Turns among waiting tasks of one priority that passed to another task (each a context switch between them).",
		Value: func(s *Stats) float64 { return count(s.FairTurns) }},
	{Name: "fikit_fair_throttles_total", Help: "Holders that ran the fair lag ahead of their equals and waited for them.",
		Value: func(s *Stats) float64 { return count(s.FairThrottles) }},
}
