package scheduler

// This file is credit: launches a waiter may make without asking, and the
// GPU time reserved for them.

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
