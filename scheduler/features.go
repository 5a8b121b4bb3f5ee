package scheduler

import "github.com/fikit/fikit/profiler"

// This file lists the core's features as its loop sees them: each says when
// time alone next changes one of its decisions on a GPU (the core's next
// tick is the earliest over the features and the gates, gate.go), and
// which of its counters /metrics shows (the daemon's rows are made from
// Metrics, as the wire is made from udp's table). A new feature is one row
// here, its counters one type embedded in Stats.
type feature struct {
	name string
	// deadline reports through at each time at which time alone changes a
	// decision of the feature on g (at ignores times not after now).
	deadline func(n *Node, g *gpu, at func(int64))
	metrics  []Metric
}

var features = []feature{
	{name: "liveness", deadline: livenessDeadline, metrics: livenessMetrics},
	{name: "holders", deadline: holdersDeadline},
	{name: "requests", deadline: requestsDeadline, metrics: grantMetrics},
	{name: "fill", deadline: fillDeadline, metrics: predictionMetrics},
	{name: "profiling", deadline: func(n *Node, g *gpu, at func(int64)) { at(n.verdictAt(g)) }, metrics: profilingMetrics},
	{name: "fairness", deadline: func(n *Node, g *gpu, at func(int64)) { at(n.fairDeadline(g)) }, metrics: fairMetrics},
	{name: "drift", metrics: driftMetrics},
	{name: "calibration", metrics: calibrationMetrics},
	{name: "pre-switch", metrics: preSwitchMetrics},
}

// deadline is the earliest time at which time alone changes a decision:
// the least over the features and the gates.
func (n *Node) deadline() int64 {
	d := int64(0)
	at := func(t int64) {
		if t > n.now && (d == 0 || t < d) {
			d = t
		}
	}
	for _, g := range n.order {
		for i := range features {
			if f := features[i].deadline; f != nil {
				f(n, g, at)
			}
		}
		for i := range gates {
			if f := gates[i].at; f != nil {
				at(f(n, g))
			}
		}
	}
	return d
}

// livenessDeadline: a silent task is dropped.
func livenessDeadline(n *Node, g *gpu, at func(int64)) {
	for _, t := range g.tasks {
		at(t.lastSeen + n.deadAfter(t) + 1)
	}
}

// holdersDeadline: a holder whose activity runs out, or a profiling task
// whose turn runs out, lets the waiters hold.
func holdersDeadline(n *Node, g *gpu, at func(int64)) {
	if g.waiting() == 0 {
		return
	}
	for _, t := range g.tasks {
		if t.role == RoleHolder {
			at(t.lastActive + n.holderTTL(t) + 1)
		}
	}
	at(n.turnEnd(g))
}

// requestsDeadline: a queued request is told to keep waiting.
func requestsDeadline(n *Node, g *gpu, at func(int64)) {
	for p := range g.queues {
		for _, r := range g.queues[p] {
			at(r.lastHold + n.cfg.HoldInterval)
		}
	}
}

// fillDeadline: the holders turn idle, a window starts, granted work
// drains, an idle period starves.
func fillDeadline(n *Node, g *gpu, at func(int64)) {
	if g.waiting() == 0 {
		return
	}
	if !g.idle {
		at(n.idleAt(g))
	}
	if g.window.open {
		at(g.window.start - n.cfg.GrantLead)
	}
	if g.idle || g.window.open {
		// Room frees as granted work drains.
		at(g.lpBusyUntil)
	}
	at(n.idleStarveAt(g))
}

// Metric is one of the core's counters as /metrics shows it: a counter, or
// a gauge; Labels are constant labels (one row per value of a dimension).
type Metric struct {
	Name, Help string
	Gauge      bool
	Labels     map[string]string
	Value      func(*Stats) float64
}

// Metrics are the rows of every feature's counters, in the features'
// order.
func Metrics() []Metric {
	var out []Metric
	for _, f := range features {
		out = append(out, f.metrics...)
	}
	for _, r := range profiler.DiscardReasons() {
		out = append(out, Metric{Name: "fikit_profiling_discards_total",
			Help: "Profiling runs discarded, by reason (docs/operations.md).", Labels: map[string]string{"reason": r.String()},
			Value: func(s *Stats) float64 { return float64(s.RunsDiscardedBy[r]) }})
	}
	return out
}

func count(v uint64) float64 { return float64(v) }

// LivenessCounters: tasks that came and went, and what their reports lost.
type LivenessCounters struct {
	Registered          uint64 `json:"registered"`
	Left                uint64 `json:"left"`
	Dropped             uint64 `json:"dropped"`
	LostNotifies        uint64 `json:"lost_notifications"`
	ReorderedNotifies   uint64 `json:"reordered_notifications"` // arrived after a later seq: late, not lost
	Refused             uint64 `json:"refused_requests"`        // requests past MaxWaitingPerTask
	UnscheduledLaunches uint64 `json:"unscheduled_launches"`
}

var livenessMetrics = []Metric{
	{Name: "fikit_tasks", Help: "Registered tasks.", Gauge: true, Value: func(s *Stats) float64 { return float64(s.Tasks) }},
	{Name: "fikit_tasks_dropped_total", Help: "Tasks dropped for missing heartbeats.", Value: func(s *Stats) float64 { return count(s.Dropped) }},
	{Name: "fikit_lost_notifications_total", Help: "Launch notifications that never arrived (still missing after 64 later ones).",
		Value: func(s *Stats) float64 { return count(s.LostNotifies) }},
	{Name: "fikit_reordered_notifications_total", Help: "Launch notifications that arrived after a later one (late, not lost).",
		Value: func(s *Stats) float64 { return count(s.ReorderedNotifies) }},
	{Name: "fikit_refused_requests_total", Help: "Launch requests refused: the task had too many waiting.",
		Value: func(s *Stats) float64 { return count(s.Refused) }},
}

// GrantCounters: what waiters were let launch.
type GrantCounters struct {
	Grants    uint64 `json:"grants"`
	Holds     uint64 `json:"holds"`
	Credited  uint64 `json:"credited"`
	Revoked   uint64 `json:"revoked"`
	TopUps    uint64 `json:"top_ups"`    // credit renewed without a request
	GrantedNs int64  `json:"granted_ns"` // predicted low-priority GPU time granted
	// BoardResumes: a waiter's queued launch went without a grant, the
	// board showing the better priorities between runs (board-resume).
	BoardResumes uint64 `json:"board_resumes"`
}

var grantMetrics = []Metric{
	{Name: "fikit_waiting_launches", Help: "Launch requests waiting for a grant.", Gauge: true, Value: func(s *Stats) float64 { return float64(s.Waiting) }},
	{Name: "fikit_grants_total", Help: "Launches granted to waiting tasks.", Value: func(s *Stats) float64 { return count(s.Grants) }},
	{Name: "fikit_granted_seconds_total", Help: "Predicted GPU time granted to waiting tasks.", Value: func(s *Stats) float64 { return float64(s.GrantedNs) / 1e9 }},
	{Name: "fikit_board_resumes_total", Help: "Queued launches that went on the board's word, the better priorities between runs (board resume).",
		Value: func(s *Stats) float64 { return count(s.BoardResumes) }},
}
