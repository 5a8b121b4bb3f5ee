package main

import (
	"fmt"
	"net"
)

// checkListen refuses a --listen address that other hosts can reach unless
// the daemon has a key (keyed: --auth-key-file, so their datagrams must
// carry its MAC) or insecure is set: without a key every datagram is
// believed (a Register claims any priority the policy gives remote hooks,
// and the token of a registration crosses the network in the clear), so a
// port open to the network is one anyone on it can slow the high-priority
// service through (docs/security.md). It returns whether the address is
// reachable from other hosts, for the caller's log line.
func checkListen(addr string, keyed, insecure bool) (remote bool, err error) {
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
	if remote && !keyed && !insecure {
		return true, fmt.Errorf("--listen %s accepts datagrams from other hosts, and without a key fikit cannot authenticate them: "+
			"any host that reaches it can register and slow other tasks down; "+
			"give the daemon and the remote hooks a key (--auth-key-file, FIKIT_AUTH_KEY_FILE), "+
			"listen on a loopback address (127.0.0.1:PORT), or pass --insecure on a network you trust", addr)
	}
	return remote, nil
}
