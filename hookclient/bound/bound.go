// Package bound is the hook's µs bound and board resume (hookclient/bound.h,
// docs/scheduler.md "The µs bound") called from Go through cgo: the
// simulator (bench/sim) decides as the hook does by running the hook's own
// code, so there is one copy of the logic and a change to it shows in
// `fikit sim` at once.
//
// cmd/go does not see bound.h change (it is outside this directory): after
// editing it, rebuild with -a or change this file, or tests run the old rule.
//
// Times are the hook's: CLOCK_MONOTONIC nanoseconds, never negative (a
// negative one is taken as 0). The board's "no better task expected"
// (FK_NEXT_NONE) is NextNone here.
package bound

/*
#cgo CFLAGS: -std=gnu11 -O2 -I${SRCDIR}/..
#include "bound.h"

static uint64_t next_none(void) { return FK_NEXT_NONE; }
*/
import "C"

import "math"

// LaunchLatencyNs is what a cursor allows for a launch to reach the device.
const LaunchLatencyNs = int64(C.FK_LAUNCH_LATENCY_NS)

// NextNone is View.Next and Resume.Next when no better priority is expected
// back (the board's FK_NEXT_NONE; scheduler.NoneExpected has the same value).
const NextNone = int64(math.MaxInt64)

// View is what the µs bound looks at: the GPU's cursor (all the bounded
// tasks' work), the task's own, and a better priority's next predicted run
// (0 unknown, NextNone none) and the latest it is expected; with Slack, the
// daemon's bound that follows the slack: FillUntil (0 none) and Budget,
// and whether a better priority is inside its run.
type View struct {
	GPU, Own, Next, Late int64
	Slack                bool
	FillUntil, Budget    int64
	InRun                bool
}

// Resume is what a resume looks at on the board.
type Resume struct {
	On          bool  // the board offers resuming, its daemon alive
	TaskOK      bool  // the board names this task to resume
	BetterInRun bool  // a better priority launched since its latest run end
	Next        int64 // as View.Next
	SwitchNs    int64 // the board's switch
}

// CursorAfter is the cursor after a launch of predicted duration dur at
// now, paying switchIn first (fk_cursor_after).
func CursorAfter(cursor, now, dur, switchIn int64) int64 {
	return int64(C.fk_cursor_after(u64(cursor), u64(now), u64(dur), u64(switchIn)))
}

// Until is when a launch of predicted duration dur may go under bound (at
// once when ≤ now; fk_bound_until).
func Until(v View, now, dur, bound int64) int64 {
	cv := C.fk_bound_view{gpu: u64(v.GPU), own: u64(v.Own), next: next(v.Next), late: u64(v.Late),
		slack: cbool(v.Slack), until: u64(v.FillUntil), budget: u64(v.Budget), in_run: cbool(v.InRun)}
	return int64(C.fk_bound_until(&cv, u64(now), u64(dur), u64(bound)))
}

// ResumeOK reports whether a waiter may launch a kernel of predicted
// duration dur without asking, on the board's word (fk_resume_ok).
func ResumeOK(r Resume, gpuCursor, now, dur int64) bool {
	cv := C.fk_resume_view{on: cbool(r.On), task_ok: cbool(r.TaskOK), better_in_run: cbool(r.BetterInRun),
		next: next(r.Next), sw: u64(r.SwitchNs)}
	return C.fk_resume_ok(&cv, u64(gpuCursor), u64(now), u64(dur)) != 0
}

func u64(ns int64) C.uint64_t { return C.uint64_t(max(ns, 0)) }

func next(ns int64) C.uint64_t {
	if ns == NextNone {
		return C.next_none()
	}
	return u64(ns)
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
