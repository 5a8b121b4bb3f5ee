package profiler

import (
	"fmt"
	"unicode/utf8"
)

// DiscardReason says why a profiling run was left out of a profile. The
// names (String) are the metrics' labels, the status API's keys and the
// export format's: one list of them.
type DiscardReason uint8

const (
	// DiscardOverlap: another task's work was on the GPU during the run.
	DiscardOverlap DiscardReason = iota + 1
	// DiscardUnplaced: the daemon never saw the run's first launch, so it
	// could not tell when the run was (reports lost, or a task that
	// registered mid-run).
	DiscardUnplaced
	// DiscardRecordsLost: the run's measurement records were not all there
	// (lost or duplicated datagrams).
	DiscardRecordsLost
	// DiscardImplausible: a kernel or gap longer than the run itself.
	DiscardImplausible
	// DiscardStalled: the hook sent the run without records: a launch call
	// stalled while the device idled, before its kernel ID was measured
	// whole once.
	DiscardStalled
	// DiscardUncertain: the hook sent the run without records: a stalled
	// launch left a kernel's start too uncertain for the accuracy budget.
	DiscardUncertain
	// DiscardNoEvents: the hook had no event pair for a kernel.
	DiscardNoEvents
	// DiscardStopped: the hook stopped measuring during the run.
	DiscardStopped
	// DiscardRunEndLost: the run's end never came (a later run ended first).
	DiscardRunEndLost

	// NumDiscardReasons is one more than the largest reason.
	NumDiscardReasons
)

var discardNames = [NumDiscardReasons]string{
	DiscardOverlap:     "overlap",
	DiscardUnplaced:    "unplaced",
	DiscardRecordsLost: "records_lost",
	DiscardImplausible: "implausible",
	DiscardStalled:     "hook_stalled",
	DiscardUncertain:   "hook_uncertain",
	DiscardNoEvents:    "hook_no_events",
	DiscardStopped:     "hook_stopped",
	DiscardRunEndLost:  "run_end_lost",
}

// String is the reason's name ("overlap", "hook_uncertain", …).
func (r DiscardReason) String() string {
	if r > 0 && r < NumDiscardReasons {
		return discardNames[r]
	}
	return fmt.Sprintf("discard(%d)", uint8(r))
}

// DiscardReasons lists every reason in order.
func DiscardReasons() []DiscardReason {
	out := make([]DiscardReason, 0, NumDiscardReasons-1)
	for r := DiscardReason(1); r < NumDiscardReasons; r++ {
		out = append(out, r)
	}
	return out
}

// ParseDiscardReason is the reason named s.
func ParseDiscardReason(s string) (DiscardReason, bool) {
	for r := DiscardReason(1); r < NumDiscardReasons; r++ {
		if discardNames[r] == s {
			return r, true
		}
	}
	return 0, false
}

// Discards counts a profile's discarded runs by reason (index: the reason).
// Profiles written before reasons were kept have runs in DiscardedRuns that
// no reason counts (Unclassified).
type Discards [NumDiscardReasons]uint32

// Total is the runs the reasons count.
func (d *Discards) Total() uint32 {
	var n uint32
	for _, c := range d[1:] {
		n += c
	}
	return n
}

// Map is the counts by name, without the zero ones.
func (d *Discards) Map() map[string]uint32 {
	m := map[string]uint32{}
	for r := DiscardReason(1); r < NumDiscardReasons; r++ {
		if d[r] > 0 {
			m[r.String()] = d[r]
		}
	}
	return m
}

// Unclassified is the discarded runs no reason counts (a profile from
// before reasons were kept).
func (p *Profile) Unclassified() uint32 {
	if t := p.Discards.Total(); t < p.DiscardedRuns {
		return p.DiscardedRuns - t
	}
	return 0
}

// VersionInfo is one completed version of a profile: the profile of a task
// key is built again when the service drifts from it (docs/scheduler.md
// "Drift"), and each version says when and why it came.
type VersionInfo struct {
	Version uint32
	// UnixNs is the wall-clock time the version was completed (set by the
	// daemon when it stores it; 0: not known).
	UnixNs    int64
	Reason    string
	Runs      uint32
	Discarded uint32
	MeanRunNs float64
}

// MaxHistory bounds the versions a profile remembers (the oldest go first).
const MaxHistory = 32

// MaxReasonLen bounds a version's reason.
const MaxReasonLen = 256

// ReasonNew is the reason of a task's first profile.
const ReasonNew = "new service"

// addHistory appends the completed current version to the history.
func (p *Profile) addHistory() {
	p.History = append(p.History, VersionInfo{
		Version: p.Version, Reason: p.Reason, Runs: p.Runs, Discarded: p.DiscardedRuns, MeanRunNs: p.RunTime.Mean,
	})
	if n := len(p.History); n > MaxHistory {
		p.History = append(p.History[:0], p.History[n-MaxHistory:]...)
	}
}

// StampHistory sets the time of every version whose time is unknown to
// unixNs (the daemon, when it stores a profile) and reports whether it
// changed any.
func (p *Profile) StampHistory(unixNs int64) bool {
	changed := false
	for i := range p.History {
		if p.History[i].UnixNs == 0 {
			p.History[i].UnixNs = unixNs
			changed = true
		}
	}
	return changed
}

// validateVersions: the version is at least 1 and newer than every version
// of the history, which is in increasing order; reasons are short UTF-8;
// the reasons count no more runs than were discarded.
func validateVersions(p *Profile) error {
	if p.Version == 0 {
		return fmt.Errorf("profile version 0: %w", ErrInvalid)
	}
	if len(p.Reason) > MaxReasonLen || !utf8.ValidString(p.Reason) {
		return fmt.Errorf("version reason: %w", ErrInvalid)
	}
	if len(p.History) > MaxHistory {
		return fmt.Errorf("%d versions in the history: %w", len(p.History), ErrInvalid)
	}
	for i, h := range p.History {
		if h.Version == 0 || h.Version > p.Version || (i > 0 && h.Version <= p.History[i-1].Version) {
			return fmt.Errorf("history entry %d: version %d (profile version %d): %w", i, h.Version, p.Version, ErrInvalid)
		}
		if len(h.Reason) > MaxReasonLen || !utf8.ValidString(h.Reason) || !finiteNonNeg(h.MeanRunNs) || h.UnixNs < 0 {
			return fmt.Errorf("history entry %d: %w", i, ErrInvalid)
		}
	}
	if p.Discards[0] != 0 || p.Discards.Total() > p.DiscardedRuns {
		return fmt.Errorf("%d discards by reason of %d discarded runs: %w", p.Discards.Total(), p.DiscardedRuns, ErrInvalid)
	}
	return nil
}
