package tests

// Issue 38 item 1 end to end: the README's start order — a busy periodic
// high-priority service first, then a low-priority one back to back — must
// give the low priority a complete profile while the high priority runs.
// Before, every run of the low priority overlapped the high priority's work
// and was discarded: it profiled only once the high priority had gone.

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/simgpu/trace"
)

// besideStatus is the part of `fikit status --json` this test reads.
type besideStatus struct {
	Tasks []struct {
		Key       string            `json:"task_key"`
		Phase     string            `json:"phase"`
		Role      string            `json:"role"`
		Runs      int               `json:"profiled_runs"`
		Needed    int               `json:"profile_runs_needed"`
		Discarded int               `json:"profile_runs_discarded"`
		Reasons   map[string]uint32 `json:"profile_discards_by_reason"`
	} `json:"tasks"`
}

func TestProfileBesideBusyHighPriority(t *testing.T) {
	const hpTrace, lpTrace, runs = "h100/resnet50_4_fwd", "h100/bert_2_fwd", 20
	fikit := requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")[0]
	tr, err := trace.Load(lpTrace)
	if err != nil {
		t.Fatal(err)
	}
	d := startServe(t, t.TempDir(), "", "--profile-runs", "20")
	env := simgpuEnv(t, uniqueShm(t))
	hp := replaySpec{trace: hpTrace, cpuNs: 12000, prio: 0, key: "beside-hp", sched: d.addr, runs: 2 * runs}
	profileFully(t, d, env, hp)
	// The low priority's trace profiled alone: how its durations read on
	// this host with nothing beside it.
	alone := replaySpec{trace: lpTrace, cpuNs: 5000, prio: 5, key: "beside-lp-alone", sched: d.addr, runs: 2 * runs}
	profileFully(t, d, env, alone)

	// The high priority every 5 ms, for as long as the test needs it.
	hp.hooked, hp.runs, hp.interval = true, 1_000_000, 5*time.Millisecond
	hcmd, hargs := hp.command(t)
	hproc := startCmd(t, env, hcmd, hargs...)
	defer hproc.KillGroup()
	if !hproc.waitOutput(`{"run"`, 20, 60*time.Second) {
		t.Fatalf("the high-priority service did not get going: %s", hproc.KillGroup())
	}
	lp := replaySpec{trace: lpTrace, cpuNs: 5000, prio: 5, key: "beside-lp", sched: d.addr, hooked: true, runs: 1_000_000}
	lcmd, largs := lp.command(t)
	lproc := startCmd(t, env, lcmd, largs...)
	defer lproc.KillGroup()

	// The low priority's profile must complete within a bounded number of
	// its runs: T kept, and seven times as many again for runs the hook
	// withholds, or that ran with nothing alone, on a loaded machine (the
	// slack bound lets the low priority's runs come closer to the high
	// priority's, and more of them are withheld or overlapped: figures in
	// docs/scheduler.md "Profiling beside a better priority"). Runs are
	// counted from the replay's own output, so a daemon that keeps none
	// cannot stretch the bound; the wall-clock limit only stops a test that
	// never gets there.
	bound := 8 * runs
	t0 := time.Now()
	var st besideStatus
	progressSeen := false
	done := waitFor(3*time.Minute, func() bool {
		if n := len(parseRuns(t, lproc.Stdout())); n > bound {
			return true
		}
		d.statusInto(t, &st)
		for _, ta := range st.Tasks {
			if ta.Key != lp.key {
				continue
			}
			if ta.Phase == "profiling" && ta.Needed == runs {
				progressSeen = true
			}
			return ta.Phase == "sharing"
		}
		return false
	})
	elapsed := time.Since(t0)
	lpRuns := len(parseRuns(t, lproc.Stdout()))
	hpRuns := len(parseRuns(t, hproc.Stdout()))
	if !done || lpRuns > bound {
		t.Fatalf("the low priority's profile is not complete after %d of its runs (%.1fs; the high priority ran %d): %+v",
			lpRuns, elapsed.Seconds(), hpRuns, st.Tasks)
	}
	select {
	case <-hproc.done:
		t.Fatalf("the high priority had exited before the low priority's profile completed: %s", hproc.result(false))
	default:
	}
	t.Logf("low priority's profile complete after %d of its runs, %.1fs (the high priority ran %d runs meanwhile)",
		lpRuns, elapsed.Seconds(), hpRuns)
	if !progressSeen {
		t.Errorf("status never showed the profiling task's runs needed (%d): %+v", runs, st.Tasks)
	}

	// What the profile keeps is true. simgpu runs each kernel for the
	// trace's duration unless another context's work comes between, and
	// then the switch back alone (140 µs on the h200 preset) is inside the
	// duration the hook measures: a duration kept from such a kernel is
	// longer than the trace's longest for it by half a switch at least.
	// A loaded host stretches a few durations by as much with nothing
	// beside (a launch call descheduled after its start event is inside the
	// kernel's time), so the bound comes from the same host in the same
	// run: the low priority's trace profiled alone, under another key,
	// before the high priority started. At most twice its share of
	// stretched durations, and 1 in 40, may be: with every duration kept,
	// stretched or not, about 1 in 10 are, and the verdicts still miss
	// now and then some work of the high priority's (under 1 in 100 so
	// far: docs/scheduler.md). Each kernel's median is
	// within 5% (2 µs for the shortest: the hook's own error, FK_GAP_ERR_NS
	// in measure.c) of the trace's mean, alone; beside, within that plus
	// the largest error the same host gave alone (a loaded host moves a
	// short kernel's median by a little more than the hook's own error).
	// The mean is not judged, the host's stalls move it.
	_, aloneSamples, aloneStretched, aloneErr := keptDurations(t, fikit, d.dataDir, alone.key, tr, false, 0)
	known, samples, stretched, _ := keptDurations(t, fikit, d.dataDir, lp.key, tr, true, aloneErr)
	t.Logf("alone: %d of %d durations stretched; a short kernel's median off by %.0f ns at most", aloneStretched, aloneSamples, aloneErr)
	allowed := max(samples/40, 2*aloneStretched*samples/max(aloneSamples, 1))
	if stretched > allowed {
		t.Errorf("%d of %d kept durations are stretched by half a switch or more (alone %d of %d)", stretched, samples, aloneStretched, aloneSamples)
	}
	distinct := map[kernelKey]bool{}
	for _, k := range tr.Kernels {
		distinct[kernelKey{k.Name, k.Grid, k.Block}] = true
	}
	if 2*known < len(distinct) {
		t.Errorf("the profile knows the duration of %d of the trace's %d kernels, want at least half", known, len(distinct))
	}
	t.Logf("%d kernels' durations known; %d of %d kept durations stretched", known, stretched, samples)
}

// keptDurations reads key's profile and checks it against the trace: each
// known kernel's median within 5% (2 µs, plus slack) of the trace's mean;
// it returns the kernels whose durations are known, the durations kept,
// how many of them are longer than the trace's longest for their kernel by
// half a switch or more, and the largest error of a median found. beside:
// the profile must hold runs kept beside others.
func keptDurations(t *testing.T, fikit, dataDir, key string, tr *trace.Trace, beside bool, slack float64) (known, samples, stretched int, maxErr float64) {
	t.Helper()
	r := runCmd(t, 30*time.Second, nil, fikit, "profile", "export", key, "--data-dir", dataDir)
	if r.ExitCode != 0 {
		t.Fatalf("profile export: %s", r)
	}
	prof, err := profiler.DecodeJSON(strings.NewReader(r.Stdout))
	if err != nil {
		t.Fatalf("profile export: %v", err)
	}
	if beside && prof.BesideRuns == 0 {
		t.Errorf("no run was kept beside the high priority (%d runs)", prof.Runs)
	}
	want := map[uint64][]int64{}
	for _, k := range tr.Kernels {
		id := kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block)
		want[id] = append(want[id], k.DurationNs)
	}
	switchNs := float64(140_000)
	firstID := kernelid.ID(kernelid.ReplayEntryName(tr.Kernels[0].Name), tr.Kernels[0].Grid, tr.Kernels[0].Block)
	for id, k := range prof.Kernels {
		durs, ok := want[id]
		if !ok {
			t.Errorf("profile has kernel %016x (%s), the trace has not", id, k.Name)
			continue
		}
		if !k.DurationKnown() {
			continue
		}
		known++
		var sum int64
		for _, d := range durs {
			sum += d
		}
		mean, longest := float64(sum)/float64(len(durs)), float64(slices.Max(durs))
		p50 := k.Duration.Quantile(0.5)
		tol := math.Max(0.05*mean, 2000) + slack
		if id == firstID {
			// A run's first launch comes after idle time: the hook takes
			// all of its launch call's extra time as the kernel's late
			// start (measure.c, settle), which a loaded host's stalls in
			// that call make it overestimate. The first kernel reads short
			// by up to that much; another 2 µs.
			tol += 2000
		}
		if err := math.Abs(p50 - mean); err > tol {
			t.Errorf("%s grid %v: median duration %.0f ns, trace mean %.0f ns (allowed %.0f ns more)", k.Name, k.Grid, p50, mean, slack)
		} else if 0.05*mean < 2000 {
			maxErr = max(maxErr, err) // a short kernel's: the host's error
		}
		n := int(k.Duration.Count)
		for j := 0; j < n; j++ {
			q := 0.5
			if n > 1 {
				q = float64(j) / float64(n-1)
			}
			if k.Duration.Quantile(q) > longest+switchNs/2 {
				stretched++
			}
		}
		samples += n
	}
	return known, samples, stretched, maxErr
}
