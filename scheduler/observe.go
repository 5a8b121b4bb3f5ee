package scheduler

// FillState is one GPU's filling state at the core's current time, for
// observers such as the daemon's decision record (`fikit serve --record`):
// windows and idle periods are decided inside Step and leave no trace in
// Ready, which carries only what is sent to hooks.
type FillState struct {
	GPU string `json:"-"` // its GPU (the status shows it beside)
	// Window: the holders are predicted idle from WindowStartNs (their
	// launched work ends) to WindowEndNs (their next launch).
	Window        bool  `json:"window_open"`
	WindowStartNs int64 `json:"window_start_ns"`
	WindowEndNs   int64 `json:"window_end_ns"`
	// Idle: the holders count as idle; lower priorities run within IdleCapNs
	// of predicted backlog.
	Idle      bool  `json:"idle"`
	IdleCapNs int64 `json:"idle_cap_ns"`
	// LPBusyUntilNs is the predicted end of the low-priority work granted or
	// launched; Reserved the GPU time set aside for credit unused.
	LPBusyUntilNs int64 `json:"lp_busy_until_ns"`
	ReservedNs    int64 `json:"reserved_ns"`
	// Waiting is the number of queued requests; Turns the task whose turn
	// it is among each priority's equals (fair policies; 0: none), by
	// priority.
	Waiting int        `json:"waiting"`
	Turns   [10]TaskID `json:"turns"`
	// LPLast is the waiter whose work ends LPBusyUntilNs; FairAtNs when a
	// kernel held back behind it goes (fairDefers; 0: none).
	LPLast   TaskID `json:"lp_last"`
	FairAtNs int64  `json:"fair_at_ns"`
	// Shut names the gate that lets nothing go now ("": none).
	Shut string `json:"shut"`
}

// FillStates appends every GPU's fill state to dst, by GPU UUID, and
// returns it: what decides whether a waiting kernel may go (the decision
// record's windows and idle periods, `fikit status`'s gpus[].fill). Times
// are CLOCK_MONOTONIC ns, as the core's clock. It only reads the core.
func (n *Node) FillStates(dst []FillState) []FillState {
	for _, g := range n.order {
		f := FillState{
			GPU: g.uuid, Window: g.window.open, WindowStartNs: g.window.start, WindowEndNs: g.window.end,
			Idle: g.idle, IdleCapNs: g.idleCap,
			LPBusyUntilNs: g.lpBusyUntil, ReservedNs: g.reservedNs, Waiting: g.waiting(),
		}
		if !g.window.open {
			f.WindowStartNs, f.WindowEndNs = 0, 0
		}
		if !g.idle {
			f.IdleCapNs = 0
		}
		for p, t := range g.turn {
			if t != nil {
				f.Turns[p] = t.id
			}
		}
		if g.lpLast != nil {
			f.LPLast = g.lpLast.id
		}
		if g.fairAt > n.now {
			f.FairAtNs = g.fairAt // passed: holds nothing back
		}
		f.Shut = n.shutBy(g)
		dst = append(dst, f)
	}
	return dst
}
