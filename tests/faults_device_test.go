package tests

// Faults: one service's CUDA error touches no other (issue 24). A service
// under the daemon gets an injected device fault (simgpu's
// FIKIT_SIMGPU_FAULT: a kernel with an illegal address, or its context
// destroyed under it) while another, of the other priority, runs beside it.
// The failing service sees the driver's error (sticky where the driver's is),
// the daemon lets go of its task, and the healthy one keeps its schedule:
// ground truth from simgpu's timeline, no kernel of the healthy service is
// blocked by other contexts after the fault (but for the device's switch away
// from the failed context), and it is never left waiting for a grant.

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFaultDeviceErrors(t *testing.T) {
	requireBins(t, "fikit", "hook-launcher", "libfikit_hook.so", "simgpu/libcuda.so.1")
	launcher := requireBins(t, "hook-launcher")[0]
	cases := []struct {
		name string
		// failing: priority of the failing service (the healthy one has
		// the other of 0 and 8); fault: FIKIT_SIMGPU_FAULT.
		failing int
		fault   string
		// carryOn: the failing service answers every later request with
		// the error and carries on (HOOK_LAUNCHER_ON_ERROR=continue)
		// instead of exiting; then wantErr is the error of every call
		// after the fault.
		carryOn bool
		wantErr string
	}{
		{"hp kernel faults, hp carries on", 0, "illegal-address@60", true, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"lp kernel faults, lp exits", 8, "illegal-address@60", false, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"hp context destroyed, hp exits", 0, "destroy-context@60", false, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			// Profiles complete within the first runs: the fault comes in
			// the sharing phase, where the healthy service is gated by
			// (or gates) the failing one.
			d := startServe(t, t.TempDir(), "", "--profile-runs", "10")
			shm := uniqueShm(t)
			tl := timelineOf(t)
			healthyPrio := 8 - c.failing
			env := func(prio int, key string, extra ...string) []string {
				return hookEnv(t, shm, d.addr, append([]string{"FIKIT_PRIORITY=" + strconv.Itoa(prio),
					"FIKIT_TASK_KEY=" + key, "FIKIT_CONNECT_TIMEOUT_MS=3000", "FIKIT_SIMGPU_TIMELINE=" + tl}, extra...)...)
			}
			// Both profiled alone first, so that the scenario runs in the
			// sharing phase: the lower priority waits for grants.
			for _, p := range []struct {
				prio int
				key  string
			}{{c.failing, "fault-failing"}, {healthyPrio, "fault-healthy"}} {
				if r := runCmd(t, time.Minute, env(p.prio, p.key), launcher, kernelsPTX(t), "direct", "15", "200000"); r.ExitCode != 0 {
					t.Fatalf("profiling %s: %s", p.key, r)
				}
			}
			if !waitFor(5*time.Second, func() bool {
				r := runCmd(t, 30*time.Second, nil, requireBins(t, "fikit")[0], "profile", "ls", "--data-dir", d.dataDir, "--json")
				return strings.Count(r.Stdout, `"sharing"`) == 2
			}) {
				t.Fatalf("the two services' profiles did not complete")
			}
			failEnv := env(c.failing, "fault-failing", "FIKIT_SIMGPU_FAULT="+c.fault)
			runs := "60"
			if c.carryOn {
				failEnv = append(failEnv, "HOOK_LAUNCHER_ON_ERROR=continue")
				runs = "1500" // about 3 s of errors after the fault
			}
			// Both leave gaps between runs (a service between requests):
			// the lower priority runs in the higher one's gaps.
			failEnv = append(failEnv, "HOOK_LAUNCHER_GAP_US=300")
			healthy := startCmd(t, env(healthyPrio, "fault-healthy", "HOOK_LAUNCHER_GAP_US=300"), launcher, kernelsPTX(t),
				"direct", "1500", "200000")
			failing := startCmd(t, failEnv, launcher, kernelsPTX(t), "direct", runs, "200000")

			// The failing service sees the driver's error.
			if c.carryOn {
				if !failing.waitOutput(" E ", 1, time.Minute) {
					t.Fatalf("no error seen by the failing service: %s", failing.Wait(time.Second))
				}
				// The daemon lets go of the task while its process lives on.
				gone := waitFor(5*time.Second, func() bool {
					for _, ts := range d.status(t).Tasks {
						if ts.Key == "fault-failing" {
							return false
						}
					}
					return true
				})
				select {
				case <-failing.done:
					t.Fatalf("the failing service ended before the check")
				default:
				}
				if !gone {
					t.Errorf("5 s after its sticky error, the daemon still schedules the failing task: %+v", d.status(t).Tasks)
				}
			}
			fr := failing.Wait(2 * time.Minute)
			hr := healthy.Wait(2 * time.Minute)
			if c.carryOn {
				if fr.ExitCode != 0 {
					t.Fatalf("failing service: %s", fr)
				}
				checkSticky(t, fr.Stdout, c.wantErr)
			} else if fr.ExitCode != 1 || !strings.Contains(fr.Stderr, c.wantErr) {
				t.Fatalf("failing service: want exit 1 with %s: %s", c.wantErr, fr)
			}
			if hr.ExitCode != 0 || len(parseLauncher(t, hr.Stdout)) != 1500*3 {
				t.Fatalf("healthy service: %s", hr)
			}
			if strings.Contains(hr.Stderr, "launching anyway") {
				t.Errorf("the healthy service waited for a grant in vain:\n%s", hr.Stderr)
			}

			// The daemon holds nothing of either.
			if !waitFor(5*time.Second, func() bool {
				m := adminMetrics(t, d.dataDir)
				return m["fikit_tasks"] == 0 && m["fikit_board_slots_in_use"] == 0 && m["fikit_exit_watches"] == 0
			}) {
				m := adminMetrics(t, d.dataDir)
				t.Errorf("after both ended: %v tasks, %v board slots, %v watches", m["fikit_tasks"],
					m["fikit_board_slots_in_use"], m["fikit_exit_watches"])
			}

			// Ground truth: nothing of the failed service runs after its
			// fault, so nothing of it blocks the healthy one.
			recs := readTimeline(t, tl)
			fpid, hpid := failing.Pid(), healthy.Pid()
			// The fault: the failed service's last work on the device, the
			// hook's probe included (its context is the service's).
			var faultAt int64
			for _, r := range readTimelineAll(t, tl) {
				if r.PID == fpid && r.EndNs > faultAt {
					faultAt = r.EndNs
				}
			}
			// The device's switch away from the failed context may block
			// a kernel that arrives right after the fault (simgpu's switch
			// cost, at most a millisecond); after that, nothing may.
			const settle = int64(time.Millisecond)
			var after, blocked, blockedSettling int64
			var afterN int
			for _, r := range recs {
				switch {
				case r.PID != hpid || r.ArriveNs <= faultAt:
				case r.ArriveNs <= faultAt+settle:
					blockedSettling += r.BlockedNs
				default:
					afterN++
					after += r.EndNs - r.StartNs
					blocked += r.BlockedNs
				}
			}
			faultReport(t, "device fault: "+c.name, c.fault, verdict(t),
				fmt.Sprintf("healthy service: %d kernel segments after the fault, blocked %d ns of %d ns", afterN, blocked, after))
			if afterN == 0 {
				t.Fatalf("the healthy service ran nothing after the fault (fault at %d ns; %d records)", faultAt, len(recs))
			}
			if blocked != 0 || blockedSettling > settle {
				t.Errorf("after the fault the healthy service's kernels were blocked %d ns by other contexts (%d ns in the first ms)",
					blocked, blockedSettling)
			}
		})
	}
}

// checkSticky: once a call failed with want, every later call failed with
// it too (each launch line follows its error line), and nothing else failed.
func checkSticky(t *testing.T, stdout, want string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(stdout))
	var prev string
	seen, errs := false, 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[1] {
		case "E":
			if len(f) != 4 || f[3] != want {
				t.Fatalf("error line %q, want %s", sc.Text(), want)
			}
			seen = true
			errs++
		case "K":
			if seen && !strings.Contains(prev, " E cuLaunchKernel") && !strings.Contains(prev, " E launch") {
				t.Fatalf("a launch after the fault succeeded (%q after %q): the error is not sticky", sc.Text(), prev)
			}
		}
		prev = sc.Text()
	}
	if !seen || errs < 100 {
		t.Fatalf("%d error lines, want the fault and every call after it", errs)
	}
}
