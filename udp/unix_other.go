//go:build !linux

package udp

import (
	"errors"
	"net/netip"
)

// UnixConn is the daemon's AF_UNIX datagram socket: Linux only.
type UnixConn struct{ Pidfds bool }

// Cred is what the kernel says of a datagram's sender.
type Cred struct {
	PID      int32
	UID, GID uint32
	PidFD    int
}

// ErrUnknownPeer is an answer to a unix sender the socket does not know.
var ErrUnknownPeer = errors.New("unknown unix peer")

var errNoUnix = errors.New("unix datagram sockets with credentials are Linux only")

// ListenUnix fails: Linux only.
func ListenUnix(string) (*UnixConn, error) { return nil, errNoUnix }

func (c *UnixConn) Path() string         { return "" }
func (c *UnixConn) Close() error         { return nil }
func (c *UnixConn) Unanswerable() uint64 { return 0 }
func (c *UnixConn) Read(func([]byte, netip.AddrPort, *Cred)) error {
	return errNoUnix
}
func (c *UnixConn) PeerPath(netip.AddrPort) (string, bool)    { return "", false }
func (c *UnixConn) Forget(netip.AddrPort)                     {}
func (c *UnixConn) Peers() int                                { return 0 }
func (c *UnixConn) WriteTo([]byte, netip.AddrPort, int) error { return errNoUnix }
