package udp

import (
	"fmt"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchReader is the state of recvmmsg: one buffer, iovec and address per
// slot, allocated once.
type batchReader struct {
	bufs  [][]byte
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for IPv4 and IPv6
	hdrs  []unix.Mmsghdr
	fn    func(fd uintptr) bool // made once so that Read does not allocate
	n     int
	errno syscall.Errno
}

// batchWriter is the state of sendmmsg.
type batchWriter struct {
	family int // AF_INET or AF_INET6: the socket's
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet6
	hdrs   []unix.Mmsghdr
	fn     func(fd uintptr) bool
	todo   []unix.Mmsghdr // what fn still has to send
	errno  syscall.Errno
}

func (c *Conn) init() error {
	var family int
	var serr error
	if err := c.rc.Control(func(fd uintptr) {
		family, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("socket domain: %w", serr)
	}

	r := &c.rd
	backing := make([]byte, batchSize*readBufferSize)
	r.bufs = make([][]byte, batchSize)
	r.iovs = make([]unix.Iovec, batchSize)
	r.names = make([]unix.RawSockaddrInet6, batchSize)
	r.hdrs = make([]unix.Mmsghdr, batchSize)
	for i := range r.hdrs {
		r.bufs[i] = backing[i*readBufferSize : (i+1)*readBufferSize : (i+1)*readBufferSize]
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(readBufferSize)
		r.hdrs[i].Hdr.Iov = &r.iovs[i]
		r.hdrs[i].Hdr.SetIovlen(1)
		r.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
	}
	r.fn = func(fd uintptr) bool {
		for i := range r.hdrs {
			r.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
			r.hdrs[i].Hdr.Flags = 0
		}
		for {
			n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])),
				uintptr(len(r.hdrs)), unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait until readable
			}
			r.n, r.errno = int(n), e
			return true
		}
	}

	w := &c.wr
	w.family = family
	w.iovs = make([]unix.Iovec, batchSize)
	w.names = make([]unix.RawSockaddrInet6, batchSize)
	w.hdrs = make([]unix.Mmsghdr, batchSize)
	for i := range w.hdrs {
		w.hdrs[i].Hdr.Iov = &w.iovs[i]
		w.hdrs[i].Hdr.SetIovlen(1)
		w.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&w.names[i]))
	}
	w.fn = func(fd uintptr) bool {
		for len(w.todo) > 0 {
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.todo[0])),
				uintptr(len(w.todo)), unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case 0:
				w.todo = w.todo[n:]
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait until writable
			default:
				w.errno = e
				return true
			}
		}
		return true
	}
	return nil
}

func (c *Conn) read(fn func(p []byte, from netip.AddrPort)) (int, error) {
	r := &c.rd
	r.n, r.errno = 0, 0
	if err := c.rc.Read(r.fn); err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	if r.errno != 0 {
		return 0, fmt.Errorf("recvmmsg: %w", r.errno)
	}
	for i := range r.n {
		h := &r.hdrs[i]
		fn(r.bufs[i][:h.Len], addrPort(&r.names[i]))
	}
	return r.n, nil
}

func (c *Conn) readQueued(fn func(p []byte, from netip.AddrPort)) (int, bool, error) {
	r := &c.rd
	r.n, r.errno = 0, 0
	if err := c.rc.Control(func(fd uintptr) { r.fn(fd) }); err != nil {
		return 0, false, fmt.Errorf("read: %w", err)
	}
	if r.errno != 0 {
		return 0, false, fmt.Errorf("recvmmsg: %w", r.errno)
	}
	for i := range r.n {
		h := &r.hdrs[i]
		fn(r.bufs[i][:h.Len], addrPort(&r.names[i]))
	}
	return r.n, r.n < batchSize, nil
}

func (c *Conn) batch() int { return batchSize }

// addrPort converts a sockaddr the kernel wrote; IPv4-mapped IPv6 addresses
// become IPv4 addresses.
func addrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), ntohs(sa4.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr).Unmap()
		if sa.Scope_id != 0 && a.Is6() {
			a = a.WithZone(strconv.FormatUint(uint64(sa.Scope_id), 10))
		}
		return netip.AddrPortFrom(a, ntohs(sa.Port))
	}
	return netip.AddrPort{}
}

// ntohs reads a port stored in network byte order.
func ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// htons stores a port in network byte order.
func htons(p uint16) uint16 {
	var v uint16
	b := (*[2]byte)(unsafe.Pointer(&v))
	b[0], b[1] = byte(p>>8), byte(p)
	return v
}

// sockaddr writes to into sa for a socket of the given family. It reports
// false for an address such a socket cannot take (IPv6 on an IPv4 socket) or
// one with a zone, which WriteTo sends instead.
func sockaddr(sa *unix.RawSockaddrInet6, family int, to netip.AddrPort) bool {
	a := to.Addr()
	switch {
	case a.Zone() != "":
		return false
	case family == unix.AF_INET:
		a = a.Unmap()
		if !a.Is4() {
			return false
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: htons(to.Port()), Addr: a.As4()}
		return true
	case family == unix.AF_INET6 && a.IsValid():
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: htons(to.Port()), Addr: a.As16()}
		return true
	}
	return false
}

func (c *Conn) writeBatch(ds []Datagram) (int, error) {
	w := &c.wr
	sent := 0
	defer func() {
		// Keep no references to the caller's payloads.
		for i := range w.iovs {
			w.iovs[i].Base = nil
		}
	}()
	for sent < len(ds) {
		k := 0
		for k < batchSize && sent+k < len(ds) {
			d := ds[sent+k]
			if !sockaddr(&w.names[k], w.family, d.Addr) {
				break
			}
			var base *byte
			if len(d.Payload) > 0 {
				base = &d.Payload[0]
			}
			w.iovs[k].Base = base
			w.iovs[k].SetLen(len(d.Payload))
			w.hdrs[k].Hdr.Namelen = unix.SizeofSockaddrInet6
			if w.family == unix.AF_INET {
				w.hdrs[k].Hdr.Namelen = unix.SizeofSockaddrInet4
			}
			k++
		}
		if k == 0 {
			// An address the batch cannot carry: send it alone.
			if err := c.WriteTo(ds[sent].Payload, ds[sent].Addr); err != nil {
				return sent, err
			}
			sent++
			continue
		}
		w.todo, w.errno = w.hdrs[:k], 0
		err := c.rc.Write(w.fn)
		sent += k - len(w.todo)
		w.todo = nil
		if err != nil {
			return sent, fmt.Errorf("write: %w", err)
		}
		if w.errno != 0 {
			return sent, fmt.Errorf("sendmmsg: %w", w.errno)
		}
	}
	return sent, nil
}

// forceBuffers raises the socket buffers past net.core.rmem_max/wmem_max
// where the process may (CAP_NET_ADMIN): the defaults (about 200 KiB) hold
// a few hundred datagrams, which 64 clients on a busy host overflow.
func (c *Conn) forceBuffers() {
	_ = c.rc.Control(func(fd uintptr) {
		if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil && n < 2*socketBuffer {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuffer)
		}
		if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && n < 2*socketBuffer {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, socketBuffer)
		}
	})
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of the drop counter in
// what SO_MEMINFO returns (linux/sock_diag.h); skMeminfoVars their number.
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// SocketStats reads the receive buffer's size and drop count.
func (c *Conn) SocketStats() (SocketStats, error) {
	var st SocketStats
	var serr error
	err := c.rc.Control(func(fd uintptr) {
		st.ReadBuffer, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		if serr != nil {
			return
		}
		var mem [skMeminfoVars]uint32
		size := uint32(unsafe.Sizeof(mem))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&size)), 0)
		if e != 0 {
			serr = e
			return
		}
		st.Drops = uint64(mem[skMeminfoDrops])
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return st, fmt.Errorf("socket stats: %w", err)
	}
	return st, nil
}
