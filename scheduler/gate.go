package scheduler

// This file is the gate list: every rule that decides whether a waiting
// kernel may go now is a gate, and the gates are applied here, in one place
// (schedule, rank, stopAt, BoardHints, deadline), before a fill policy sees
// anything. A fill policy (policy.go) only ranks what every gate let
// through — in the manner of nomad's scheduler, feasibility checkers first,
// then rankers.
//
// Adding a gate is one new file holding its row (gate_preswitch.go is one)
// and one line in gates below. A gate fills in what it needs of the row:
//
//   - step moves its own state on before g is filled (schedule calls the
//     steps in the list's order, then asks shut);
//   - shut says that nothing waiting on g may go now;
//   - arm sets what it judges one fill by, at the fill's start (a window's
//     or an idle period's), and admits says whether one request may go;
//   - stop is when g's low-priority work must be off the device: windows
//     end there, idle periods fill no further, and the board shows the
//     better priorities back then, imminent until the second time;
//   - at is when time alone changes its verdict (the core's next tick).
//
// Not gates: the delay budget and an idle period's cap are the room a fill
// has (fill.go prices them per window and per idle period, not per
// kernel); the fairness lag among equals is how the fair policy ranks
// (whose turn it is, fair.go); the skip limit marks a kernel as starving,
// once (starving), and the rankers put starving kernels first.
type gate struct {
	name   string
	step   func(n *Node, g *gpu)
	shut   func(n *Node, g *gpu) bool
	arm    func(n *Node, g *gpu)
	admits func(n *Node, g *gpu, r *request) bool
	stop   func(n *Node, g *gpu) (stop, until int64)
	at     func(n *Node, g *gpu) int64
}

// gates are applied in this order.
var gates = []gate{
	calibrationGate,
	preSwitchGate,
	rejoinGate,
	profilingHolderGate,
	profilingRunGate,
}

// calibrationGate: while a waiter's hook is measuring the switch
// (switchcost.go) no waiter of the GPU is granted anything, until the
// answer or the hold's end: another's kernels beside the probes spoil the
// sample (switch_calibration_spoiled.txt).
var calibrationGate = gate{
	name: "calibration",
	step: func(n *Node, g *gpu) {
		n.maybeCalibrate(g)
		g.held = n.calibrating(g)
	},
	admits: func(_ *Node, g *gpu, _ *request) bool { return g.held == nil },
	at:     (*Node).calibrateAt,
}

// rejoinGate: a place held after a restart for a priority better than
// every task registered on g (rejoin.go) holds everyone there.
var rejoinGate = gate{
	name: "rejoin",
	shut: func(_ *Node, g *gpu) bool { return g.awaitedBetter() },
	at: func(_ *Node, g *gpu) int64 {
		if len(g.awaited) == 0 {
			return 0
		}
		return g.awaitUntil
	},
}

// profilingHolderGate: a holder being measured has the GPU to itself.
var profilingHolderGate = gate{
	name: "profiling-holder",
	shut: func(_ *Node, g *gpu) bool {
		for _, h := range g.tasks {
			if h.role == RoleHolder && h.phase == PhaseProfiling {
				return true
			}
		}
		return false
	},
}

// profilingRunGate: while a waiter's profiling run is under way
// (profilingRun), nothing of its priority or lower but its own kernels
// goes.
var profilingRunGate = gate{
	name: "profiling-run",
	arm:  func(n *Node, g *gpu) { g.measuring = n.profilingRun(g) },
	admits: func(_ *Node, g *gpu, r *request) bool {
		m := g.measuring
		return m == nil || r.t == m || r.t.prio < m.prio
	},
}

// stepGates moves every gate's state on (from schedule).
func (n *Node) stepGates(g *gpu) {
	for i := range gates {
		if s := gates[i].step; s != nil {
			s(n, g)
		}
	}
}

// shut reports whether some gate lets nothing waiting on g go now.
func (n *Node) shut(g *gpu) bool { return n.shutBy(g) != "" }

// shutBy names the first gate that lets nothing waiting on g go now ("":
// none).
func (n *Node) shutBy(g *gpu) string {
	for i := range gates {
		if s := gates[i].shut; s != nil && s(n, g) {
			return gates[i].name
		}
	}
	return ""
}

// armGates prepares the gates for one fill of g.
func (n *Node) armGates(g *gpu) {
	for i := range gates {
		if a := gates[i].arm; a != nil {
			a(n, g)
		}
	}
}

// admits reports whether every gate lets r go now.
func (n *Node) admits(g *gpu, r *request) bool {
	for i := range gates {
		if a := gates[i].admits; a != nil && !a(n, g, r) {
			return false
		}
	}
	return true
}

// stopAt is the earliest time a gate wants g's low-priority work off the
// device (0: none), and until when the better priority is imminent then.
func (n *Node) stopAt(g *gpu) (stop, until int64) {
	for i := range gates {
		s := gates[i].stop
		if s == nil {
			continue
		}
		if at, u := s(n, g); at > 0 && (stop == 0 || at < stop) {
			stop, until = at, u
		}
	}
	return stop, until
}

// starving reports whether r was passed over more than SkipLimit fill
// opportunities: it goes first into the next one it fits (the one place
// the skip limit is compared).
func (n *Node) starving(r *request) bool { return r.skips > n.cfg.SkipLimit }

// cand is a waiting kernel every gate admits, as a ranker sees it: its
// request, its place in its priority's queue, and whether it starves.
type cand struct {
	r        *request
	i        int
	starving bool
}

// lineup is what a ranker chooses from: g's requests of priorities below
// the holders' (hp) that every gate admits, by priority, in arrival order.
type lineup struct {
	g  *gpu
	hp int
	q  [10][]cand
}

// line builds g's lineup into g's reused buffer.
func (n *Node) line(g *gpu) *lineup {
	l := &g.line
	l.g, l.hp = g, int(n.holderPrio(g))
	for p := range l.q {
		l.q[p] = l.q[p][:0]
		if p <= l.hp {
			continue
		}
		for i, r := range g.queues[p] {
			if n.admits(g, r) {
				l.q[p] = append(l.q[p], cand{r: r, i: i, starving: n.starving(r)})
			}
		}
	}
	return l
}

// rank lets fill policy f choose among g's admitted waiting kernels for
// room, and takes its choice out of its queue.
func (n *Node) rank(g *gpu, f fillPolicy, room int64, idle bool) *request {
	c := f(n, n.line(g), room, idle)
	if c == nil {
		return nil
	}
	r := c.r
	n.take(g, int(r.t.prio), c.i)
	return r
}

// boardStops puts the gates' stops on g's board hint: the better
// priorities are back, for the low priorities, when their work must be off
// the device (a time past is as unknown: no liberty taken while they are
// stopped), imminent from then until the gate's second time; while such a
// gate is shut, nobody resumes.
func (n *Node) boardStops(g *gpu, h *BoardHint) {
	for i := range gates {
		gt := &gates[i]
		if gt.stop == nil {
			continue
		}
		stop, until := gt.stop(n, g)
		if stop == 0 {
			continue
		}
		if h.NextNs != 0 {
			h.NextNs, h.NextLateNs = mini(h.NextNs, stop), maxi(h.NextLateNs, until)
		}
		h.Resume = h.Resume && (gt.shut == nil || !gt.shut(n, g))
	}
}
