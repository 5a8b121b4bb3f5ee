package scheduler

// Places held for the tasks a restarted daemon knew (docs/scheduler.md
// "Rejoining after an outage"). After an outage every hook re-registers,
// each when its own probe next reaches the daemon, in no particular order.
// A low priority that came back first was the best priority the daemon
// knew: it held the GPU, and the high priority, back a moment later, ran
// behind it. So the daemon keeps its roster (the tasks registered, in its
// store), and for RejoinGrace after its start a task of that roster not yet
// back holds its place: nothing of a worse priority holds or is granted on
// its GPU until it registers again or the grace ends.

// KnownTask is one task of a daemon's roster: what it registered as.
type KnownTask struct {
	Key      string `json:"task_key"`
	PID      uint32 `json:"pid"`
	Priority uint8  `json:"priority"`
	GPU      string `json:"gpu"`
}

// PlacesHeld: the daemon starts knowing these tasks from before; each holds
// its place until it registers again or Until. A later PlacesHeld replaces
// the places still held.
type PlacesHeld struct {
	Now   int64
	Until int64
	Tasks []KnownTask
}

func (e PlacesHeld) at() int64 { return e.Now }

// holdPlaces sets the places held from e, on each task's GPU; a task
// registered already (it came back before the roster was read) holds none.
func (n *Node) holdPlaces(e PlacesHeld) error {
	for _, k := range e.Tasks {
		if k.Priority > 9 {
			return errPriority(k.Priority)
		}
	}
	n.rosterVer++
	for _, g := range n.order {
		g.awaited = nil
	}
	for _, k := range e.Tasks {
		if e.Until <= n.now {
			break
		}
		g := n.gpuOf(k.GPU)
		back := false
		for _, t := range g.tasks {
			if t.key == k.Key && (k.PID == 0 || t.pid == k.PID) {
				back = true
				break
			}
		}
		if !back {
			g.awaited = append(g.awaited, k)
			g.awaitUntil = e.Until
			n.stats.PlacesHeld++
		}
	}
	for _, g := range n.order {
		n.electHolders(g, nil)
		n.schedule(g)
	}
	return nil
}

// returned ends the place held for a task that registered again: the one of
// its key and pid, else one of its key (the service restarted too).
func (n *Node) returned(g *gpu, key string, pid uint32) {
	at := -1
	for i, k := range g.awaited {
		if k.Key == key && (k.PID == pid || at < 0) {
			at = i
			if k.PID == pid {
				break
			}
		}
	}
	if at >= 0 {
		g.awaited = append(g.awaited[:at], g.awaited[at+1:]...)
		n.stats.PlacesReturned++
	}
}

// awaitedPrio is the best priority whose place is held on g (10: none).
func (g *gpu) awaitedPrio() uint8 {
	best := uint8(10)
	for _, k := range g.awaited {
		best = min(best, k.Priority)
	}
	return best
}

// awaitedBetter reports whether a place is held on g for a priority better
// than every task registered there: then nobody there holds, and nothing is
// granted, until it returns or the grace ends.
func (g *gpu) awaitedBetter() bool {
	p := g.awaitedPrio()
	if p == 10 {
		return false
	}
	for _, t := range g.tasks {
		if t.prio <= p {
			return false
		}
	}
	return true
}

// graceOver ends the places still held on g once the grace has passed.
func (n *Node) graceOver(g *gpu) {
	if len(g.awaited) == 0 || n.now < g.awaitUntil {
		return
	}
	n.stats.PlacesExpired += uint64(len(g.awaited))
	g.awaited = nil
	n.rosterVer++
	n.electHolders(g, nil)
}

// Roster is what the daemon keeps so that a restarted daemon knows its
// tasks: every task registered, and every place still held (a daemon that
// restarts again within the grace must still hold it).
func (n *Node) Roster() []KnownTask {
	var out []KnownTask
	for _, g := range n.order {
		for _, t := range g.tasks {
			out = append(out, KnownTask{Key: t.key, PID: t.pid, Priority: t.prio, GPU: g.uuid})
		}
		out = append(out, g.awaited...)
	}
	return out
}

// RosterVersion changes whenever Roster does: the daemon writes the roster
// when it changed, without building it every time to compare.
func (n *Node) RosterVersion() uint64 { return n.rosterVer }

// Awaited is the places held now.
func (n *Node) Awaited() []KnownTask {
	var out []KnownTask
	for _, g := range n.order {
		out = append(out, g.awaited...)
	}
	return out
}

// RejoinCounters: places held after a restart for the tasks the daemon knew
// before it (rejoin.go): held, ended by the task's return, ended by the
// grace.
type RejoinCounters struct {
	PlacesHeld     uint64 `json:"places_held"`
	PlacesReturned uint64 `json:"places_returned"`
	PlacesExpired  uint64 `json:"places_expired"`
}
