package sim

import (
	"time"

	"github.com/fikit/fikit/hookclient/bound"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// This file models what a hook decides on its own, with the daemon's board
// shared (Options.Board; docs/design.md "Board", hookclient/README.md "The
// core"): the gate of a permission (a better priority's launch after what
// the daemon knew stops credit, and makes a lower holder ask), the bound on
// the work a task keeps in flight (a device-time cursor over its kernels'
// predicted durations with hook-bound, else FIKIT_INFLIGHT kernels of a
// holder), and resuming on the board when the better priorities' runs end
// (board-resume). The board itself is shared memory: what a service writes
// there, every other sees at once.

// boardState is the board's part the hooks write: per priority, the latest
// launch (or launch request) and the latest run end; and the GPU's hint,
// which the daemon writes (scheduler.BoardHints).
type boardState struct {
	level  [10]int64
	runEnd [10]int64
	hint   scheduler.BoardHint
	// lpCursor is the predicted end of the bounded tasks' work on the
	// device, all of them together (the µs bound's cursor).
	lpCursor int64
}

// hookState is a service's hook beyond its role and credit.
type hookState struct {
	gateSeen, gateExpires int64
	// asks: a lower holder whose gate closed asks for each launch until
	// the daemon says again (a State).
	asks bool
	// The kernel durations and bound the daemon sent (nil: none yet).
	kt               map[uint64]int64
	ktBound, ktDef   int64
	cursor           int64    // predicted end of its own work on the device (µs bound)
	last             int64    // its latest launch
	inflight         []uint64 // device seqs under the count bound
	reasks           int
	resumed, granted int
	// warm-ups launched (pre-switch), and skipped inside a run
	warmups, warmSkipped int
}

// countBound is FIKIT_INFLIGHT's default: a holder's kernels in flight
// while the daemon sent no µs bound.
const countBound = 2

// resumeWake is how long a thread waiting for the board takes to wake
// after a better priority's run ends there (a futex wake).
const resumeWake = 10_000

// above is the latest launch of a priority better than st's on the board.
func (s *sim) above(st *svcState) int64 {
	var m int64
	for _, at := range s.board.level[:st.spec.Priority] {
		m = max(m, at)
	}
	return m
}

// betterRegistered: a task of a better priority than st's shares the GPU.
func (s *sim) betterRegistered(st *svcState) bool {
	for _, o := range s.svcs {
		if o.spec.Priority < st.spec.Priority {
			return true
		}
	}
	return false
}

// gateStale: st's permission was given before a better priority launched,
// or has expired.
func (s *sim) gateStale(st *svcState) bool {
	if st.h.gateExpires > 0 && s.now > st.h.gateExpires {
		return true
	}
	return s.opts.Board && s.above(st) > st.h.gateSeen
}

// dur is st's predicted duration of kernel id, as its hook knows it.
func (st *svcState) dur(id uint64) int64 {
	if d, ok := st.h.kt[id]; ok {
		return d
	}
	return st.h.ktDef
}

// usBound: st is under the µs bound (the daemon gave it one, and a better
// priority shares its GPU).
func (s *sim) usBound(st *svcState) bool {
	return s.opts.Board && st.h.kt != nil && st.h.ktBound > 0 && s.betterRegistered(st)
}

// boundAt is the earliest time st's next launch (kernel k) fits its bound
// (s.now: at once): hookclient/bound.h's fk_bound_until over the GPU's
// cursor (every bounded task's work) and st's own.
func (s *sim) boundAt(st *svcState, k Kernel, resume bool) int64 {
	if !s.opts.Board || !s.betterRegistered(st) {
		return s.now
	}
	if s.usBound(st) {
		h := s.board.hint
		better := false
		for p := range st.spec.Priority {
			better = better || s.inRun(uint8(p))
		}
		v := bound.View{GPU: s.board.lpCursor, Own: st.h.cursor, Next: hintNext(h), Late: h.NextLateNs,
			Slack: h.Slack, FillUntil: h.FillUntilNs, Budget: h.BoundNs, InRun: better}
		return bound.Until(v, s.now, st.dur(k.ID), st.h.ktBound)
	}
	if (st.role != scheduler.RoleHolder || st.h.asks) && !resume {
		return s.now
	}
	live := st.h.inflight[:0]
	for _, q := range st.h.inflight {
		if done, _, err := s.dev.Done(st.ctx, q); err == nil && !done {
			live = append(live, q)
		}
	}
	st.h.inflight = live
	if len(live) >= countBound {
		return s.dev.Forecast(st.ctx, live[0], s.now) + 1
	}
	return s.now
}

// resumeOK: st, a waiter without a grant, may launch k on the board's word
// (hookclient/bound.h's fk_resume_ok): its priority is the one the daemon
// lets resume, every better priority is between runs, and their predicted
// next run leaves a switch and k's time.
func (s *sim) resumeOK(st *svcState, k Kernel) bool {
	h := s.board.hint
	if !s.opts.Board || st.h.kt == nil {
		return false
	}
	better := false
	for p := range st.spec.Priority {
		better = better || s.inRun(uint8(p))
	}
	r := bound.Resume{On: h.Resume, TaskOK: st.id == h.ResumeTask, BetterInRun: better, Next: hintNext(h), SwitchNs: h.SwitchNs}
	return bound.ResumeOK(r, s.board.lpCursor, s.now, st.dur(k.ID))
}

// hintNext is the hint's next predicted run as the hook reads it.
func hintNext(h scheduler.BoardHint) int64 {
	if h.NextNs == scheduler.NoneExpected {
		return bound.NextNone
	}
	return h.NextNs
}

// inRun: the board shows priority p inside a run (a launch since its
// latest run end; a launch at the very time of a run end starts the next).
func (s *sim) inRun(p uint8) bool {
	return s.board.level[p] > 0 && s.board.level[p] >= s.board.runEnd[p]
}

// tookOff records that st's kernel (device seq q, predicted d) went: under
// the µs bound the cursors move on by its duration from when it can start
// — after the work in flight, or, where a better priority launched since
// st's last launch, after the switch to st's context; under the count
// bound it is one more in flight.
func (s *sim) tookOff(st *svcState, q uint64, d int64) {
	var switchIn int64
	if s.opts.Board && s.above(st) > st.h.last {
		switchIn = s.board.hint.SwitchNs
	}
	if s.usBound(st) {
		st.h.cursor = bound.CursorAfter(st.h.cursor, s.now, d, switchIn)
		s.board.lpCursor = bound.CursorAfter(s.board.lpCursor, s.now, d, switchIn)
	}
	st.h.last = s.now
	if st.h.ktBound == 0 {
		st.h.inflight = append(st.h.inflight, q)
	}
}

// calibrate answers a calibration request as the hook does: a probe kernel
// of its own on the device, and the switch it paid.
func (s *sim) calibrate(st *svcState, c scheduler.Calibration) {
	_, _ = s.dev.Enqueue(st.ctx, devmodel.Op{Type: devmodel.Kernel, Stream: 2, Duration: 2 * timeNs(c.ProbeNs)}, s.now)
	sw := int64(s.opts.Device.Switch)
	half := int64(s.opts.GrantRTT) / 2
	at := s.now + sw + 2*c.ProbeNs + half
	s.toCore(at, scheduler.SwitchCalibrated{Now: at, Task: st.id, Seq: c.Seq, HostNs: sw + c.ProbeNs, DeviceNs: c.ProbeNs}, 0)
}

func timeNs(ns int64) time.Duration { return time.Duration(ns) }
