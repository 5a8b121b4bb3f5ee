package tests

// End to end: a launch-bound high-priority service (priority 0) and a
// second service (priority 5) are profiled under `fikit serve`, then run
// together under fikit, and in the same test alone and without a scheduler
// (the simulated GPU's default time-slicing). Judged by what happened on the
// device — each run's blocked time, simgpu's ground truth — and only loosely
// by wall-clock JCTs, which on a 2-core host mix in CPU contention; never by
// anything fikit reports about itself.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/simgpu/timeline"
)

func TestFikitProtectsHighPriority(t *testing.T) {
	// A request every 5 ms, about twice the HP's JCT alone, as in
	// `fikit demo`.
	protectsHighPriority(t, pairCase{
		hp:     replaySpec{trace: "h100/resnet50_4_fwd", cpuNs: 12000, prio: 0, key: "e2e-hp", warmup: 3, runs: 150, interval: 5 * time.Millisecond},
		lp:     replaySpec{trace: "h100/bert_2_fwd", cpuNs: 5000, prio: 5, key: "e2e-lp"},
		device: "h200",
	})
}

// The pair an H200 ran (docs/bench.md "On a real GPU", issue 22): a
// CUDA-graph ResNet-50 batch 1, one graph launch per request every 8 ms,
// beside BERT-base batch 16, the frozen scenario traces, on the calibrated
// device. The daemon sees each request as one launch of the graph.
func TestFikitProtectsCUDAGraphService(t *testing.T) {
	show := protectsHighPriority(t, pairCase{
		hp: replaySpec{trace: "scenario/graph_resnet50_b1", cpuNs: -1, graph: true, prio: 0, key: "e2e-graph-hp", warmup: 3,
			runs: 150, interval: 8 * time.Millisecond},
		lp:     replaySpec{trace: "scenario/bert_base_b16", cpuNs: -1, prio: 5, key: "e2e-bert-lp"},
		device: "h200",
	})
	if len(show.Kernels) != 1 || !strings.HasPrefix(show.Kernels[0].Name, "fikit.graph") {
		t.Errorf("the graph service's profile has %d kernels (%v), want its one graph launch", len(show.Kernels), show.Kernels)
	}
}

// pairCase is a high-priority service at an interval beside a closed-loop
// low-priority one, on a simgpu device preset.
type pairCase struct {
	hp, lp replaySpec
	device string
}

// protectsHighPriority profiles the pair under `fikit serve`, runs the high-
// priority service alone, the two without a scheduler and under fikit, and
// judges fikit by the device's ground truth against bounds derived from the
// preset's context-switch cost. It returns the HP's profile.
func protectsHighPriority(t *testing.T, pc pairCase) profileShowJSON {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	dev, err := devmodel.Preset(pc.device)
	if err != nil {
		t.Fatal(err)
	}
	d := startServe(t, t.TempDir(), "", "--profile-runs", "20")
	shm, tl := uniqueShm(t), timelineOf(t)
	env := simgpuEnv(t, shm, "FIKIT_SIMGPU_TIMELINE="+tl, "FIKIT_SIMGPU_DEVICE="+pc.device)
	hp, lp := pc.hp, pc.lp
	hp.sched, lp.sched = d.addr, d.addr
	hpRuns, hpInterval := hp.runs, hp.interval

	// Profile each alone.
	var hpShow profileShowJSON
	for i, s := range []replaySpec{hp, lp} {
		s.runs, s.warmup, s.interval = 23, 0, 0
		show := profileFully(t, d, env, s)
		if i == 0 {
			hpShow = show
		}
	}

	hp.runs, hp.interval = hpRuns, hpInterval
	type mode struct {
		hp, lp []replayRun
		hpPid  int
	}
	run := func(hpHooked, lpHooked bool) mode {
		t.Helper()
		l := lp
		l.hooked, l.runs = lpHooked, 1000000
		lcmd, largs := l.command(t)
		lproc := startCmd(t, env, lcmd, largs...)
		if !lproc.waitOutput(`{"run"`, 1, 60*time.Second) {
			t.Fatalf("the low-priority service did not get going: %s", lproc.KillGroup())
		}
		h := hp
		h.hooked = hpHooked
		hcmd, hargs := h.command(t)
		hr := runCmd(t, 3*time.Minute, env, hcmd, hargs...)
		lr := lproc.KillGroup()
		if hr.ExitCode != 0 {
			t.Fatalf("high-priority replay: %s", hr)
		}
		return mode{hp: parseRuns(t, hr.Stdout), lp: parseRuns(t, lr.Stdout), hpPid: summaryPid(t, hr.Stdout)}
	}

	var lpLongest int64
	for _, k := range loadTrace(t, lp.trace).Kernels {
		lpLongest = max(lpLongest, k.DurationNs)
	}
	// Alone (hooked, sharing phase).
	h := hp
	h.hooked = true
	cmd, args := h.command(t)
	ar := runCmd(t, 3*time.Minute, env, cmd, args...)
	if ar.ExitCode != 0 {
		t.Fatalf("high priority alone: %s", ar)
	}
	aloneRuns := parseRuns(t, ar.Stdout)
	alone := stats.Quantile(harness.JCTs(aloneRuns), 0.5)
	heavyNs := int64(dev.Switch) + max(alone/4, lpLongest)

	shared := run(false, false)
	fikit := run(true, true)
	// The low-priority service's waiting thread was answered in its board
	// slot (a futex wake), not only by datagrams.
	m := adminMetrics(t, d.dataDir)
	t.Logf("answers in board slots %.0f; grants %.0f, holds %.0f", m["fikit_board_answers_total"], m["fikit_grants_total"], m["fikit_holds_total"])
	if m["fikit_board_answers_total"] == 0 {
		t.Error("no grant or hold was given in a board slot")
	}

	segs := readTimeline(t, tl)
	// The instrument first: alone, nothing delays the high-priority kernels;
	// each run's blocked time as the replayer read it from the device equals
	// the timeline's, kernel by kernel.
	if in := interference(t, aloneRuns, alone, heavyNs); in.p99 != 0 {
		t.Errorf("alone, the high-priority runs were blocked %.2f%% of their JCT (p99): the instrument is wrong", in.p99)
	}
	for name, m := range map[string]mode{"default sharing": shared, "fikit": fikit} {
		checkBlockedMatchesTimeline(t, name, m.hp, segs, m.hpPid)
	}

	sh, fk := interference(t, shared.hp, alone, heavyNs), interference(t, fikit.hp, alone, heavyNs)
	shShare, fkShare := lpInsideHP(shared.hp, segs, shared.hpPid), lpInsideHP(fikit.hp, segs, fikit.hpPid)
	t.Logf("high priority p50 JCT: alone %s; default sharing %s (%.2fx, host part %.2fx); fikit %s (%.2fx, host part %.2fx)",
		ms(alone), ms(stats.Quantile(harness.JCTs(shared.hp), 0.5)), sh.wall, sh.host, ms(stats.Quantile(harness.JCTs(fikit.hp), 0.5)), fk.wall, fk.host)
	t.Logf("HP GPU interference (blocked / JCT alone) p50 / p90 / p99: default sharing %.2f%% / %.2f%% / %.2f%%, fikit %.2f%% / %.2f%% / %.2f%%; heavy runs (blocked > %s): %.0f%% / %.0f%%",
		sh.p50, sh.p90, sh.p99, fk.p50, fk.p90, fk.p99, ms(heavyNs), sh.heavy, fk.heavy)
	t.Logf("low priority runs during the high-priority span: default sharing %d, fikit %d; LP GPU time inside HP runs under fikit %.0f%%",
		lpWithin(shared.hp, shared.lp), lpWithin(fikit.hp, fikit.lp), 100*fkShare.inside)
	t.Logf("HP idle GPU time filled: default sharing %.0f%%, fikit %.0f%%; time between HP runs %.0f%% / %.0f%% of the span, filled %.0f%% / %.0f%%",
		100*shShare.fill, 100*fkShare.fill, 100*shShare.room, 100*fkShare.room, 100*shShare.roomFill, 100*fkShare.roomFill)

	// The scheduler, judged by what happened on the device, against what
	// today's scheduler does on this device (docs/bench.md): a median run
	// pays the switch back from the low-priority service, which filled the
	// time before it; a fill can end up to a switch late; the bound leaves
	// a third switch for a host that delays the core's news of the run. A
	// heavy run is one blocked more than a switch and the longer of one
	// low-priority kernel (kernels are not preempted) and a quarter of its
	// JCT alone: the tail where the core let more than one kernel in.
	gpuWrong := func(fk interferenceFigures) []string {
		var wrong []string
		if maxP50 := 300 * float64(dev.Switch) / float64(alone); fk.p50 > maxP50 {
			wrong = append(wrong, fmt.Sprintf("under fikit the high-priority runs were blocked %.2f%% of their JCT alone at the median, want ≤ %.1f%% (three %v switches)", fk.p50, maxP50, dev.Switch))
		}
		if fk.heavy > heavyRunsMaxPct {
			wrong = append(wrong, fmt.Sprintf("under fikit %.0f%% of the high-priority runs were heavy (blocked over %s), want ≤ %.0f%%", fk.heavy, ms(heavyNs), heavyRunsMaxPct))
		}
		if fk.p50 > sh.p50/4 {
			wrong = append(wrong, fmt.Sprintf("fikit's GPU interference (p50 %.2f%%) is not clearly below default sharing's (%.2f%%)", fk.p50, sh.p50))
		}
		return wrong
	}
	// Wall clock is the host's as much as the scheduler's (CPU
	// contention): logged here, measured by `fikit bench` and `fikit
	// demo`, not judged. The rest only where the host let it be measured:
	// a fikit span that failed the device's checks above, or in which the
	// host slowed the high-priority runs until they went back to back (no
	// time between them to fill), or in which the low-priority service
	// (launching from the same loaded host) filled too little of that
	// time, is measured again, at most twice, after a pause: a scheduler
	// that lets the low priority in or starves it does so every time, a
	// host that was busy for a moment does not stay busy (a host that
	// stalls a hook or the daemon lets kernels in late).
	for retry := 1; (len(gpuWrong(fk)) > 0 || fkShare.room < minRoom || fkShare.roomFill < minRoomFill) && retry <= measureRetries; retry++ {
		msg := "the device's checks passed"
		if w := gpuWrong(fk); len(w) > 0 {
			msg = strings.Join(w, "; ")
		}
		t.Logf("%s; %.0f%% of the span between HP runs, %.0f%% of it filled: measuring fikit again (%d of %d)",
			msg, 100*fkShare.room, 100*fkShare.roomFill, retry, measureRetries)
		time.Sleep(measureRetryPause)
		again := run(true, true)
		fk = interference(t, again.hp, alone, heavyNs)
		fkShare = lpInsideHP(again.hp, readTimeline(t, tl), again.hpPid)
		t.Logf("again: fikit %.2fx (host part %.2fx), interference p50 / p90 / p99 %.2f%% / %.2f%% / %.2f%%, heavy runs %.0f%%; HP idle GPU time filled %.0f%%, time between HP runs %.0f%% of the span, filled %.0f%%",
			fk.wall, fk.host, fk.p50, fk.p90, fk.p99, fk.heavy, 100*fkShare.fill, 100*fkShare.room, 100*fkShare.roomFill)
	}
	for _, w := range gpuWrong(fk) {
		t.Error(w)
	}
	t.Logf("wall clock, not judged: default sharing %.2fx alone, fikit %.2fx (host part %.2fx)", sh.wall, fk.wall, fk.host)
	// The low-priority service's progress is its GPU time in the time
	// between high-priority runs (whole runs, about 30 ms of GPU time each,
	// are logged, not judged). In-run gaps are not judged: they are mostly
	// shorter than its kernels.
	switch {
	case fkShare.room < minRoom:
		t.Logf("the host kept the high-priority runs back to back in every measurement (%.1f%% of the span between them, want ≥ %.0f%%): the low-priority service's progress is not judged", 100*fkShare.room, 100*minRoom)
	case fkShare.roomFill < minRoomFill:
		t.Errorf("only %.0f%% of the time between high-priority runs was filled, want ≥ %.0f%%", 100*fkShare.roomFill, 100*minRoomFill)
	}
	return hpShow
}

// The low-priority service's progress under fikit: the share of the time
// between high-priority runs it fills, judged where that time is at least
// minRoom of the span. Since the hooks bound their GPU time in flight
// (HookBound, 200 µs by default) the low-priority service keeps only that
// much queued even between runs, so a host that is slow to launch (two
// spinning services and the daemon on this VM's two cores) leaves the GPU
// idle more often (docs/scheduler.md "Measured" has the fill with the
// bound and before it). A starved service fills next to nothing.
const (
	minRoom     = 0.20
	minRoomFill = 0.40
)

// The share of heavy runs allowed under fikit (see protectsHighPriority).
const heavyRunsMaxPct = 8.0

// How often, and after what pause, a fikit span that lost to default sharing
// on wall clock, or left too little time between high-priority runs, is
// measured again.
const (
	measureRetries    = 2
	measureRetryPause = 3 * time.Second
)

// interferenceFigures is a service's slowdown split into the GPU's part and
// the host's.
type interferenceFigures struct {
	p50, p90, p99 float64 // blocked / p50 JCT alone, %
	heavy         float64 // % of runs blocked more than heavyNs
	wall, host    float64 // p50 JCT / alone; p50 (JCT − blocked) / alone
}

func interference(t testing.TB, runs []replayRun, alone, heavyNs int64) interferenceFigures {
	t.Helper()
	r := &harness.Result{Runs: runs}
	blocked := r.Blocked()
	if len(blocked) != len(runs) {
		t.Fatalf("%d of %d runs have no blocked_ns: the replayer did not read simgpu's totals", len(runs)-len(blocked), len(runs))
	}
	in := harness.InterferenceOf(r, alone) // as fikit demo and fikit bench report it
	f := interferenceFigures{p50: in.P50Pct, p99: in.P99Pct, wall: in.WallRatio, host: in.HostRatio}
	f.p90 = 100 * float64(stats.Quantile(blocked, 0.9)) / float64(alone)
	for _, b := range blocked {
		if b > heavyNs {
			f.heavy += 100 / float64(len(blocked))
		}
	}
	return f
}

// checkBlockedMatchesTimeline: a run's blocked_ns (the replayer's reading of
// its context's totals) is the sum over the timeline records of the kernels
// that arrived during the run.
func checkBlockedMatchesTimeline(t testing.TB, name string, runs []replayRun, segs []timeline.Record, pid int) {
	t.Helper()
	spans := make([]timeline.Span, len(runs))
	for i, r := range runs {
		spans[i] = timeline.Span{From: r.StartNs, To: r.StartNs + r.JCTNs}
	}
	got := timeline.BlockedPerSpan(segs, pid, spans)
	bad := 0
	for i, r := range runs {
		if r.BlockedNs != nil && *r.BlockedNs != got[i] {
			if bad++; bad <= 3 {
				t.Errorf("%s: run %d blocked %d ns by the replayer, %d ns by the timeline", name, r.Run, *r.BlockedNs, got[i])
			}
		}
	}
}

// summaryPid is the pid in fikit-replay's --json summary line.
func summaryPid(t testing.TB, stdout string) int {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, `{"summary"`) {
			var s struct{ PID int }
			if err := json.Unmarshal([]byte(line), &s); err != nil || s.PID <= 0 {
				t.Fatalf("replay summary %q: pid %d, %v", line, s.PID, err)
			}
			return s.PID
		}
	}
	t.Fatalf("no summary line in the replay output:\n%s", tail(stdout, 500))
	return 0
}

// span is the interval from the first run's start to the last run's end.
func span(runs []replayRun) (int64, int64) {
	if len(runs) == 0 {
		return 0, 0
	}
	from, to := runs[0].StartNs, int64(0)
	for _, r := range runs {
		to = max(to, r.StartNs+r.JCTNs)
	}
	return from, to
}

// lpWithin counts low-priority runs that ran entirely within the
// high-priority span.
func lpWithin(hp, lp []replayRun) int {
	from, to := span(hp)
	n := 0
	for _, r := range lp {
		if r.StartNs >= from && r.StartNs+r.JCTNs <= to {
			n++
		}
	}
	return n
}

// hpShare is how the low-priority service used the high-priority span on
// the device. Every other process's kernels in the span are the
// low-priority service's.
type hpShare struct {
	inside float64 // share of the LP's GPU time that fell inside HP runs
	fill   float64 // share of the HP's idle GPU time the LP filled
	// room is the share of the span between HP runs: the idle time the
	// scheduler knows of ahead (in-run gaps are a few µs, shorter than
	// most LP kernels). A host that slows the HP's runs past its request
	// interval leaves none: its runs go back to back.
	room float64
	// roomFill is the share of the time between HP runs the LP filled.
	roomFill float64
}

func lpInsideHP(hp []replayRun, segs []timeline.Record, hpPid int) hpShare {
	var sh hpShare
	from, to := span(hp)
	if to <= from {
		return sh
	}
	// The stretches between runs, in start order.
	runs := slices.Clone(hp)
	slices.SortFunc(runs, func(a, b replayRun) int { return cmp.Compare(a.StartNs, b.StartNs) })
	var between []timeline.Span
	var room int64
	end := runs[0].StartNs
	for _, r := range runs {
		if r.StartNs > end {
			between = append(between, timeline.Span{From: end, To: r.StartNs})
			room += r.StartNs - end
		}
		end = max(end, r.StartNs+r.JCTNs)
	}
	overlap := func(a, b int64, spans []timeline.Span) (n int64) {
		for _, sp := range spans {
			if x, y := max(a, sp.From), min(b, sp.To); y > x {
				n += y - x
			}
		}
		return n
	}
	inRuns := make([]timeline.Span, len(hp))
	for i, r := range hp {
		inRuns[i] = timeline.Span{From: r.StartNs, To: r.StartNs + r.JCTNs}
	}
	var lpTotal, lpIn, lpBetween, hpBusy int64
	for _, s := range segs {
		a, b := max(s.StartNs, from), min(s.EndNs, to)
		if b <= a {
			continue
		}
		if s.PID == hpPid {
			hpBusy += b - a
			continue
		}
		lpTotal += b - a
		lpIn += overlap(a, b, inRuns)
		lpBetween += overlap(a, b, between)
	}
	if lpTotal > 0 {
		sh.inside = float64(lpIn) / float64(lpTotal)
	}
	if idle := (to - from) - hpBusy; idle > 0 {
		sh.fill = float64(lpTotal) / float64(idle)
	}
	sh.room = float64(room) / float64(to-from)
	if room > 0 {
		sh.roomFill = float64(lpBetween) / float64(room)
	}
	return sh
}
