package scheduler

// FillState is one GPU's filling state at the core's current time, for
// observers such as the daemon's decision record (`fikit serve --record`):
// windows and idle periods are decided inside Step and leave no trace in
// Ready, which carries only what is sent to hooks.
type FillState struct {
	GPU string
	// Window: the holders are predicted idle from WindowStart (their
	// launched work ends) to WindowEnd (their next launch).
	Window                 bool
	WindowStart, WindowEnd int64
	// Idle: the holders count as idle; lower priorities run within IdleCap
	// of predicted backlog.
	Idle    bool
	IdleCap int64
}

// FillStates appends every GPU's fill state to dst, by GPU UUID, and
// returns it. It only reads the core.
func (n *Node) FillStates(dst []FillState) []FillState {
	for _, g := range n.order {
		dst = append(dst, FillState{
			GPU: g.uuid, Window: g.window.open, WindowStart: g.window.start, WindowEnd: g.window.end,
			Idle: g.idle, IdleCap: g.idleCap,
		})
	}
	return dst
}
