package scheduler

// A fill policy chooses which waiting kernel goes next into predicted free
// GPU time: room is the predicted GPU time free before the holders need the
// GPU back (a window's remaining gap, or an idle period's cap minus the
// backlog); idle says the GPU has no low-priority backlog. It removes its
// choice from its queue (n.take) and returns it, or returns nil. Waiting
// kernels are g.queues[p] for priorities p below the holders'
// (n.holderPrio(g)), in arrival order; a request with skips > SkipLimit
// has been passed over too often and must not starve. A policy grants only
// requests g.mayFill allows (a profiling run under way).
//
// A new policy is one such function, one row in policies, and a scenario
// file under testdata/ that shows what it does differently.
type fillPolicy func(n *Node, g *gpu, room int64, idle bool) *request

// policyRow is one fill policy: how windows (predicted gaps of the holders)
// and idle periods are filled, and how equal priorities share.
type policyRow struct {
	name         string
	window, idle fillPolicy
	// holders, if set, balances the holders of priority best on g (equal
	// priorities, which launch without asking) and reports whether a
	// task's role must change (throttleHolders).
	holders func(n *Node, g *gpu, best uint8) bool
	// fair: credit is bounded by the lag among equals and renewed to the
	// task whose turn it is only (fair.go), as the fair rows choose.
	fair bool
}

// Policy names.
const (
	// PolicyFairPrioFit is the default: BestPrioFit across priorities,
	// fair queuing by GPU time among equals (fair.go).
	PolicyFairPrioFit = "fair-prio-fit"
	PolicyBestPrioFit = "best-prio-fit"
)

var policies = []policyRow{
	// BestPrioFit across priorities; among tasks of one priority, turns by
	// GPU time used / weight with a bounded lag, in windows, idle periods
	// and among holders alike (docs/scheduler.md "Equals").
	{name: PolicyFairPrioFit, window: (*Node).fairPrioFit, idle: (*Node).fairFirstFit,
		holders: (*Node).throttleHolders, fair: true},
	// FIKIT's BestPrioFit (paper Algorithm 2) into windows, first fit in
	// priority order into idle periods.
	{name: PolicyBestPrioFit, window: (*Node).bestPrioFit, idle: (*Node).firstFit},
	// Arrival order across priorities below the holders', both in windows
	// and idle periods: the baseline BestPrioFit is compared against.
	{name: "fifo", window: (*Node).fifoFit, idle: (*Node).fifoFit},
}

// PolicyNames lists the fill policies, the default first.
func PolicyNames() []string { return policyNames() }

func policyNames() []string {
	out := make([]string, len(policies))
	for i, p := range policies {
		out[i] = p.name
	}
	return out
}

// policyOf returns the named policy's row (the default for an unknown name:
// Validate refuses those first).
func policyOf(name string) policyRow {
	for _, p := range policies {
		if p.name == name {
			return p
		}
	}
	return policies[0]
}

// fifoFit picks the earliest-arrived waiting kernel of any priority below
// the holders' that fits room (starving kernels first, like firstFit; on an
// idle GPU a starving kernel goes even if it does not fit).
func (n *Node) fifoFit(g *gpu, room int64, idle bool) *request {
	hp := n.holderPrio(g)
	for pass := 0; pass < 2; pass++ {
		var best *request
		bestP, bestI := 0, 0
		for p := int(hp) + 1; p < len(g.queues); p++ {
			for i, r := range g.queues[p] {
				starving := r.skips > n.cfg.SkipLimit
				if pass == 0 && !starving || !(r.est <= room || idle && starving) || !g.mayFill(r) {
					continue
				}
				if best == nil || r.arrived < best.arrived {
					best, bestP, bestI = r, p, i
				}
				break // later requests of this priority arrived later
			}
		}
		if best != nil {
			n.take(g, bestP, bestI)
			return best
		}
	}
	return nil
}
