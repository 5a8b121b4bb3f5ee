package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// soPassPidfd is SO_PASSPIDFD (Linux 6.5; not yet in x/sys): each datagram
// then carries an SCM_PIDFD, a pidfd of its sender.
const soPassPidfd = 76

// UnixConn is the daemon's AF_UNIX datagram socket (`fikit serve --listen
// unix:PATH`), for hooks in pods, which cannot reach the host's loopback.
// Each datagram arrives with the kernel's word on its sender
// (SCM_CREDENTIALS, and SCM_PIDFD where the kernel has it); the daemon
// never believes what a message says about who sent it.
//
// Senders are named by the path their socket is bound to (a hook binds its
// reply socket in the reply directory); each path is given a stand-in
// address in UnixPrefix, so the daemon keys, rate-limits and answers unix
// peers as it does UDP ones. Datagrams from an unbound socket cannot be
// answered and are dropped, counted in Unanswerable.
type UnixConn struct {
	uc   *net.UnixConn
	rc   syscall.RawConn
	path string
	ino  uint64 // of the socket file, removed at Close while it is still ours
	// Pidfds reports whether the kernel sends SCM_PIDFD (Linux ≥ 6.5).
	Pidfds bool

	mu      sync.Mutex
	byPath  map[string]netip.AddrPort
	byAddr  map[netip.AddrPort]string
	next    uint64
	unbound uint64

	buf, oob []byte
}

// Cred is what the kernel says of a datagram's sender: pid, uid and gid as
// the daemon's namespaces see them (SCM_CREDENTIALS), and PidFD, a pidfd
// pinning that process (-1: none, on a kernel before 6.5). A process may
// put other values in SCM_CREDENTIALS only with privilege (CAP_SYS_ADMIN
// for another pid, CAP_SETUID for another uid in its user namespace), and
// the pidfd is the pid's it sent.
type Cred struct {
	PID      int32
	UID, GID uint32
	PidFD    int
}

// MaxUnixPeers bounds the senders a UnixConn remembers; past it the table
// starts again (an answer to a forgotten sender's old address is dropped,
// and its next datagram gets a new one).
const MaxUnixPeers = 1 << 16

// ListenUnix binds a datagram socket at path, replacing a stale socket
// there (a daemon that died); it refuses to replace anything else. The
// socket file is made writable by everyone: who sends is told by the
// kernel, not by who may open the file.
func ListenUnix(path string) (*UnixConn, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen unix:%s: %w: exists and is not a socket", path, os.ErrExist)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen unix:%s: %w", path, err)
		}
	}
	uc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("listen unix:%s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		uc.Close()
		return nil, fmt.Errorf("listen unix:%s: %w", path, err)
	}
	_ = uc.SetReadBuffer(socketBuffer)
	_ = uc.SetWriteBuffer(socketBuffer)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("listen unix:%s: %w", path, err)
	}
	c := &UnixConn{uc: uc, rc: rc, path: path, byPath: map[string]netip.AddrPort{}, byAddr: map[netip.AddrPort]string{},
		buf: make([]byte, readBufferSize), oob: make([]byte, 256)}
	var serr, perr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
		perr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soPassPidfd, 1)
	}); err != nil || serr != nil {
		uc.Close()
		return nil, fmt.Errorf("listen unix:%s: SO_PASSCRED: %w", path, errors.Join(err, serr))
	}
	c.Pidfds = perr == nil
	if fi, err := os.Lstat(path); err == nil {
		c.ino = fi.Sys().(*syscall.Stat_t).Ino
	}
	return c, nil
}

// Path is the socket's path.
func (c *UnixConn) Path() string { return c.path }

// Close closes the socket and removes its file, unless another daemon
// has bound the path since.
func (c *UnixConn) Close() error {
	if fi, err := os.Lstat(c.path); err == nil && fi.Sys().(*syscall.Stat_t).Ino == c.ino {
		os.Remove(c.path)
	}
	return c.uc.Close()
}

// Unanswerable is how many datagrams came from unbound sockets.
func (c *UnixConn) Unanswerable() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unbound
}

// Read waits for one datagram and calls fn with it, its sender's stand-in
// address and the kernel's credentials. p is valid during the call only.
// The credentials' PidFD is closed after fn returns unless fn set it to -1
// (it keeps it). Read returns an error wrapping net.ErrClosed once the
// socket is closed.
func (c *UnixConn) Read(fn func(p []byte, from netip.AddrPort, cred *Cred)) error {
	for {
		n, oobn, flags, sa, err := c.uc.ReadMsgUnix(c.buf, c.oob)
		if err != nil {
			return fmt.Errorf("read unix: %w", err)
		}
		cred := Cred{PID: -1, PidFD: -1}
		var fds []int
		if msgs, perr := unix.ParseSocketControlMessage(c.oob[:oobn]); perr == nil {
			for _, m := range msgs {
				switch {
				case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_CREDENTIALS:
					if uc, err := unix.ParseUnixCredentials(&m); err == nil {
						cred.PID, cred.UID, cred.GID = uc.Pid, uc.Uid, uc.Gid
					}
				case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_PIDFD && len(m.Data) >= 4:
					cred.PidFD = int(int32(uint32(m.Data[0]) | uint32(m.Data[1])<<8 | uint32(m.Data[2])<<16 | uint32(m.Data[3])<<24))
				case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_RIGHTS:
					// A hook sends no descriptors: close any, unread.
					if f, err := unix.ParseUnixRights(&m); err == nil {
						fds = append(fds, f...)
					}
				}
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		from, ok := c.addrOf(sa)
		if ok && cred.PID > 0 && flags&unix.MSG_CTRUNC == 0 {
			fn(c.buf[:n], from, &cred)
		} else if !ok {
			c.mu.Lock()
			c.unbound++
			c.mu.Unlock()
		}
		if cred.PidFD >= 0 {
			unix.Close(cred.PidFD)
		}
		return nil
	}
}

// addrOf is the stand-in address of a sender's path.
func (c *UnixConn) addrOf(sa *net.UnixAddr) (netip.AddrPort, bool) {
	if sa == nil || sa.Name == "" || sa.Name == "@" {
		return netip.AddrPort{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.byPath[sa.Name]; ok {
		return a, true
	}
	if len(c.byPath) >= MaxUnixPeers {
		clear(c.byPath)
		clear(c.byAddr)
	}
	c.next++
	a := UnixAddr(c.next)
	c.byPath[sa.Name] = a
	c.byAddr[a] = sa.Name
	return a, true
}

// PeerPath is the socket path a stand-in address stands for.
func (c *UnixConn) PeerPath(a netip.AddrPort) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.byAddr[a]
	return p, ok
}

// Peers is how many senders the socket has stand-in addresses for.
func (c *UnixConn) Peers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byAddr)
}

// Forget drops a sender's stand-in address (its hook went away).
func (c *UnixConn) Forget(a netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.byAddr[a]; ok {
		delete(c.byAddr, a)
		delete(c.byPath, p)
	}
}

// WriteTo sends p to the sender that a stands for, with the file
// descriptor fd (SCM_RIGHTS) where fd > 0. It does not block: a hook whose
// queue is full (net.unix.max_dgram_qlen datagrams) loses the datagram,
// as a UDP one would.
func (c *UnixConn) WriteTo(p []byte, a netip.AddrPort, fd int) error {
	path, ok := c.PeerPath(a)
	if !ok {
		return fmt.Errorf("write unix: %v: %w", a, ErrUnknownPeer)
	}
	var oob []byte
	if fd > 0 {
		oob = unix.UnixRights(fd)
	}
	var werr error
	err := c.rc.Write(func(s uintptr) bool {
		werr = unix.Sendmsg(int(s), p, oob, &unix.SockaddrUnix{Name: path}, unix.MSG_DONTWAIT)
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("write unix %s: %w", path, err)
	}
	return nil
}

// ErrUnknownPeer is an answer to a unix sender the socket does not know
// (any more).
var ErrUnknownPeer = errors.New("unknown unix peer")
