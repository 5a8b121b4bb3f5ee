package tests

// Faults: the daemon is killed (SIGKILL) the moment it logs "profile
// complete". The profile must be on disk: that line was logged before the
// write, and a kill soon after lost completed profiles and sent others back
// to their 10-run checkpoint (docs/operations.md "The fault campaign").
// The hooked service runs on
// through the daemon's death.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"syscall"
	"testing"
	"time"
)

func TestFaultKillAfterProfileComplete(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	fikit := requireBins(t, "fikit")[0]
	sc := faultsScale()
	dir := t.TempDir()
	env := simgpuEnv(t, uniqueShm(t))
	addr := freeUDPAddr(t)
	const profileRuns = 10

	// checkProfile reports whether key's profile is complete in the store
	// (read through a running daemon's socket), and its runs.
	checkProfile := func(d *daemonProc, key string) (bool, int) {
		r := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", key, "--data-dir", d.dataDir, "--json")
		var show profileShowJSON
		if r.ExitCode != 0 || json.Unmarshal([]byte(r.Stdout), &show) != nil {
			return false, 0
		}
		return show.Phase == "sharing", show.Runs
	}

	lost, serviceFailed := 0, 0
	var killDelays []time.Duration
	prev := ""
	for c := 1; c <= sc.kills+1; c++ {
		d := startServe(t, dir, addr, "--profile-runs", fmt.Sprint(profileRuns))
		if prev != "" {
			if ok, runs := checkProfile(d, prev); !ok || runs != profileRuns {
				lost++
				t.Errorf("cycle %d: %s was logged complete, then the daemon was killed: now complete %v with %d runs", c-1, prev, ok, runs)
			}
		}
		if c > sc.kills {
			d.stop(t)
			break
		}
		key := fmt.Sprintf("kill-%d", c)
		complete := regexp.MustCompile(`msg="profile complete".* key=` + key + ` `)
		s := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: key, sched: addr, hooked: true, runs: 60}
		cmd, args := s.command(t)
		var svc *proc
		killed := false
		for attempt := 0; attempt < 3 && !killed; attempt++ {
			svc = startCmd(t, env, cmd, args...)
			// Poll the daemon's log and kill it as soon as the line is there.
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
				if loc := complete.FindStringIndex(d.Stderr()); loc != nil {
					seen := time.Now()
					_ = syscall.Kill(d.Pid(), syscall.SIGKILL)
					killDelays = append(killDelays, time.Since(seen))
					d.Wait(10 * time.Second)
					killed = true
					break
				}
				select {
				case <-svc.done:
					deadline = time.Time{} // finished without completing: replay again
				case <-time.After(500 * time.Microsecond):
				}
			}
			if !killed {
				if r := svc.Wait(time.Minute); r.ExitCode != 0 {
					t.Fatalf("cycle %d: the service failed while profiling: %s", c, r)
				}
			}
		}
		if !killed {
			t.Fatalf("cycle %d: %s never completed its profile:\n%s", c, key, tail(d.Stderr(), 3000))
		}
		// The service runs on without its daemon (fail open) and finishes.
		if r := svc.Wait(time.Minute); r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != s.runs {
			serviceFailed++
			t.Errorf("cycle %d: the service did not finish its %d runs after the daemon was killed: %s", c, s.runs, r)
		}
		prev = key
	}
	faultReport(t, "kill -9 of the daemon right after \"profile complete\"", fmt.Sprintf("%d kills", sc.kills), verdict(t),
		fmt.Sprintf("profiles lost or not complete after restart: %d; services that did not finish: %d; SIGKILL sent within %v of seeing the line",
			lost, serviceFailed, maxDur(killDelays).Round(time.Microsecond)))
}
