package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/simgpu/timeline"
)

// both is one measured mode of two services together.
type both struct {
	fg, bg       *harness.Result
	fgPid, bgPid int // the replayers (timeline pids); 0: unknown
}

// together runs bg in a closed loop in the background, starts fg once bg has
// completed two runs (registered and going), waits for fg to finish and
// stops bg. Hooked services are scheduled by daemon d; otherwise neither
// is hooked (default sharing). bg runs on bgEnv's device (nil: env's).
func (r *runner) together(ctx context.Context, d *harness.Daemon, env, bgEnv *harness.Env, fg, bg svc, hooked bool, extraEnv ...string) (*both, error) {
	if bgEnv == nil {
		bgEnv = env
	}
	if hooked {
		quiesce(d)
	}
	bgs := bg.live(hooked, d.Addr())
	bgs.Runs = 1_000_000
	bgs.Env = append(bgs.Env, extraEnv...)
	bp, err := bgEnv.Start(ctx, bgs)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(bp.Runs()) < 2 {
		if bp.Exited() || time.Now().After(deadline) {
			res := bp.Stop()
			return nil, fmt.Errorf("%s did not get going: %s", bg.Key, lastLine(res.Stderr))
		}
		time.Sleep(2 * time.Millisecond)
	}
	fgs := fg.live(hooked, d.Addr())
	fgs.Env = append(fgs.Env, extraEnv...)
	fp, err := env.Start(ctx, fgs)
	if err != nil {
		bp.Stop()
		return nil, err
	}
	b := &both{}
	if !hooked {
		b.fgPid, b.bgPid = fp.Pid(), bp.Pid()
	} else {
		// A hooked replayer is the child of `fikit run`: its pid is the one
		// its hook registered with.
		for !fp.Exited() && (b.fgPid == 0 || b.bgPid == 0) {
			b.fgPid, b.bgPid = taskPid(d, fg.Key), taskPid(d, bg.Key)
			time.Sleep(5 * time.Millisecond)
		}
	}
	fres, ferr := fp.Wait()
	bres := bp.Stop()
	if ferr != nil {
		return nil, ferr
	}
	if len(fres.Runs) == 0 {
		return nil, fmt.Errorf("%s completed no runs", fg.Key)
	}
	b.fg, b.bg = fres, bres
	return b, nil
}

// taskPid is the pid the newest task registered under key with d reported.
func taskPid(d *harness.Daemon, key string) int {
	_, pid := task(d, key)
	return pid
}

// task is the ID and pid of the newest task registered under key with d
// (0, 0: none).
func task(d *harness.Daemon, key string) (id uint32, pid int) {
	for _, t := range d.Status().Tasks {
		if t.Key == key && t.ID >= id {
			id, pid = t.ID, int(t.PID)
		}
	}
	return id, pid
}

// alone1 runs s by itself (exclusive use of the GPU; hooked for Scheme II).
func (r *runner) alone1(ctx context.Context, env *harness.Env, s svc, hooked bool) (*harness.Result, error) {
	if hooked {
		quiesce(r.d)
	}
	p, err := env.Start(ctx, s.live(hooked, r.d.Addr()))
	if err != nil {
		return nil, err
	}
	res, err := p.Wait()
	if err != nil {
		return nil, err
	}
	if len(res.Runs) == 0 {
		return nil, fmt.Errorf("%s completed no runs", s.Key)
	}
	return res, nil
}

// within returns the JCTs of the runs inside [from, to].
func within(res *harness.Result, from, to int64) []int64 {
	return (&harness.Result{Runs: runsWithin(res, from, to)}).JCTs()
}

// runsWithin returns the runs inside [from, to].
func runsWithin(res *harness.Result, from, to int64) []harness.Run {
	var out []harness.Run
	for _, x := range res.Runs {
		if x.StartNs >= from && x.StartNs+x.JCTNs <= to {
			out = append(out, x)
		}
	}
	return out
}

// setInterference sets each mode's HP GPU interference (harness.InterferenceOf)
// from its HP runs, repetitions pooled as the JCTs are, against the
// exclusive mode's pooled HP p50. A mode some of whose runs the device could
// not account for is left without.
func setInterference(modes []ModeResult, runs map[string][]harness.Run) {
	ex := findMode(modes, ModeExclusive)
	if ex == nil || ex.HP.P50 <= 0 {
		return
	}
	for i := range modes {
		rs := runs[modes[i].Mode]
		if len(rs) == 0 {
			continue
		}
		in := harness.InterferenceOf(&harness.Result{Runs: rs}, int64(ex.HP.P50))
		if in.Runs == len(rs) {
			modes[i].HPInterference = &in
		}
	}
}

// acc pools a mode's results over repetitions.
type acc struct {
	hp, lp         []int64
	hpRuns         []harness.Run
	hpSpan, lpSpan int64
	fills          []float64
	spans          int64
	lates          []int64 // early stop, per HP run
	lateN          []int
}

func (a *acc) result(mode string) ModeResult {
	m := ModeResult{Mode: mode, HP: Summarize(a.hp, a.hpSpan), LP: Summarize(a.lp, a.lpSpan), SpanNs: a.spans}
	if len(a.fills) > 0 {
		var s float64
		for _, f := range a.fills {
			s += f
		}
		m.FillPct = ptr(s / float64(len(a.fills)))
	}
	m.EarlyStop = harness.SummarizeEarlyStop(a.lates, a.lateN)
	return m
}

// pairCfg is how measurePair measures a pair.
type pairCfg struct {
	eo   harness.Options // the device (Device: the bench's when zero)
	reps int
	tag  string // for progress and work directories
	// modes are the co-located modes to run, by name (modeSpecs; nil:
	// colocModes); sim adds the simulator's prediction.
	modes []string
	sim   bool
}

// pairModes measures an HP at an interval with an LP in a closed loop:
// exclusive (each alone, not hooked), then each of modes (modeSpecs) with
// both together, reps times in that order, pooling the JCTs. The LP's JCTs
// are those of its runs inside the HP's span; the fill share comes from the
// timeline.
//
// The control mode (ModeFikitCPU) runs fikit with the LP on a second
// private device: the daemon schedules both as if they shared a GPU, but
// the LP's kernels cannot delay the HP's, so what the HP loses there is
// host-side cost (the daemon, the hooks' sender threads and the waiter's
// requests competing for this machine's CPUs), not the GPU's.
func (r *runner) pairModes(ctx context.Context, env *harness.Env, hp, lp svc, reps int, tag string, modes []string) ([]ModeResult, error) {
	if modes == nil {
		modes = colocModes
	}
	accs := map[string]*acc{ModeExclusive: {}}
	specs := make([]modeSpec, len(modes))
	var other *harness.Env
	for i, name := range modes {
		m, ok := modeByName(name)
		if !ok {
			return nil, fmt.Errorf("no mode %q", name)
		}
		specs[i], accs[name] = m, &acc{}
		if m.LPOtherDevice && other == nil {
			var err error
			if other, err = r.env(tag+" control", harness.Options{Device: env.Device()}); err != nil {
				return nil, err
			}
			defer other.Close()
		}
	}
	lpAlone := lp
	lpAlone.Runs = runsFor(600*time.Millisecond, r.alone[lp.Key], 5, 40)
	lpAlone.Warmup = 1
	type window struct {
		mode     string
		from, to int64
		hp, lp   int
		hpRuns   []harness.Run
	}
	var wins []window
	for rep := 0; rep < reps; rep++ {
		r.logf("  %s: rep %d/%d exclusive", tag, rep+1, reps)
		a, err := r.alone1(ctx, env, hp, false)
		if err != nil {
			return nil, fmt.Errorf("HP alone: %w", err)
		}
		l, err := r.alone1(ctx, env, lpAlone, false)
		if err != nil {
			return nil, fmt.Errorf("LP alone: %w", err)
		}
		ex := accs[ModeExclusive]
		ex.hp = append(ex.hp, a.JCTs()...)
		ex.hpRuns = append(ex.hpRuns, a.Runs...)
		ex.lp = append(ex.lp, l.JCTs()...)
		f, t := a.Span()
		ex.hpSpan += t - f
		f2, t2 := l.Span()
		ex.lpSpan += t2 - f2
		for _, m := range specs {
			mode := m.Name
			r.logf("  %s: rep %d/%d %s", tag, rep+1, reps, mode)
			var bgEnv *harness.Env
			if m.LPOtherDevice {
				bgEnv = other
			}
			d, err := r.daemonFor(ctx, m)
			if err != nil {
				return nil, err
			}
			// The first fikit repetition of a pair is kept as a trace:
			// the daemon records its decisions meanwhile.
			traceName, dec := "", ""
			if mode == ModeFikit && rep == 0 && r.o.TraceDir != "" && env.TimelinePath() != "" {
				traceName = fmt.Sprintf("%s %s + %s", tag, shortKey(hp.Key), shortKey(lp.Key))
				dec = filepath.Join(r.o.WorkDir, traceFileName(traceName)+".decisions.jsonl")
				if err := d.RecordTo(dec); err != nil {
					r.logf("  trace: %v", err)
					dec = ""
				}
			}
			b, err := r.together(ctx, d, env, bgEnv, hp, lp, m.Hooked, m.Env...)
			if dec != "" {
				if rerr := d.RecordTo(""); rerr != nil {
					r.logf("  trace: %v", rerr)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", mode, err)
			}
			from, to := b.fg.Span()
			if dec != "" {
				if err := writePairTrace(r.o.TraceDir, traceName, env.TimelinePath(), dec, from, to); err != nil {
					r.logf("  trace: %v", err)
				}
			}
			ac := accs[mode]
			ac.hp = append(ac.hp, b.fg.JCTs()...)
			ac.hpRuns = append(ac.hpRuns, b.fg.Runs...)
			ac.lp = append(ac.lp, within(b.bg, from, to)...)
			ac.hpSpan += to - from
			ac.lpSpan += to - from
			ac.spans += to - from
			if b.fgPid > 0 && b.bgPid > 0 && !m.LPOtherDevice {
				wins = append(wins, window{mode, from, to, b.fgPid, b.bgPid, b.fg.Runs})
			}
		}
	}
	if path := env.TimelinePath(); path != "" && len(wins) > 0 {
		segs, err := timeline.Read(path)
		if err != nil {
			return nil, err
		}
		for _, w := range wins {
			a := accs[w.mode]
			a.fills = append(a.fills, 100*harness.FillShare(segs, w.hp, w.lp, w.from, w.to))
			lates, counts := harness.EarlyStopOf(segs, w.hpRuns, w.hp, w.lp)
			a.lates, a.lateN = append(a.lates, lates...), append(a.lateN, counts...)
		}
	}
	out := []ModeResult{accs[ModeExclusive].result(ModeExclusive)}
	for _, m := range modes {
		out = append(out, accs[m].result(m))
	}
	runs := map[string][]harness.Run{}
	for m, a := range accs {
		runs[m] = a.hpRuns
	}
	setInterference(out, runs)
	return out, nil
}

// pairs is Scheme IV a/b: each pair's HP at an interval with its LP in a
// closed loop, every mode side by side, the simulator's prediction beside.
func (r *runner) pairs(ctx context.Context) error {
	for i, p := range r.p.pairs {
		hp := hpSvc(p.HP, hpInterval(r.alone["bench/hp/"+p.HP]), r.p.hpRuns)
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" pair %d/%d %s, HP every %s", i+1, len(r.p.pairs), p.name(), hp.Every)
		sc := Scenario{Section: SecPair, Name: p.name(), HP: hp.spec(), LP: lp.spec()}
		err := r.measurePair(ctx, &sc, hp, lp, pairCfg{eo: harness.Options{Timeline: true}, reps: r.p.reps,
			tag: fmt.Sprintf("pair %d", i+1), modes: controlModes, sim: true})
		r.add(sc, err)
		if err == nil && sc.Derived != nil {
			fk, sh := sc.Mode(ModeFikit), sc.Mode(ModeSharing)
			r.logf("  HP p50 vs alone: sharing %.2fx, fikit %.2fx (sim %.2fx; LP on another device %.2fx); fill %s; LP p50 %.1f ms → %.1f ms",
				sc.Derived.HPVsAloneP50[ModeSharing], sc.Derived.HPVsAloneP50[ModeFikit], sc.Derived.SimHPVsAloneP50[ModeFikit],
				sc.Derived.HPVsAloneP50[ModeFikitCPU], fmtPtr(fk.FillPct, "%.0f%%"), sh.LP.P50/1e6, fk.LP.P50/1e6)
			r.logInterference(&sc)
		}
	}
	return nil
}

// measurePair fills sc with the measured modes, the prediction if asked
// for and the derived ratios.
func (r *runner) measurePair(ctx context.Context, sc *Scenario, hp, lp svc, c pairCfg) error {
	env, err := r.env(c.tag, c.eo)
	if err != nil {
		return err
	}
	defer env.Close()
	sc.Device = env.Device().String()
	modes, err := r.pairModes(ctx, env, hp, lp, c.reps, c.tag, c.modes)
	if err != nil {
		return err
	}
	sc.Modes = modes
	if c.sim {
		sc.Sim, err = r.predict(hp, lp, env.Device(), true)
		if err != nil {
			r.logf("  simulator: %v", err)
		}
	}
	sc.Derived = Derive(sc)
	return nil
}

// logInterference prints the HP's GPU interference and host part per
// co-located mode.
func (r *runner) logInterference(sc *Scenario) {
	var parts []string
	for _, mr := range sc.Modes {
		m := mr.Mode
		if m != ModeExclusive && m != ModeFikitUDP && mr.HPInterference != nil {
			in := mr.HPInterference
			parts = append(parts, fmt.Sprintf("%s %.1f%%/%.1f%% (host %.2fx)", m, in.P50Pct, in.P99Pct, in.HostRatio))
		}
	}
	if len(parts) > 0 {
		r.logf("  HP GPU interference p50/p99: %s", strings.Join(parts, ", "))
	}
}

// preemption is Scheme IV c: the LP runs continuously and the HP sends a
// request every preEvery (the paper's 1 s, scaled down).
func (r *runner) preemption(ctx context.Context) error {
	for i, p := range r.p.pairs {
		hp := hpSvc(p.HP, r.p.preEvery, r.p.preRuns)
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" pair %d/%d %s, HP every %s", i+1, len(r.p.pairs), p.name(), hp.Every)
		sc := Scenario{Section: SecPreempt, Name: p.name(), HP: hp.spec(), LP: lp.spec()}
		err := r.measurePair(ctx, &sc, hp, lp, pairCfg{reps: 1, tag: fmt.Sprintf("preempt %d", i+1), sim: true})
		r.add(sc, err)
		if err == nil && sc.Derived != nil {
			r.logf("  HP speedup over sharing %.2fx (mean %.2fx), LP p50 sharing/fikit %.2f", sc.Derived.Speedup,
				sc.Derived.SpeedupMean, sc.Derived.LPSpeedup)
			r.logInterference(&sc)
		}
	}
	return nil
}

// stability is Scheme IV d: the HP runs continuously (requests back to back
// with pre- and post-processing) and the LP sends a request at an interval;
// the LP JCT's coefficient of variation in each mode.
func (r *runner) stability(ctx context.Context) error {
	for i, p := range r.p.pairs {
		hpc := hpContinuous(p.HP, runsFor(600*time.Millisecond, r.alone["bench/hpc/"+p.HP]+hpPostNs, 20, 150))
		lp := lpSvc(p.LP, lpInterval(r.alone["bench/lp/"+p.LP]), r.p.stableRuns)
		lp.Warmup = 1
		r.logf(" pair %d/%d %s, LP every %s", i+1, len(r.p.pairs), p.name(), lp.Every)
		sc := Scenario{Section: SecStability, Name: p.name(), HP: hpc.spec(), LP: lp.spec()}
		err := r.stable1(ctx, &sc, hpc, lp, fmt.Sprintf("stable %d", i+1))
		r.add(sc, err)
		if err == nil {
			r.logf("  LP CV: exclusive %.3f, sharing %.3f, fikit %.3f", sc.Mode(ModeExclusive).LP.CV,
				sc.Mode(ModeSharing).LP.CV, sc.Mode(ModeFikit).LP.CV)
			r.logInterference(&sc)
		}
	}
	return nil
}

func (r *runner) stable1(ctx context.Context, sc *Scenario, hpc, lp svc, tag string) error {
	env, err := r.env(tag, harness.Options{})
	if err != nil {
		return err
	}
	defer env.Close()
	r.logf("  %s: exclusive", tag)
	a, err := r.alone1(ctx, env, hpc, false)
	if err != nil {
		return fmt.Errorf("HP alone: %w", err)
	}
	l, err := r.alone1(ctx, env, lp, false)
	if err != nil {
		return fmt.Errorf("LP alone: %w", err)
	}
	af, at := a.Span()
	lf, lt := l.Span()
	sc.Modes = append(sc.Modes, ModeResult{Mode: ModeExclusive, HP: Summarize(a.JCTs(), at-af), LP: Summarize(l.JCTs(), lt-lf)})
	// The HP is the background service here: its runs inside the LP's span.
	hpRuns := map[string][]harness.Run{ModeExclusive: a.Runs}
	for _, mode := range []string{ModeSharing, ModeFikit} {
		r.logf("  %s: %s", tag, mode)
		b, err := r.together(ctx, r.d, env, nil, lp, hpc, mode == ModeFikit)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		from, to := b.fg.Span()
		hpRuns[mode] = runsWithin(b.bg, from, to)
		sc.Modes = append(sc.Modes, ModeResult{Mode: mode, HP: Summarize(within(b.bg, from, to), to-from),
			LP: Summarize(b.fg.JCTs(), to-from), SpanNs: to - from})
	}
	setInterference(sc.Modes, hpRuns)
	sc.Sim, err = r.predict(hpc, lp, env.Device(), false)
	if err != nil {
		r.logf("  simulator: %v", err)
	}
	sc.Derived = Derive(sc)
	return nil
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
