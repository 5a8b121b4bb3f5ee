package decisions

import (
	"errors"
	"fmt"
	"strconv"
)

// Kinds of record. Fields not listed for a kind are absent (zero).
const (
	// KindRegister: a task registered (or was already registered when the
	// recording started). Task, PID, Key, Priority, GPU, Role, Phase.
	KindRegister = "register"
	// KindLeave: a task said goodbye or its process ended. Task.
	KindLeave = "leave"
	// KindDrop: a task went silent and was dropped. Task.
	KindDrop = "drop"
	// KindState: a task was told a new role, phase or credit (a waiter's
	// credit 0 is a revocation). Task, Role, Phase, Credit.
	KindState = "state"
	// KindGrant: launch Seq of Task may go, and Credit launches after it.
	// Kernel is the kernel ID it asked for (absent for a credit renewal,
	// Reason "renew"). Reason "window" or "idle" says what it filled;
	// Deadline is then the end of the window it was granted into (the
	// holders' predicted return); a grant has no expiry of its own.
	KindGrant = "grant"
	// KindRequest: Task asks to launch Seq, Kernel (its hook waits for
	// the answer: a grant, or holds).
	KindRequest = "request"
	// KindHold: waiting launch Seq of Task is told to keep waiting.
	KindHold = "hold"
	// KindWindow: a fill window opened on GPU: the holders are predicted
	// idle from Start (their launched work ends) to End (their next launch).
	KindWindow = "window"
	// KindWindowEnd: that window (Start, End) closed at T. Reason
	// "early_stop": a holder launched before End (T is that launch);
	// "holder_launch": a holder launched at or after End; "expired": time
	// passed End with nothing launched; "closed": the holders changed;
	// "board": the board showed a holder's launch before its report came.
	KindWindowEnd = "window_end"
	// KindIdle: the holders of GPU count as idle from T: lower priorities
	// run within CapNs of predicted backlog. KindIdleEnd: they are back
	// (Reason "board": the board showed it before their reports came).
	KindIdle    = "idle"
	KindIdleEnd = "idle_end"
	// KindRun: Task's run Run ended (reported at T): Kernels launches,
	// RunNs long as the hook measured it, from Start (its first launch as
	// the daemon saw it; 0 if unknown) to End.
	KindRun = "run"
	// KindProfilingRun: what profiling did with run Run of Task (Reason:
	// committed, discarded, incomplete, implausible, empty, ignored; Why:
	// the discard reason, profiler.DiscardReason's name); Runs committed
	// so far.
	KindProfilingRun = "profiling_run"
	// KindDrift: Task drifted from its profile (Reason: the check,
	// kernels or timing; Why: how) and is profiled again as Version.
	KindDrift = "drift"
	// KindPrediction: Samples holder launches of Task were compared with
	// the predicted start of their kernels in one event: ErrNs is the sum
	// of (actual − predicted), AbsErrNs the sum of its absolute values.
	KindPrediction = "prediction"
	// KindLost: Count records were lost because the writer fell behind.
	KindLost = "lost"
)

// Record is one line of a decision record. Absent fields are zero.
type Record struct {
	// T is when the daemon decided or observed it (CLOCK_MONOTONIC ns).
	T    int64  `json:"t_ns"`
	Kind string `json:"kind"`
	// GPU is the device UUID (hex) for window and idle records, and the
	// task's device for register records.
	GPU      string   `json:"gpu,omitempty"`
	Task     uint32   `json:"task,omitempty"`
	PID      uint32   `json:"pid,omitempty"`
	Key      string   `json:"key,omitempty"`
	Priority uint8    `json:"priority,omitempty"`
	Role     string   `json:"role,omitempty"`
	Phase    string   `json:"phase,omitempty"`
	Seq      uint32   `json:"seq,omitempty"`
	Kernel   KernelID `json:"kernel,omitempty"`
	Credit   uint32   `json:"credit,omitempty"`
	Deadline int64    `json:"deadline_ns,omitempty"`
	Start    int64    `json:"start_ns,omitempty"`
	End      int64    `json:"end_ns,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	CapNs    int64    `json:"cap_ns,omitempty"`
	Run      uint32   `json:"run,omitempty"`
	Kernels  uint32   `json:"kernels,omitempty"`
	RunNs    int64    `json:"run_ns,omitempty"`
	Runs     int      `json:"runs,omitempty"`
	Samples  uint64   `json:"samples,omitempty"`
	ErrNs    int64    `json:"err_ns,omitempty"`
	AbsErrNs int64    `json:"abs_err_ns,omitempty"`
	Count    uint64   `json:"count,omitempty"`
	Why      string   `json:"why,omitempty"`
	Version  uint32   `json:"version,omitempty"`
}

// KernelID is a kernel ID (docs/design.md), written as 16 hex digits: as a
// JSON number it would lose precision in JavaScript-based trace viewers.
type KernelID uint64

// MarshalText writes 16 lowercase hex digits.
func (k KernelID) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%016x", uint64(k)), nil
}

// UnmarshalText reads up to 16 hex digits.
func (k *KernelID) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil || len(b) == 0 || len(b) > 16 {
		return fmt.Errorf("%w: kernel ID %q is not 1–16 hex digits", ErrFormat, b)
	}
	*k = KernelID(v)
	return nil
}

// ErrFormat is wrapped by every error about a malformed record.
var ErrFormat = errors.New("decisions: malformed record")
