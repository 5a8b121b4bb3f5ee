package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/k8s/podid"
	"github.com/fikit/fikit/k8s/pods"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
)

// Who a unix-socket sender is (docs/kubernetes.md "Who a pod is"): the
// kernel names its process (SCM_CREDENTIALS' pid, pinned by the datagram's
// pidfd where the kernel sends one), the process's cgroup names its pod
// (k8s/podid), and the pod informer its namespace, service account and
// annotations (k8s/pods). What the Register says of its pid or user is not
// believed. A process whose cgroup names no pod is a host service, judged
// by uid rules as over UDP.

// Errors of identify.
var (
	// ErrSenderGone: the sender exited before the daemon read its cgroup
	// (its pidfd says so), or its /proc entry is gone.
	ErrSenderGone = errors.New("sender exited before it was identified")
	// ErrNoCredentials: a unix datagram without the kernel's credentials.
	ErrNoCredentials = errors.New("unix datagram without credentials")
)

// sender is who registered, as far as the daemon can tell.
type sender struct {
	uid   uint32
	known bool   // uid known (the kernel said)
	pid   uint32 // in the daemon's pid namespace (0: unknown)
	pidfd int    // pinning pid (-1: none); the caller owns a dup of it
	pod   *podRef
}

// podRef is the pod a sender's cgroup names.
type podRef struct {
	uid   string
	known bool // the informer knows it
	info  pods.Pod
}

// listenUnix binds cfg.ListenUnix.
func (s *Server) listenUnix(wake func()) error {
	for _, p := range s.cfg.ListenUnix {
		c, err := udp.ListenUnix(p)
		if err != nil {
			for _, o := range s.unix {
				o.Close()
			}
			s.unix = nil
			return err
		}
		if !c.Pidfds {
			s.log.Warn("this kernel sends no pidfd with unix datagrams (Linux < 6.5): a sender is named by its pid alone, "+
				"which it could give up to another process between sending and being identified (docs/kubernetes.md)", "path", p)
		}
		s.unix = append(s.unix, c)
	}
	if len(s.unix) > 0 {
		s.unixIn = newUnixIntake(wake)
		if q, err := maxDgramQlen(); err == nil && q < wantDgramQlen {
			s.log.Warn("net.unix.max_dgram_qlen is small: hooks' datagrams beyond that many queued on the unix socket are dropped "+
				"(their sender gets EAGAIN); raise it in the daemon's network namespace (docs/kubernetes.md \"Queue\")",
				"max_dgram_qlen", q, "want", wantDgramQlen)
		}
	}
	return nil
}

// wantDgramQlen is the queue of the daemon's unix socket below which it
// warns: a burst of launch reports from a few dozen hooks.
const wantDgramQlen = 512

// maxDgramQlen reads net.unix.max_dgram_qlen of the daemon's network
// namespace: how many datagrams a unix socket created there queues before
// a sender that is not its peer gets EAGAIN (answers to the hooks are not
// bounded by it: their sockets are connected to the daemon's).
func maxDgramQlen() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/unix/max_dgram_qlen")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// identify says who sent the Register in intake from src.
func (s *Server) identify(m *udp.Register, src netip.AddrPort) (sender, error) {
	if !udp.IsUnixAddr(src) {
		uid, known := peerUID(src, s.Addr())
		return sender{uid: uid, known: known, pid: m.PID, pidfd: -1}, nil
	}
	c := s.cred
	if c == nil || c.PID <= 0 {
		return sender{}, ErrNoCredentials
	}
	who := sender{uid: c.UID, known: true, pid: uint32(c.PID), pidfd: -1}
	pod, err := podid.Of(s.cfg.ProcRoot, int(c.PID))
	switch {
	case errors.Is(err, podid.ErrNoPod):
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH):
		return sender{}, fmt.Errorf("%w: %w", ErrSenderGone, err)
	case err != nil:
		return sender{}, err
	default:
		who.pod = &podRef{uid: pod.UID}
	}
	// The cgroup read is the sender's only if the pid still names it.
	if c.PidFD >= 0 {
		if err := unix.PidfdSendSignal(c.PidFD, 0, nil, 0); err != nil {
			return sender{}, fmt.Errorf("%w: %w", ErrSenderGone, err)
		}
		if fd, err := unix.FcntlInt(uintptr(c.PidFD), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			who.pidfd = fd
		}
	}
	if who.pod != nil && s.cfg.Pods != nil {
		who.pod.info, who.pod.known = s.cfg.Pods.Pod(who.pod.uid)
	}
	return who, nil
}

// authorizePod applies the policy to a pod's Register: the priority and
// weight it gets, what to tell its hook, and whether it gets the board. A
// pod's fikit.io/priority annotation is its claim where it has one (the
// pod's spec, not the container's environment, says what it asks); the
// rule for its namespace or service account caps it; a pod the informer
// does not know yet gets the lowest priority and no board.
func (s *Server) authorizePod(m *udp.Register, src netip.AddrPort, p *podRef) (uint8, uint32, string, bool) {
	best, rule := uint8(9), &unknownPodRule
	claim := m.Priority
	if p.known {
		best, rule = s.policy.AllowedPod(p.info.Namespace, p.info.ServiceAccount, m.TaskKey)
		if ask, ok, err := p.info.AskedPriority(); ok {
			claim = ask
		} else if err != nil {
			s.srcLog.logAt(src, slog.LevelWarn, "pod annotation ignored", "pod", p.info.Namespace+"/"+p.info.Name, "err", err)
		}
	}
	prio := max(claim, best)
	weight := min(max(m.Weight, udp.DefaultWeight), rule.maxWeight())
	var msg []string
	if prio > claim {
		s.met.demoted.Inc()
		msg = append(msg, fmt.Sprintf("priority %d is not allowed for %s (policy: %s); registered at %d", claim, podName(p), spell(rule), prio))
		s.srcLog.logAt(src, slog.LevelWarn, "pod's priority claim above the policy's: registered lower", "pod", podName(p),
			"claimed", claim, "priority", prio, "rule", spell(rule))
	}
	if weight != max(m.Weight, udp.DefaultWeight) {
		s.met.weightDemoted.Inc()
		msg = append(msg, fmt.Sprintf("weight %d is not allowed for %s (policy: %s); registered with %d", m.Weight, podName(p), spell(rule), weight))
	}
	// The hook notes its launches on the board at the level it claimed:
	// only a pod registered at that level may have it.
	board := p.known && rule != nil && rule.Board && prio == m.Priority
	return prio, weight, strings.Join(msg, "; "), board
}

func spell(r *PolicyRule) string {
	if r == nil {
		return "(no rule: any)"
	}
	return r.Spell
}

func podName(p *podRef) string {
	if !p.known {
		return "pod " + p.uid + " (not known yet)"
	}
	return "pod " + p.info.Namespace + "/" + p.info.Name
}

// podKey is a pod's task key as the daemon keeps it: its namespace's (or,
// unknown, its UID's), so pods of different namespaces never share
// profiles.
func podKey(p *podRef, key string) string {
	if !p.known {
		return "pod:" + p.uid + "/" + key
	}
	return "ns:" + p.info.Namespace + "/" + key
}

// podTenant is whom a pod's GPU time is accounted to.
func podTenant(p *podRef) string {
	if !p.known {
		return "pod:" + p.uid
	}
	return "namespace:" + p.info.Namespace
}

// silentAfter is how long a running injected pod may go without a
// registration before it counts as un-hooked: its service may load CUDA
// late, and the informer's start time is the pod's, not the container's.
const silentAfter = 2 * time.Minute

// unhookedPods counts the running pods of this node that the webhook put
// under the hook and that never registered since silentAfter after their
// start: a musl image (the hook is not loaded), a hook that failed to
// load, or a service that has not used CUDA yet (docs/kubernetes.md).
// Called with mu held.
func (s *Server) unhookedPods(now time.Time) int {
	if s.cfg.Pods == nil {
		return 0
	}
	n := 0
	seen := map[string]bool{}
	for _, p := range s.cfg.Pods.List() {
		seen[p.UID] = true
		if p.Annotations[pods.InjectedAnnotation] == "true" && p.Running && now.Sub(p.RunningSince) > silentAfter &&
			!s.podsHeard[p.UID] {
			n++
		}
	}
	for uid := range s.podsHeard {
		if !seen[uid] {
			delete(s.podsHeard, uid) // the pod is gone
		}
	}
	return n
}

// watchPods wakes the loop when the informer learns pods, so that tasks of
// pods it did not know are raised to their own priority.
func (s *Server) watchPods(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-s.cfg.Pods.Learned():
			s.podsLearned.Store(true)
			_ = s.conn.SetReadDeadline(aLongTimeAgo)
		}
	}
}

// raiseLearned drops the tasks of pods that were not known at their
// registration and are now, and tells their hooks to register again (an
// Error(unknown task), which a hook answers at once): they come back at
// their own priority. Called with mu held, in the loop.
func (s *Server) raiseLearned() {
	if s.cfg.Pods == nil || !s.podsLearned.Swap(false) {
		return
	}
	now := s.now()
	for id, ta := range s.tasks {
		if ta.podUID == "" || ta.podKnown {
			continue
		}
		if _, ok := s.cfg.Pods.Pod(ta.podUID); !ok {
			continue
		}
		s.log.Info("pod now known: its task registers again at its own priority", "task", id, "pod", ta.podUID)
		ctrl := ta.ctrl
		s.step(event{core: scheduler.TaskLeft{Now: now, Task: id}, task: id, src: ctrl, then: afterReplaced})
		s.replyError(ctrl, udp.CodeUnknownTask, uint32(id), "pod known now: register again")
		s.met.podsRaised.Inc()
	}
}
