package tests

// Hooks on another host: the daemon hears them only with the MAC of its
// key (--auth-key-file, FIKIT_AUTH_KEY_FILE), and refuses an address other
// hosts can reach without one. "Another host" is an address on the
// loopback device of a private network namespace that is not in 127/8: the
// daemon and the hooks see each other as remote, and nothing leaves the
// namespace.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/udp"
)

const remoteIP = "10.203.0.1"

// enterPrivateNetwork moves the test's goroutine, locked to its thread for
// good (the thread ends with the test), into a new network namespace with
// lo up and remoteIP on it; processes the test starts inherit it.
func enterPrivateNetwork(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private network namespace")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs ip(8) to set up a private network namespace")
	}
	runtime.LockOSThread() // never unlocked: the runtime ends the thread with the goroutine
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", remoteIP + "/32", "dev", "lo"}} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

func TestRemoteHooksNeedTheKey(t *testing.T) {
	bins := requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	enterPrivateNetwork(t)
	dir := t.TempDir()
	key := writeTemp(t, "fikit.key", "c2VjcmV0LWtleS1mb3ItdGhlLWUyZS10ZXN0\n")
	wrongKey := writeTemp(t, "wrong.key", "YW5vdGhlci1rZXktb2YtdGhlLXNhbWUtc2l6ZQ==\n")
	for _, p := range []string{key, wrongKey} {
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := fmt.Sprintf("%s:%d", remoteIP, 17000+os.Getpid()%2000)

	// An address other hosts can reach, without a key: refused.
	for _, listen := range []string{addr, "0.0.0.0:0"} {
		r := runCmd(t, 10*time.Second, nil, bins[0], "serve", "--ephemeral", "--listen", listen)
		if r.ExitCode != 2 || !strings.Contains(r.Stderr, "--auth-key-file") {
			t.Fatalf("serve --listen %s without a key: %s; want status 2 naming --auth-key-file", listen, r)
		}
	}

	policy := writeTemp(t, "policy", "remote 0\n")
	d := startServe(t, dir, addr, "--auth-key-file", key, "--priority-policy", policy, "--profile-runs", "10")
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_AUTH_KEY_FILE="+key)
	hp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: "remote-hp", sched: addr, hooked: true,
		runs: 150, interval: 10 * time.Millisecond}
	lp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 5, key: "remote-lp", sched: addr, hooked: true,
		runs: 1000000}
	procs := startReplays(t, env, hp, lp)
	defer procs[1].KillGroup()
	ids := map[string]uint32{}
	prios := map[string]int{}
	if !waitFor(20*time.Second, func() bool {
		for _, ta := range d.status(t).Tasks {
			ids[ta.Key], prios[ta.Key] = ta.ID, ta.Priority
		}
		return ids[hp.key] != 0 && ids[lp.key] != 0
	}) {
		t.Fatalf("the signed hooks did not register: %v\nhp: %s", ids, procs[0].Stderr())
	}
	if prios[hp.key] != 0 || prios[lp.key] != 5 {
		t.Errorf("priorities %v, want the claimed ones (the policy allows remote 0)", prios)
	}

	// A hook with another key and a forger without any: dropped, unanswered.
	intruder := hp
	intruder.key, intruder.runs = "intruder", 20
	cmd, args := intruder.command(t)
	in := startCmd(t, simgpuEnv(t, uniqueShm(t), "FIKIT_AUTH_KEY_FILE="+wrongKey), cmd, args...)
	c, send := rawSender(t, addr)
	send(&udp.Register{Seq: 1, TaskKey: "forger", PID: 1, Priority: 0, DeviceName: "x", HookFlags: udp.HookSendsToken})
	send(&udp.Goodbye{TaskID: ids[hp.key]})
	send(&udp.Goodbye{TaskID: ids[lp.key]})
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(make([]byte, 2048)); err == nil {
		t.Errorf("the forger got a %d-byte answer", n)
	}
	// The intruder's service is never scheduled, and never stopped: it
	// runs un-hooked once its registration goes unanswered.
	if r := in.Wait(time.Minute); r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != intruder.runs {
		t.Errorf("the wrongly keyed service: %s", r)
	}

	r := procs[0].Wait(2 * time.Minute)
	if r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != hp.runs {
		t.Fatalf("high-priority service: %s", r)
	}
	m := adminMetrics(t, dir)
	after := map[string]uint32{}
	for _, ta := range d.status(t).Tasks {
		after[ta.Key] = ta.ID
	}
	t.Logf("tasks %v; unauthenticated datagrams dropped %.0f; grants %.0f; holds %.0f", after,
		m["fikit_unauthenticated_datagrams_total"], m["fikit_grants_total"], m["fikit_holds_total"])
	if after["forger"] != 0 || after["intruder"] != 0 {
		t.Errorf("an unsigned or wrongly signed hook registered: %v", after)
	}
	if after[lp.key] != ids[lp.key] {
		t.Errorf("a forged Goodbye removed the low-priority task (ID %d, now %d)", ids[lp.key], after[lp.key])
	}
	if got := m["fikit_unauthenticated_datagrams_total"]; got < 3+1 {
		t.Errorf("fikit_unauthenticated_datagrams_total = %.0f, want the forger's 3 and the intruder's", got)
	}
	if m["fikit_grants_total"] == 0 {
		t.Error("the signed low-priority service was granted nothing")
	}
	if bytes.Contains([]byte(procs[0].Stderr()), []byte("unreachable")) {
		t.Errorf("the signed high-priority hook lost the scheduler:\n%s", tail(procs[0].Stderr(), 2000))
	}
}
