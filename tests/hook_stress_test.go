package tests

// The hook under concurrency and a daemon that goes and comes back; with
// the other launcher tests they are what `make test-asan` / `test-tsan` run
// under the sanitizers (docs/operations.md "Sanitizers").

import (
	"fmt"
	"testing"
	"time"

	"github.com/fikit/fikit/udp"
)

// TestHookManyThreads: eight threads launching at once, as holder and as a
// waiter spending credit; every launch is heard, with gapless seqs.
func TestHookManyThreads(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	for _, role := range []udp.Role{udp.RoleHolder, udp.RoleWaiter} {
		t.Run(fmt.Sprint(role), func(t *testing.T) {
			sched := newFakeSched(t, schedPolicy{Role: role, Phase: udp.PhaseSharing, Credit: 3})
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=4", "FIKIT_CONNECT_TIMEOUT_MS=3000",
				"FIKIT_GRANT_TIMEOUT_MS=5000")
			r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "threads8", "20", "20000")
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			units := parseLauncher(t, r.Stdout)
			if len(units) != 8*20*4 {
				t.Fatalf("launcher printed %d launches, want %d", len(units), 8*20*4)
			}
			waitFor(5*time.Second, func() bool { return len(ofType[*udp.Goodbye](sched.Received())) > 0 })
			ls := launchesByTask(sched.Received())[1]
			if len(ls) != len(units) {
				t.Fatalf("heard %d launches of %d", len(ls), len(units))
			}
			for i, l := range ls {
				if l.Seq != uint32(i+1) {
					t.Fatalf("launch %d has seq %d", i, l.Seq)
				}
			}
		})
	}
}

// TestHookDaemonGoneAndBack: the daemon's port closes mid-run (the hook
// gets ECONNREFUSED and passes launches through), and a daemon comes back
// on the same port: the hook registers with it and reports there again;
// the service never fails.
func TestHookDaemonGoneAndBack(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	policy := schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing, Credit: 2}
	first := newFakeSched(t, policy)
	addr := first.Addr()
	env := hookEnv(t, uniqueShm(t), addr, "FIKIT_PRIORITY=6", "FIKIT_CONNECT_TIMEOUT_MS=3000",
		"FIKIT_GRANT_TIMEOUT_MS=200")
	// 3 launches of 200 µs per run: a few seconds, past the hook's first
	// re-registration (1 s after the outage is seen).
	p := startCmd(t, env, launcher, kernelsPTX(t), "direct", "6000", "200000")
	heard := func(f *fakeSched) int {
		n := 0
		for _, ls := range launchesByTask(f.Received()) {
			n += len(ls)
		}
		return n
	}
	if !waitFor(30*time.Second, func() bool { return heard(first) >= 300 }) {
		t.Fatalf("the first daemon heard %d launches", heard(first))
	}
	first.Close()
	time.Sleep(300 * time.Millisecond)
	second := newFakeSchedAt(t, policy, addr)
	r := p.Wait(2 * hookTimeout)
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	if regs := ofType[*udp.Register](second.Received()); len(regs) == 0 || heard(second) == 0 {
		t.Fatalf("the daemon back on %s got %d registrations and %d launches", addr, len(regs), heard(second))
	}
	t.Logf("launches heard: %d before the outage, %d by the daemon back on the port", heard(first), heard(second))
}

// TestHookNullFunction: a service that launches a NULL function (the
// driver refuses it) runs on, and its real launches are heard. Under
// make test-asan, LeakSanitizer checks the hook allocates nothing per such
// launch (it named each one anew, unstored, before).
func TestHookNullFunction(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_CONNECT_TIMEOUT_MS=3000")
	r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "null", "3")
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	units := parseLauncher(t, r.Stdout)
	waitFor(5*time.Second, func() bool { return len(ofType[*udp.Goodbye](sched.Received())) > 0 })
	var real int
	for _, l := range launchesByTask(sched.Received())[1] {
		for _, u := range units {
			if l.KernelID == u.ID {
				real++
				break
			}
		}
	}
	if real != len(units) {
		t.Errorf("heard %d of the %d real launches", real, len(units))
	}
}
