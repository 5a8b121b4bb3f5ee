package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// The daemon is three stages, each datagram going down them once: intake
// (this file) turns a datagram into the events it means for the core —
// authenticated, decoded, its sender's right to speak for the task checked,
// a registration admitted (admit.go); the loop (loop.go) steps the core
// with each and keeps the daemon's side of what the core took; sending
// (send.go) turns what the core decided into datagrams and board writes,
// once per batch. A datagram intake refuses is answered (within a rate
// limit) and goes no further.

// Error replies to bad datagrams are rate limited (a token bucket), so a
// misbehaving sender cannot make the daemon flood the network.
const (
	errBurst  = 20
	errPerSec = 20
)

// An event is what the loop steps: the core's event, the task it is about
// and where it came from — so a refusal is answered there without looking
// into the event — and what the daemon does beside the core once the core
// has taken it (then).
type event struct {
	core scheduler.Event
	task scheduler.TaskID // 0: about no task (a Tick)
	src  netip.AddrPort   // the zero value: the daemon's own (a tick, an exit)
	then after
	// seq is the Flush's (then afterFlush).
	seq uint32
	// adm is what admission decided of a registration (TaskRegistered).
	adm *admission
}

// after is what the daemon does beside the core with an event the core took.
type after uint8

const (
	afterNothing  after = iota
	afterGoodbye        // TaskLeft: its hook said goodbye
	afterReplaced       // TaskLeft: a new registration from its socket replaces it
	afterExited         // TaskLeft: its process was seen to end
	afterFlush          // Heartbeat: a Flush, answered once what came before is durable
	afterReack          // Heartbeat: a Register sent again; the same ack again
)

// intake turns datagram b from src into the events it stands for (none when
// it is refused or needs no step). The slice is reused by the next call.
// Called with mu held.
func (s *Server) intake(b []byte, src netip.AddrPort) []event {
	s.evs = s.evs[:0]
	m, ok := s.open(b, src)
	if !ok {
		return nil
	}
	s.met.countReceived(m.Type())
	now := s.now()
	var task scheduler.TaskID
	if tm, ok := m.(udp.TaskMessage); ok {
		task = scheduler.TaskID(tm.Task())
		if !s.maySpeak(tm, task, src, now) {
			return nil
		}
	}
	add := func(ev scheduler.Event) *event {
		s.evs = append(s.evs, event{core: ev, task: task, src: src})
		return &s.evs[len(s.evs)-1]
	}
	switch m := m.(type) {
	case *udp.Register:
		s.admit(m, src, now)
	case *udp.LaunchNotify:
		add(scheduler.LaunchNotified{Now: now, Task: task, Seq: m.Seq, Kernel: m.KernelID})
	case *udp.LaunchBatch:
		if s.debug && len(m.Launches) > 0 {
			s.log.Debug("launches", "t_us", now/1000, "task", m.TaskID, "seq", m.Seq, "n", len(m.Launches),
				"lag_us", (now-launchTime(int64(m.BaseNS)+int64(m.Launches[len(m.Launches)-1].OffsetNS), now))/1000)
		}
		ev := scheduler.LaunchesNotified{Now: now, Task: task, Seq: m.Seq, Kernels: s.kernels[:0], Times: s.times[:0]}
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
		add(ev)
	case *udp.LaunchRequest:
		if s.debug {
			s.log.Debug("request", "t_us", now/1000, "task", task, "seq", m.Seq)
		}
		if ta := s.tasks[task]; ta != nil && s.board != nil && ta.boardGPU >= 0 {
			// A better priority's launch may be on the board before its
			// report is here: the hook asks because it saw one. The clock
			// is read after the board: a holder launching every few µs
			// noted a launch after this datagram's handling began, and a
			// time after that now was dropped as untruthful, with it the
			// launch it stood for.
			lv := s.board.Levels(ta.boardGPU)
			seen := s.now()
			add(scheduler.BoardObserved{Now: seen, Task: task, Levels: board.Sane(lv, seen)})
		}
		add(scheduler.LaunchRequested{Now: now, Task: task, Seq: m.Seq, Kernel: m.KernelID})
	case *udp.Measurements:
		if s.debug {
			s.log.Debug("measurements", "task", m.TaskID, "run", m.Run, "records", len(m.Records))
		}
		recs := make([]profiler.Record, len(m.Records))
		for i, r := range m.Records {
			recs[i] = profiler.Record{KernelID: r.KernelID, DurationNs: r.DurationNS, GapNs: r.GapNS, Flags: uint8(r.Flags)}
		}
		add(scheduler.MeasurementsReceived{Now: now, Task: task, Run: m.Run, Records: recs})
	case *udp.KernelInfo:
		add(scheduler.KernelInfoReceived{Now: now, Task: task,
			Info: profiler.KernelInfo{ID: m.KernelID, Name: m.Name, Grid: m.Grid, Block: m.Block}})
	case *udp.RunEnd:
		if s.debug {
			s.log.Debug("run end", "t_us", now/1000, "task", m.TaskID, "run", m.Run, "kernels", m.Kernels, "run_us", m.RunNS/1000)
		}
		add(scheduler.RunEnded{Now: now, Task: task, Run: m.Run, Kernels: m.Kernels,
			RunNs: clampNs(m.RunNS), LastSeq: m.LastSeq, Unmeasured: uint8(m.Unmeasured)})
	case *udp.Flush:
		ev := add(scheduler.Heartbeat{Now: now, Task: task})
		ev.then, ev.seq = afterFlush, m.Seq
	case *udp.Heartbeat:
		add(scheduler.Heartbeat{Now: now, Task: task})
	case *udp.Calibration:
		add(scheduler.SwitchCalibrated{Now: now, Task: task, Seq: m.Seq,
			HostNs: clampNs(m.HostNS), DeviceNs: clampNs(m.DeviceNS),
			MPS: m.Flags&udp.CalibrationMPS != 0, Failed: m.Flags&udp.CalibrationFailed != 0})
	case *udp.Goodbye:
		add(scheduler.TaskLeft{Now: now, Task: task}).then = afterGoodbye
	default:
		s.replyError(src, udp.CodeInvalidValue, 0, "daemon-to-hook message sent to the daemon: "+m.Type().String())
	}
	return s.evs
}

// open authenticates and decodes datagram b; a datagram it refuses is
// counted, logged and, where that is safe, answered.
func (s *Server) open(b []byte, src netip.AddrPort) (udp.Message, bool) {
	if s.auth != nil && !src.Addr().IsLoopback() {
		// With a key, a datagram from another host is believed only with
		// its MAC; one without gets no answer (an answer would tell a
		// forger the port is there, and amplify a spoofed source).
		msg, err := s.auth.Open(b, udp.ToDaemon)
		if err != nil {
			s.met.unauthenticated.Inc()
			s.srcLog.logAt(src, slog.LevelWarn, "datagram dropped: not signed with the daemon's key (--auth-key-file)", "bytes", len(b), "err", err)
			return nil, false
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
		return nil, false
	}
	return m, true
}

// maySpeak reports whether tm, from src, may speak for its task: it carries
// the task's registration token, if the task has one, and comes from a
// socket of the task's process (identity.go). A message about a task the
// daemon does not know passes: the core answers it (register again).
func (s *Server) maySpeak(tm udp.TaskMessage, id scheduler.TaskID, src netip.AddrPort, now int64) bool {
	ta := s.tasks[id]
	switch {
	case ta == nil:
		return true
	case ta.token != 0 && tm.AuthToken() != ta.token:
		s.met.forged.Inc()
		s.srcLog.logAt(src, slog.LevelWarn, "message dropped: not the task's registration token",
			"type", tm.Type().String(), "task", tm.Task(), "key", ta.key)
		// A hook of a previous daemon whose task ID another task has now
		// (its token is another registration's) must register again, or
		// it goes on unscheduled; rate limited. A message with no token at
		// all gets no answer.
		if tm.AuthToken() != 0 {
			s.replyError(src, udp.CodeUnknownTask, tm.Task(), "not this task's registration: register again")
		}
		return false
	case !s.speaksFor(ta, src, now):
		s.met.forged.Inc()
		s.srcLog.logAt(src, slog.LevelWarn, "message dropped: its socket is not the task's process's",
			"type", tm.Type().String(), "task", tm.Task(), "key", ta.key, "pid", ta.pid)
		return false
	}
	return true
}

// clampNs is a wire duration in ns as the core's int64, clamped far below
// overflow.
func clampNs(ns uint64) int64 { return int64(min(ns, uint64(1)<<62)) }

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
