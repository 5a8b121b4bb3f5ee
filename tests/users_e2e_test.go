package tests

// Another user of the host against a daemon of root's (the security
// issue's findings): any local process could register at priority 0, and
// runs it reported under a service's task key became that service's
// profile. The other user here is a socket the test process makes as uid
// 65534: the kernel lists it as that user's, which is all the daemon goes
// by.

import (
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/udp"
)

const otherUID = 65534 // nobody

func TestOtherUserCannotClaimPriorityOrPoisonProfile(t *testing.T) {
	requireBins(t, "fikit")
	d := startServe(t, t.TempDir(), "", "--profile-runs", "10")
	const key = "users-svc"
	c, send := socketAs(t, otherUID, d.addr)
	send(&udp.Register{Seq: 1, TaskKey: key, PID: 1, Priority: 0, DeviceUUID: [16]byte{7}, DeviceName: "fikit simgpu"})
	var ack *udp.RegisterAck
	var refusal *udp.Error
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && (ack == nil || refusal == nil); {
		_ = c.SetReadDeadline(deadline)
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		switch m, _ := udp.Decode(buf[:n]); m := m.(type) {
		case *udp.RegisterAck:
			ack = m
		case *udp.Error:
			refusal = m
		}
	}
	if ack == nil {
		t.Fatal("no RegisterAck")
	}
	if refusal == nil || refusal.Code != udp.CodeInvalidValue || refusal.TaskID != ack.TaskID {
		t.Errorf("the hook was not told its priority was lowered: %+v", refusal)
	}
	var prio int = -1
	var gotKey string
	for _, ta := range d.status(t).Tasks {
		if ta.ID == ack.TaskID {
			prio, gotKey = ta.Priority, ta.Key
		}
	}
	if prio != 5 {
		t.Errorf("another user's claim of priority 0 registered at %d, want 5 (the default policy)", prio)
	}
	wantKey := "uid65534:" + key
	if gotKey != wantKey {
		t.Errorf("another user's task profiles under %q, want %q", gotKey, wantKey)
	}

	// 23 made-up runs of one 5 ms kernel under the service's key.
	for run := uint32(1); run <= 23; run++ {
		send(&udp.LaunchNotify{TaskID: ack.TaskID, Seq: run, KernelID: 9})
		send(&udp.Measurements{TaskID: ack.TaskID, Run: run, Records: []udp.Record{{KernelID: 9, DurationNS: 5_000_000}}})
		send(&udp.RunEnd{TaskID: ack.TaskID, Run: run, Kernels: 1, RunNS: 6_000_000, Reason: udp.ReasonStreamSync, LastSeq: run})
		time.Sleep(2 * time.Millisecond)
	}
	send(&udp.Goodbye{TaskID: ack.TaskID})
	fikit := requireBins(t, "fikit")[0]
	if !waitFor(5*time.Second, func() bool {
		return runCmd(t, 30*time.Second, nil, fikit, "profile", "show", wantKey, "--data-dir", d.dataDir, "--json").ExitCode == 0
	}) {
		t.Fatalf("the other user's runs were not kept under %q", wantKey)
	}
	if r := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", key, "--data-dir", d.dataDir, "--json"); r.ExitCode == 0 {
		t.Fatalf("another user's runs became the service's profile:\n%s", r.Stdout)
	}

	// The daemon's own user (root here) claims what it likes, under its key.
	rc, rsend := rawSender(t, d.addr)
	rsend(&udp.Register{Seq: 1, TaskKey: key, PID: 1, Priority: 0, DeviceUUID: [16]byte{7}, DeviceName: "fikit simgpu"})
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := rc.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := udp.Decode(buf[:n])
	ra, ok := m.(*udp.RegisterAck)
	if !ok {
		t.Fatalf("root's registration answered %#v", m)
	}
	for _, ta := range d.status(t).Tasks {
		if ta.ID == ra.TaskID && (ta.Priority != 0 || ta.Key != key) {
			t.Errorf("root's task registered at %d under %q, want 0 under %q", ta.Priority, ta.Key, key)
		}
	}
}

// socketAs is a UDP socket to addr that the kernel lists as uid's: made
// while this thread alone (a raw setresuid, not Go's, which changes every
// thread) has uid as its effective user. Needs root; skips without.
func socketAs(t *testing.T, uid int, addr string) (net.Conn, func(udp.Message)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	keep := ^uintptr(0) // setresuid: -1 leaves an id as it is
	runtime.LockOSThread()
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
		runtime.UnlockOSThread()
		t.Fatalf("setresuid: %v", e)
	}
	fd, serr := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, 0, keep); e != 0 {
		// This thread stays locked, and so ends with its goroutine.
		t.Fatalf("setresuid back: %v", e)
	}
	runtime.UnlockOSThread()
	if serr != nil {
		t.Fatal(serr)
	}
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	sa := &syscall.SockaddrInet4{Port: ua.Port}
	copy(sa.Addr[:], ua.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "udp-as-other-user")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, sendOn(t, c)
}
