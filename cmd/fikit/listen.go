package main

import (
	"fmt"
	"net"
)

// checkListen refuses a --listen address that other hosts can reach unless
// insecure is set: every datagram is believed (a Register claims any
// priority, a Goodbye names any task), so a port open to the network is one
// anyone on it can stop the high-priority service through
// (docs/security.md). It returns whether the address is reachable from
// other hosts, for the caller's warning.
func checkListen(addr string, insecure bool) (remote bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	// An empty host or an unspecified address (0.0.0.0, ::) binds every
	// interface.
	remote = host == "" || ua.IP == nil || !ua.IP.IsLoopback()
	if remote && !insecure {
		return true, fmt.Errorf("--listen %s accepts datagrams from other hosts, and fikit does not authenticate them: "+
			"any host that reaches it can register at any priority and stop other tasks; "+
			"listen on a loopback address (127.0.0.1:PORT), or pass --insecure on a network you trust", addr)
	}
	return remote, nil
}
