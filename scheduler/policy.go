package scheduler

// A fill policy ranks the waiting kernels the gates admitted (gate.go) and
// chooses which goes next into predicted free GPU time: room is the
// predicted GPU time free before the holders need the GPU back (a window's
// remaining gap, or an idle period's cap minus the backlog); idle says the
// GPU has no low-priority backlog. It returns its choice from l (the caller
// takes it out of its queue), or nil. l.q[p] holds the admitted kernels of
// each priority p below the holders' (l.hp), in arrival order; a starving
// one (passed over more than SkipLimit times) must not starve.
//
// A new policy is one such function, one row in policies, and a scenario
// file under testdata/ that shows what it does differently.
type fillPolicy func(n *Node, l *lineup, room int64, idle bool) *cand

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

// fifoFit picks the earliest-arrived admitted kernel of any priority below
// the holders' that fits room (starving kernels first, like firstFit; on an
// idle GPU a starving kernel goes even if it does not fit).
func (n *Node) fifoFit(l *lineup, room int64, idle bool) *cand {
	for pass := 0; pass < 2; pass++ {
		var best *cand
		for p := l.hp + 1; p < len(l.q); p++ {
			for k := range l.q[p] {
				c := &l.q[p][k]
				if pass == 0 && !c.starving || !(c.r.est <= room || idle && c.starving) {
					continue
				}
				if best == nil || c.r.arrived < best.r.arrived {
					best = c
				}
				break // later requests of this priority arrived later
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}
