package scheduler

import "slices"

// This file is the GPU's context-switch cost, measured (docs/scheduler.md
// "The switch, measured"). With switch-cost auto the core asks a waiter's
// hook, now and then, to time a tiny kernel of its own right after a
// holder's run (another context ran last) against the same kernel right
// after its own; the difference is one switch. The hook reports the host
// time between the two launches and the device time between their ends
// (their events): host − device is the switch the first one paid. A
// median of recent samples is the GPU's estimate; a hook that finds MPS
// (no time slicing between its clients) makes it 0. While it measures
// (calibHold at most) the waiter is granted nothing, and from the time a
// measurement is due none may resume on the board: its own kernels queued
// beside the probes would be measured with them (the hook also discards a
// sample its task, or a better one, launched during).

// ProbeNs is how long the hook's calibration kernel spins.
const ProbeNs = 5000

// Calibration asks a task's hook to measure the switch: Seq names the
// request, ProbeNs the kernel's duration.
type Calibration struct {
	Task    TaskID
	Seq     uint32
	ProbeNs int64
}

// SwitchCalibrated: a hook answered Calibration Seq: the host time from its
// first probe launch to its second (HostNs) and the device time between the
// two probes' ends (DeviceNs). MPS: the device runs the task under MPS (no
// switch between its clients); Failed: it could not measure.
type SwitchCalibrated struct {
	Now              int64
	Task             TaskID
	Seq              uint32
	HostNs, DeviceNs int64
	MPS, Failed      bool
}

func (e SwitchCalibrated) at() int64 { return e.Now }

const (
	// switchSamples are the samples the estimate is the median of.
	switchSamples = 15
	// warmSamples: until this many are in, the GPU is measured
	// warmFactor times as often.
	warmSamples = 5
	warmFactor  = 20
	// calibTimeout: an unanswered request is given up after this long;
	// a task that left calibFailures unanswered is asked no more (a hook
	// that does not know the message).
	calibTimeout  = int64(1e9)
	calibFailures = 2
	// calibHold: how long the calibrating waiter is held back at most
	// (the probes take a switch, two 5 µs kernels and the hook's sender
	// polling between them, a few hundred µs).
	calibHold = int64(2e6)
	// maxSwitchSample bounds a sample: more is another context's work that
	// ran at the probe, not a switch.
	maxSwitchSample = int64(10e6)
)

// switchEstimate is one GPU's measured switch.
type switchEstimate struct {
	samples []int64 // the latest, oldest first
	est     int64   // their median
	mps     bool
	// The request outstanding (seq 0: none), and when the next is due.
	seq   uint32
	task  TaskID
	asked int64
	hold  int64 // the waiters are held back until then, or the answer
	// spoiled: another task launched while the probes were timed.
	spoiled  bool
	nextAsk  int64
	lastSeq  uint32
	answered uint64
}

// switchCost is what the policy assumes a switch on g costs.
func (n *Node) switchCost(g *gpu) int64 {
	if n.cfg.SwitchCost >= 0 {
		return n.cfg.SwitchCost
	}
	if g.sw.mps {
		return 0
	}
	if len(g.sw.samples) > 0 {
		return g.sw.est
	}
	return n.cfg.SwitchCostPrior
}

// maybeCalibrate asks a waiter of g to measure the switch when one is due,
// the holders ran last (no low-priority work since their last launch) and
// their predicted gap has room for the probe and both switches. The probe
// then counts as low-priority work in the window: the holders' next kernel
// pays the switch back either way.
func (n *Node) maybeCalibrate(g *gpu) {
	s := &g.sw
	if n.cfg.SwitchCost >= 0 || s.mps {
		return
	}
	if s.seq != 0 {
		if n.now-s.asked < calibTimeout {
			return
		}
		if t := n.tasks[s.task]; t != nil {
			t.calibMissed++
		}
		s.seq = 0
	}
	if n.now < s.nextAsk || !g.window.open || g.lpInWindow || !n.windowStarting(g) {
		return
	}
	if n.cfg.DelayBudget == 0 {
		return // the holders are never to wait for anyone: not for a probe either
	}
	sw := n.switchCost(g)
	start := maxi(n.now, g.window.start)
	if g.window.end-start < 2*sw+4*ProbeNs {
		return
	}
	by := n.calibrator(g)
	if by == nil {
		return
	}
	s.lastSeq++
	s.seq, s.task, s.asked, s.hold, s.spoiled = s.lastSeq, by.id, n.now, n.now+calibHold, false
	every := n.cfg.SwitchCalibrate
	if len(s.samples) < warmSamples {
		every /= warmFactor
	}
	s.nextAsk = n.now + every
	g.lpInWindow = true
	g.lpBusyUntil = maxi(g.lpBusyUntil, start) + sw + 2*ProbeNs
	by.busyUntil = maxi(by.busyUntil, g.lpBusyUntil) // the probe is its work
	n.noteUnreported(by, n.now, g.lpBusyUntil+sw)
	n.stats.Calibrations++
	n.out.Calibrations = append(n.out.Calibrations, Calibration{Task: by.id, Seq: s.seq, ProbeNs: ProbeNs})
}

// calibrator is the waiter of g to ask for a measurement (nil: none): one
// that wants the GPU, shares it and has answered before.
func (n *Node) calibrator(g *gpu) *task {
	for _, t := range g.tasks {
		if t.role == RoleWaiter && t.phase == PhaseSharing && t.calibMissed < calibFailures && n.wants(t) {
			return t
		}
	}
	return nil
}

// calibrationDue reports whether g's switch is to be measured at the next
// window, or is being measured: the board then lets no waiter resume (a
// waiter that resumed at the holder's run end would launch its kernels
// beside the probes).
func (n *Node) calibrationDue(g *gpu) bool {
	s := &g.sw
	if n.cfg.SwitchCost >= 0 || s.mps {
		return false
	}
	return n.calibrating(g) != nil || s.seq == 0 && n.now >= s.nextAsk && n.calibrator(g) != nil
}

// calibrationSeen notes t's launch at at: one beside a calibration's
// probes (another task's, since it was asked) spoils its sample.
func (g *gpu) calibrationSeen(t *task, at int64) {
	if s := &g.sw; s.seq != 0 && t.id != s.task && at >= s.asked {
		s.spoiled = true
	}
}

// calibrating is the waiter of g being calibrated, held back meanwhile
// (nil: none).
func (n *Node) calibrating(g *gpu) *task {
	s := &g.sw
	if s.seq == 0 || n.now >= s.hold {
		return nil
	}
	return n.tasks[s.task]
}

// calibrateAt is when g's open window starts (less the grant lead) if a
// calibration is due by then: maybeCalibrate asks at that time, waiting
// requests or not (0: none due).
func (n *Node) calibrateAt(g *gpu) int64 {
	s := &g.sw
	if s.seq != 0 && n.now < s.hold {
		return s.hold // the held-back waiter goes then, answer or not
	}
	if n.cfg.SwitchCost >= 0 || s.mps || s.seq != 0 || !g.window.open || g.lpInWindow || s.nextAsk >= g.window.end {
		return 0
	}
	return maxi(s.nextAsk, g.window.start-n.cfg.GrantLead)
}

// calibrated takes in a hook's answer.
func (n *Node) calibrated(t *task, e SwitchCalibrated) {
	s := &t.gpu.sw
	if s.seq == 0 || e.Seq != s.seq || e.Task != s.task {
		return // late, or not asked for
	}
	s.seq = 0
	t.calibMissed = 0
	defer n.schedule(t.gpu) // what was held back for it goes now
	switch {
	case e.MPS:
		s.mps = true
	case e.Failed:
		return
	case s.spoiled:
		// Another task's kernels ran around the probes: before the first
		// (a switch seen longer) or between the two (shorter, or none).
		n.stats.CalibrationsSpoiled++
		return
	}
	s.answered++
	n.stats.CalibrationsAnswered++
	if s.mps {
		return
	}
	x := min(max(e.HostNs-e.DeviceNs, 0), maxSwitchSample)
	if len(s.samples) == switchSamples {
		s.samples = s.samples[1:]
	}
	s.samples = append(s.samples, x)
	sorted := slices.Clone(s.samples)
	slices.Sort(sorted)
	s.est = sorted[len(sorted)/2]
}

// SwitchInfo is one GPU's switch as the core prices it, for status output.
type SwitchInfo struct {
	GPU string `json:"gpu"`
	// CostNs is what the policy assumes now; Measured whether that comes
	// from samples (or MPS) rather than the prior or a fixed setting.
	CostNs   int64 `json:"cost_ns"`
	Measured bool  `json:"measured"`
	MPS      bool  `json:"mps"`
	Samples  int   `json:"samples"`
	// Last is the latest sample (0: none).
	LastNs int64 `json:"last_ns"`
}

// Switches describes every GPU's switch, by GPU UUID.
func (n *Node) Switches() []SwitchInfo {
	out := []SwitchInfo{}
	for _, g := range n.order {
		si := SwitchInfo{GPU: g.uuid, CostNs: n.switchCost(g), MPS: g.sw.mps, Samples: len(g.sw.samples)}
		si.Measured = n.cfg.SwitchCost < 0 && (g.sw.mps || si.Samples > 0)
		if si.Samples > 0 {
			si.LastNs = g.sw.samples[si.Samples-1]
		}
		out = append(out, si)
	}
	return out
}

// CalibrationCounters: calibrations asked of hooks, and answered
// (switch-cost auto).
type CalibrationCounters struct {
	Calibrations         uint64 `json:"calibrations"`
	CalibrationsAnswered uint64 `json:"calibrations_answered"`
	CalibrationsSpoiled  uint64 `json:"calibrations_spoiled"`
}

var calibrationMetrics = []Metric{
	{Name: "fikit_switch_calibrations_total", Help: "Switch calibrations asked of hooks (--switch-cost auto).", Value: func(s *Stats) float64 { return count(s.Calibrations) }},
	{Name: "fikit_switch_calibrations_answered_total", Help: "Switch calibrations hooks answered.", Value: func(s *Stats) float64 { return count(s.CalibrationsAnswered) }},
	{Name: "fikit_switch_calibrations_spoiled_total", Help: "Switch samples thrown away: another task launched while the probes were timed.", Value: func(s *Stats) float64 { return count(s.CalibrationsSpoiled) }},
}
