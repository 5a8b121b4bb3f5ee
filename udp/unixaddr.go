package udp

import (
	"encoding/binary"
	"net/netip"
)

// BoardInAnswer is RegisterAck.Board for a hook on a unix socket: the
// board's file descriptor comes with the answer (SCM_RIGHTS), since a hook
// in a pod cannot open the daemon's path.
const BoardInAnswer = "fd:scm_rights"

// UnixPrefix holds the stand-in addresses of senders on a unix socket
// (UnixConn): 100::/64, IPv6's discard-only prefix (RFC 6666), which no
// real peer has.
var UnixPrefix = netip.MustParsePrefix("100::/64")

// UnixAddr is the n-th stand-in address.
func UnixAddr(n uint64) netip.AddrPort {
	var b [16]byte
	b[0] = 0x01
	binary.BigEndian.PutUint64(b[8:], n)
	return netip.AddrPortFrom(netip.AddrFrom16(b), 1)
}

// IsUnixAddr reports whether a is a unix sender's stand-in address.
func IsUnixAddr(a netip.AddrPort) bool { return UnixPrefix.Contains(a.Addr()) }
