package scheduler

// preSwitchGate stops the low priorities ahead of the best priority's
// predicted run so that its hook can make its context resident
// (preswitch.go): their work must be off the device at the stop, and
// nothing of theirs goes from then until the holder's run starts or the
// guard ends.
var preSwitchGate = gate{
	name: "pre-switch",
	step: (*Node).preSwitchStep,
	shut: (*Node).preSwitchHolds,
	stop: func(n *Node, g *gpu) (int64, int64) {
		stop := n.preSwitchStop(g)
		if stop == 0 {
			return 0, 0
		}
		return stop, n.preSwitchUntil(g)
	},
	at: (*Node).preSwitchAt,
}

// preSwitchStop is when g's low-priority work must be off the device for a
// pre-switch (0: none planned).
func (n *Node) preSwitchStop(g *gpu) int64 {
	if p := &g.pre; p.task != nil {
		return p.stop
	}
	h := n.preSwitchTarget(g)
	if h == nil || h.nextLaunch == g.pre.doneNext {
		return 0
	}
	next := h.preSwitchNext()
	if next <= n.now {
		return 0
	}
	return next - n.preSwitchLead(g)
}

// preSwitchUntil is when g's planned or current pre-switch lets the low
// priorities go on if the holder has not come (0: none planned).
func (n *Node) preSwitchUntil(g *gpu) int64 {
	if p := &g.pre; p.task != nil {
		return p.until
	}
	if n.preSwitchStop(g) == 0 {
		return 0
	}
	return n.preSwitchTarget(g).preSwitchNext() + n.cfg.PreSwitchGuard
}

// preSwitchHolds reports whether g's low priorities are stopped for a
// pre-switch now (from its stop until the holder comes or the guard ends).
func (n *Node) preSwitchHolds(g *gpu) bool {
	p := &g.pre
	return p.task != nil && n.now >= p.stop && n.now < p.until
}
