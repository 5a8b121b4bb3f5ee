//go:build linux

package udp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestUnixConnCredentialsAndAnswers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hooks.sock")
	c, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket file %v %v", fi, err)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	t.Logf("kernel %s: SCM_PIDFD %v", unix.ByteSliceToString(uts.Release[:]), c.Pidfds)

	hook, err := net.DialUnix("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "c1"), Net: "unixgram"},
		&net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer hook.Close()
	if _, err := hook.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	var from netip.AddrPort
	var got Cred
	var pidfdAlive bool
	if err := c.Read(func(p []byte, f netip.AddrPort, cred *Cred) {
		if string(p) != "hello" {
			t.Errorf("payload %q", p)
		}
		from, got = f, *cred
		if cred.PidFD >= 0 {
			pidfdAlive = unix.PidfdSendSignal(cred.PidFD, 0, nil, 0) == nil
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !IsUnixAddr(from) || got.PID != int32(os.Getpid()) || got.UID != uint32(os.Getuid()) {
		t.Fatalf("from %v cred %+v", from, got)
	}
	if c.Pidfds && (got.PidFD < 0 || !pidfdAlive) {
		t.Errorf("kernel passes pidfds, datagram had none usable: %+v", got)
	}
	// The same sender keeps its address.
	hook.Write([]byte("again"))
	_ = c.Read(func(_ []byte, f netip.AddrPort, _ *Cred) {
		if f != from {
			t.Errorf("second datagram from %v, first from %v", f, from)
		}
	})

	// The answer carries a descriptor where asked.
	f, err := os.CreateTemp(dir, "board")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.WriteTo([]byte("ack"), from, int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 64), make([]byte, 64)
	hook.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, _, err := hook.ReadMsgUnix(buf, oob)
	if err != nil || string(buf[:n]) != "ack" {
		t.Fatalf("answer %q %v", buf[:n], err)
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	if len(msgs) != 1 {
		t.Fatalf("%d control messages", len(msgs))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights %v %v", fds, err)
	}
	var a, b unix.Stat_t
	_ = unix.Fstat(fds[0], &a)
	_ = unix.Fstat(int(f.Fd()), &b)
	unix.Close(fds[0])
	if a.Ino != b.Ino {
		t.Error("descriptor received is not the one sent")
	}
	if err := c.WriteTo([]byte("x"), UnixAddr(999), 0); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("unknown peer: %v", err)
	}
}

// TestUnixConnUnboundSender: a datagram from an unbound socket cannot be
// answered: it is dropped and counted, not handed on.
func TestUnixConnUnboundSender(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.sock")
	c, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	called := false
	if err := c.Read(func([]byte, netip.AddrPort, *Cred) { called = true }); err != nil {
		t.Fatal(err)
	}
	if called || c.Unanswerable() != 1 {
		t.Errorf("called %v, unanswerable %d", called, c.Unanswerable())
	}
}

// TestListenUnixReplaces: a stale socket (a daemon that died) is
// replaced; a file that is not a socket is refused; Close removes the
// socket only while it is still this daemon's.
func TestListenUnixReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hooks.sock")
	old, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	old.Close() // the old daemon's close leaves the new socket
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the old daemon's close removed the new socket: %v", err)
	}
	c.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	if _, err := ListenUnix(plain); !errors.Is(err, os.ErrExist) {
		t.Errorf("over a plain file: %v", err)
	}
}
