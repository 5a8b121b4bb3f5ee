package tests

// Faults: the daemon goes away (SIGTERM, or SIGKILL as a crash) for 0.1 s,
// 2 s and 13 s (and 60 s under `make faults`) under a high-priority
// service (a request every 10 ms) and a back-to-back low-priority one. Each
// time both services must be registered again within 1 s of the daemon's
// start, and the low priority, back first, must not hold the GPU while the
// high priority has not returned (issue 38, item 2). Before, the hooks'
// registration retry backed off to 30 s while the daemon was unreachable:
// after a 13 s outage nothing registered for 14 s after the restart, and
// the low priority, back first, was the best priority the daemon knew: it
// held the GPU, and the high priority ran behind it.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/simgpu/timeline"
)

// rejoinWithin is the bound on how soon every live service is
// registered again after the daemon's start, as the daemon recorded it. The
// hooks probe every 100 ms; the test holds the high priority back 250 ms
// after the low priority's return (below), so about 350 ms is the
// mechanism's and the rest is margin for a busy host.
const rejoinWithin = time.Second

// rejoinDrain is how long after the low priority registered its kernels
// launched before (un-hooked, during the outage) may still run: one of its
// runs is 33 ms of GPU time, launched whole before its host sync.
const rejoinDrain = 100 * time.Millisecond

// rejoinHPBlockedMax bounds the high priority's blocked time (simgpu's
// ground truth) over the kernels that arrived while the low priority was
// registered and it was not: two context switches of the h200 preset (its
// first kernel after the idle device switches from the low priority's
// context), where a low priority holding the GPU blocks it for ms.
const rejoinHPBlockedMax = 2 * 140 * time.Microsecond

// rejoinLPBusyMax bounds the low priority's device time in that span: its
// place is behind the high priority's until that returns.
const rejoinLPBusyMax = time.Millisecond

// rejoinStatus is the part of `fikit status --json` this test reads.
type rejoinStatus struct {
	StartedNs int64 `json:"started_ns"` // CLOCK_MONOTONIC, the timeline's clock
	Tasks     []struct {
		Key          string `json:"task_key"`
		PID          int    `json:"pid"`
		Role         string `json:"role"`
		RegisteredNs int64  `json:"registered_after_start_ns"`
	} `json:"tasks"`
	Stats struct {
		PlacesHeld     uint64 `json:"places_held"`
		PlacesReturned uint64 `json:"places_returned"`
	} `json:"stats"`
}

// Outages of 0.1, 2 and 13 s under `make test`; `make faults` adds 60 s.
// The hooks' probe does not depend on the outage's length (a fixed 100 ms
// interval from the loss on), so 13 s, the case, already finds a
// back-off that grows; the minute confirms it at the cost of a minute of
// wall time, which the campaign can afford and `make test` should not.
// The outages run one after the other on one daemon's data directory (its
// roster carries over, as in production): separate daemons at once would
// put four daemons and eight replayers on a 2-core host, whose contention
// would then be what the test measures.
func TestFaultRejoin(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	sc := faultsScale()
	type outage struct {
		d    time.Duration
		kill bool // SIGKILL (a crash); else SIGTERM (a restart, an upgrade)
	}
	outages := []outage{{100 * time.Millisecond, false}, {2 * time.Second, false}, {13 * time.Second, true}}
	if sc.full {
		outages = append(outages, outage{60 * time.Second, true})
	}
	dir := t.TempDir()
	d := startServe(t, dir, "", "--profile-runs", "20")
	env := simgpuEnv(t, uniqueShm(t))
	hp := replaySpec{trace: "h100/resnet50_4_fwd", cpuNs: 12000, prio: 0, key: "rejoin-hp", sched: d.addr}
	lp := replaySpec{trace: "h100/bert_2_fwd", cpuNs: 5000, prio: 5, key: "rejoin-lp", sched: d.addr}
	for _, s := range []replaySpec{hp, lp} {
		s.runs = 40
		profileFully(t, d, env, s)
	}

	tl := timelineOf(t)
	senv := append(slices.Clone(env), "FIKIT_SIMGPU_TIMELINE="+tl, "FIKIT_LOG=info")
	lp.hooked, lp.runs = true, 1_000_000
	lcmd, largs := lp.command(t)
	lproc := startCmd(t, senv, lcmd, largs...)
	if !lproc.waitOutput(`{"run"`, 1, 60*time.Second) {
		t.Fatalf("the low-priority service did not get going: %s", lproc.KillGroup())
	}
	hp.hooked, hp.runs, hp.interval = true, 1_000_000, 10*time.Millisecond
	hcmd, hargs := hp.command(t)
	hproc := startCmd(t, senv, hcmd, hargs...)
	defer hproc.signal(syscall.SIGCONT) // never leave it stopped for the cleanup
	// both reads the status; ok: both services are registered. A daemon
	// still starting does not answer: not yet.
	both := func() (st rejoinStatus, ok bool) {
		r := runCmd(t, 10*time.Second, nil, requireBins(t, "fikit")[0], "status", "--data-dir", d.dataDir, "--json")
		if r.ExitCode != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
			return st, false
		}
		n := 0
		for _, ta := range st.Tasks {
			if ta.Key == hp.key || ta.Key == lp.key {
				n++
			}
		}
		return st, n == 2
	}
	if !waitFor(10*time.Second, func() bool { _, ok := both(); return ok }) {
		t.Fatalf("the services did not register: %+v", d.status(t).Tasks)
	}

	var figures []string
	for _, o := range outages {
		name := fmt.Sprintf("%v outage (%s)", o.d, map[bool]string{false: "SIGTERM", true: "SIGKILL"}[o.kill])
		if err := os.Truncate(tl, 0); err != nil { // the hooks append (O_APPEND): what follows is this cycle's
			t.Fatal(err)
		}
		if o.kill {
			d.Kill()
		} else {
			d.stop(t)
		}
		time.Sleep(o.d)
		// The worst order of return, every time: the low priority first.
		// The high priority is held back (stopped) from just before the
		// daemon starts until 250 ms after the low priority registered.
		hproc.signal(syscall.SIGSTOP)
		lpRegs := strings.Count(lproc.Stderr(), "registered on")
		d = startServeAsync(t, dir, d.addr, "--profile-runs", "20")
		if !waitFor(30*time.Second, func() bool { return strings.Count(lproc.Stderr(), "registered on") > lpRegs }) {
			hproc.signal(syscall.SIGCONT)
			t.Fatalf("%s: the low priority did not register again within 30 s", name)
		}
		time.Sleep(250 * time.Millisecond)
		hproc.signal(syscall.SIGCONT)
		var st rejoinStatus
		if !waitFor(15*time.Second, func() bool {
			var ok bool
			st, ok = both()
			return ok
		}) {
			t.Fatalf("%s: the services did not register again: %+v", name, st.Tasks)
		}
		var regLP, regHP int64
		var pidLP, pidHP int
		for _, ta := range st.Tasks {
			switch ta.Key {
			case lp.key:
				regLP, pidLP = ta.RegisteredNs, ta.PID
			case hp.key:
				regHP, pidHP = ta.RegisteredNs, ta.PID
			}
		}
		for _, r := range []struct {
			who string
			ns  int64
		}{{"low", regLP}, {"high", regHP}} {
			if r.ns > int64(rejoinWithin) {
				t.Errorf("%s: the %s priority registered %v after the daemon's start (bound %v)", name, r.who, time.Duration(r.ns), rejoinWithin)
			}
		}
		if st.Stats.PlacesHeld < 2 || st.Stats.PlacesReturned < 2 {
			t.Errorf("%s: places held %d, returned %d; want both services' places held and returned", name, st.Stats.PlacesHeld, st.Stats.PlacesReturned)
		}
		// Ground truth over the span in which the low priority was back
		// and the high priority not yet: the low priority did not run and
		// the high priority waited behind nothing.
		from, to := st.StartedNs+regLP+int64(rejoinDrain), st.StartedNs+regHP
		time.Sleep(300 * time.Millisecond) // the processes write their timelines every 20 ms
		recs := readTimeline(t, tl)
		lpBusy, hpBlocked, hpKernels := int64(0), int64(0), 0
		if to > from {
			lpBusy = timeline.BusyNs(recs, pidLP, from, to)
			for _, r := range recs {
				if r.PID == pidHP && r.ArriveNs >= from && r.ArriveNs < to {
					hpBlocked += r.BlockedNs
					hpKernels++
				}
			}
		} else {
			t.Errorf("%s: the high priority registered %v after the low one: no span to judge (want %v at least)",
				name, time.Duration(regHP-regLP), rejoinDrain)
		}
		if lpBusy > int64(rejoinLPBusyMax) {
			t.Errorf("%s: the low priority ran %v on the device in the %v after its return (and %v drained) before the high priority's (bound %v)",
				name, time.Duration(lpBusy), time.Duration(to-from), rejoinDrain, rejoinLPBusyMax)
		}
		if hpBlocked > int64(rejoinHPBlockedMax) {
			t.Errorf("%s: the high priority's %d kernels in that span were blocked %v in all (bound %v)",
				name, hpKernels, time.Duration(hpBlocked), rejoinHPBlockedMax)
		}
		f := fmt.Sprintf("%s: LP back %v, HP %v after start; over the %v between: LP ran %v, HP blocked %v over %d kernels",
			name, time.Duration(regLP).Round(time.Millisecond), time.Duration(regHP).Round(time.Millisecond),
			time.Duration(max(0, to-from)).Round(time.Millisecond), time.Duration(lpBusy), time.Duration(hpBlocked), hpKernels)
		t.Log(f)
		figures = append(figures, f)
	}
	hproc.KillGroup()
	lproc.KillGroup()
	faultReport(t, "daemon outage (0.1 s to 13 s; 60 s full) under HP every 10 ms + LP, LP back first", fmt.Sprintf("%d outages", len(outages)),
		verdict(t), strings.Join(figures, "; "))
}

// startServeAsync starts `fikit serve` like startServe without waiting for
// it to answer: the test watches what the hooks do as it comes up.
func startServeAsync(t testing.TB, dataDir, addr string, args ...string) *daemonProc {
	t.Helper()
	fikit := requireBins(t, "fikit")[0]
	p := startCmd(t, nil, fikit, append([]string{"serve", "--data-dir", dataDir, "--listen", addr, "--log-level", "debug"}, args...)...)
	return &daemonProc{proc: p, addr: addr, dataDir: dataDir}
}
