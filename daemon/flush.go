package daemon

import (
	"net/netip"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
)

// A hook's fikit_flush() sends Flush after everything it measured: the
// answer, Flushed, says that all of it is durable — the task's runs decided
// (a run's verdict may wait for other tasks' runs, scheduler/profiling.go)
// and the profile versions they made written to the store. A daemon killed
// after it answered loses none of them (docs/operations.md).

// flushReq is a Flush waiting for its answer.
type flushReq struct {
	task scheduler.TaskID
	seq  uint32
	src  netip.AddrPort
	// target is the persister's version number to wait for, once the
	// task's runs are decided (ready).
	target uint64
	ready  bool
}

// maxFlushes bounds the Flush requests waiting (the oldest is dropped: its
// hook times out and reports the flush not done).
const maxFlushes = 1024

// flushRequested notes the Flush seq of a task the core knows (its
// Heartbeat was taken: an unknown task was told to register again, its
// earlier runs gone); it is answered when what came before it is durable
// (answerFlushes, after the batch).
func (s *Server) flushRequested(id scheduler.TaskID, seq uint32, src netip.AddrPort) {
	if len(s.flushes) == maxFlushes {
		s.flushes = s.flushes[1:]
	}
	s.flushes = append(s.flushes, flushReq{task: id, seq: seq, src: src})
}

// answerFlushes answers the flushes whose tasks' runs are decided and
// whose versions are durable. Called with mu held, after the batch's
// profile versions went to the persister (and whenever it writes one).
func (s *Server) answerFlushes() {
	if len(s.flushes) == 0 {
		return
	}
	enq, durable := s.pers.marks()
	kept := s.flushes[:0]
	for _, f := range s.flushes {
		if !f.ready && s.core.Undecided(f.task) == 0 {
			f.target, f.ready = enq, true
		}
		if f.ready && f.target <= durable {
			s.send(f.src, &udp.Flushed{TaskID: uint32(f.task), Seq: f.seq})
			continue
		}
		kept = append(kept, f)
	}
	s.flushes = kept
}
