package tests

// End-to-end tests of the hook (bin/libfikit_hook.so) on the simulated GPU
// against a recording fake scheduler (hook_helpers_test.go): every launch
// path seen with exactly the expected kernel IDs in order, waiter grants,
// profiling measurements against simgpu's timeline, fail-open, bad
// environment values, and `fikit run`.

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/udp"
)

const hookTimeout = 60 * time.Second

// TestHookPaths launches the test module's kernels through each way an
// application reaches the driver; the scheduler must hear of exactly the
// launched units (kernel IDs computed in Go), in order, with gapless seqs
// from 1, and one RunEnd per run.
func TestHookPaths(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	const runs = 3
	paths := []string{"direct", "dlsym", "gpa1", "gpa2", "gpa2-ptds", "ptsz", "ex", "coop", "library",
		"enumerate", "graph-capture", "graph-build", "threads", "fork"}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
			// A loaded machine (parallel tests) may answer slower than the
			// default 1 s; registration must not time out here.
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=0", "FIKIT_LOG=debug",
				"FIKIT_CONNECT_TIMEOUT_MS=3000")
			r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), path, fmt.Sprint(runs))
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			units := parseLauncher(t, r.Stdout)
			if len(units) == 0 {
				t.Fatalf("launcher reported no launches: %v", r)
			}
			// Exit waits for the sender at most FK_EXIT_FLUSH_MS (exit
			// must not hang) and says when it gave up. Under a sanitizer
			// on a loaded host the sender can be that slow: the launches
			// it did not ship are lost, as the hook said, and there is
			// nothing to compare.
			if sanitized() && strings.Contains(r.Stderr, "did not ship the last measurements") {
				t.Skipf("sanitized hook: the sender did not ship before exit, as it logged:\n%s", r.Stderr)
			}
			// The last messages leave right after the process's final sync:
			// wait for every launch and each process's Goodbye, which comes
			// after its last RunEnd (waiting for the launches alone judged a
			// run end still on its way: 2 of 3 RunEnds, once in ~25 runs).
			procs := map[int]bool{}
			for _, u := range units {
				procs[u.Pid] = true
			}
			var byTask map[uint32][]taskLaunch
			waitFor(2*time.Second, func() bool {
				byTask = launchesByTask(sched.Received())
				n := 0
				for _, ls := range byTask {
					n += len(ls)
				}
				return n >= len(units) && len(ofType[*udp.Goodbye](sched.Received())) >= len(procs)
			})
			if bad := sched.Bad(); len(bad) > 0 {
				t.Fatalf("undecodable datagrams: %v", bad)
			}
			// Per process (the fork path has two), the launcher's units in
			// order are the task's notifications in seq order.
			want := map[int][]uint64{}
			for _, u := range units {
				want[u.Pid] = append(want[u.Pid], u.ID)
			}
			if regs := ofType[*udp.Register](sched.Received()); len(byTask) != len(want) || len(regs) != len(want) {
				t.Fatalf("%d tasks heard of, %d registrations, %d processes launched\n%s", len(byTask), len(regs), len(want), r.Stderr)
			}
			for id, ls := range byTask {
				pid := int(sched.TaskPID(id))
				w, ok := want[pid]
				if !ok {
					t.Fatalf("task %d registered by pid %d, which launched nothing", id, pid)
				}
				var got []uint64
				for i, l := range ls {
					if l.Request || l.Seq != uint32(i+1) {
						t.Fatalf("task %d: launch %d has seq %d (request %v), want a notify with seq %d", id, i, l.Seq, l.Request, i+1)
					}
					got = append(got, l.KernelID)
				}
				if path == "threads" {
					// Two threads interleave freely: the same launches, any order.
					slices.Sort(got)
					w = slices.Clone(w)
					slices.Sort(w)
				}
				if !slices.Equal(got, w) {
					t.Errorf("pid %d: scheduler heard %d launches %x,\nlauncher made %d: %x", pid, len(got), got, len(w), w)
				}
			}
			// Runs are the task's: every launch is counted in exactly one
			// RunEnd. Two threads syncing their own streams end 1 to 2 runs
			// per round (a sync may find the other thread's launches counted).
			ends := ofType[*udp.RunEnd](sched.Received())
			wantEnds, kernels := runs, 0
			if path == "fork" {
				wantEnds = 2 * runs // parent: 1 run, fork, runs-1 more; child: runs
			}
			for _, e := range ends {
				kernels += int(e.Kernels)
				if e.Kernels == 0 || e.RunNS == 0 || e.Reason != udp.ReasonStreamSync && e.Reason != udp.ReasonContextSync {
					t.Errorf("bad RunEnd %+v", e)
				}
			}
			if path == "threads" && len(ends) >= runs && len(ends) <= 2*runs {
				wantEnds = len(ends)
			}
			if len(ends) != wantEnds || kernels != len(units) {
				t.Errorf("%d RunEnds counting %d launches, want %d counting %d", len(ends), kernels, wantEnds, len(units))
			}
			// How each kernel was named (FIKIT_LOG=debug prints it once per handle).
			wantPath := map[string]string{"library": "named by cuLibraryGetKernel", "enumerate": "named by cuFuncGetName"}
			if p, ok := wantPath[path]; ok && !strings.Contains(r.Stderr, p) {
				t.Errorf("stderr lacks %q:\n%s", p, r.Stderr)
			}
			if path == "direct" && !strings.Contains(r.Stderr, "named by cuModuleGetFunction") {
				t.Errorf("stderr lacks the naming path:\n%s", r.Stderr)
			}
			if path == "library" && !strings.Contains(r.Stderr, "named by cuKernelGetFunction") {
				t.Errorf("stderr lacks cuKernelGetFunction:\n%s", r.Stderr)
			}
		})
	}
}

// TestHookWaiter: a waiter asks before every launch (LaunchRequest with the
// launch's kernel ID, seq shared with notifications) and launches on the
// grant; with credit it launches without asking and notifies instead.
func TestHookWaiter(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	for _, credit := range []uint32{0, 2} {
		t.Run(fmt.Sprintf("credit%d", credit), func(t *testing.T) {
			sched := newFakeSched(t, schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing, Credit: credit})
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=7", "FIKIT_CONNECT_TIMEOUT_MS=3000",
				"FIKIT_GRANT_TIMEOUT_MS=5000")
			units, ls := launchAll(t, sched, env, launcher, kernelsPTX(t), "direct", "4")
			for i, l := range ls {
				// Each grant carries the credit: the next `credit` launches
				// go without asking.
				wantReq := i%int(credit+1) == 0
				if l.Seq != uint32(i+1) || l.KernelID != units[i].ID || l.Request != wantReq {
					t.Errorf("launch %d: %+v, want seq %d kernel %x request %v", i, l, i+1, units[i].ID, wantReq)
				}
			}
			if regs := ofType[*udp.Register](sched.Received()); len(regs) != 1 || regs[0].Priority != 7 {
				t.Errorf("registrations %+v, want one at priority 7", regs)
			}
		})
	}
}

// TestHookProfilingAccuracy profiles replays of shared traces. Per kernel
// ID, the mean measured duration is within 3% (or 500 ns) of the trace's
// mean duration (issue 4's acceptance). The run's first kernel, launched
// after the service idled, is held to 10% (or 3 µs): its cold launch call
// leaves an unknown part of itself inside the event pair
// (hookclient/README.md, "Measurement"). In a second replay with simgpu's
// timeline, 95% of the measured gaps are within 10% (or 1 µs) of the real
// idle gaps on the timeline, gap by gap. (Durations are checked without the
// timeline: writing it is work inside the driver's calls.)
func TestHookProfilingAccuracy(t *testing.T) {
	for _, name := range []string{"h100/resnet50_4_fwd", "h100/bert_2_fwd"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			tr := loadTrace(t, sharedTrace(t, name))
			const runs = 12
			per := map[uint64]*profiledKernel{}
			var ids []uint64
			kernel := func(i int) *profiledKernel {
				k := tr.Kernels[i]
				id := kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block)
				if i == 0 {
					id = ^id // kept apart: see the tolerances below
				}
				if per[id] == nil {
					per[id] = &profiledKernel{name: k.Name, first: i == 0}
					ids = append(ids, id)
				}
				return per[id]
			}
			for _, recs := range profileReplay(t, name, runs, "") {
				for i, rec := range recs {
					p := kernel(i)
					p.n++
					p.measDur += float64(rec.DurationNS)
					p.trDur += float64(tr.Kernels[i].DurationNs)
				}
			}
			tl := filepath.Join(t.TempDir(), "timeline.jsonl")
			records := profileReplay(t, name, runs, tl)
			var tlk []tlKernel // the replay's kernels in launch order
			for _, ks := range kernelsByPid(t, readTimeline(t, tl)) {
				tlk = ks
			}
			if len(tlk) != runs*len(tr.Kernels) {
				t.Fatalf("timeline has %d kernels, want %d", len(tlk), runs*len(tr.Kernels))
			}
			gaps, gapsOK := 0, 0
			for run, recs := range records {
				for i, rec := range recs[:max(len(recs)-1, 0)] { // the last gap spans the run end
					real := float64(max(0, tlk[run*len(tr.Kernels)+i+1].first().StartNs-tlk[run*len(tr.Kernels)+i].last().EndNs))
					p := kernel(i)
					p.gapN++
					p.measGap += float64(rec.GapNS)
					p.realGap += real
					gaps++
					if math.Abs(float64(rec.GapNS)-real) <= math.Max(0.10*real, 1000) {
						gapsOK++
					}
				}
			}
			// Gaps are checked gap by gap against the timeline: a rare host
			// stall (this machine is shared) must not decide a kernel's mean.
			if gapsOK < gaps*95/100 {
				t.Errorf("%d of %d measured gaps within 10%% (or 1 µs) of the timeline's, want 95%%", gapsOK, gaps)
			}
			var worstDur, worstGap float64
			var report strings.Builder
			fmt.Fprintf(&report, "\n%-44s %5s %10s %10s %7s %10s %10s\n", "kernel", "n", "trace ns", "meas ns", "diff", "gap real", "gap meas")
			for _, id := range ids {
				p := per[id]
				trMean, measMean := p.trDur/float64(p.n), p.measDur/float64(p.n)
				d := 100 * (measMean/trMean - 1)
				worstDur = math.Max(worstDur, math.Abs(d))
				tol := math.Max(0.03*trMean, 500)
				if p.first {
					tol = math.Max(0.10*trMean, 3000)
				}
				if p.n == 0 || math.Abs(measMean-trMean) > tol {
					t.Errorf("%s (%x): mean measured duration %.0f ns is %+.2f%% off the trace's %.0f ns", p.name, id, measMean, d, trMean)
				}
				gr, gm := 0.0, 0.0
				if p.gapN > 0 {
					gr, gm = p.realGap/float64(p.gapN), p.measGap/float64(p.gapN)
					if gr > 0 {
						worstGap = math.Max(worstGap, 100*math.Abs(gm/gr-1))
					}
					// The profile's gaps are held to 10 % + 10 µs of the
					// truth (issue 28: the hook keeps runs whose stalls can
					// move a gap's mean by up to 2 µs).
					if math.Abs(gm-gr) > 0.10*gr+10_000 {
						t.Errorf("%s (%x): mean measured gap %.0f ns, the timeline's %.0f ns", p.name, id, gm, gr)
					}
				}
				label := p.name
				if p.first {
					label = "(first) " + label
				}
				fmt.Fprintf(&report, "%-44.44s %5d %10.0f %10.0f %+6.2f%% %10.0f %10.0f\n", label, p.n, trMean, measMean, d, gr, gm)
			}
			t.Logf("%s: %d kernel IDs, worst mean duration error %.2f%%, worst mean gap error %.1f%%, %d of %d gaps within 10%% (or 1 µs)%s",
				name, len(ids), worstDur, worstGap, gapsOK, gaps, report.String())
		})
	}
}

// replayJCT runs fikit-replay (optionally under `fikit run`) and returns its
// p50 JCT; it fails the test if the replay does not finish every run.
func replayP50(t *testing.T, env []string, runs int, wrap []string, replayArgs ...string) (int64, cmdResult) {
	t.Helper()
	bins := requireBins(t, "fikit", "fikit-replay")
	args := append([]string{"--runs", fmt.Sprint(runs), "--json", "-q"}, replayArgs...)
	var r cmdResult
	if wrap != nil {
		r = runCmd(t, replayTimeout, env, bins[0], append(append(append([]string{"run"}, wrap...), "--", bins[1]), args...)...)
	} else {
		r = runCmd(t, replayTimeout, env, bins[1], args...)
	}
	if r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("replay: %v", r)
	}
	out := parseReplay(t, r.Stdout)
	if out.summary == nil || out.summary.Runs != runs || len(out.runs) != runs {
		t.Fatalf("replay finished %d of %d runs: %v", len(out.runs), runs, r)
	}
	return out.summary.P50Ns, r
}

// closedPort is a UDP port on 127.0.0.1 with nothing listening.
func closedPort(t *testing.T) string {
	t.Helper()
	s := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	addr := s.Addr()
	s.Close()
	return addr
}

// TestHookReplayIDs: `fikit run -p 0 --task-key K -- fikit-replay …`: the
// scheduler hears the task's key and priority, and exactly the trace's
// kernel IDs in order, run after run.
func TestHookReplayIDs(t *testing.T) {
	tr := loadTrace(t, sharedTrace(t, "h100/resnet50_4_fwd"))
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_CONNECT_TIMEOUT_MS=3000")
	const runs = 4
	replayP50(t, env, runs, []string{"-p", "0", "--task-key", "svc-hp", "--scheduler", sched.Addr()},
		"--trace", sharedTrace(t, "h100/resnet50_4_fwd"), "--cpu-ns", fmt.Sprint(replayCPUNs))
	var want []uint64
	for range runs {
		for _, k := range tr.Kernels {
			want = append(want, kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block))
		}
	}
	waitFor(2*time.Second, func() bool { return len(launchesByTask(sched.Received())[1]) >= len(want) })
	regs := ofType[*udp.Register](sched.Received())
	if len(regs) != 1 || regs[0].TaskKey != "svc-hp" || regs[0].Priority != 0 {
		t.Fatalf("registrations %+v, want one with key svc-hp at priority 0", regs)
	}
	var got []uint64
	for i, l := range launchesByTask(sched.Received())[1] {
		if l.Seq != uint32(i+1) {
			t.Fatalf("launch %d has seq %d", i, l.Seq)
		}
		got = append(got, l.KernelID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("heard %d launches, the trace made %d (first difference at %d)", len(got), len(want),
			func() int {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						return i
					}
				}
				return min(len(got), len(want))
			}())
	}
}

// TestHookFailOpen: whatever the scheduler does, the service completes
// every run, with a p50 JCT within 10% of the same replay without the hook,
// and the hook warns at most once.
func TestHookFailOpen(t *testing.T) {
	name := sharedTrace(t, "h100/resnet50_4_fwd")
	const runs = 200 // about 0.5 s
	replay := []string{"--trace", name, "--cpu-ns", fmt.Sprint(replayCPUNs)}
	cases := []struct {
		name   string
		policy *schedPolicy
		killAt int // close the scheduler after this many launches heard
		runs   int // 0: runs
	}{
		{"no-listener", nil, 0, 0},
		// About 2 s: the first back-off (1 s) expires, the second request
		// times out too, and only then does the hook register again.
		{"never-grants", &schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing, NoGrant: true}, 0, 800},
		{"holder-killed", &schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing}, 500, 0},
		{"waiter-killed", &schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing}, 500, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shm := uniqueShm(t)
			addr := closedPort(t)
			var sched *fakeSched
			if tc.policy != nil {
				sched = newFakeSched(t, *tc.policy)
				addr = sched.Addr()
				if tc.killAt > 0 {
					go func() {
						waitFor(time.Minute, func() bool {
							n := 0
							for _, ls := range launchesByTask(sched.Received()) {
								n += len(ls)
							}
							return n >= tc.killAt
						})
						sched.Close()
					}()
				}
			}
			env := simgpuEnv(t, shm, "FIKIT_GRANT_TIMEOUT_MS=100", "FIKIT_CONNECT_TIMEOUT_MS=3000")
			runs := cmp.Or(tc.runs, runs)
			base, _ := replayP50(t, env, runs, nil, replay...)
			hooked, r := replayP50(t, env, runs, []string{"-p", "5", "--scheduler", addr}, replay...)
			// The bound is 10 % over the un-hooked p50, plus what this host
			// moved that p50 between two measurements of its own: with two
			// busy loops on two cores the hooked replay (one thread more)
			// ran 33 % over in both of two pairs. A hook that waited on the
			// dead scheduler (a 100 ms grant timeout per request, here) is
			// over by far more.
			noise := 0.0
			if d := pct(hooked, base); d > 10 {
				// One more pair: the machine may have been busy.
				base2, _ := replayP50(t, env, runs, nil, replay...)
				noise = math.Abs(pct(base2, base))
				base = min(base, base2)
				hooked, r = replayP50(t, env, runs, []string{"-p", "5", "--scheduler", addr}, replay...)
			}
			t.Logf("p50 JCT without the hook %.3f ms, with it %.3f ms (%+.1f%%; the host moved the un-hooked p50 %.1f%%)",
				float64(base)/1e6, float64(hooked)/1e6, pct(hooked, base), noise)
			if d := pct(hooked, base); d > 10+noise {
				t.Errorf("p50 JCT %d ns is %+.1f%% over the un-hooked %d ns, want ≤ 10%% + the host's %.1f%%", hooked, d, base, noise)
			}
			if n := strings.Count(r.Stderr, "warning:"); n > 1 {
				t.Errorf("%d warnings, want at most one:\n%s", n, r.Stderr)
			}
			// The path under test was taken.
			if sched != nil {
				regs := ofType[*udp.Register](sched.Received())
				reqs := ofType[*udp.LaunchRequest](sched.Received())
				switch {
				case len(regs) == 0:
					t.Errorf("the scheduler never heard of the task")
				case tc.name == "never-grants" && (len(reqs) < 2 || len(regs) < 2):
					t.Errorf("%d requests, %d registrations: want requests and a re-registration after two timeouts in a row", len(reqs), len(regs))
				}
			}
		})
	}
}

// TestHookBadEnvironment: each bad value is reported in one line naming the
// variable and ignored (the default is used); the service runs normally.
// FIKIT_DISABLE=1 makes the hook a pure pass-through: not one datagram.
func TestHookBadEnvironment(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	bad := map[string]string{"FIKIT_PRIORITY": "12", "FIKIT_LOG": "loud", "FIKIT_GRANT_TIMEOUT_MS": "soon",
		"FIKIT_CONNECT_TIMEOUT_MS": "-1", "FIKIT_DISABLE": "perhaps"}
	extra := []string{}
	for k, v := range bad {
		extra = append(extra, k+"="+v)
	}
	r := runCmd(t, hookTimeout, hookEnv(t, uniqueShm(t), sched.Addr(), extra...), launcher, kernelsPTX(t), "direct", "2")
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	for k, v := range bad {
		var lines []string
		for _, l := range strings.Split(r.Stderr, "\n") {
			if strings.Contains(l, k+"=") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], `"`+v+`"`) || !strings.Contains(lines[0], "using") {
			t.Errorf("%s=%s reported as %q, want one line naming it and the default", k, v, lines)
		}
	}
	units := parseLauncher(t, r.Stdout)
	waitFor(2*time.Second, func() bool { return len(launchesByTask(sched.Received())[1]) >= len(units) })
	regs := ofType[*udp.Register](sched.Received())
	if len(regs) != 1 || regs[0].Priority != 5 || len(launchesByTask(sched.Received())[1]) != len(units) {
		t.Errorf("registrations %+v, %d launches heard of %d: want the defaults in force", regs,
			len(launchesByTask(sched.Received())[1]), len(units))
	}

	off := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	r = runCmd(t, hookTimeout, hookEnv(t, uniqueShm(t), off.Addr(), "FIKIT_DISABLE=1", "FIKIT_LOG=debug"), launcher,
		kernelsPTX(t), "gpa2", "2")
	time.Sleep(100 * time.Millisecond)
	if r.ExitCode != 0 || len(off.Received()) != 0 {
		t.Errorf("FIKIT_DISABLE=1: exit %d, %d datagrams sent:\n%s", r.ExitCode, len(off.Received()), r.Stderr)
	}
}

// TestHookSchedulerChanges: a State message turns a holder into a waiter
// (its next launches ask first); a daemon that forgot the task (restarted)
// answers Error(unknown task) and the hook registers again, going on with
// the new task ID. A C program says Goodbye at exit.
func TestHookSchedulerChanges(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	for _, tc := range []struct {
		name   string
		policy schedPolicy
	}{
		{"demote", schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, DemoteAt: 6}},
		{"forget", schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, ForgetAt: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := newFakeSched(t, tc.policy)
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_CONNECT_TIMEOUT_MS=3000")
			// 40 runs of 3 launches, 200 µs each: the change arrives while it runs.
			r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "direct", "40", "200000")
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			waitFor(2*time.Second, func() bool { return len(ofType[*udp.Goodbye](sched.Received())) > 0 })
			msgs := sched.Received()
			byTask := launchesByTask(msgs)
			regs := ofType[*udp.Register](msgs)
			switch tc.name {
			case "demote":
				ls := byTask[1]
				if len(regs) != 1 || len(ls) != 120 || ls[0].Request || !ls[len(ls)-1].Request {
					t.Fatalf("%d registrations, %d launches (first request %v, last %v): want notifies, then requests",
						len(regs), len(ls), len(ls) > 0 && ls[0].Request, len(ls) > 0 && ls[len(ls)-1].Request)
				}
			case "forget":
				if len(regs) != 2 || len(byTask[2]) == 0 || len(byTask[1])+len(byTask[2]) > 120 {
					var seen []string
					for _, m := range msgs {
						seen = append(seen, fmt.Sprintf("%T%+v", m.Msg, m.Msg))
					}
					t.Fatalf("%d registrations, launches per task %d/%d: want a second registration and launches under it\n%s",
						len(regs), len(byTask[1]), len(byTask[2]), strings.Join(seen[:min(len(seen), 30)], "\n"))
				}
			}
			byes := ofType[*udp.Goodbye](msgs)
			if len(byes) != 1 || byes[0].TaskID != uint32(len(regs)) {
				t.Errorf("goodbyes %+v, want one from task %d", byes, len(regs))
			}
		})
	}
}

// TestHookSilentAfterGoodbye: once the hook has said Goodbye at exit, the
// process's later CUDA calls (a framework's teardown: PyTorch's static
// destructors synchronize after the hook's atexit handler) pass through
// unreported. Reporting them drew Error(unknown task) from the daemon, which
// had let the task go, and the hook registered the exiting process anew (on
// an H200, every PyTorch service registered twice).
func TestHookSilentAfterGoodbye(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
	env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_CONNECT_TIMEOUT_MS=3000")
	r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "exit-run", "3", "20000")
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	if got := len(parseLauncher(t, r.Stdout)); got != 3*3 {
		t.Fatalf("%d launches printed, want 9 (the teardown run prints none)", got)
	}
	waitFor(2*time.Second, func() bool { return len(ofType[*udp.Goodbye](sched.Received())) > 0 })
	time.Sleep(200 * time.Millisecond) // the teardown run's reports, if any, come after
	msgs := sched.Received()
	bye := -1
	for i, m := range msgs {
		if _, ok := m.Msg.(*udp.Goodbye); ok {
			bye = i
			break
		}
	}
	if bye < 0 {
		t.Fatalf("no Goodbye among %d datagrams", len(msgs))
	}
	if after := msgs[bye+1:]; len(after) > 0 {
		var seen []string
		for _, m := range after[:min(len(after), 10)] {
			seen = append(seen, fmt.Sprintf("%T%+v", m.Msg, m.Msg))
		}
		t.Errorf("%d datagrams after the Goodbye, want none:\n%s", len(after), strings.Join(seen, "\n"))
	}
	if n := len(launchesByTask(msgs[:bye])[1]); n != 9 {
		t.Errorf("%d launches reported before the Goodbye, want the 9 of the runs", n)
	}
}

// TestHookProfilingExit: a C program's last profiling run is not lost: at
// exit the hook reads its events and ships records, RunEnd and Goodbye.
// A run whose measurement the hook judged unreliable (a launch call stalled
// on a loaded machine, docs in measure.c) goes without records, and says so
// in the hook's debug log: every run has its records or that line.
func TestHookProfilingExit(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	// The hook withholds a run in which a launch call stalled, which a
	// loaded or sanitized host does often; a withheld run is right, but
	// shows nothing of the exit path. An attempt whose every run was
	// withheld is repeated, a few times at most: what is asserted holds
	// in every attempt, and one attempt must ship records at exit.
	const attempts = 4
	for a := 1; a <= attempts; a++ {
		if profilingExitAttempt(t, launcher) {
			return
		}
		t.Logf("attempt %d: all runs withheld as unreliable (stalled launch calls); again", a)
	}
	if sanitized() {
		// Under TSan every launch call can stall (all runs of 4 attempts
		// withheld, once in ~10 make test runs): the sanitizer run is for
		// the exit path's races, which ran all the same; the plain run of
		// this test judges what is shipped.
		t.Logf("all runs withheld as unreliable in %d attempts under a sanitizer", attempts)
		return
	}
	t.Errorf("all runs withheld as unreliable in %d attempts: nothing shows records are shipped at exit", attempts)
}

// profilingExitAttempt runs three profiled runs and checks what reached
// the scheduler; it says whether some run's records were shipped.
func profilingExitAttempt(t *testing.T, launcher string) bool {
	t.Helper()
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseProfiling})
	env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_CONNECT_TIMEOUT_MS=3000", "FIKIT_LOG=debug")
	r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "direct", "3", "20000")
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	waitFor(2*time.Second, func() bool { return len(ofType[*udp.Goodbye](sched.Received())) > 0 })
	msgs := sched.Received()
	ends := ofType[*udp.RunEnd](msgs)
	inRun := map[uint32]int{}
	for _, m := range ofType[*udp.Measurements](msgs) {
		for _, rec := range m.Records {
			// 20 µs spin kernels: the measured durations are theirs. Where
			// in a slow launch call the time went is unknown, and measure.c
			// takes half of the call's excess as delay (off by at most
			// half of FK_SLOW_LAUNCH_NS, 5 µs, on a loaded host: a kernel
			// read 18.97 µs in 1 of ~30 `make test` runs). A run's first
			// kernel starts after the driver's cold path, which measure.c
			// estimates from the median of the runs so far (here one to
			// three): it may be a few µs more off.
			lo, hi := uint64(17500), uint64(23000)
			if inRun[m.Run] == 0 {
				lo, hi = 15000, 25000
			}
			inRun[m.Run]++
			switch {
			case rec.DurationNS >= lo && rec.DurationNS <= hi:
			case sanitized():
				// Under a sanitizer every host call is slow, and a
				// stalled call's kernel takes its ID's mean, which the
				// slow first runs skew (27.4 µs read under TSan): the
				// sanitizer run is for the exit path's races; the plain
				// run judges the values shipped.
				t.Logf("under a sanitizer: record %+v (kernel %d of run %d) read %d ns", rec, inRun[m.Run], m.Run, rec.DurationNS)
			default:
				t.Errorf("record %+v (kernel %d of run %d): duration not about 20 µs", rec, inRun[m.Run], m.Run)
			}
		}
	}
	if len(ends) != 3 || len(ofType[*udp.Goodbye](msgs)) != 1 {
		t.Fatalf("%d RunEnds, %d Goodbyes; want 3, 1\n%s", len(ends), len(ofType[*udp.Goodbye](msgs)), tail(r.Stderr, 3000))
	}
	withheld := 0
	for _, e := range ends {
		switch n := inRun[e.Run]; {
		case n == 3:
		case n == 0 && withheldRun(r.Stderr, int(e.Run)):
			withheld++
		default:
			t.Errorf("run %d: %d records of 3, and the hook did not say it withheld them\n%s", e.Run, n, tail(r.Stderr, 1500))
		}
	}
	if withheld > 0 {
		t.Logf("%d run withheld by the hook as unreliable (a stalled launch call)", withheld)
	}
	return withheld < len(ends)
}

// TestFikitRunParentDeath: `fikit run` killed outright (SIGKILL cannot be
// forwarded) does not leave its service running unsupervised.
func TestFikitRunParentDeath(t *testing.T) {
	fikit := requireBins(t, "fikit", "libfikit_hook.so")[0]
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The service lets go of the test's output pipes, so that waiting for
	// fikit does not wait for it.
	p := startCmd(t, nil, fikit, "run", "--", "sh", "-c", `echo $$ >"$0"; exec sleep 60 >/dev/null 2>&1`, pidFile)
	var pid int
	if !waitFor(10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		_, serr := fmt.Sscan(string(b), &pid)
		return err == nil && serr == nil
	}) {
		t.Fatal("the service did not start")
	}
	p.Kill()
	if !waitFor(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("the service outlived `fikit run` killed with SIGKILL")
	}
}

// A Register the scheduler does not answer in time (a daemon waiting for a
// CPU) is sent again with the same seq: a retransmission the daemon answers
// with the same ack, not a second registration (with a new seq per retry,
// 64 clients on 2 cores registered tasks twice and the hooks ignored the
// first acks). The task runs un-hooked meanwhile, then hooked.
func TestHookRetransmitsRegister(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, IgnoreRegisters: 1})
	env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_CONNECT_TIMEOUT_MS=100")
	// 3000 runs of 3 launches 200 µs apart: past the hook's 1 s retry.
	r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "direct", "3000", "200000")
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	msgs := sched.Received()
	regs := ofType[*udp.Register](msgs)
	if len(regs) < 2 {
		t.Fatalf("%d Registers: the unanswered one was not retried", len(regs))
	}
	for _, rg := range regs[1:] {
		if rg.Seq != regs[0].Seq {
			t.Errorf("Register seqs %d then %d: a retry must be a retransmission", regs[0].Seq, rg.Seq)
		}
	}
	if n := len(launchesByTask(msgs)[1]); n == 0 {
		t.Errorf("no launches reported under the task the retransmission registered")
	}
}
