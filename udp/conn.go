package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Conn is the daemon's UDP socket. [Conn.Read] receives datagrams in batches
// (recvmmsg on Linux) into buffers the Conn owns and reuses, and
// [Conn.WriteBatch] sends replies in batches (sendmmsg on Linux), so the
// receive loop neither allocates nor makes a system call per datagram.
//
// Read and Serve must be called from one goroutine at a time; WriteTo and
// WriteBatch may be called from any goroutine, also while a Read is waiting.
type Conn struct {
	uc *net.UDPConn
	rc syscall.RawConn

	rd batchReader

	wmu sync.Mutex
	wr  batchWriter
}

// Datagram is one datagram to send with [Conn.WriteBatch].
type Datagram struct {
	Payload []byte
	Addr    netip.AddrPort
	// FD, if > 0, is a file descriptor sent with it (SCM_RIGHTS): only to
	// a unix peer ([UnixConn.WriteTo]), never over UDP.
	FD int
}

const (
	// batchSize is how many datagrams one system call reads or writes.
	batchSize = 64
	// readBufferSize is one byte more than MaxDatagram, so that a datagram
	// that was too large arrives as MaxDatagram+1 bytes and fails to decode
	// with ErrTooLarge instead of being silently cut to a valid size.
	readBufferSize = MaxDatagram + 1
	// socketBuffer is asked for as SO_RCVBUF and SO_SNDBUF; the kernel caps
	// it (net.core.rmem_max).
	socketBuffer = 4 << 20
)

// Listen opens a UDP socket on addr ("127.0.0.1:7070", ":7070", "[::1]:0").
func Listen(addr string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Best effort: a larger buffer absorbs bursts of launch notifications
	// (64 clients on a CPU-starved host: the daemon reads late, not never).
	_ = uc.SetReadBuffer(socketBuffer)
	_ = uc.SetWriteBuffer(socketBuffer)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	c := &Conn{uc: uc, rc: rc}
	c.forceBuffers()
	if err := c.init(); err != nil {
		uc.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return c, nil
}

// LocalAddr returns the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort {
	return c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Read waits for at least one datagram and calls fn for each datagram of
// the batch that arrived, with its payload and its sender (IPv4 senders on a
// dual-stack socket as plain IPv4 addresses). p is only valid during the call
// of fn: its buffer is reused. A datagram longer than MaxDatagram arrives cut
// to MaxDatagram+1 bytes. Read returns the number of datagrams, or an error
// wrapping net.ErrClosed once the Conn is closed.
func (c *Conn) Read(fn func(p []byte, from netip.AddrPort)) (int, error) {
	return c.read(fn)
}

// ReadQueued is Read without waiting, and whatever the read deadline: it
// calls fn for the datagrams queued now, up to one batch. drained reports
// that fewer than a batch were queued, so every datagram that arrived
// before the call has been read. The daemon calls it before it judges time:
// a task's heartbeat still in the queue is not silence.
func (c *Conn) ReadQueued(fn func(p []byte, from netip.AddrPort)) (n int, drained bool, err error) {
	return c.readQueued(fn)
}

// Drained reports whether a Read that returned n datagrams found the queue
// empty after them: every datagram that arrived before it was called has
// been read.
func (c *Conn) Drained(n int) bool { return n < c.batch() }

// Serve calls Read until the Conn is closed, when it returns nil, or until
// Read fails otherwise.
func (c *Conn) Serve(fn func(p []byte, from netip.AddrPort)) error {
	for {
		if _, err := c.Read(fn); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
	}
}

// SetReadDeadline makes a waiting Read return an error wrapping
// os.ErrDeadlineExceeded at t (the zero time: never), so that one loop can
// both receive and act at deadlines.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.uc.SetReadDeadline(t)
}

// WriteTo sends one datagram.
func (c *Conn) WriteTo(p []byte, to netip.AddrPort) error {
	if _, err := c.uc.WriteToUDPAddrPort(p, to); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// WriteBatch sends datagrams in order and returns how many were sent before
// an error, if any. It does not keep references to ds.
func (c *Conn) WriteBatch(ds []Datagram) (int, error) {
	if len(ds) == 1 {
		// One reply (a grant, typically): sendto is a little cheaper than
		// sendmmsg, and this is on the round trip a waiting kernel pays.
		if err := c.WriteTo(ds[0].Payload, ds[0].Addr); err != nil {
			return 0, err
		}
		return 1, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeBatch(ds)
}

// SocketStats is what the kernel says about the socket's receive side.
type SocketStats struct {
	// ReadBuffer is the receive buffer in bytes (SO_RCVBUF: the kernel
	// doubles what is asked, and caps it at net.core.rmem_max unless the
	// process may force it).
	ReadBuffer int
	// Drops counts datagrams the kernel dropped because the buffer was
	// full (SK_MEMINFO_DROPS; it wraps at 2^32).
	Drops uint64
}

// Close closes the socket; a waiting Read returns.
func (c *Conn) Close() error {
	return c.uc.Close()
}
