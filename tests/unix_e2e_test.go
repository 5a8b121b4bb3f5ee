package tests

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/udp"
)

// TestUnixSocketHooks (issue 35 item 1): hooked fikit-replays on simgpu
// reach the daemon over its unix socket alone (FIKIT_SCHEDULER=unix:PATH),
// are identified by the kernel's pid (pid_verified), get the board's
// descriptor in their RegisterAck, are scheduled (the low priority is
// granted, the high priority completes), shrug off forged datagrams on the
// socket, and register again with a restarted daemon.
func TestUnixSocketHooks(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so")
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock", "hooks.sock")
	reply := filepath.Join(dir, "c")
	dataDir := filepath.Join(dir, "data")
	args := []string{"--listen", "unix:" + sock, "--reply-dir", reply, "--profile-runs", "10"}
	d := startServe(t, dataDir, "", args...)
	if fi, err := os.Stat(reply); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o733 {
		t.Fatalf("reply directory %v %v, want drwx-wx-wt", fi, err)
	}
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_LOG=info")
	sched := "unix:" + sock
	hp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: "unix-hp", sched: sched, hooked: true,
		runs: 150, interval: 10 * time.Millisecond}
	lp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 5, key: "unix-lp", sched: sched, hooked: true,
		runs: 1000000}
	procs := startReplays(t, env, hp, lp)
	defer procs[1].KillGroup()
	var lpID uint32
	if !waitFor(20*time.Second, func() bool {
		n := 0
		for _, ta := range d.status(t).Tasks {
			if ta.Key == hp.key || ta.Key == lp.key {
				n++
				if !ta.Verified {
					return false
				}
				if ta.Key == lp.key {
					lpID = ta.ID
				}
			}
		}
		return n == 2
	}) {
		t.Fatalf("the unix hooks did not register (verified): %+v\nhp: %s", d.status(t), tail(procs[0].Stderr(), 20))
	}

	// Forgeries on the socket from another process (this one): a Goodbye
	// for the low-priority task, with and without a guessed token.
	forger, err := net.DialUnix("unixgram", &net.UnixAddr{Name: filepath.Join(reply, "forger"), Net: "unixgram"},
		&net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	for _, tok := range []uint64{0, 1, 0xdeadbeef} {
		b, _ := udp.Append(nil, &udp.Goodbye{TaskID: lpID, Token: tok})
		if _, err := forger.Write(b); err != nil {
			t.Fatal(err)
		}
	}

	r := procs[0].Wait(2 * time.Minute)
	if r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != hp.runs {
		t.Fatalf("high-priority service: %s", r)
	}
	if !strings.Contains(r.Stderr, "sharing the scheduler's board "+udp.BoardInAnswer) {
		t.Errorf("the high-priority hook did not map the board from its answer:\n%s", tail(r.Stderr, 20))
	}
	m := adminMetrics(t, dataDir)
	if m["fikit_grants_total"] == 0 {
		t.Error("the low-priority service was granted nothing")
	}
	if m["fikit_forged_messages_total"] < 3 {
		t.Errorf("fikit_forged_messages_total = %.0f, want the 3 forged Goodbyes", m["fikit_forged_messages_total"])
	}
	// All three were dropped (a hook may register again on its own, under
	// a new ID, so the ID is not what shows it), and the task is there.
	still := false
	for _, ta := range d.status(t).Tasks {
		still = still || ta.Key == lp.key
	}
	if !still {
		t.Error("the low-priority task is gone after forged Goodbyes")
	}

	// A C service that exits normally (its atexit handler runs) removes
	// the names of its reply sockets from the reply directory: at
	// priority 9 beside the running low-priority service it is a waiter,
	// and its main thread asks from a socket of its own (a thread alive
	// at exit runs no destructor: a busy host's run left that one).
	before, _ := filepath.Glob(filepath.Join(reply, "fk-*"))
	launcher := requireBins(t, "hook-launcher")[0]
	lr := runCmd(t, time.Minute, hookEnv(t, uniqueShm(t), sched, "FIKIT_LOG=info", "FIKIT_PRIORITY=9"), launcher, kernelsPTX(t), "direct", "50")
	if lr.ExitCode != 0 || !strings.Contains(lr.Stderr, "registered") {
		t.Fatalf("hooked launcher over the unix socket: %s", lr)
	}
	if after, _ := filepath.Glob(filepath.Join(reply, "fk-*")); len(after) != len(before) {
		t.Errorf("reply sockets before the launcher %v, after it exited %v", before, after)
	}

	// A restarted daemon at the same path: the running hook connects again
	// and registers with it.
	d.stop(t)
	d2 := startServe(t, dataDir, "", args...)
	defer d2.stop(t)
	if !waitFor(30*time.Second, func() bool {
		for _, ta := range d2.status(t).Tasks {
			if ta.Key == lp.key && ta.Verified {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the low-priority hook did not register with the restarted daemon: %+v\n%s", d2.status(t), tail(procs[1].Stderr(), 30))
	}

	// A service killed (no atexit handler) leaves its reply sockets: the
	// daemon, seeing its process exit, removes them, and forgets it.
	var lpPID int
	for _, ta := range d2.status(t).Tasks {
		if ta.Key == lp.key {
			lpPID = ta.PID
		}
	}
	own := func() []string {
		m, _ := filepath.Glob(filepath.Join(reply, fmt.Sprintf("fk-%d-*", lpPID)))
		return m
	}
	if len(own()) == 0 {
		t.Fatalf("no reply socket of the low-priority service (pid %d) in %s", lpPID, reply)
	}
	procs[1].KillGroup()
	if !waitFor(10*time.Second, func() bool { return len(own()) == 0 }) {
		t.Errorf("the killed service's reply sockets are still there: %v", own())
	}
	if m := adminMetrics(t, dataDir); m["fikit_unix_peers"] != 0 {
		t.Errorf("fikit_unix_peers = %.0f after every hook left, want 0", m["fikit_unix_peers"])
	}
}
