package daemon

import (
	"net/netip"
	"slices"
	"time"

	"github.com/fikit/fikit/udp"
)

// Who may speak for a task. Task IDs are small numbers anyone can guess, and
// a datagram's source is all the daemon learns of its sender; so a local
// process could send a Goodbye under the high-priority task's ID and remove
// it, or LaunchRequests under another task's ID and be granted.
//
// A task whose registering process was shown to own the socket it
// registered from (the exit watch's check: that pid, in this pid namespace,
// has the socket open) is spoken for only by sockets of that process: its
// registration socket, or another one the kernel says the process has open
// (a hook sends each thread's launch requests from a socket of its own).
// Each new socket is checked once, in /proc; a socket that is not the
// process's is refused for a while without looking again. Datagrams from
// other sockets are dropped and counted. Tasks not proven so (remote hooks,
// other pid namespaces, the moments before the check completes) are trusted
// as before: docs/security.md.

// maxSources bounds the sockets remembered per task; a task that cycles
// through more (or a flood of forgeries from many sockets) makes the daemon
// check again, no more.
const maxSources = 64

// refusedFor is how long a socket found not to be the task's is refused
// without looking again: long enough that a flood from it costs one /proc
// scan a second, short enough that the port, reused by the task's process,
// is accepted soon.
const refusedFor = time.Second

// A check reads /proc (about a millisecond with a few hundred sockets and
// open files), on the receive loop: a task's new sockets are checked at
// most checkBurst at once and checkPerSec a second after that. A flood of
// forgeries from ever new sockets is refused unchecked past that, and
// costs the daemon no more.
const (
	checkBurst  = 32
	checkPerSec = 16
)

type sourceCheck struct {
	ok    bool
	until int64 // a refusal's expiry (core time)
}

// speaksFor reports whether a datagram from src may speak for task ta.
func (s *Server) speaksFor(ta *taskAddr, src netip.AddrPort, now int64) bool {
	if ta.unixPid {
		// The kernel names every unix datagram's sender: a socket of the
		// task's process (its own, or a thread's) speaks for it, nothing
		// else, from the first datagram on.
		ok := s.cred != nil && s.cred.PID > 0 && uint32(s.cred.PID) == ta.pid
		if ok && src != ta.ctrl && !slices.Contains(ta.unixPeers, src) && len(ta.unixPeers) < maxSources {
			ta.unixPeers = append(ta.unixPeers, src) // forgotten when it leaves (forgetPeers)
		}
		return ok
	}
	if !ta.proven || src == ta.ctrl {
		return true
	}
	if udp.IsUnixAddr(src) {
		return false // a unix sender for a task registered over UDP
	}
	if c, ok := ta.sources[src]; ok && (c.ok || now < c.until) {
		return c.ok
	}
	if !ta.checks.take(time.Now(), checkBurst, checkPerSec) {
		return false
	}
	ok := ownsSocket(int(ta.pid), src) == nil
	if len(ta.sources) >= maxSources {
		clear(ta.sources)
	}
	if ta.sources == nil {
		ta.sources = map[netip.AddrPort]sourceCheck{}
	}
	ta.sources[src] = sourceCheck{ok: ok, until: now + int64(refusedFor)}
	return ok
}
