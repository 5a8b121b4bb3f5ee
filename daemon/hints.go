package daemon

import (
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// This file is what the daemon tells hooks beside grants (docs/scheduler.md
// "Switches, bounds and arrivals"): their tasks' kernel durations and
// in-flight bound (KernelTimes), and each GPU's hint on the board — the
// better priorities' next predicted run, the switch, who may resume.

// sendKernelTimes sends a task's kernel durations to its hook, in as many
// datagrams as the table needs. Only hooks that share the board get them:
// the bound applies while the board shows a better priority registered,
// and a resume reads the board.
func (s *Server) sendKernelTimes(kt scheduler.KernelTimes) {
	ta := s.tasks[kt.Task]
	if ta == nil || ta.boardGPU < 0 {
		return
	}
	ks := make([]udp.KernelTime, len(kt.Kernels))
	for i, k := range kt.Kernels {
		ks[i] = udp.KernelTime{KernelID: k.ID, DurationNS: clampU32(k.Ns)}
	}
	bound, def := clampU32(kt.BoundNs), clampU32(kt.DefaultNs)
	for first := true; first || len(ks) > 0; first = false {
		start := len(s.outBuf)
		b, n, err := udp.PackKernelTimes(s.outBuf, uint32(kt.Task), bound, def, ks)
		if err != nil {
			s.log.Error("encoding kernel times", "task", kt.Task, "err", err)
			return
		}
		s.outBuf = b
		s.out = append(s.out, udp.Datagram{Payload: b[start:len(b):len(b)], Addr: ta.ctrl})
		s.met.countSent(udp.TypeKernelTimes)
		ks = ks[n:]
	}
}

func clampU32(ns int64) uint32 { return uint32(min(max(ns, 0), 1<<32-1)) }

// publishHints writes each GPU's hint on the board where it changed.
// Called with mu held.
func (s *Server) publishHints() {
	if s.board == nil {
		return
	}
	s.hints = s.core.BoardHints(s.hints[:0])
	for _, h := range s.hints {
		sec, ok := s.sectionOf(h.GPU)
		if !ok {
			continue
		}
		bh := boardHint(h)
		if s.hinted[sec] != bh {
			s.hinted[sec] = bh
			s.board.SetHint(sec, bh)
		}
	}
}

// boardHint is the core's hint as the board carries it: next and its
// window's end (never before it) where predicted, NoneExpected as the
// board's, 0 unknown.
func boardHint(h scheduler.BoardHint) board.Hint {
	bh := board.Hint{SwitchNs: uint64(max(h.SwitchNs, 0)), Resume: h.Resume, ResumeTask: uint32(h.ResumeTask),
		Slack: h.Slack, FillUntilNs: uint64(max(h.FillUntilNs, 0)), BoundNs: uint64(max(h.BoundNs, 0))}
	switch {
	case h.NextNs == scheduler.NoneExpected:
		bh.NextNs = board.NoneExpected
	case h.NextNs > 0:
		bh.NextNs, bh.NextLateNs = uint64(h.NextNs), uint64(max(h.NextLateNs, h.NextNs))
	}
	return bh
}

// sectionOf is the board section of the GPU with this UUID (hex), as its
// tasks registered it.
func (s *Server) sectionOf(gpu string) (int, bool) {
	for _, ta := range s.tasks {
		if ta.gpu == gpu && ta.boardGPU >= 0 {
			return ta.boardGPU, true
		}
	}
	return 0, false
}
