package daemon

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// peerUID is the uid owning the local UDP socket src that sent to the
// daemon at dst: who registered, whatever the Register claims. It asks the
// kernel for that one socket (sock_diag), else scans /proc/net/udp{,6} —
// which can miss a socket while others are created and closed, so it
// looks again before giving up. ok is false for a socket not found (another
// host, another network namespace).
func peerUID(src, dst netip.AddrPort) (uid uint32, ok bool) {
	if !src.Addr().IsLoopback() {
		return 0, false
	}
	if uid, err := diagUID(src, dst); err == nil {
		return uid, true
	}
	for range 3 {
		if uid, ok := scanUID(src); ok {
			return uid, true
		}
	}
	return 0, false
}

// scanUID looks src up in /proc/net/udp{,6} (the daemon's network namespace).
func scanUID(src netip.AddrPort) (uint32, bool) {
	files := []string{"/proc/net/udp", "/proc/net/udp6"}
	if src.Addr().Is6() && !src.Addr().Is4In6() {
		files = files[1:]
	}
	for _, f := range files {
		if uid, ok := findUDP(f, src); ok {
			return uid, true
		}
	}
	return 0, false
}

// findUDP scans one /proc/net/udp file for the socket bound to src.
func findUDP(file string, src netip.AddrPort) (uint32, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:tm retrnsmt uid …
		if len(fs) < 8 {
			continue
		}
		a, ok := parseProcAddr(fs[1])
		if !ok || a.Port() != src.Port() || a.Addr().Unmap() != src.Addr().Unmap() && !a.Addr().IsUnspecified() {
			continue
		}
		uid, err := strconv.ParseUint(fs[7], 10, 32)
		if err != nil {
			return 0, false
		}
		return uint32(uid), true
	}
	return 0, false
}

// parseProcAddr parses /proc/net/udp's "0100007F:1F90" (the address as the
// kernel's 32-bit words in host order, the port in hex).
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	// Each 32-bit word is printed in host byte order (little-endian here).
	for i := 0; i+4 <= len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(a, uint16(port)), true
}
