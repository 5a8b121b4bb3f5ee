package daemon

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/udp"
)

// The unix socket (`--listen unix:PATH`, udp.UnixConn): hooks in pods send
// there. A goroutine per socket reads datagrams with their credentials and
// queues them; it wakes the loop as the exit watch does (the UDP socket's
// read deadline), and the loop takes them through intake like UDP ones,
// with the kernel's credentials at hand (s.cred) for who sent them.

// maxUnixQueue bounds the datagrams queued for the loop; past it the
// reader stops reading, and the socket's own queue (net.unix.max_dgram_qlen
// datagrams per sender, then the sender's send fails with EAGAIN) holds the
// rest.
const maxUnixQueue = 4096

type unixDatagram struct {
	p    []byte
	from netip.AddrPort
	cred udp.Cred
	conn *udp.UnixConn
}

// unixIntake is the queue between the unix readers and the loop.
type unixIntake struct {
	wake func()

	mu    sync.Mutex
	cond  *sync.Cond
	queue []unixDatagram
	taken []unixDatagram // the loop's, reused
	done  bool
}

func newUnixIntake(wake func()) *unixIntake {
	u := &unixIntake{wake: wake}
	u.cond = sync.NewCond(&u.mu)
	return u
}

// read serves one unix socket until it is closed.
func (u *unixIntake) read(c *udp.UnixConn) {
	for {
		err := c.Read(func(p []byte, from netip.AddrPort, cred *udp.Cred) {
			d := unixDatagram{p: append([]byte(nil), p...), from: from, cred: *cred, conn: c}
			// The pidfd is kept until the loop has taken the datagram.
			cred.PidFD = -1
			u.mu.Lock()
			for len(u.queue) >= maxUnixQueue && !u.done {
				u.cond.Wait()
			}
			if u.done {
				u.mu.Unlock()
				closeFD(d.cred.PidFD)
				return
			}
			first := len(u.queue) == 0
			u.queue = append(u.queue, d)
			u.mu.Unlock()
			if first {
				u.wake()
			}
		})
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // not a busy loop on a persistent error
		}
	}
}

// take returns the queued datagrams (valid until the next take).
func (u *unixIntake) take() []unixDatagram {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.taken, u.queue = u.queue, u.taken[:0]
	u.cond.Broadcast()
	return u.taken
}

func (u *unixIntake) close() {
	u.mu.Lock()
	u.done = true
	q := u.queue
	u.queue = nil
	u.cond.Broadcast()
	u.mu.Unlock()
	for _, d := range q {
		closeFD(d.cred.PidFD)
	}
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// drainUnix takes the queued unix datagrams through intake, each with its
// sender's credentials in s.cred.
func (s *Server) drainUnix(handle func([]byte, netip.AddrPort)) {
	if s.unixIn == nil {
		return
	}
	for _, d := range s.unixIn.take() {
		s.mu.Lock()
		s.cred = &d.cred
		s.mu.Unlock()
		handle(d.p, d.from)
		s.mu.Lock()
		s.cred = nil
		s.mu.Unlock()
		closeFD(d.cred.PidFD)
	}
}

// unixConnOf is the unix socket a stand-in address came from (nil: none).
func (s *Server) unixConnOf(a netip.AddrPort) *udp.UnixConn {
	for _, c := range s.unix {
		if _, ok := c.PeerPath(a); ok {
			return c
		}
	}
	return nil
}

// onHost reports whether a sender shares the daemon's host (its clock and,
// where the policy allows, its board): loopback or a unix socket.
func onHost(a netip.AddrPort) bool { return a.Addr().IsLoopback() || udp.IsUnixAddr(a) }
