package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/scheduler"
)

// overhead is Scheme II (sec SecScheme2: the hooked service is in the
// sharing phase, profiled already) or Scheme III (SecScheme3: it is being
// profiled, under a second daemon whose T exceeds the runs, with a new task
// key each repetition). Each repetition runs A (no hook), H (hooked), B (no
// hook), closed loop, on one private device.
func (r *runner) overhead(ctx context.Context, sec string) error {
	d := r.d
	phase := "sharing"
	if sec == SecScheme3 {
		phase = "profiling"
		cfg := scheduler.DefaultConfig()
		cfg.ProfileRuns = 1000 // never completes: every run is measured
		var err error
		if d, err = harness.StartDaemon(ctx, cfg, r.o.DaemonLog); err != nil {
			return fmt.Errorf("profiling daemon: %w", err)
		}
		defer d.Stop()
	}
	for i, tr := range r.p.overhead {
		s := hpSvc(tr, 0, runsFor(r.p.ovBudget, r.alone["bench/hp/"+tr], 20, 300))
		r.logf(" %d/%d %s, %d runs × %d repetitions × (no hook, %s, no hook)", i+1, len(r.p.overhead), tr, s.Runs, r.p.ovReps, phase)
		sc := Scenario{Section: sec, Name: tr, HP: s.spec()}
		ov, err := r.overhead1(ctx, d, s, sec, i)
		sc.Overhead = ov
		r.add(sc, err)
		if err == nil {
			r.logf("  overhead p50 %+.2f%% (mean %+.2f%%), noise floor %.2f%%", ov.PctP50, ov.PctMean, ov.NoisePct)
		}
	}
	return nil
}

func (r *runner) overhead1(ctx context.Context, d *harness.Daemon, s svc, sec string, idx int) (*Overhead, error) {
	env, err := r.env(sec+"-"+s.Trace, harness.Options{})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	ov := &Overhead{Phase: "sharing", Reps: r.p.ovReps}
	if sec == SecScheme3 {
		ov.Phase = "profiling"
	}
	var base, test []int64
	var noise, noiseMean []float64
	run := func(hooked bool, key string) (*harness.Result, error) {
		hs := s.live(hooked, d.Addr())
		if hooked {
			hs.TaskKey = key
		}
		p, err := env.Start(ctx, hs)
		if err != nil {
			return nil, err
		}
		res, err := p.Wait()
		if err == nil && len(res.Runs) == 0 {
			err = fmt.Errorf("%s completed no runs", s.Trace)
		}
		return res, err
	}
	for rep := 0; rep < r.p.ovReps; rep++ {
		key := s.Key
		if sec == SecScheme3 {
			key = fmt.Sprintf("bench/s3/%d/%d/%s", idx, rep, s.Trace)
		}
		a, err := run(false, "")
		if err != nil {
			return nil, err
		}
		h, err := run(true, key)
		if err != nil {
			return nil, err
		}
		b, err := run(false, "")
		if err != nil {
			return nil, err
		}
		ja, jh, jb := Summarize(a.JCTs(), 0), Summarize(h.JCTs(), 0), Summarize(b.JCTs(), 0)
		ov.PerRep = append(ov.PerRep, 100*(jh.P50/((ja.P50+jb.P50)/2)-1))
		ov.PerRepMean = append(ov.PerRepMean, 100*(jh.Mean/((ja.Mean+jb.Mean)/2)-1))
		noise = append(noise, 100*math.Abs(jb.P50/ja.P50-1))
		noiseMean = append(noiseMean, 100*math.Abs(jb.Mean/ja.Mean-1))
		base = append(base, a.JCTs()...)
		base = append(base, b.JCTs()...)
		test = append(test, h.JCTs()...)
	}
	ov.Base, ov.Test = Summarize(base, 0), Summarize(test, 0)
	ov.PctP50, ov.PctMean = stats.Median(ov.PerRep), stats.Median(ov.PerRepMean)
	ov.NoisePct, ov.NoiseMeanPct = stats.Median(noise), stats.Median(noiseMean)
	return ov, nil
}

// ratio is Fig. 18: the HP issues K tasks for each LP task. Both arrive
// together; under exclusive use the LP task would wait for the K HP tasks
// (JCT = K·T_A + T_B, the paper's computation from the services' JCTs
// alone, measured in IV d); under fikit it is measured, both services
// hooked, started together (K HP tasks back to back, one LP task).
func (r *runner) ratio(ctx context.Context) error {
	for _, p := range r.p.headline {
		sc := Scenario{Section: SecRatio, Name: p.name()}
		hpc, lp := hpContinuous(p.HP, 0), lpSvc(p.LP, 0, 1)
		sc.HP, sc.LP = hpc.spec(), lp.spec()
		// T_A and T_B: the services alone, from IV d when it ran this pair.
		ta, tb := r.aloneMeans(p)
		env, err := r.env("ratio", harness.Options{})
		if err != nil {
			return err
		}
		if ta == 0 || tb == 0 {
			r.logf("  measuring %s alone", p.name())
			hs := hpc
			hs.Runs = runsFor(400*time.Millisecond, r.alone[hpc.Key]+hpPostNs, 10, 100)
			a, err1 := r.alone1(ctx, env, hs, false)
			ls := lp
			ls.Runs, ls.Warmup = runsFor(400*time.Millisecond, r.alone[lp.Key], 5, 40), 1
			l, err2 := r.alone1(ctx, env, ls, false)
			if err1 != nil || err2 != nil {
				env.Close()
				r.add(sc, fmt.Errorf("alone: %v %v", err1, err2))
				continue
			}
			ta, tb = Summarize(a.JCTs(), 0).Mean, Summarize(l.JCTs(), 0).Mean
		}
		var ferr error
		for _, k := range r.p.ratios {
			pt, err := r.ratio1(ctx, env, hpc, lp, k, ta, tb)
			if err != nil {
				ferr = fmt.Errorf("ratio %d:1: %w", k, err) // the points so far stay
				break
			}
			r.logf("  %s %2d:1  LP JCT fikit %.1f ms, exclusive %.1f ms (%.2fx); %.1f HP tasks ahead, LP started %+.1f ms after the HP",
				p.HP, k, pt.LPFikitNs/1e6, pt.LPExclusiveNs/1e6, pt.Speedup, pt.HPAhead, pt.LagNs/1e6)
			sc.Ratio = append(sc.Ratio, pt)
		}
		env.Close()
		r.add(sc, ferr)
	}
	return nil
}

// aloneMeans are T_A (continuous HP) and T_B (LP) mean JCTs alone from the
// stability section's exclusive mode of pair p (0 if not measured).
func (r *runner) aloneMeans(p pair) (ta, tb float64) {
	for i := range r.res.Scenarios {
		sc := &r.res.Scenarios[i]
		if sc.Section == SecStability && sc.Name == p.name() && sc.Error == "" {
			if ex := sc.Mode(ModeExclusive); ex != nil {
				return ex.HP.Mean, ex.LP.Mean
			}
		}
	}
	return 0, 0
}

func (r *runner) ratio1(ctx context.Context, env *harness.Env, hpc, lp svc, k int, ta, tb float64) (Point, error) {
	pt := Point{K: k, Trials: r.p.ratioTrials, LPExclusiveNs: float64(k)*ta + tb}
	var jct, ahead, lag float64
	for t := 0; t < r.p.ratioTrials; t++ {
		tr, err := r.ratioTrial(ctx, env, hpc, lp, k)
		if err != nil {
			return pt, fmt.Errorf("trial %d: %w", t, err)
		}
		jct, ahead, lag = jct+tr.jct, ahead+tr.ahead, lag+tr.lag
	}
	n := float64(r.p.ratioTrials)
	pt.LPFikitNs, pt.HPAhead, pt.LagNs = jct/n, ahead/n, lag/n
	pt.Speedup = ratio(pt.LPExclusiveNs, pt.LPFikitNs)
	return pt, nil
}

type trial struct{ jct, ahead, lag float64 }

// ratioTrial starts the HP's k tasks (back to back) and the LP's one task
// together, both hooked, and measures the LP task.
func (r *runner) ratioTrial(ctx context.Context, env *harness.Env, hpc, lp svc, k int) (trial, error) {
	h := hpc
	h.Runs, h.Warmup = k, 0
	l := lp
	l.Runs, l.Warmup = 1, 0
	quiesce(r.d)
	hp, err := env.Start(ctx, h.live(true, r.d.Addr()))
	if err != nil {
		return trial{}, err
	}
	lpp, err := env.Start(ctx, l.live(true, r.d.Addr()))
	if err != nil {
		hp.Stop()
		return trial{}, err
	}
	hres, herr := hp.Wait()
	lres, lerr := lpp.Wait()
	if herr != nil {
		return trial{}, herr
	}
	if lerr != nil {
		return trial{}, lerr
	}
	if len(lres.Runs) != 1 || len(hres.Runs) == 0 {
		return trial{}, fmt.Errorf("%d LP and %d HP runs", len(lres.Runs), len(hres.Runs))
	}
	lr := lres.Runs[0]
	tr := trial{jct: float64(lr.JCTNs), lag: float64(lr.StartNs - hres.Runs[0].StartNs)}
	for _, x := range hres.Runs {
		if x.StartNs+x.JCTNs > lr.StartNs {
			tr.ahead++
		}
	}
	return tr, nil
}

// sensitivity re-measures the headline pairs on the run's device and on
// variants of it (plan.variants: no switch cost, the legacy preset, the
// fifo model). The scheduler keeps its defaults (it assumes 25 µs).
func (r *runner) sensitivity(ctx context.Context) error {
	for _, p := range r.p.headline {
		hp := hpSvc(p.HP, hpInterval(r.alone["bench/hp/"+p.HP]), r.p.hpRuns)
		lp := lpSvc(p.LP, 0, 0)
		for _, v := range r.p.variants {
			r.logf(" %s on %s", p.name(), v.Name)
			sc := Scenario{Section: SecSensitivity, Name: p.name(), Variant: v.Name, HP: hp.spec(), LP: lp.spec()}
			eo := harness.Options{Device: v.device(r.o.Device), Timeline: true}
			err := r.measurePair(ctx, &sc, hp, lp, pairCfg{eo: eo, reps: 1, tag: "sens " + v.Name, sim: true})
			r.add(sc, err)
			if err == nil && sc.Derived != nil {
				r.logf("  HP p50 vs alone: sharing %.2fx, fikit %.2fx; fill %s", sc.Derived.HPVsAloneP50[ModeSharing],
					sc.Derived.HPVsAloneP50[ModeFikit], fmtPtr(sc.Mode(ModeFikit).FillPct, "%.0f%%"))
			}
		}
	}
	return nil
}
