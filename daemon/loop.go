package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
)

// The loop: it reads datagrams in batches, takes each through intake
// (intake.go) and steps the core with what intake made of it (step, the one
// place the core is stepped), then, once per batch, sends what the core
// decided (send.go). The clock (the core's deadline) and the exit watch
// bring their events to the same step.

// maxDrainBatches bounds how many batches drainQueue reads before a tick.
const maxDrainBatches = 16

// loop reads datagrams in batches. Each datagram is handled under the lock
// (the admin socket reads status concurrently); the decisions of a batch are
// sent together with one sendmmsg.
func (s *Server) loop(ctx context.Context) error {
	handle := func(p []byte, from netip.AddrPort) {
		s.mu.Lock()
		if s.deadline != 0 && s.now() >= s.deadline {
			// A steady stream of datagrams never lets the read time out:
			// time-driven decisions must not wait for a quiet moment.
			s.tick()
			s.deadline = 0
		}
		s.handle(p, from)
		s.mu.Unlock()
	}
	for {
		// Before every read, not only after one: the shutdown wakes the
		// loop with a read deadline in the past, which the deadline case
		// below clears if the timer's wake-up came first; the read after
		// it would then wait for a datagram that may never come.
		if ctx.Err() != nil {
			return nil
		}
		// heard (see scheduler.Tick): a read that found the queue empty
		// after its batch has read everything that arrived before it began.
		began := s.now()
		n, err := s.conn.Read(handle)
		if ctx.Err() != nil {
			return nil
		}
		s.drainUnix(handle)
		if err == nil && s.conn.Drained(n) {
			s.mu.Lock()
			s.heard = began
			s.mu.Unlock()
		}
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				if s.onDeadlineRead != nil {
					s.onDeadlineRead()
				}
				// The deadline timer fired: clear the expired deadline
				// first, so a timer firing meanwhile is seen by this tick.
				_ = s.conn.SetReadDeadline(time.Time{})
				// A unix reader's wake-up since the read was cleared with
				// the deadline: what it queued is taken now.
				s.drainUnix(handle)
				// A read past its deadline reads nothing: what is queued
				// (a stalled daemon's backlog) is read before time is
				// judged.
				s.drainQueue(handle)
				s.mu.Lock()
				s.tick()
				s.mu.Unlock()
			case errors.Is(err, net.ErrClosed):
				return fmt.Errorf("socket closed: %w", err)
			default:
				// ICMP errors from a vanished hook surface here: not fatal.
				s.log.Debug("read", "err", err)
			}
		}
		if s.beforeReap != nil {
			s.beforeReap()
		}
		// A hook says Goodbye before its process ends: what is queued now
		// is read before an exit is judged, or a busy daemon takes every
		// normal end for one without Goodbye.
		if s.exits.pending() {
			s.drainQueue(handle)
		}
		s.mu.Lock()
		s.reapExited()
		s.raiseLearned()
		s.sendReady()
		s.mu.Unlock()
		s.sendBatch()
	}
}

// handle takes one datagram through intake and steps the core with what it
// stands for. Called with mu held.
func (s *Server) handle(b []byte, src netip.AddrPort) {
	for _, ev := range s.intake(b, src) {
		s.step(ev)
	}
}

// tick tells the core the time: its deadline passed. Called with mu held.
func (s *Server) tick() {
	s.step(event{core: scheduler.Tick{Now: s.now(), Heard: s.heard}})
}

// drainQueue reads the datagrams queued now, and records that the daemon
// has heard everything up to when it found the queue empty. Under a flood
// that never lets the queue empty it gives up after maxDrainBatches: the
// time-driven decisions go ahead, and no task's silence is judged by a
// backlog the daemon has not read.
func (s *Server) drainQueue(handle func([]byte, netip.AddrPort)) {
	for range maxDrainBatches {
		began := s.now()
		_, drained, err := s.conn.ReadQueued(handle)
		if err != nil {
			return
		}
		if drained {
			s.mu.Lock()
			s.heard = began
			s.mu.Unlock()
			return
		}
	}
}

// reapExited removes the tasks whose processes ended, and tells the core
// which ones are watched. Called with mu held.
func (s *Server) reapExited() {
	for _, w := range s.exits.takeStarted() {
		ta := s.tasks[w.id]
		if ta == nil {
			continue
		}
		ta.watched = w.err == nil
		ta.proven = w.err == nil
		if w.err != nil {
			s.log.Info("task not watched: its exit is seen by its missing heartbeats only", "task", w.id, "key", ta.key, "err", w.err)
		}
		s.step(event{core: scheduler.TaskWatched{Now: s.now(), Task: w.id, Watched: ta.watched}, task: w.id})
	}
	for _, e := range s.exits.takeExited() {
		if s.tasks[e.id] == nil {
			continue // it said goodbye meanwhile
		}
		s.step(event{core: scheduler.TaskLeft{Now: s.now(), Task: e.id}, task: e.id, then: afterExited})
	}
}

// step is where the core is stepped: every event, from a datagram, the
// clock or the exit watch, comes here once, is recorded if the core took it,
// and is settled (the daemon's side of it). It reports whether the core took
// it.
func (s *Server) step(ev event) bool {
	err := s.core.Step(ev.core)
	if err != nil {
		s.refused(ev, err)
	} else if s.rec != nil {
		s.rec.stepped(ev.core, s.core)
	}
	s.settle(ev, err == nil)
	return err == nil
}

// refused answers an event the core did not take: a task it does not know
// is told to register again, a request it cannot queue is told so.
func (s *Server) refused(ev event, err error) {
	if errors.Is(err, scheduler.ErrUnknownTask) {
		switch ev.core.(type) {
		case scheduler.TaskLeft, scheduler.TaskWatched:
			return // already gone: nothing to say
		}
		s.replyError(ev.src, udp.CodeUnknownTask, uint32(ev.task), "unknown task: register again")
		return
	}
	if _, ok := ev.core.(scheduler.LaunchRequested); ok && errors.Is(err, scheduler.ErrOverloaded) {
		// The hook's thread stops waiting for a grant that will not come.
		s.replyError(ev.src, udp.CodeOverloaded, uint32(ev.task), err.Error())
	}
	s.srcLog.logAt(ev.src, slog.LevelWarn, "event rejected", "event", ev.core, "err", err)
}

// settle does the daemon's side of an event: what it keeps beside the core
// of a task (where to answer a request, its activity, its board slot), and
// forgetting a task that left. ok: the core took the event.
func (s *Server) settle(ev event, ok bool) {
	ta := s.tasks[ev.task]
	switch e := ev.core.(type) {
	case scheduler.TaskRegistered:
		if !ok {
			closeFD(ev.adm.pidfd)
			s.replyError(ev.src, udp.CodeInvalidValue, 0, "registration rejected")
			return
		}
		s.keep(ev)
	case scheduler.TaskLeft:
		s.left(ev, ok)
	case scheduler.LaunchRequested:
		if ok && ta != nil {
			ta.reqs[e.Seq] = ev.src // its grant or hold goes there
		}
	case scheduler.RunEnded:
		if ok && ta != nil {
			ta.act.runEnded(e.Now, e.RunNs)
		}
	case scheduler.Heartbeat:
		switch {
		case ev.then == afterFlush && ok:
			s.flushRequested(ev.task, ev.seq, ev.src)
		case ev.then == afterReack && ta != nil:
			cfg := s.core.Config()
			for _, ti := range s.core.Tasks() {
				if ti.ID == ev.task {
					s.send(ev.src, s.ack(ta, ev.task, ti.Role, ti.Phase, cfg.ProfileRuns, cfg.HeartbeatInterval))
				}
			}
		}
	}
}

// keep keeps a task the core took: where its messages go, its board
// slot, the watch on its process.
func (s *Server) keep(ev event) {
	id, adm := ev.task, ev.adm
	s.tasks[id] = adm.ta
	if adm.demoted != "" {
		s.replyError(ev.src, udp.CodeInvalidValue, uint32(id), adm.demoted)
	}
	if adm.ta.boardGPU >= 0 {
		adm.ta.slot = s.board.Claim(uint32(id))
	}
	s.srcLog.logAt(ev.src, slog.LevelInfo, "task registered", "task", id, "key", adm.ta.key, "pid", adm.pid,
		"priority", adm.ta.prio, "weight", ev.core.(scheduler.TaskRegistered).Weight, "gpu", adm.ta.model, "phase", adm.phase)
	switch {
	case adm.pidfd >= 0:
		s.exits.watchPinned(id, adm.pid, adm.pidfd)
	case adm.ta.unixPid:
		s.exits.watchPinned(id, adm.pid, -1)
	default:
		s.exits.watch(id, adm.pid, ev.src)
	}
}

// left forgets a task that left, as the way it left says. ok: the core took
// its TaskLeft (a task it no longer knew was dropped meanwhile).
func (s *Server) left(ev event, ok bool) {
	id := ev.task
	ta := s.tasks[id]
	switch ev.then {
	case afterGoodbye:
		if !ok {
			return
		}
		if ta != nil {
			s.log.Info("task left", "task", id, "key", ta.key)
		}
		s.removeTask(id)
		s.exits.forget(id)
		if ta != nil {
			s.forgetPeers(ta)
		}
	case afterReplaced:
		if ok && ta != nil {
			s.srcLog.logAt(ev.src, slog.LevelInfo, "task re-registered: the new registration replaces it", "task", id, "key", ta.key)
		}
		s.removeTask(id)
		s.exits.forget(id)
	case afterExited:
		if ok && ta != nil {
			s.log.Info("task exited without goodbye", "task", id, "key", ta.key, "pid", ta.pid)
		}
		if ta == nil {
			s.removeTask(id)
			return
		}
		paths := s.peerPaths(ta) // while the unix sockets still know them
		s.removeTask(id)
		s.removeReplySockets(ta, paths)
	}
}

// removeTask forgets a task the core dropped, freeing its board slot.
func (s *Server) removeTask(id scheduler.TaskID) {
	if ta := s.tasks[id]; ta != nil && ta.slot {
		s.board.Release(uint32(id))
	}
	delete(s.tasks, id)
}

// forgetPeers drops the unix sockets' stand-in addresses of a task's hook
// that left (goodbye, or its process exited), once no other task of its
// process speaks from them (one process's tasks on several GPUs share its
// sockets). Each hook process added one for each of its sockets, kept for
// the daemon's life. A task replaced or raised (its hook registers again)
// keeps them: the answer telling it so goes there.
func (s *Server) forgetPeers(ta *taskAddr) {
	if len(s.unix) == 0 {
		return
	}
	for _, a := range ta.peerAddrs() {
		if !udp.IsUnixAddr(a) || s.peerInUse(a) {
			continue
		}
		for _, c := range s.unix {
			c.Forget(a)
		}
	}
}

// peerAddrs are the addresses ta's hook spoke from: its registration's,
// its requests', the sources checked for it.
func (ta *taskAddr) peerAddrs() []netip.AddrPort {
	out := []netip.AddrPort{ta.ctrl}
	for _, a := range ta.reqs {
		out = append(out, a)
	}
	for a := range ta.sources {
		out = append(out, a)
	}
	return append(out, ta.unixPeers...)
}

// peerInUse reports whether a live task's hook speaks from a.
func (s *Server) peerInUse(a netip.AddrPort) bool {
	for _, o := range s.tasks {
		if o.ctrl == a || slices.Contains(o.unixPeers, a) {
			return true
		}
		if _, ok := o.sources[a]; ok {
			return true
		}
	}
	return false
}

// peerPaths are the socket paths ta's hook spoke from on the unix
// sockets.
func (s *Server) peerPaths(ta *taskAddr) []string {
	var out []string
	for _, a := range ta.peerAddrs() {
		for _, c := range s.unix {
			if p, ok := c.PeerPath(a); ok && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// removeReplySockets removes the reply sockets of ta's process, which
// exited without its hook's atexit handler (killed): the daemon is the
// only one left to do it, and a node's reply directory filled with the
// names of every hook ever killed there. A hook names its sockets
// fk-PID-TAG-N, TAG drawn once per process (hookclient/link.c): for each
// path the daemon heard the process from (paths), its siblings with the
// same fk-PID-TAG- go too (its threads' sockets that never spoke to this
// daemon), nothing else; and only once no task of the process is left.
func (s *Server) removeReplySockets(ta *taskAddr, paths []string) {
	s.forgetPeers(ta)
	for _, o := range s.tasks {
		if o.pid == ta.pid && o.pid != 0 {
			return // another task of the process is still known
		}
	}
	var gone []string
	for _, p := range paths {
		prefix, ok := replyPrefix(filepath.Base(p))
		if !ok {
			continue
		}
		sib, _ := filepath.Glob(filepath.Join(filepath.Dir(p), prefix+"*"))
		for _, q := range append(sib, p) {
			if !slices.Contains(gone, q) {
				gone = append(gone, q)
			}
		}
	}
	for _, p := range gone {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove an exited hook's reply socket", "path", p, "err", err)
		}
	}
}

// replyPrefix is "fk-PID-TAG-" of a hook's reply socket name fk-PID-TAG-N
// (false: not one).
func replyPrefix(name string) (string, bool) {
	f := strings.Split(name, "-")
	if len(f) != 4 || f[0] != "fk" || len(f[2]) != 8 {
		return "", false
	}
	for _, x := range []string{f[1], f[3]} {
		if _, err := strconv.ParseUint(x, 10, 32); err != nil {
			return "", false
		}
	}
	if _, err := strconv.ParseUint(f[2], 16, 32); err != nil {
		return "", false
	}
	return strings.Join(f[:3], "-") + "-", true
}
