package daemon

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// diagUID asks the kernel (sock_diag, NETLINK_SOCK_DIAG) for the owner of
// the UDP socket bound to src that talks to dst: one exact lookup, where a
// scan of /proc/net/udp can miss a socket while others come and go. An
// error when the kernel has no UDP sock_diag (the udp_diag module absent).
func diagUID(src, dst netip.AddrPort) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Usec: 100_000}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	// nlmsghdr (16) + inet_diag_req_v2 (56): family, protocol, ext, pad,
	// states, then inet_diag_sockid: sport, dport (big-endian), src[4],
	// dst[4], if, cookie[2]. For UDP the kernel looks the socket up as the
	// receiver of a datagram from id.src to id.dst ("src and dst are
	// swapped for historical reasons"): id.dst is the socket's own address.
	req := make([]byte, 16+56)
	binary.LittleEndian.PutUint32(req[0:], uint32(len(req)))
	binary.LittleEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.LittleEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.LittleEndian.PutUint32(req[8:], 1)
	r := req[16:]
	family := byte(unix.AF_INET)
	if src.Addr().Is6() && !src.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	r[0], r[1] = family, unix.IPPROTO_UDP
	binary.LittleEndian.PutUint32(r[4:], 0xffffffff) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], dst.Port())
	binary.BigEndian.PutUint16(id[2:], src.Port())
	putAddr(id[4:20], dst.Addr(), family)
	putAddr(id[20:36], src.Addr(), family)
	binary.LittleEndian.PutUint32(id[40:], 0xffffffff) // INET_DIAG_NOCOOKIE
	binary.LittleEndian.PutUint32(id[44:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	if n < 16 {
		return 0, errors.New("sock_diag: short reply")
	}
	switch binary.LittleEndian.Uint16(buf[4:]) {
	case unix.NLMSG_ERROR:
		if n >= 20 {
			if e := int32(binary.LittleEndian.Uint32(buf[16:])); e < 0 {
				return 0, unix.Errno(-e)
			}
		}
		return 0, errors.New("sock_diag: error reply")
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return 0, errors.New("sock_diag: unexpected reply")
	}
	// inet_diag_msg: family, state, timer, retrans, sockid (48), expires,
	// rqueue, wqueue, uid, inode.
	const uidOff = 16 + 4 + 48 + 12
	if n < uidOff+4 {
		return 0, errors.New("sock_diag: short reply")
	}
	return binary.LittleEndian.Uint32(buf[uidOff:]), nil
}

func putAddr(b []byte, a netip.Addr, family byte) {
	if family == unix.AF_INET {
		v4 := a.Unmap().As4()
		copy(b, v4[:])
		return
	}
	v6 := a.As16()
	copy(b, v6[:])
}
