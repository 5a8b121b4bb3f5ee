package tests

// Issue 5 end to end: a launch-bound high-priority service (priority 0) and a
// second service (priority 5) are profiled under `fikit serve`, then run
// together under fikit, and in the same test alone and without a scheduler
// (the simulated GPU's default time-slicing). Judged from the replays' own
// JCTs and simgpu's timeline, not from anything fikit reports about itself.

import (
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/simgpu/trace"
)

func TestFikitProtectsHighPriority(t *testing.T) {
	const (
		hpTrace, lpTrace = "h100/resnet50_4_fwd", "h100/bert_2_fwd"
		hpKey, lpKey     = "e2e-hp", "e2e-lp"
		hpRuns           = 150
	)
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	d := startServe(t, t.TempDir(), "", "--profile-runs", "20")
	shm, tl := uniqueShm(t), timelineOf(t)
	env := simgpuEnv(t, shm, "FIKIT_SIMGPU_TIMELINE="+tl)
	hp := replaySpec{trace: hpTrace, cpuNs: 12000, prio: 0, key: hpKey, sched: d.addr, warmup: 3}
	lp := replaySpec{trace: lpTrace, cpuNs: 5000, prio: 5, key: lpKey, sched: d.addr}

	// Profile each alone.
	for _, s := range []replaySpec{hp, lp} {
		s.hooked, s.runs, s.warmup = true, 23, 0
		cmd, args := s.command(t)
		if r := runCmd(t, 3*time.Minute, env, cmd, args...); r.ExitCode != 0 {
			t.Fatalf("profiling %s: %s", s.key, r)
		}
	}

	hp.runs, hp.interval = hpRuns, 5*time.Millisecond
	run := func(hpHooked, lpHooked bool) (hpRuns, lpRuns []replayRun) {
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
		return parseRuns(t, hr.Stdout), parseRuns(t, lr.Stdout)
	}

	// Alone (hooked, sharing phase).
	h := hp
	h.hooked = true
	cmd, args := h.command(t)
	ar := runCmd(t, 3*time.Minute, env, cmd, args...)
	if ar.ExitCode != 0 {
		t.Fatalf("high priority alone: %s", ar)
	}
	alone := p50(jcts(parseRuns(t, ar.Stdout)))

	sharedHP, sharedLP := run(false, false)
	fikitHP, fikitLP := run(true, true)

	shared, fk := p50(jcts(sharedHP)), p50(jcts(fikitHP))
	shRatio, fkRatio := float64(shared)/float64(alone), float64(fk)/float64(alone)
	segs := readTimeline(t, tl)
	hpOnly := onlyIn(t, hpTrace, lpTrace)
	shLPIn, shFill := lpInsideHP(sharedHP, segs, hpOnly)
	fkLPIn, fkFill := lpInsideHP(fikitHP, segs, hpOnly)
	t.Logf("high priority p50 JCT: alone %s; default sharing %s (%.2fx); fikit %s (%.2fx)", ms(alone), ms(shared), shRatio, ms(fk), fkRatio)
	t.Logf("low priority runs during the high-priority span: default sharing %d, fikit %d", lpWithin(sharedHP, sharedLP), lpWithin(fikitHP, fikitLP))
	t.Logf("low-priority GPU time inside high-priority runs: default sharing %.0f%%, fikit %.0f%%; high-priority idle GPU time filled: %.0f%% / %.0f%%",
		100*shLPIn, 100*fkLPIn, 100*shFill, 100*fkFill)

	if fkRatio > 1.10 {
		t.Errorf("under fikit the high-priority p50 JCT is %.2fx its JCT alone, want ≤ 1.10", fkRatio)
	}
	if shRatio <= fkRatio {
		t.Errorf("default sharing (%.2fx) should hurt the high-priority service more than fikit (%.2fx)", shRatio, fkRatio)
	}
	if n := lpWithin(fikitHP, fikitLP); n < 1 {
		t.Errorf("the low-priority service completed %d runs under fikit", n)
	}
	// Its kernels ran in the high-priority service's gaps: hardly ever
	// inside a high-priority run, unlike under default sharing.
	if fkLPIn > 0.25 {
		t.Errorf("%.0f%% of the low-priority GPU time fell inside high-priority runs", 100*fkLPIn)
	}
	if fkFill < 0.20 {
		t.Errorf("only %.0f%% of the high-priority idle GPU time was filled", 100*fkFill)
	}
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

// lpInsideHP reports, within the high-priority span, the share of the
// low-priority service's GPU time that fell inside high-priority runs, and
// the share of the high-priority service's idle GPU time the low-priority
// service filled. Processes are told apart by their kernels' start times:
// the timeline's segments inside the span belong to one of the two.
func lpInsideHP(hp []replayRun, segs []timelineRec, hpOnly map[string]bool) (inside, fill float64) {
	from, to := span(hp)
	if to <= from {
		return 0, 0
	}
	hpPid := pidOf(segs, hpOnly, from, to)
	var lpTotal, lpIn, hpBusy int64
	for _, s := range segs {
		a, b := max(s.StartNs, from), min(s.EndNs, to)
		if b <= a {
			continue
		}
		if s.Pid == hpPid {
			hpBusy += b - a
			continue
		}
		lpTotal += b - a
		for _, r := range hp {
			ra, rb := max(a, r.StartNs), min(b, r.StartNs+r.JCTNs)
			if rb > ra {
				lpIn += rb - ra
			}
		}
	}
	if lpTotal > 0 {
		inside = float64(lpIn) / float64(lpTotal)
	}
	if idle := (to - from) - hpBusy; idle > 0 {
		fill = float64(lpTotal) / float64(idle)
	}
	return inside, fill
}

// pidOf finds the high-priority process within [from, to] (the timeline
// holds every phase's processes): the one that ran most kernels there whose
// names only its trace has.
func pidOf(segs []timelineRec, hpOnly map[string]bool, from, to int64) int {
	votes := map[int]int{}
	for _, s := range segs {
		if hpOnly[s.Name] && s.StartNs >= from && s.EndNs <= to {
			votes[s.Pid]++
		}
	}
	best, pid := 0, -1
	for p, v := range votes {
		if v > best {
			best, pid = v, p
		}
	}
	return pid
}

// onlyIn lists the replayer entry names of trace a's kernels that trace b
// does not have.
func onlyIn(t testing.TB, a, b string) map[string]bool {
	ta, err := trace.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := trace.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	inB := map[string]bool{}
	for _, k := range tb.Kernels {
		inB[k.Name] = true
	}
	out := map[string]bool{}
	for _, k := range ta.Kernels {
		if !inB[k.Name] {
			out[kernelid.ReplayEntryName(k.Name)] = true
		}
	}
	return out
}
