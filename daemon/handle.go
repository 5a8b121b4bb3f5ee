package daemon

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// Error replies to bad datagrams are rate limited (a token bucket), so a
// misbehaving sender cannot make the daemon flood the network.
const (
	errBurst  = 20
	errPerSec = 20
)

// handle decodes one datagram and feeds it to the core. Called with mu held.
func (s *Server) handle(b []byte, src netip.AddrPort) {
	if s.auth != nil && !src.Addr().IsLoopback() {
		// With a key, a datagram from another host is believed only with
		// its MAC; one without gets no answer (an answer would tell a
		// forger the port is there, and amplify a spoofed source).
		msg, err := s.auth.Open(b, udp.ToDaemon)
		if err != nil {
			s.met.unauthenticated.Inc()
			s.srcLog.logAt(src, slog.LevelWarn, "datagram dropped: not signed with the daemon's key (--auth-key-file)", "bytes", len(b), "err", err)
			return
		}
		b = msg
	}
	m, err := udp.Decode(b)
	if err != nil {
		s.met.decodeErrors.Inc()
		s.log.Debug("bad datagram", "from", src.String(), "err", err)
		msg := err.Error()
		if s.auth == nil && errors.Is(err, udp.ErrTrailing) && udp.HasTrailer(b) {
			msg = "the datagram carries a MAC, but this daemon has no key: start it with --auth-key-file"
		}
		s.replyError(src, udp.ErrorCodeOf(err), 0, msg)
		return
	}
	s.met.countReceived(m.Type())
	now := s.now()
	if tm, ok := m.(udp.TaskMessage); ok {
		if ta := s.tasks[scheduler.TaskID(tm.Task())]; ta != nil {
			switch {
			case ta.token != 0 && tm.AuthToken() != ta.token:
				s.met.forged.Inc()
				s.srcLog.logAt(src, slog.LevelWarn, "message dropped: not the task's registration token",
					"type", m.Type().String(), "task", tm.Task(), "key", ta.key)
				// A hook of a previous daemon whose task ID another task
				// has now (its token is another registration's) must
				// register again, or it goes on unscheduled; rate limited.
				// A message with no token at all gets no answer.
				if tm.AuthToken() != 0 {
					s.replyError(src, udp.CodeUnknownTask, tm.Task(), "not this task's registration: register again")
				}
				return
			case !s.speaksFor(ta, src, now):
				s.met.forged.Inc()
				s.srcLog.logAt(src, slog.LevelWarn, "message dropped: its socket is not the task's process's",
					"type", m.Type().String(), "task", tm.Task(), "key", ta.key, "pid", ta.pid)
				return
			}
		}
	}
	switch m := m.(type) {
	case *udp.Register:
		s.register(m, src, now)
	case *udp.LaunchNotify:
		s.step(scheduler.LaunchNotified{Now: now, Task: scheduler.TaskID(m.TaskID), Seq: m.Seq, Kernel: m.KernelID}, src)
	case *udp.LaunchBatch:
		if s.debug && len(m.Launches) > 0 {
			s.log.Debug("launches", "t_us", now/1000, "task", m.TaskID, "seq", m.Seq, "n", len(m.Launches),
				"lag_us", (now-launchTime(int64(m.BaseNS)+int64(m.Launches[len(m.Launches)-1].OffsetNS), now))/1000)
		}
		ev := scheduler.LaunchesNotified{Now: now, Task: scheduler.TaskID(m.TaskID), Seq: m.Seq,
			Kernels: s.kernels[:0], Times: s.times[:0]}
		local := src.Addr().IsLoopback()
		for _, l := range m.Launches {
			at := now
			if local {
				at = launchTime(int64(m.BaseNS)+int64(l.OffsetNS), now)
			}
			ev.Kernels = append(ev.Kernels, l.KernelID)
			ev.Times = append(ev.Times, at)
		}
		s.kernels, s.times = ev.Kernels, ev.Times // reused: the core keeps neither
		s.step(ev, src)
	case *udp.LaunchRequest:
		id := scheduler.TaskID(m.TaskID)
		if s.debug {
			s.log.Debug("request", "t_us", now/1000, "task", id, "seq", m.Seq)
		}
		ta := s.tasks[id]
		if ta != nil {
			ta.reqs[m.Seq] = src
			if s.board != nil && ta.boardGPU >= 0 {
				// A better priority's launch may be on the board before
				// its report is here: the hook asks because it saw one.
				// The clock is read after the board: a holder launching
				// every few µs noted a launch after this datagram's
				// handling began, and a time after that now was dropped
				// as untruthful, with it the launch it stood for.
				lv := s.board.Levels(ta.boardGPU)
				seen := s.now()
				s.step(scheduler.BoardObserved{Now: seen, Task: id, Levels: board.Sane(lv, seen)}, src)
			}
		}
		if !s.step(scheduler.LaunchRequested{Now: now, Task: id, Seq: m.Seq, Kernel: m.KernelID}, src) && ta != nil {
			delete(ta.reqs, m.Seq)
		}
	case *udp.Measurements:
		if s.debug {
			s.log.Debug("measurements", "task", m.TaskID, "run", m.Run, "records", len(m.Records))
		}
		recs := make([]profiler.Record, len(m.Records))
		for i, r := range m.Records {
			recs[i] = profiler.Record{KernelID: r.KernelID, DurationNs: r.DurationNS, GapNs: r.GapNS, Flags: uint8(r.Flags)}
		}
		s.step(scheduler.MeasurementsReceived{Now: now, Task: scheduler.TaskID(m.TaskID), Run: m.Run, Records: recs}, src)
	case *udp.KernelInfo:
		s.step(scheduler.KernelInfoReceived{Now: now, Task: scheduler.TaskID(m.TaskID),
			Info: profiler.KernelInfo{ID: m.KernelID, Name: m.Name, Grid: m.Grid, Block: m.Block}}, src)
	case *udp.RunEnd:
		if s.debug {
			s.log.Debug("run end", "t_us", now/1000, "task", m.TaskID, "run", m.Run, "kernels", m.Kernels, "run_us", m.RunNS/1000)
		}
		if s.step(scheduler.RunEnded{Now: now, Task: scheduler.TaskID(m.TaskID), Run: m.Run, Kernels: m.Kernels,
			RunNs: int64(min(m.RunNS, uint64(1)<<62)), LastSeq: m.LastSeq, Unmeasured: uint8(m.Unmeasured)}, src) {
			if ta := s.tasks[scheduler.TaskID(m.TaskID)]; ta != nil {
				ta.act.runEnded(now, int64(min(m.RunNS, uint64(1)<<62)))
			}
		}
	case *udp.Flush:
		s.flushRequested(m, src, now)
	case *udp.Heartbeat:
		s.step(scheduler.Heartbeat{Now: now, Task: scheduler.TaskID(m.TaskID)}, src)
	case *udp.Calibration:
		s.step(scheduler.SwitchCalibrated{Now: now, Task: scheduler.TaskID(m.TaskID), Seq: m.Seq,
			HostNs: int64(min(m.HostNS, uint64(1)<<62)), DeviceNs: int64(min(m.DeviceNS, uint64(1)<<62)),
			MPS: m.Flags&udp.CalibrationMPS != 0, Failed: m.Flags&udp.CalibrationFailed != 0}, src)
	case *udp.Goodbye:
		id := scheduler.TaskID(m.TaskID)
		if s.step(scheduler.TaskLeft{Now: now, Task: id}, src) {
			if ta := s.tasks[id]; ta != nil {
				s.log.Info("task left", "task", id, "key", ta.key)
			}
			s.removeTask(id)
			s.exits.forget(id)
		}
	default:
		s.replyError(src, udp.CodeInvalidValue, 0, "daemon-to-hook message sent to the daemon: "+m.Type().String())
	}
}

// maxLaunchAge bounds how far back a hook's launch time is believed: a
// stamp older than that (a stalled sender) or from the future (another clock)
// is replaced by the arrival time.
const maxLaunchAge = int64(50 * time.Millisecond)

// launchTime is when a launch stamped t on the hook's CLOCK_MONOTONIC
// happened on the daemon's clock (the same clock: a hook on this machine).
func launchTime(t, now int64) int64 {
	if t > now || now-t > maxLaunchAge {
		return now
	}
	return t
}

// step feeds an event; an unknown task is told to register again. It
// reports whether the core accepted the event.
func (s *Server) step(ev scheduler.Event, src netip.AddrPort) bool {
	err := s.core.Step(ev)
	if err == nil {
		if s.rec != nil {
			s.rec.stepped(ev, s.core)
		}
		return true
	}
	if errors.Is(err, scheduler.ErrUnknownTask) {
		var id uint32
		switch e := ev.(type) {
		case scheduler.LaunchNotified:
			id = uint32(e.Task)
		case scheduler.LaunchRequested:
			id = uint32(e.Task)
		case scheduler.LaunchesNotified:
			id = uint32(e.Task)
		case scheduler.RunEnded:
			id = uint32(e.Task)
		case scheduler.Heartbeat:
			id = uint32(e.Task)
		case scheduler.MeasurementsReceived:
			id = uint32(e.Task)
		case scheduler.KernelInfoReceived:
			id = uint32(e.Task)
		case scheduler.SwitchCalibrated:
			id = uint32(e.Task)
		case scheduler.TaskLeft, scheduler.TaskWatched:
			return false // already gone: nothing to say
		}
		s.replyError(src, udp.CodeUnknownTask, id, "unknown task: register again")
		return false
	}
	if e, ok := ev.(scheduler.LaunchRequested); ok && errors.Is(err, scheduler.ErrOverloaded) {
		// The hook's thread stops waiting for a grant that will not come.
		s.replyError(src, udp.CodeOverloaded, uint32(e.Task), err.Error())
	}
	s.srcLog.logAt(src, slog.LevelWarn, "event rejected", "event", ev, "err", err)
	return false
}

func (s *Server) register(m *udp.Register, src netip.AddrPort, now int64) {
	if m.Priority > 9 {
		s.replyError(src, udp.CodeInvalidValue, 0, "priority must be 0–9")
		return
	}
	// Hooks cut longer keys to MaxTaskKeyLen bytes (docs/design.md); an
	// empty or longer one comes from something else.
	if m.TaskKey == "" || len(m.TaskKey) > kernelid.MaxTaskKeyLen {
		s.replyError(src, udp.CodeInvalidValue, 0,
			fmt.Sprintf("task key of %d bytes: want 1–%d", len(m.TaskKey), kernelid.MaxTaskKeyLen))
		return
	}
	model := m.DeviceName
	if model == "" {
		model = "unknown-gpu"
	}
	gpu := hex.EncodeToString(m.DeviceUUID[:])
	if s.reacknowledge(src, gpu, m.Seq, now) {
		return
	}
	uid, known := peerUID(src, s.Addr())
	prio, weight, demoted := s.authorize(m, src, uid, known)
	key := s.profileKey(m.TaskKey, uid, known)
	prof := s.lookupProfile(model, key, src)
	s.replaceOlder(src, gpu, now)
	id := scheduler.TaskID(s.nextID)
	s.nextID++
	if s.nextID == 0 {
		s.nextID = 1
	}
	local := watchable(m.PID, src)
	// A demoted hook would note its launches on the board at the level it
	// claimed, so it is not given the board: it is gated by UDP alone.
	section := -1
	if prio == m.Priority {
		section = s.boardSection(src, m.DeviceUUID)
	}
	s.tasks[id] = &taskAddr{ctrl: src, gpu: gpu, model: model, key: key, reqs: map[uint32]netip.AddrPort{}, regSeq: m.Seq,
		watched: local, pid: m.PID, local: src.Addr().IsLoopback(), boardGPU: section, prio: prio,
		token: newToken(m.HookFlags), act: activity{sinceNs: now}}
	if !s.step(scheduler.TaskRegistered{Now: now, Task: id, Key: key, PID: m.PID, Priority: prio, Weight: weight,
		Owner: tenantOf(uid, known), GPU: gpu, Model: model, Profile: prof, Local: local}, src) {
		delete(s.tasks, id)
		s.replyError(src, udp.CodeInvalidValue, 0, "registration rejected")
		return
	}
	if demoted != "" {
		s.replyError(src, udp.CodeInvalidValue, uint32(id), demoted)
	}
	if section >= 0 {
		s.tasks[id].slot = s.board.Claim(uint32(id))
	}
	phase := "profiling"
	if prof != nil && prof.Phase == profiler.PhaseSharing {
		phase = "sharing"
	}
	s.srcLog.logAt(src, slog.LevelInfo, "task registered", "task", id, "key", key, "pid", m.PID, "priority", prio,
		"weight", weight, "gpu", model, "phase", phase)
	s.exits.watch(id, m.PID, src)
}

// removeTask forgets a task the core dropped, freeing its board slot.
func (s *Server) removeTask(id scheduler.TaskID) {
	if ta := s.tasks[id]; ta != nil && ta.slot {
		s.board.Release(uint32(id))
	}
	delete(s.tasks, id)
}

// reacknowledge answers a Register that is a copy of the one a task
// registered with (same socket, GPU and seq): the hook sent it again because
// the answer was late (a daemon waiting for a CPU). It gets the same ack
// again, and no second registration. It reports whether there was such a
// task. The copy is a sign of life, as a heartbeat.
func (s *Server) reacknowledge(src netip.AddrPort, gpu string, seq uint32, now int64) bool {
	for id, ta := range s.tasks {
		if ta.ctrl != src || ta.gpu != gpu || ta.regSeq != seq {
			continue
		}
		cfg := s.core.Config()
		for _, ti := range s.core.Tasks() {
			if ti.ID == id {
				s.send(src, s.ack(ta, id, ti.Role, ti.Phase, cfg.ProfileRuns, cfg.HeartbeatInterval))
				s.log.Debug("register again: same ack", "task", id, "seq", seq)
				s.step(scheduler.Heartbeat{Now: now, Task: id}, src)
				return true
			}
		}
	}
	return false
}

// replaceOlder removes the tasks registered earlier from the same socket on
// the same GPU: a hook registers a device once, so a second Register from
// it is a re-registration (the daemon restarted, or dropped it, or it
// failed open) and the older task is that process's stale self. Left in
// place, it would hold a role (a holder that never launches again) until
// its heartbeats were missed, and a burst of re-registrations would leave
// several.
func (s *Server) replaceOlder(src netip.AddrPort, gpu string, now int64) {
	for id, ta := range s.tasks {
		if ta.ctrl != src || ta.gpu != gpu {
			continue
		}
		if s.step(scheduler.TaskLeft{Now: now, Task: id}, src) {
			s.srcLog.logAt(src, slog.LevelInfo, "task re-registered: the new registration replaces it", "task", id, "key", ta.key)
		}
		s.removeTask(id)
		s.exits.forget(id)
	}
}

// lookupProfile finds a task's stored profile (cached: a Badger read per
// registration is cheap, but a restarting service re-registers often).
func (s *Server) lookupProfile(model, key string, src netip.AddrPort) *profiler.Profile {
	ck := model + "\x00" + key
	if p, ok := s.profileHit[ck]; ok {
		return p
	}
	p, err := s.cfg.Store.Get(model, key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.srcLog.logAt(src, slog.LevelError, "reading profile", "key", key, "gpu", model, "err", err)
		}
		return nil
	}
	s.profileHit[ck] = p
	return p
}

// flush sends what the core decided and re-arms the read deadline. Called
// with mu held.
func (s *Server) flush() {
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

// newToken is a registration's secret for a hook that sends it back on
// every message (random, never 0), else 0.
func newToken(hookFlags uint32) uint64 {
	if hookFlags&udp.HookSendsToken == 0 {
		return 0
	}
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if t := binary.LittleEndian.Uint64(b[:]); t != 0 {
			return t
		}
	}
}

// boardSection is the board section of a task registering from src for
// the GPU uuid: only hooks on this host share the board (-1: none).
func (s *Server) boardSection(src netip.AddrPort, uuid [16]byte) int {
	if s.board == nil || !src.Addr().IsLoopback() {
		return -1
	}
	i, err := s.board.GPU(uuid)
	if err != nil {
		s.srcLog.logAt(src, slog.LevelWarn, "no board section for this GPU: its tasks are gated by UDP only", "err", err)
		return -1
	}
	return i
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

// authorize applies the priority policy to a Register: the priority and
// weight the task gets, and, when either is less than it claimed, what to
// tell its hook.
func (s *Server) authorize(m *udp.Register, src netip.AddrPort, uid uint32, known bool) (uint8, uint32, string) {
	best, rule := s.policy.Allowed(uid, known, m.TaskKey)
	prio, weight := max(m.Priority, best), min(max(m.Weight, udp.DefaultWeight), rule.maxWeight())
	if prio == m.Priority && weight == max(m.Weight, udp.DefaultWeight) {
		return prio, weight, ""
	}
	who := "a hook whose user the daemon cannot see"
	if known {
		who = fmt.Sprintf("uid %d", uid)
	}
	var msg string
	if prio != m.Priority {
		msg = fmt.Sprintf("priority %d is not allowed for %s (policy: %s); registered at %d", m.Priority, who, rule.Spell, best)
		s.met.demoted.Inc()
		s.srcLog.logAt(src, slog.LevelWarn, "priority claim above the policy's: registered lower", "key", m.TaskKey,
			"claimed", m.Priority, "priority", best, "uid", uid, "uid_known", known, "rule", rule.Spell)
	}
	if weight != max(m.Weight, udp.DefaultWeight) {
		if msg != "" {
			msg += "; "
		}
		msg += fmt.Sprintf("weight %d is not allowed for %s (policy: %s); registered with %d", m.Weight, who, rule.Spell, weight)
		s.met.weightDemoted.Inc()
		s.srcLog.logAt(src, slog.LevelWarn, "weight claim above the policy's: registered lower", "key", m.TaskKey,
			"claimed", m.Weight, "weight", weight, "uid", uid, "uid_known", known, "rule", rule.Spell)
	}
	return prio, weight, msg
}

// tenantOf is whom a task's GPU time is accounted to: the user that owns
// its registering socket (uid:N), or "remote" for a hook whose user the
// daemon cannot see (another host or network namespace).
func tenantOf(uid uint32, known bool) string {
	if !known {
		return "remote"
	}
	return fmt.Sprintf("uid:%d", uid)
}

// profileKey is the key a task's profile is kept under: its task key for
// the daemon's own user, root, and hooks whose user the daemon cannot see
// (remote: trusted as --insecure says), else prefixed with its uid — so a
// process of another user that registers with a service's task key profiles
// under a key of its own and cannot poison the service's profile
// (docs/security.md).
func (s *Server) profileKey(key string, uid uint32, known bool) string {
	if !known || uid == 0 || uid == s.uid {
		return key
	}
	return fmt.Sprintf("uid%d:%s", uid, key)
}
