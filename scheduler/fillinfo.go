package scheduler

// FillInfo is a GPU's fill state as the core holds it: what decides
// whether a waiting kernel may go (`fikit status`'s gpus[].fill). It is
// for finding out why nothing was granted: every time is CLOCK_MONOTONIC
// ns, as the core's clock.
type FillInfo struct {
	GPU string `json:"-"` // its GPU (the status shows it beside)
	// LPBusyUntilNs is the predicted end of the low-priority work granted
	// or launched; ReservedNs the GPU time set aside for credit unused.
	LPBusyUntilNs int64 `json:"lp_busy_until_ns"`
	ReservedNs    int64 `json:"reserved_ns"`
	// The fill window open (a holders' predicted gap), or the idle period
	// (the holders idle) and its backlog cap.
	WindowOpen    bool  `json:"window_open"`
	WindowStartNs int64 `json:"window_start_ns"`
	WindowEndNs   int64 `json:"window_end_ns"`
	Idle          bool  `json:"idle"`
	IdleCapNs     int64 `json:"idle_cap_ns"`
	// Waiting is the number of queued requests; Turns the task whose turn
	// it is among each priority's equals (fair policies), by priority.
	Waiting int            `json:"waiting"`
	Turns   map[int]TaskID `json:"turns"`
	// LPLast is the waiter whose work ends LPBusyUntilNs; FairAtNs when a
	// kernel held back behind it goes (fairDefers).
	LPLast   TaskID `json:"lp_last"`
	FairAtNs int64  `json:"fair_at_ns"`
	// Shut names the gate that lets nothing go now ("": none).
	Shut string `json:"shut"`
}

// Fills describes every GPU's fill state.
func (n *Node) Fills() []FillInfo {
	out := []FillInfo{}
	for _, g := range n.order {
		f := FillInfo{GPU: g.uuid, LPBusyUntilNs: g.lpBusyUntil, ReservedNs: g.reservedNs,
			WindowOpen: g.window.open, Idle: g.idle, Waiting: g.waiting(), FairAtNs: g.fairAt}
		if g.window.open {
			f.WindowStartNs, f.WindowEndNs = g.window.start, g.window.end
		}
		if g.idle {
			f.IdleCapNs = g.idleCap
		}
		if f.FairAtNs <= n.now {
			f.FairAtNs = 0 // passed: holds nothing back
		}
		f.Turns = map[int]TaskID{}
		for p, t := range g.turn {
			if t != nil {
				f.Turns[p] = t.id
			}
		}
		if g.lpLast != nil {
			f.LPLast = g.lpLast.id
		}
		for i := range gates {
			if s := gates[i].shut; s != nil && s(n, g) {
				f.Shut = gates[i].name
				break
			}
		}
		out = append(out, f)
	}
	return out
}
