package daemon

import (
	"net/netip"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// Sending, the daemon's last stage (intake.go): what the core decided goes
// out once per batch, and replies that need no decision (an error, the same
// ack again) join the same batch.

// sendReady takes what the core decided (Ready) to the hooks — datagrams
// queued for the batch's sendmmsg, answers on the board — hands completed
// profiles to the persister, forgets the tasks the core dropped, and re-arms
// the read deadline. Called with mu held, once per batch.
func (s *Server) sendReady() {
	s.noteRoster()
	r := s.core.Ready()
	if s.debug {
		s.logDecisions(&r)
	}
	if s.rec != nil {
		s.rec.ready(&r, s.now())
	}
	s.noteVerdicts(r.Runs)
	s.sampleUsage(s.now())
	for _, a := range r.Acks {
		ta := s.tasks[a.Task]
		if ta == nil {
			continue
		}
		ack := s.ack(ta, a.Task, a.Role, a.Phase, a.ProfileRuns, a.HeartbeatNs)
		ack.Sample = a.Sample
		s.send(ta.ctrl, ack)
	}
	for _, st := range r.States {
		if ta := s.tasks[st.Task]; ta != nil {
			s.send(ta.ctrl, &udp.State{TaskID: uint32(st.Task), Role: wireRole(st.Role), Phase: wirePhase(st.Phase), Credit: st.Credit,
				Gate: s.wireGate(ta, st.Gate), Sample: st.Sample})
		}
	}
	for _, g := range r.Grants {
		ta := s.tasks[g.Task]
		if ta == nil {
			continue
		}
		dst, ok := ta.reqs[g.Seq]
		if !ok {
			dst = ta.ctrl
		}
		delete(ta.reqs, g.Seq)
		gate := s.wireGate(ta, g.Gate)
		if ta.slot && s.board.Grant(ta.boardGPU, uint32(g.Task), g.Seq, g.Credit, gate.SeenNS, gate.ExpiresNS) {
			// The hook's thread waited in its slot: answered there, with a
			// futex wake instead of a datagram.
			s.met.boardAnswers.Inc()
			continue
		}
		s.send(dst, &udp.Grant{TaskID: uint32(g.Task), Seq: g.Seq, Credit: g.Credit, Gate: gate})
	}
	for _, h := range r.Holds {
		if ta := s.tasks[h.Task]; ta != nil {
			if dst, ok := ta.reqs[h.Seq]; ok {
				if ta.slot && s.board.Hold(ta.boardGPU, uint32(h.Task), h.Seq, s.now()) {
					s.met.boardAnswers.Inc()
					continue
				}
				s.send(dst, &udp.Hold{TaskID: uint32(h.Task), Seq: h.Seq})
			}
		}
	}
	stamp := time.Now().UnixNano()
	for _, p := range r.Profiles {
		// The versions completed now get the time they came (the core has
		// no wall clock).
		p.Profile.StampHistory(stamp)
		s.profileHit[p.Model+"\x00"+p.Key] = p.Profile
		s.pers.put(p) // it says "profile complete" once the write is synced
	}
	for _, d := range r.Drifts {
		s.log.Info("profile drift: profiling again without holding others", "task", d.Task, "key", d.Key, "kind", d.Kind,
			"version", d.Version, "why", d.Reason)
	}
	for _, c := range r.Calibrations {
		if ta := s.tasks[c.Task]; ta != nil {
			s.send(ta.ctrl, &udp.Calibrate{TaskID: uint32(c.Task), Seq: c.Seq, ProbeNS: uint32(c.ProbeNs)})
		}
	}
	for _, w := range r.Warmups {
		if ta := s.tasks[w.Task]; ta != nil {
			s.send(ta.ctrl, &udp.Warm{TaskID: uint32(w.Task), Seq: w.Seq, ProbeNS: uint32(w.ProbeNs)})
		}
	}
	for _, kt := range r.KernelTimes {
		s.sendKernelTimes(kt)
	}
	s.answerFlushes()
	s.closeAccounts(r.Accounts)
	for _, id := range r.Dropped {
		exited := s.exits.forget(id)
		if ta := s.tasks[id]; ta != nil {
			if exited {
				s.log.Info("task exited without goodbye", "task", id, "key", ta.key, "seen", "late")
			} else {
				s.log.Warn("task dropped: no heartbeat", "task", id, "key", ta.key, "watched", ta.watched)
			}
		}
		s.removeTask(id)
	}
	s.publishRegistered()
	s.publishHints()
	s.armDeadline(r.Deadline)
}

// publishRegistered writes on the board which priorities have tasks on each
// GPU: a hook whose priority is worse than one registered bounds its
// kernels in flight, so a better task that returns waits for little.
func (s *Server) publishRegistered() {
	if s.board == nil {
		return
	}
	var m [board.GPUs]uint64
	for _, ta := range s.tasks {
		if ta.boardGPU >= 0 {
			m[ta.boardGPU] |= 1 << ta.prio
		}
	}
	for i := range m {
		if m[i] != s.registered[i] {
			s.registered[i] = m[i]
			s.board.SetRegistered(i, m[i])
		}
	}
}

// logDecisions logs every decision at debug level (one line each: meant for
// following a scheduling problem, not for production volumes).
func (s *Server) logDecisions(r *scheduler.Ready) {
	at := s.now() // CLOCK_MONOTONIC, the clock of simgpu's timeline
	for _, g := range r.Grants {
		s.log.Debug("grant", "t_us", at/1000, "task", g.Task, "seq", g.Seq, "credit", g.Credit)
	}
	for _, st := range r.States {
		s.log.Debug("state", "t_us", at/1000, "task", st.Task, "role", st.Role.String(), "phase", st.Phase.String(), "credit", st.Credit)
	}
	for _, h := range r.Holds {
		s.log.Debug("hold", "t_us", at/1000, "task", h.Task, "seq", h.Seq)
	}
	for _, v := range r.Runs {
		s.log.Debug("profiling run", "task", v.Task, "run", v.Run, "outcome", v.Outcome, "reason", v.Reason, "kind", v.Kind,
			"runs", v.Runs)
	}
}

// armDeadline arms the deadline timer for the core's next deadline.
func (s *Server) armDeadline(d int64) {
	if d == s.deadline {
		return
	}
	s.deadline = d
	s.timer.set(d)
}

// send queues a reply for the batch's sendmmsg.
func (s *Server) send(dst netip.AddrPort, m udp.Message) {
	start := len(s.outBuf)
	b, err := udp.Append(s.outBuf, m)
	if err != nil {
		s.log.Error("encoding reply", "type", m.Type().String(), "err", err)
		return
	}
	if s.auth != nil && !dst.Addr().IsLoopback() {
		b = append(b[:start], s.auth.Seal(b[start:], udp.ToHook)...)
	}
	s.outBuf = b
	s.out = append(s.out, udp.Datagram{Payload: b[start:len(b):len(b)], Addr: dst})
	s.met.countSent(m.Type())
}

// sendBatch sends the queued replies.
func (s *Server) sendBatch() {
	s.mu.Lock()
	out := s.out
	s.mu.Unlock()
	for len(out) > 0 {
		n, err := s.conn.WriteBatch(out)
		if err != nil {
			// A hook that went away: skip its datagram, send the rest.
			s.log.Debug("send", "to", out[n].Addr.String(), "err", err)
			n++
		}
		out = out[n:]
	}
	s.mu.Lock()
	s.out = s.out[:0]
	s.outBuf = s.outBuf[:0]
	s.mu.Unlock()
}

// replyError answers a bad datagram, within the rate limit.
func (s *Server) replyError(dst netip.AddrPort, code udp.ErrorCode, task uint32, msg string) {
	if !dst.IsValid() || !s.errLimit.take(time.Now(), errBurst, errPerSec) {
		return
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	s.send(dst, &udp.Error{Code: code, TaskID: task, Message: msg})
}

// ack is a task's RegisterAck, naming the board where it may use it.
func (s *Server) ack(ta *taskAddr, id scheduler.TaskID, role scheduler.Role, phase scheduler.Phase, runs int, heartbeatNs int64) *udp.RegisterAck {
	a := &udp.RegisterAck{Seq: ta.regSeq, TaskID: uint32(id), Role: wireRole(role), Phase: wirePhase(phase),
		ProfileRuns: uint32(runs), HeartbeatMS: uint32(heartbeatNs / 1e6)}
	if s.board != nil && ta.boardGPU >= 0 {
		a.Board, a.BoardGen, a.BoardGPU = s.board.Path(), s.board.Generation(), uint8(ta.boardGPU)
	}
	a.Token = ta.token
	return a
}

// wireGate is a permission's gate as the hook reads it: expiry on the
// daemon's clock for a hook on this host, else as a time from receipt.
func (s *Server) wireGate(ta *taskAddr, g scheduler.Gate) udp.Gate {
	w := udp.Gate{SeenNS: uint64(max(0, g.Seen))}
	switch {
	case g.Expires <= 0:
	case ta.local:
		w.ExpiresNS = uint64(g.Expires)
	default:
		w.ExpiresNS = uint64(max(1, g.Expires-s.now()))
	}
	return w
}
