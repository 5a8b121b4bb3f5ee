package daemon

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// Admission is intake's part for a Register: what the task may claim
// (priority policy), which profile it resumes, which task of the same hook
// it replaces, and the ID it gets. What it decides goes to the loop as a
// TaskRegistered event carrying an admission; the daemon keeps the task
// once the core has taken it.

// admission is what the daemon keeps of a registration the core takes.
type admission struct {
	ta *taskAddr
	// demoted, if set, tells the hook it got less than it claimed.
	demoted string
	pid     uint32
	phase   string // for the log
}

// admit turns Register m into events: the TaskLeft of the tasks it
// replaces, then its TaskRegistered; or, for a copy of the Register a task
// registered with, a Heartbeat answered with the same ack. A Register the
// daemon refuses is answered with an error.
func (s *Server) admit(m *udp.Register, src netip.AddrPort, now int64) {
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
	phase := "profiling"
	if prof != nil && prof.Phase == profiler.PhaseSharing {
		phase = "sharing"
	}
	adm := &admission{
		ta: &taskAddr{ctrl: src, gpu: gpu, model: model, key: key, reqs: map[uint32]netip.AddrPort{}, regSeq: m.Seq,
			watched: local, pid: m.PID, local: src.Addr().IsLoopback(), boardGPU: section, prio: prio,
			token: newToken(m.HookFlags), act: activity{sinceNs: now}},
		demoted: demoted, pid: m.PID, phase: phase,
	}
	s.evs = append(s.evs, event{task: id, src: src, adm: adm,
		core: scheduler.TaskRegistered{Now: now, Task: id, Key: key, PID: m.PID, Priority: prio, Weight: weight,
			Owner: tenantOf(uid, known), GPU: gpu, Model: model, Profile: prof, Local: local}})
}

// reacknowledge notes a Register that is a copy of the one a task
// registered with (same socket, GPU and seq): the hook sent it again because
// the answer was late (a daemon waiting for a CPU). It is a sign of life, as
// a heartbeat, answered with the same ack again (afterReack), and no second
// registration. It reports whether there was such a task.
func (s *Server) reacknowledge(src netip.AddrPort, gpu string, seq uint32, now int64) bool {
	for id, ta := range s.tasks {
		if ta.ctrl != src || ta.gpu != gpu || ta.regSeq != seq {
			continue
		}
		for _, ti := range s.core.Tasks() {
			if ti.ID == id {
				s.log.Debug("register again: same ack", "task", id, "seq", seq)
				s.evs = append(s.evs, event{core: scheduler.Heartbeat{Now: now, Task: id}, task: id, src: src, then: afterReack})
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
		if ta.ctrl == src && ta.gpu == gpu {
			s.evs = append(s.evs, event{core: scheduler.TaskLeft{Now: now, Task: id}, task: id, src: src, then: afterReplaced})
		}
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
