package daemon

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// childOwning starts `sleep` holding a copy of conn's socket, as a hooked
// process holds the socket it registered from.
func childOwning(t *testing.T, conn *net.UDPConn) *exec.Cmd {
	t.Helper()
	f, err := conn.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "60")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestOwnsSocket(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := c.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := ownsSocket(os.Getpid(), src); err != nil {
		t.Fatalf("this process does not own its own socket: %v", err)
	}
	child := childOwning(t, c)
	if err := ownsSocket(child.Process.Pid, src); err != nil {
		t.Fatalf("a child holding the socket does not own it: %v", err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if err := ownsSocket(other.Process.Pid, src); err == nil {
		t.Fatal("a process without the socket owns it")
	}
	unused := netip.MustParseAddrPort("127.0.0.1:1")
	if err := ownsSocket(os.Getpid(), unused); err == nil {
		t.Fatal("an unbound address is owned")
	}
}

// A holder whose process dies without a Goodbye is gone at once, not after
// DeadAfter: the waiter behind it gets the GPU.
func TestExitedTaskLeavesAtOnce(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter = int64(10 * time.Second) // heartbeats would take this long
	s := startServer(t, store.NewMemory(), cfg, "")
	hp := newFakeHook(t, s)
	child := childOwning(t, hp.conn)
	hp.send(&udp.Register{Seq: 1, TaskKey: "dies", PID: uint32(child.Process.Pid), Priority: 0,
		DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	if m := hp.recv(2 * time.Second); m == nil {
		t.Fatal("no RegisterAck")
	}
	lp := newFakeHook(t, s)
	if a := lp.register("waits", 5); a.Role != udp.RoleWaiter {
		t.Fatalf("low priority registered as %v", a.Role)
	}
	// The profiling holder holds everyone: the request waits.
	lp.send(&udp.LaunchRequest{TaskID: 2, Seq: 1, KernelID: 5})
	if m := lp.recv(100 * time.Millisecond); m != nil {
		if g, ok := m.(*udp.Grant); ok {
			t.Fatalf("granted behind a profiling holder: %+v", g)
		}
	}
	killed := time.Now()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	for {
		m := lp.recv(3 * time.Second)
		if m == nil {
			t.Fatalf("nothing for the waiter %v after its holder died", time.Since(killed))
		}
		if st, ok := m.(*udp.State); ok && st.Role == udp.RoleHolder {
			break
		}
		if _, ok := m.(*udp.Grant); ok {
			break
		}
	}
	if d := time.Since(killed); d > 2*time.Second {
		t.Fatalf("the dead holder's task left after %v", d)
	}
	if n := len(s.Status().Tasks); n != 1 {
		t.Fatalf("%d tasks after the holder died, want 1", n)
	}
}

// A watched task's silence is not death: on a CPU-starved host its
// heartbeats come late, and it stays registered up to DeadAfterWatched; an
// unwatched one (here: a pid that does not own its socket) is dropped after
// DeadAfter.
func TestWatchedTaskSurvivesSilence(t *testing.T) {
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter = int64(100 * time.Millisecond)
	cfg.DeadAfterWatched = int64(10 * time.Second)
	s := startServer(t, store.NewMemory(), cfg, "")
	watched := newFakeHook(t, s)
	child := childOwning(t, watched.conn)
	watched.send(&udp.Register{Seq: 1, TaskKey: "watched", PID: uint32(child.Process.Pid), Priority: 0,
		DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	if m := watched.recv(2 * time.Second); m == nil {
		t.Fatal("no RegisterAck")
	}
	unwatched := newFakeHook(t, s)
	unwatched.send(&udp.Register{Seq: 1, TaskKey: "unwatched", PID: 1, Priority: 5,
		DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	if m := unwatched.recv(2 * time.Second); m == nil {
		t.Fatal("no RegisterAck")
	}
	time.Sleep(600 * time.Millisecond) // silent: no heartbeats
	var keys []string
	for _, ta := range s.Status().Tasks {
		keys = append(keys, ta.Key)
	}
	if len(keys) != 1 || keys[0] != "watched" {
		t.Fatalf("after 600 ms of silence the tasks are %q, want only the watched one", keys)
	}
}
