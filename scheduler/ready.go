package scheduler

import (
	"fmt"
	"strings"
	"time"
)

// Ack answers a registration.
type Ack struct {
	Task  TaskID
	Role  Role
	Phase Phase
	// ProfileRuns is T, the clean runs the task profiles for.
	ProfileRuns int
	// HeartbeatNs is the interval the hook should heartbeat at.
	HeartbeatNs int64
	// Sample: in the sharing phase the hook measures one run in Sample (0:
	// none), so that the core sees the profile drift (drift.go).
	Sample uint32
}

// Grant lets launch Seq go, and the Credit launches after it go without
// asking. A Grant whose Seq is not a waiting request renews credit: the
// launches after Seq (the latest the core saw) may go, Credit of them.
type Grant struct {
	Task   TaskID
	Seq    uint32
	Credit uint32
	Gate
}

// Gate bounds a permission: it holds while no task of a better priority
// than its receiver launched after Seen (the latest such launch the core
// knew of; a hook sharing the daemon's board checks it at each launch),
// and until Expires (0: no expiry).
type Gate struct {
	Seen    int64
	Expires int64
}

func (g Gate) String() string {
	var s string
	if g.Seen != 0 {
		s += fmt.Sprintf(" seen=%d", g.Seen)
	}
	if g.Expires != 0 {
		s += fmt.Sprintf(" expires=%d", g.Expires)
	}
	return s
}

// Hold tells a waiting launch to keep waiting.
type Hold struct {
	Task TaskID
	Seq  uint32
}

// StateChange tells a task its new role, phase or credit.
type StateChange struct {
	Task   TaskID
	Role   Role
	Phase  Phase
	Credit uint32
	Gate
	Sample uint32 // as Ack's: every State carries the task's current one
}

// RunVerdict says what profiling did with one run of a task.
type RunVerdict struct {
	Task    TaskID
	Run     uint32
	Outcome string // "committed", "discarded", "incomplete", "implausible", "empty", "ignored"
	Reason  string // why a run was left out (profiler.DiscardReason's name)
	Kind    string // "profiling", or "refresh" (a new version after a drift)
	Runs    int    // committed runs so far
}

// Ready is everything the core decided since the last call to Ready.
type Ready struct {
	Acks   []Ack
	Grants []Grant
	Holds  []Hold
	States []StateChange
	// Profiles finished or advanced by profiling, for the daemon to persist.
	Profiles []ProfileUpdate
	// Runs are the verdicts on profiling runs (for logs).
	Runs []RunVerdict
	// Drifts are the tasks found to drift from their profiles, being
	// profiled again.
	Drifts []DriftEvent
	// Dropped tasks: silent past DeadAfter. The daemon forgets them.
	Dropped []TaskID
	// Calibrations ask hooks to measure their GPU's switch (switch-cost
	// auto).
	Calibrations []Calibration
	// Warmups ask holders' hooks to make their contexts resident ahead of
	// a predicted request (pre-switch).
	Warmups []Warmup
	// KernelTimes give hooks their tasks' kernel durations and in-flight
	// bound (hook-bound).
	KernelTimes []KernelTimes
	// Accounts are the final GPU-time accounts of the tasks removed since
	// the last Ready (left, dropped or replaced), for the daemon to keep.
	Accounts []Account
	// Deadline is when the core next wants a Tick (0: no deadline).
	Deadline int64
}

// Empty reports whether Ready carries no decision (a deadline alone is not
// a decision).
func (r *Ready) Empty() bool {
	return len(r.Acks) == 0 && len(r.Grants) == 0 && len(r.Holds) == 0 &&
		len(r.States) == 0 && len(r.Profiles) == 0 && len(r.Dropped) == 0 && len(r.Runs) == 0 && len(r.Drifts) == 0 &&
		len(r.Accounts) == 0 && len(r.Calibrations) == 0 && len(r.KernelTimes) == 0 && len(r.Warmups) == 0
}

// String renders the decisions one per line, as scenario tests show them.
func (r *Ready) String() string { return r.Format(0) }

// Format is String, but a sharing task's sample is shown in its ack or
// state only where it is not usual (the configured DriftSample): scenarios
// show it where it changes. A profiling task's is never shown (its hook
// measures every run).
func (r *Ready) Format(usual uint32) string {
	sampleStr := func(s uint32, ph Phase) string {
		if s == usual || ph != PhaseSharing {
			return ""
		}
		return fmt.Sprintf(" sample=%d", s)
	}
	var b strings.Builder
	for _, a := range r.Acks {
		fmt.Fprintf(&b, "ack task=%d role=%s phase=%s%s\n", a.Task, a.Role, a.Phase, sampleStr(a.Sample, a.Phase))
	}
	for _, s := range r.States {
		fmt.Fprintf(&b, "state task=%d role=%s phase=%s credit=%d%s%s\n", s.Task, s.Role, s.Phase, s.Credit, s.Gate,
			sampleStr(s.Sample, s.Phase))
	}
	for _, g := range r.Grants {
		fmt.Fprintf(&b, "grant task=%d seq=%d credit=%d%s\n", g.Task, g.Seq, g.Credit, g.Gate)
	}
	for _, h := range r.Holds {
		fmt.Fprintf(&b, "hold task=%d seq=%d\n", h.Task, h.Seq)
	}
	for _, v := range r.Runs {
		extra := ""
		if v.Reason != "" {
			extra += " reason=" + v.Reason
		}
		if v.Kind == "refresh" {
			extra += " refresh"
		}
		fmt.Fprintf(&b, "run task=%d run=%d %s%s runs=%d\n", v.Task, v.Run, v.Outcome, extra, v.Runs)
	}
	for _, d := range r.Drifts {
		fmt.Fprintf(&b, "drift task=%d kind=%s version=%d %q\n", d.Task, d.Kind, d.Version, d.Reason)
	}
	for _, p := range r.Profiles {
		beside := ""
		if p.Profile != nil && p.Profile.BesideRuns > 0 {
			beside = fmt.Sprintf(" beside=%d", p.Profile.BesideRuns)
		}
		fmt.Fprintf(&b, "profile task=%d key=%s runs=%d%s complete=%v\n", p.Task, p.Key, p.Runs, beside, p.Complete)
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "dropped task=%d\n", d)
	}
	for _, c := range r.Calibrations {
		fmt.Fprintf(&b, "calibrate task=%d seq=%d probe=%s\n", c.Task, c.Seq, time.Duration(c.ProbeNs))
	}
	for _, w := range r.Warmups {
		fmt.Fprintf(&b, "warmup task=%d seq=%d probe=%s\n", w.Task, w.Seq, time.Duration(w.ProbeNs))
	}
	for _, k := range r.KernelTimes {
		fmt.Fprintf(&b, "kernel_times task=%d bound=%s default=%s kernels=%d\n", k.Task, time.Duration(k.BoundNs),
			time.Duration(k.DefaultNs), len(k.Kernels))
	}
	for _, a := range r.Accounts {
		fmt.Fprintf(&b, "account task=%d used=%s measured=%s granted=%s\n", a.Task, time.Duration(a.UsedNs), time.Duration(a.MeasuredNs), time.Duration(a.GrantedNs))
	}
	return b.String()
}
