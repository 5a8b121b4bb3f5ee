package tests

// Faults: the daemon restarts, again and again, under a high-priority
// service (a request every 10 ms) and a continuous low-priority one. Both
// hooks re-register with each new daemon mid-run; each restarted daemon must
// go on scheduling (before run positions were re-synchronized from run ends
// it opened no window again and granted a handful of launches per
// incarnation: the low-priority service starved), and nobody's launch may
// hang.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/internal/stats"
)

func TestFaultDaemonRestarts(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	sc := faultsScale()
	dir := t.TempDir()
	d := startServe(t, dir, "", "--profile-runs", "20")
	env := simgpuEnv(t, uniqueShm(t))
	hp := replaySpec{trace: "h100/resnet50_4_fwd", cpuNs: 12000, prio: 0, key: "restart-hp", sched: d.addr}
	lp := replaySpec{trace: "h100/bert_2_fwd", cpuNs: 5000, prio: 5, key: "restart-lp", sched: d.addr}
	for _, s := range []replaySpec{hp, lp} {
		s.runs = 40 // 20 committed; discarded runs (a loaded machine) covered
		profileFully(t, d, env, s)
	}

	lp.hooked, lp.runs = true, 1_000_000
	lcmd, largs := lp.command(t)
	lproc := startCmd(t, append(slices.Clone(env), "FIKIT_LOG=debug"), lcmd, largs...)
	if !lproc.waitOutput(`{"run"`, 1, 60*time.Second) {
		t.Fatalf("the low-priority service did not get going: %s", lproc.KillGroup())
	}
	// Every 10 ms: a run takes about 3 ms beside the low-priority service
	// and some 1.3 ms of the replayer's own between runs, so at 5 ms the
	// service is so near its capacity that its backlog from each outage
	// took up to 20 s to work off, restart after restart.
	hp.hooked, hp.runs, hp.interval = true, 1_000_000, 10*time.Millisecond
	hcmd, hargs := hp.command(t)
	hproc := startCmd(t, env, hcmd, hargs...)
	bothRegistered := func() bool {
		n := 0
		for _, ta := range d.status(t).Tasks {
			if (ta.Key == hp.key || ta.Key == lp.key) && ta.Phase == "sharing" {
				n++
			}
		}
		return n == 2
	}
	// The high-priority service is open loop: whatever delayed it (its
	// start, the outage while the low-priority service ran un-hooked) it
	// catches up on by running back to back, which leaves no gaps to fill.
	// The daemon is judged once it is on time again: the median of its
	// last 20 runs started within 1 ms of its arrival (a single run may
	// still be late: the tail of a shared GPU).
	onTime := func() bool {
		runs := parseRuns(t, hproc.Stdout())
		if len(runs) < 20 {
			return false
		}
		var waits []int64
		for _, r := range runs[len(runs)-20:] {
			if r.WaitNs == nil {
				return false
			}
			waits = append(waits, *r.WaitNs)
		}
		return stats.Quantile(waits, 0.5) <= int64(time.Millisecond)
	}
	if !waitFor(10*time.Second, bothRegistered) {
		t.Fatalf("the services did not register: %+v", d.status(t).Tasks)
	}
	if !waitFor(5*time.Second, onTime) {
		t.Fatal("the high-priority service never ran on time")
	}

	// Each cycle: what the daemon did for the low-priority service in a
	// span before the restart and in one after it, once the high-priority
	// service is on time again. A hung launch shows as a service that
	// stops making runs.
	var ratios []float64
	var reregs, catchUps, outages []time.Duration
	hung, late, starved, unprotected := 0, 0, 0, 0
	var hpRatios, hpInterf []float64
	for c := 1; c <= sc.restarts; c++ {
		before := schedulingIn(t, d, lproc, hproc, sc.restartMeasureFor)
		stopping := time.Now()
		d.stop(t)
		d = startServe(t, dir, d.addr, "--profile-runs", "20")
		restarted := time.Now()
		outages = append(outages, restarted.Sub(stopping))
		if !waitFor(10*time.Second, bothRegistered) {
			t.Fatalf("restart %d: the services did not re-register", c)
		}
		reregs = append(reregs, time.Since(restarted))
		// Through the outage both services ran un-hooked (fail open), as
		// under default sharing, and the open-loop high-priority service
		// fell behind; back to back it catches up by about 35 runs a
		// second, so a long outage takes a while to work off.
		if !waitFor(catchUpMax, onTime) {
			// Behind (its backlog from the outage) or hung (no progress).
			n0 := len(parseRuns(t, hproc.Stdout()))
			time.Sleep(time.Second)
			ran := len(parseRuns(t, hproc.Stdout())) - n0
			if ran == 0 {
				hung++
			} else {
				late++
			}
			runs := parseRuns(t, hproc.Stdout())
			t.Errorf("restart %d: the high-priority service was not on time again within %v (%d runs in the last second, p50 JCT of the last 100 %s)",
				c, catchUpMax, ran, ms(stats.Quantile(harness.JCTs(runs[max(0, len(runs)-100):]), 0.5)))
			continue
		}
		catchUps = append(catchUps, time.Since(restarted))
		after := schedulingIn(t, d, lproc, hproc, sc.restartMeasureFor)
		if after.LPRuns == 0 && before.LPRuns > 0 {
			hung++
		}
		// Throughput is the low-priority service's runs; grants are logged
		// beside them (one grant may carry credit for many launches).
		ratio := float64(after.LPRuns) / max(1, float64(before.LPRuns))
		ratios = append(ratios, ratio)
		t.Logf("restart %2d: in %v beside the on-time high-priority service: before %+v, after %+v (LP runs %.2fx; re-registered after %v, on time after %v)",
			c, sc.restartMeasureFor, before, after, ratio, reregs[len(reregs)-1].Round(time.Millisecond), catchUps[len(catchUps)-1].Round(time.Millisecond))
		// The high-priority service is protected again: before, a
		// low-priority hook passed its launches through for a second after
		// re-registering (the fail-open back-off of a request the dead
		// daemon never answered), and the high-priority runs were blocked
		// as under default sharing (~145 % of their JCT). Judged on the
		// device (simgpu's blocked time); the wall-clock JCT, which the
		// host's contention moves as much (a restart with both services
		// at a third of their pace before), is reported beside it.
		hpWorse := float64(after.HPJCT) / max(1, float64(before.HPJCT))
		hpRatios = append(hpRatios, hpWorse)
		interf := 100 * float64(after.HPBlocked) / max(1, float64(before.HPJCT))
		hpInterf = append(hpInterf, interf)
		if interf > hpInterferenceAfterMax {
			unprotected++
			t.Errorf("restart %d: the high-priority runs after it were blocked %.1f%% of their JCT before at the median (bound %.0f%%; JCT %v before, %v after)",
				c, interf, hpInterferenceAfterMax, before.HPJCT, after.HPJCT)
			var ls []string
			for _, l := range strings.Split(lproc.Stderr(), "\n") {
				if !strings.Contains(l, "kernel fkr") {
					ls = append(ls, l)
				}
			}
			t.Logf("LP hook log:\n%s", strings.Join(ls[max(0, len(ls)-40):], "\n"))
		}
		// The restarted daemon keeps scheduling: windows open in the
		// high-priority service's gaps and the low-priority service gets
		// grants. Under `make test` (other packages beside it) loosely;
		// the campaign asks for its runs within half of before.
		minRatio := 0.0
		if sc.full {
			minRatio = 0.5
		}
		perSec := func(n uint64) float64 { return float64(n) / sc.restartMeasureFor.Seconds() }
		if perSec(after.Windows) < 10 || perSec(after.Grants) < 10 || ratio < minRatio {
			starved++
			t.Errorf("restart %d: in %v after it the daemon opened %d windows, granted %d times, the LP ran %d runs (before: %d, %d, %d); tasks %+v",
				c, sc.restartMeasureFor, after.Windows, after.Grants, after.LPRuns, before.Windows, before.Grants, before.LPRuns, d.status(t).Tasks)
		}
	}
	hproc.KillGroup()
	lproc.KillGroup()
	lo, med := 0.0, 0.0
	if len(ratios) > 0 {
		lo, med = slices.Min(ratios), stats.Median(ratios)
	}
	faultReport(t, "daemon restart (SIGTERM, start) under HP every 10 ms + LP", fmt.Sprintf("%d restarts", sc.restarts), verdict(t),
		fmt.Sprintf("LP runs after/before: min %.2f, median %.2f; restarts starving the LP: %d; HP GPU interference p50 after: max %.1f%% (over %.0f%%: %d), HP p50 JCT after/before (wall clock): max %.2f; hung services: %d; HP late after %v: %d; daemon down (SIGTERM to serving again) at most %v, re-registered within %v after, HP on time within %v",
			lo, med, starved, slices.Max(append(hpInterf, 0)), hpInterferenceAfterMax, unprotected, slices.Max(append(hpRatios, 0)), hung, catchUpMax, late, maxDur(outages).Round(time.Millisecond), maxDur(reregs).Round(time.Millisecond), maxDur(catchUps).Round(time.Millisecond)))
}

// hpInterferenceAfterMax bounds the high-priority runs' p50 blocked time
// after a restart, in percent of their p50 JCT before it (default sharing:
// about 145 %).
const hpInterferenceAfterMax = 10.0

// catchUpMax bounds the wait for the high-priority service to be on time
// again after a restart.
const catchUpMax = 20 * time.Second

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// scheduling is what the daemon did for the low-priority service in a span.
type scheduling struct {
	Windows, Grants uint64
	Unscheduled     uint64 // launches of waiters without a grant
	LPRuns          int
	HPJCT           time.Duration // the high-priority runs' p50 JCT
	HPBlocked       time.Duration // and their p50 blocked time (simgpu's)
}

// schedulingIn measures the next d: the daemon's windows and grants, the
// low-priority runs started and the high-priority runs' p50 JCT and
// blocked time.
func schedulingIn(t testing.TB, dm *daemonProc, lp, hp *proc, d time.Duration) scheduling {
	t.Helper()
	s0 := daemonStats(t, dm)
	from := monoNow()
	time.Sleep(d)
	to := monoNow()
	s1 := daemonStats(t, dm)
	out := scheduling{Windows: s1.Windows - s0.Windows, Grants: s1.Grants - s0.Grants, Unscheduled: s1.UnscheduledLaunches - s0.UnscheduledLaunches}
	for _, r := range parseRuns(t, lp.Stdout()) {
		if r.StartNs >= from && r.StartNs < to {
			out.LPRuns++
		}
	}
	var hj, hb []int64
	for _, r := range parseRuns(t, hp.Stdout()) {
		if r.StartNs >= from && r.StartNs < to {
			if r.BlockedNs == nil {
				t.Fatalf("high-priority run %d has no blocked_ns: the replayer did not read simgpu's totals", r.Run)
			}
			hj, hb = append(hj, r.JCTNs), append(hb, *r.BlockedNs)
		}
	}
	if len(hj) > 0 {
		out.HPJCT, out.HPBlocked = time.Duration(stats.Quantile(hj, 0.5)), time.Duration(stats.Quantile(hb, 0.5))
	}
	return out
}

// schedStats is the part of `fikit status --json`'s "stats" the fault tests
// read (docs/status-api.md).
type schedStats struct {
	Windows             uint64 `json:"windows"`
	Grants              uint64 `json:"grants"`
	UnscheduledLaunches uint64 `json:"unscheduled_launches"`
}

// daemonStats reads the scheduler's counters from `fikit status --json`.
func daemonStats(t testing.TB, d *daemonProc) schedStats {
	t.Helper()
	r := runCmd(t, 10*time.Second, nil, requireBins(t, "fikit")[0], "status", "--data-dir", d.dataDir, "--json")
	var out struct {
		Stats schedStats `json:"stats"`
	}
	if r.ExitCode != 0 || json.Unmarshal([]byte(r.Stdout), &out) != nil {
		t.Fatalf("fikit status: %s", r)
	}
	return out.Stats
}

// monoNow is CLOCK_MONOTONIC: the clock of fikit-replay's start_ns, the hooks' and the board's.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
