package tests

// Issue 4 end to end: the daemon profiles a replayed trace under the hook,
// the profile matches the trace (durations) and simgpu's ground truth
// (gaps), survives a daemon restart, and the service then shares.

import (
	"encoding/json"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/simgpu/timeline"
	"github.com/fikit/fikit/simgpu/trace"
)

type profileShowJSON struct {
	TaskKey   string `json:"task_key"`
	Phase     string `json:"phase"`
	Runs      int    `json:"runs"`
	Discarded int    `json:"discarded_runs"`
	Kernels   []struct {
		ID          string    `json:"id"`
		Name        string    `json:"name"`
		Grid        [3]uint32 `json:"grid"`
		Block       [3]uint32 `json:"block"`
		Count       uint64    `json:"count"`
		MeanDurNs   float64   `json:"mean_duration_ns"`
		P90DurNs    float64   `json:"p90_duration_ns"`
		MeanGapNs   *float64  `json:"mean_gap_ns"`
		P90GapNs    *float64  `json:"p90_gap_ns"`
		MangledName string    `json:"mangled_name"`
	} `json:"kernels"`
}

type kernelKey struct {
	name        string
	grid, block [3]uint32
}

func TestProfilePipeline(t *testing.T) {
	const traceName, key, runs = "h100/resnet50_4_fwd", "e2e-resnet50", 20
	fikit := requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")[0]
	tr, err := trace.Load(traceName)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	d := startServe(t, dataDir, "", "--profile-runs", "20")
	step("daemon up")
	shm, tl := uniqueShm(t), timelineOf(t)
	env := simgpuEnv(t, shm, "FIKIT_SIMGPU_TIMELINE="+tl)

	// Profile: T runs under the hook at priority 0, and as many more: the
	// first (cold) run may be discarded, so are runs the hook measured with
	// a stalled launch call (a loaded machine), and a Go program's last runs
	// go unreported (it exits without running the hook's atexit handler).
	show := profileFully(t, d, env, replaySpec{trace: traceName, runs: 2 * runs, cpuNs: 12000, prio: 0, key: key, sched: d.addr})
	step("profiled")
	checkPrivate(t, dataDir)
	if show.Phase != "sharing" || show.Runs != runs {
		t.Fatalf("profile phase %q runs %d, want sharing after %d runs", show.Phase, show.Runs, runs)
	}

	// Every distinct (name, grid, block) of the trace, and nothing else.
	want := map[kernelKey][]int64{}
	for _, k := range tr.Kernels {
		kk := kernelKey{k.Name, k.Grid, k.Block}
		want[kk] = append(want[kk], k.DurationNs)
	}
	got := map[kernelKey]int{}
	for i, k := range show.Kernels {
		got[kernelKey{k.Name, k.Grid, k.Block}] = i
	}
	if len(got) != len(want) {
		t.Errorf("profile has %d distinct kernels, the trace %d", len(got), len(want))
	}
	for kk := range want {
		if _, ok := got[kk]; !ok {
			t.Errorf("profile lacks %q grid %v block %v", kk.name, kk.grid, kk.block)
		}
	}

	// Mean durations within 3% of the trace's.
	worstDur := 0.0
	for kk, durs := range want {
		i, ok := got[kk]
		if !ok {
			continue
		}
		var sum int64
		for _, d := range durs {
			sum += d
		}
		mean := float64(sum) / float64(len(durs))
		rel := math.Abs(show.Kernels[i].MeanDurNs-mean) / mean
		worstDur = math.Max(worstDur, rel)
		if rel > 0.03 {
			t.Errorf("%s grid %v: mean duration %.0f ns, trace %.0f ns (%.1f%% off)", kk.name, kk.grid, show.Kernels[i].MeanDurNs, mean, 100*rel)
		}
	}

	// Mean gaps within 10% of the idle gaps simgpu actually left in the runs
	// the profile holds (its timeline is the ground truth), allowing 2 µs for
	// near-zero gaps: the hook reports a run whose stalled launch calls may
	// move a gap's mean by up to that much (FK_GAP_ERR_NS in measure.c; a
	// zero gap read 1.56 µs once). Two such runs move it twice as far, and
	// the hook reports an uncertain run after eight withheld in a row:
	// a fresh clone's run read one zero gap as 3.46 µs. So two gaps may be
	// off by up to the 10 µs the profile's gaps are held to (docs/design.md
	// "A stalled launch call"), none further; a hook that misplaced gaps
	// as a rule (its launch latency or a stall taken as idle time) is off
	// in many. The daemon logs which runs it committed (the hook's run N is
	// the replay's run N-1: it registers at the first launch).
	committed := committedRuns(t, d.Stderr(), show.Runs)
	truth := timelineGaps(t, readTimeline(t, tl), len(tr.Kernels), committed)
	const heldTo = 10_000 // ns
	worstGap, checked, loose := 0.0, 0, 0
	for kk := range want {
		i, ok := got[kk]
		if !ok || show.Kernels[i].MeanGapNs == nil {
			continue
		}
		id := kernelid.ID(kernelid.ReplayEntryName(kk.name), kk.grid, kk.block)
		gaps := truth[id]
		if len(gaps) == 0 {
			continue
		}
		var sum int64
		for _, g := range gaps {
			sum += g
		}
		mean := float64(sum) / float64(len(gaps))
		diff := math.Abs(*show.Kernels[i].MeanGapNs - mean)
		checked++
		if mean > 0 {
			worstGap = math.Max(worstGap, diff/mean)
		}
		switch {
		case diff > math.Max(0.10*mean, heldTo):
			t.Errorf("%s grid %v: mean gap %.0f ns, simgpu's timeline %.0f ns", kk.name, kk.grid, *show.Kernels[i].MeanGapNs, mean)
		case diff > math.Max(0.10*mean, 2000):
			loose++
			t.Logf("%s grid %v: mean gap %.0f ns, simgpu's timeline %.0f ns (within the 10 µs gaps are held to)", kk.name, kk.grid, *show.Kernels[i].MeanGapNs, mean)
		}
	}
	if loose > 2 {
		t.Errorf("%d mean gaps off by over 2 µs (and 10%%), want 2 at most", loose)
	}
	if checked == 0 {
		t.Error("no gap could be compared with the timeline")
	}
	t.Logf("%d distinct kernels; worst mean-duration error %.2f%%, worst relative gap error %.1f%% (%d gaps checked)",
		len(want), 100*worstDur, 100*worstGap, checked)

	// Restart: the profile is still there and the service now shares.
	step("checked")
	d.stop(t)
	step("stopped")
	ls := runCmd(t, 30*time.Second, nil, fikit, "profile", "ls", "--data-dir", dataDir, "--json")
	if ls.ExitCode != 0 {
		t.Fatalf("profile ls (daemon stopped): %s", ls)
	}
	var list []struct {
		TaskKey string `json:"task_key"`
		Phase   string `json:"phase"`
		Runs    int    `json:"runs"`
	}
	if err := json.Unmarshal([]byte(ls.Stdout), &list); err != nil || len(list) != 1 || list[0].TaskKey != key || list[0].Phase != "sharing" {
		t.Fatalf("profile ls after stop: %v %s", err, ls.Stdout)
	}
	d2 := startServe(t, dataDir, d.addr)
	step("restarted")
	cmd, args := replaySpec{trace: traceName, runs: 100000, cpuNs: 12000, hooked: true, prio: 0, key: key, sched: d2.addr}.command(t)
	p := startCmd(t, simgpuEnv(t, shm), cmd, args...)
	var phase string
	waitFor(20*time.Second, func() bool {
		for _, tk := range d2.status(t).Tasks {
			if tk.Key == key {
				phase = tk.Phase
				return true
			}
		}
		return false
	})
	p.KillGroup()
	step("shared")
	if phase != "sharing" {
		t.Fatalf("after a restart the service registered in phase %q, want sharing", phase)
	}
	d2.stop(t)

	// An unknown key is an error.
	if r := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", "no-such-key", "--data-dir", dataDir, "--json"); r.ExitCode == 0 {
		t.Fatalf("profile show of an unknown key succeeded: %s", r)
	}
}

// committedRuns reads the replay runs (0-based) the daemon committed to the
// profile from its debug log.
func committedRuns(t testing.TB, log string, want int) map[int]bool {
	t.Helper()
	runs := map[int]bool{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="profiling run"`) || !strings.Contains(line, "outcome=committed") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "run="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					runs[n-1] = true
				}
			}
		}
	}
	if len(runs) != want {
		t.Fatalf("the daemon's log names %d committed runs, the profile has %d", len(runs), want)
	}
	return runs
}

// timelineGaps returns, per kernel ID, the idle gaps the device left after
// each kernel of the (single) replaying process before its next kernel, in
// the given runs of n kernels (a run's last kernel is followed by the next
// run: not an inter-kernel gap).
func timelineGaps(t testing.TB, recs []timeline.Record, n int, runs map[int]bool) map[uint64][]int64 {
	type k struct {
		start, end int64
		id         uint64
	}
	var ks []k
	starts := map[uint64]int64{}
	for _, r := range recs {
		if r.Seg == 0 {
			starts[r.Seq] = r.StartNs
		}
		if r.Last {
			ks = append(ks, k{start: starts[r.Seq], end: r.EndNs, id: kernelid.ID(r.Name, r.Grid, r.Block)})
		}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].start < ks[j].start })
	out := map[uint64][]int64{}
	for i := 0; i+1 < len(ks); i++ {
		if (i+1)%n == 0 || !runs[i/n] {
			continue
		}
		out[ks[i].id] = append(out[ks[i].id], max(0, ks[i+1].start-ks[i].end))
	}
	return out
}

// checkPrivate: what the daemon wrote in its data directory is its owner's
// alone (task keys are command lines; profiles steer the scheduler), but
// the admin socket, which its group may use.
func checkPrivate(t testing.TB, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil || path == dir || fi.Mode().Type() == fs.ModeSocket {
			return err
		}
		n++
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for others", path, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Errorf("data directory %s: %d files, %v", dir, n, err)
	}
}
