package scheduler

import "strings"

// This file is the pre-switch (docs/scheduler.md "The pre-switch"): on a
// time-sliced GPU a holder's request after low-priority work pays the
// context switch back to its context (docs/scheduler.md has its cost) inside the
// request. Ahead of the holder's predicted next run the core stops the low
// priorities early enough for their work to drain and asks the holder's
// hook for a warm-up: one tiny launch of the hook's own kernel in the
// holder's context, which pays the switch while the GPU would idle anyway.
// The low priorities stay stopped until the holder's run starts, at most
// PreSwitchGuard past the predicted start; a holder that comes before the
// warm-up meets today's early stop.
//
// Safeguards: only the best registered priority on its GPU, alone at it, in
// the sharing phase, between its runs, with steady arrivals (a Poisson or
// bursty service's next request cannot be told ahead); never under MPS (no
// switch to pay) or on a MIG instance; and per task automatically off once
// its hit rate over its last preSwitchWindow pre-switches is below
// preSwitchMinHits. The hook adds
// its own (hookclient/warm.c): never during a run or a stream capture, only
// in the service's own context, stopped by context destruction, exit and
// fork. Warm-ups are not the service's launches, runs or interference.

// WarmProbeNs is how long the warm-up's kernel spins: it is there to make
// the context resident, not to run.
const WarmProbeNs = 1000

// Warmup asks a holder's hook to launch the hook's own kernel (ProbeNs long)
// in its context now: its next request then finds the context resident.
// Seq names the pre-switch (for logs; nothing answers it).
type Warmup struct {
	Task    TaskID
	Seq     uint32
	ProbeNs int64
}

const (
	// preSwitchArrivals intervals between run starts make a holder's
	// arrivals steady enough for a pre-switch (steadyArrivals): fewer than
	// the class needs (minArrivals), so that a service's first requests
	// after it registered are not all paid for (a wrong guess costs the
	// low priority a lead and a guard; the auto-off bounds how often).
	preSwitchArrivals = 3
	// preSwitchWindow pre-switches of a task judge its hit rate; fewer
	// than preSwitchMinHits hits among them turn it off for the task.
	preSwitchWindow  = 16
	preSwitchMinHits = 8
)

// preSwitch is one GPU's pre-switch under way (task nil: none).
type preSwitch struct {
	task *task
	// next is the holder's predicted run start it is for; stop is when the
	// low priorities' work must be off the device and the warm-up is
	// asked; warmed when it was asked (0: not yet); until when the low
	// priorities go on if the holder has not come.
	next, stop, warmed, until int64
	// key is the holder's nextLaunch it was made for (doneNext's).
	key int64
	// done: the pre-switch for next is over (a miss, or skipped): none
	// again for the same prediction.
	doneNext int64
	seq      uint32
}

// preSwitchTask is a task's record of its pre-switches.
type preSwitchTask struct {
	hits, n uint32 // outcomes in the current window
	off     bool   // hit rate too low: no more pre-switches for it
}

// preSwitchTarget is the holder of g a pre-switch may be made for (nil:
// none): the best registered priority, alone at it and holding, sharing,
// between runs with steady arrivals (steadyArrivals), not turned off, not
// on a MIG instance, on a GPU where a switch costs something and someone
// lower wants the GPU.
func (n *Node) preSwitchTarget(g *gpu) *task {
	if !n.cfg.PreSwitch || g.sw.mps || n.switchCost(g) <= 0 {
		return nil
	}
	var h *task
	best := uint8(10)
	for _, t := range g.tasks {
		best = min(best, t.prio)
	}
	for _, t := range g.tasks {
		if t.prio != best {
			continue
		}
		if h != nil {
			return nil // equals at the top: they would switch between themselves
		}
		h = t
	}
	if h == nil || h.role != RoleHolder || h.phase != PhaseSharing || h.inRun || h.pre.off || onMIG(h.model) ||
		h.nextLaunch == 0 || !h.steadyArrivals() {
		return nil
	}
	for _, t := range g.tasks {
		if t != h && n.wants(t) {
			return h
		}
	}
	return nil
}

// preSwitchLead is how long before a holder's predicted run start the low
// priorities' work must be off the device: the warm-up's trip to the hook
// (PreSwitchMargin), its switch and its kernel.
func (n *Node) preSwitchLead(g *gpu) int64 {
	return n.cfg.PreSwitchMargin + n.switchCost(g) + WarmProbeNs
}

// preSwitchStep moves g's pre-switch on (from schedule): arms one for the
// target's predicted run, asks for the warm-up at its stop, and gives up
// when the guard ends without the holder.
func (n *Node) preSwitchStep(g *gpu) {
	p := &g.pre
	switch {
	case p.task == nil:
	case n.tasks[p.task.id] != p.task || p.task.role != RoleHolder:
		*p = preSwitch{doneNext: p.key, seq: p.seq} // its holder left or lost its role
	case p.warmed == 0 && n.now < p.stop:
		// Planned again until its stop: the prediction moves as reports
		// come (a run end after its last kernel's launch).
		*p = preSwitch{doneNext: p.doneNext, seq: p.seq}
	}
	if p.task == nil {
		stop := n.preSwitchStop(g)
		if stop == 0 {
			return
		}
		h := n.preSwitchTarget(g)
		next := h.preSwitchNext()
		*p = preSwitch{task: h, next: next, stop: stop, until: next + n.cfg.PreSwitchGuard, key: h.nextLaunch,
			doneNext: p.doneNext, seq: p.seq}
	}
	if n.now >= p.until {
		n.preSwitchOutcome(p.task, false)
		n.stats.PreSwitchMisses++
		*p = preSwitch{doneNext: p.key, seq: p.seq}
		return
	}
	if p.warmed != 0 || n.now < p.stop {
		return
	}
	// The stop: whatever low-priority credit is left would launch into the
	// time the switch is to be paid in. The warm-up goes now, their work
	// in flight or not: on a time-sliced device it waits behind that work,
	// and the device switches to the holder's context as soon as theirs has
	// nothing left. (Waiting for their predicted end, from p90 durations,
	// found it past the request now and then, and no warm-up went:
	// docs/scheduler.md "The pre-switch".)
	n.revokeCredit(g)
	p.seq++
	p.warmed = n.now
	g.lpInWindow = false
	n.stats.PreSwitches++
	n.out.Warmups = append(n.out.Warmups, Warmup{Task: p.task.id, Seq: p.seq, ProbeNs: WarmProbeNs})
	// The warm-up switches the device to the holder's context, and a
	// measured task's next kernel pays the switch back: its work, unreported,
	// is on the GPU from now until past the request it is for.
	sw := n.switchCost(g)
	n.noteUnreported(p.task, n.now, maxi(p.until, n.now+sw+WarmProbeNs)+sw)
}

// preSwitchAt is when g's pre-switch next needs the core (0: never): its
// stop, its guard.
func (n *Node) preSwitchAt(g *gpu) int64 {
	p := &g.pre
	if p.task == nil {
		return n.preSwitchStop(g)
	}
	if n.now < p.stop {
		return p.stop
	}
	return p.until
}

// preSwitchArrived: holder h starts a run at at. It reports whether a
// warm-up made its context resident (no switch back to predict), and
// settles the pre-switch made for it.
func (n *Node) preSwitchArrived(h *task, at int64) bool {
	g := h.gpu
	p := &g.pre
	if p.task != h {
		return false
	}
	hit := p.warmed != 0 && at >= p.warmed && at < p.until
	n.preSwitchOutcome(h, hit)
	switch {
	case hit:
		n.stats.PreSwitchHits++
	case at >= p.until:
		n.stats.PreSwitchMisses++ // its guard ended before it came
	default:
		n.stats.PreSwitchEarly++ // it came before the warm-up
	}
	*p = preSwitch{doneNext: p.key, seq: p.seq}
	return hit
}

// preSwitchOutcome counts one pre-switch of t, and turns them off for t
// when too few of a window's hit.
func (n *Node) preSwitchOutcome(t *task, hit bool) {
	s := &t.pre
	s.n++
	if hit {
		s.hits++
	}
	if s.n < preSwitchWindow {
		return
	}
	if s.hits < preSwitchMinHits {
		s.off = true
		n.stats.PreSwitchOff++
	}
	s.hits, s.n = 0, 0
}

// PreSwitchInfo is one task's pre-switch record, for status output.
type PreSwitchInfo struct {
	Task TaskID `json:"task"`
	// Off: turned off for the task (hit rate too low).
	Off bool `json:"off"`
	// Hits and Outcomes so far in the current window.
	Hits     uint32 `json:"hits"`
	Outcomes uint32 `json:"outcomes"`
}

// PreSwitches describes every task's pre-switch record, by GPU then id.
func (n *Node) PreSwitches() []PreSwitchInfo {
	out := []PreSwitchInfo{}
	for _, g := range n.order {
		for _, t := range g.tasks {
			out = append(out, PreSwitchInfo{Task: t.id, Off: t.pre.off, Hits: t.pre.hits, Outcomes: t.pre.n})
		}
	}
	return out
}

// steadyArrivals reports whether t's recent runs started on a clock: its
// last intervals between run starts (the run-gap predictor's, up to four;
// preSwitchArrivals at least) differ by at most periodicCV of the least.
// Recent ones, not the arrival class's sixteen: one odd interval at a
// service's start (its warm-up, a pause) kept the class from periodic for
// sixteen requests, each of which paid the switch.
func (t *task) steadyArrivals() bool {
	r := &t.runStarts
	return r.n >= preSwitchArrivals && float64(r.spread()) <= periodicCV*float64(r.least())
}

// preSwitchNext is when t's next run is expected for a pre-switch: by its
// clock. A run start is its request's tick plus however late the service
// woke for it; the run-gap predictor anchors the next run on the latest
// start (one late start moved the prediction past the next tick, and the
// request came before its warm-up) or on the latest run end (an eager
// service seen to end a run early had its warm-ups asked far too early,
// each a miss that cost the low priority the rest of the interval). Projected
// from each of its recent starts by their mean interval, the earliest
// tick after the latest start is the clock's; the predicted next launch
// where no interval is known.
func (t *task) preSwitchNext() int64 {
	a := &t.arr
	m := min(a.n, len(t.runStarts.v))
	if m == 0 || t.lastRunStart == 0 {
		return t.nextLaunch
	}
	var sum int64
	for j := 1; j <= m; j++ {
		sum += a.iv[(a.i-j+len(a.iv))%len(a.iv)]
	}
	period := sum / int64(m)
	next := int64(0)
	start := t.lastRunStart
	for j := 0; j <= m; j++ {
		if j > 0 {
			start -= a.iv[(a.i-j+len(a.iv))%len(a.iv)]
		}
		if tick := start + int64(j+1)*period; tick > t.lastRunStart && (next == 0 || tick < next) {
			next = tick
		}
	}
	if next == 0 {
		return t.nextLaunch
	}
	return next
}

// onMIG reports whether a device of this model name is a MIG instance
// (the driver names one "NVIDIA A100-SXM4-40GB MIG 1g.5gb"): the
// pre-switch is off there, its switch never having been measured.
func onMIG(model string) bool { return strings.Contains(model, " MIG ") }

// PreSwitchCounters (preswitch.go): warm-ups asked; holder runs that
// started after theirs (hits), before it (early); guards that ended without
// the holder (misses); tasks turned off for a low hit rate.
type PreSwitchCounters struct {
	PreSwitches     uint64 `json:"pre_switches"`
	PreSwitchHits   uint64 `json:"pre_switch_hits"`
	PreSwitchEarly  uint64 `json:"pre_switch_early"`
	PreSwitchMisses uint64 `json:"pre_switch_misses"`
	PreSwitchOff    uint64 `json:"pre_switch_off"`
}

var preSwitchMetrics = []Metric{
	{Name: "fikit_pre_switches_total", Help: "Warm-ups asked of holders' hooks ahead of a predicted request (pre-switch).", Value: func(s *Stats) float64 { return count(s.PreSwitches) }},
	{Name: "fikit_pre_switch_hits_total", Help: "Holder runs that started after their warm-up, within the guard (pre-switch).", Value: func(s *Stats) float64 { return count(s.PreSwitchHits) }},
	{Name: "fikit_pre_switch_early_total", Help: "Holder runs that started before their warm-up was asked (pre-switch).", Value: func(s *Stats) float64 { return count(s.PreSwitchEarly) }},
	{Name: "fikit_pre_switch_misses_total", Help: "Pre-switch guards that ended without the holder (pre-switch).", Value: func(s *Stats) float64 { return count(s.PreSwitchMisses) }},
	{Name: "fikit_pre_switch_off_total", Help: "Tasks whose pre-switches were turned off for a low hit rate (pre-switch).", Value: func(s *Stats) float64 { return count(s.PreSwitchOff) }},
}
