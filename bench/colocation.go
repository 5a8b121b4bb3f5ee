package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/fikit/fikit/bench/harness"
)

// Co-location under conditions the paper's schemes leave out. Each
// scenario measures exclusive, default sharing and fikit side by side like
// IV a/b (without the control mode and without the simulator, which models
// neither CPU contention nor these arrival patterns); what they add is the
// HP's GPU interference (p10) where the HP's timing is hard to predict.

// busyHost is the IV a/b pairs again on a busy host: a CPU hog (one
// spinning process per core) runs through all three modes, the exclusive
// baseline included, so the ratios compare like with like and the host
// part of the slowdown is what the scheduler adds on top of the hog.
func (r *runner) busyHost(ctx context.Context) error {
	n := runtime.NumCPU()
	for i, p := range r.p.pairs {
		hp := hpSvc(p.HP, hpInterval(r.alone["bench/hp/"+p.HP]), r.p.hpRuns)
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" pair %d/%d %s, HP every %s, %d spinning processes", i+1, len(r.p.pairs), p.name(), hp.Every, n)
		sc := Scenario{Section: SecBusyHost, Name: p.name(), HP: hp.spec(), LP: lp.spec()}
		err := r.withHog(ctx, n, func() error {
			return r.measurePair(ctx, &sc, hp, lp, pairCfg{eo: harness.Options{Timeline: true}, reps: 1, tag: fmt.Sprintf("busy %d", i+1)})
		})
		r.addColoc(sc, err)
	}
	return nil
}

// withHog runs f with a CPU hog of n processes, stopped when f returns.
func (r *runner) withHog(ctx context.Context, n int, f func() error) error {
	h, err := startHog(ctx, n)
	if err != nil {
		return err
	}
	defer h.Stop()
	return f()
}

// sparse is a sparse HP with the LP continuous: on the headline pairs a
// request every sparseEvery, longer than the daemon's holder TTL (1 s), so
// the HP comes back as a holder the scheduler had let go; on every pair
// Poisson arrivals at IV a/b's mean interval (one seed per pair, the same
// in every mode), so run starts are not on a clock.
func (r *runner) sparse(ctx context.Context) error {
	for i, p := range r.p.headline {
		hp := hpSvc(p.HP, r.p.sparseEvery, r.p.sparseRuns)
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" %s, HP every %s × %d", p.name(), hp.Every, hp.Runs)
		sc := Scenario{Section: SecSparse, Name: p.name(), Variant: "every " + hp.Every.String(), HP: hp.spec(), LP: lp.spec()}
		err := r.measurePair(ctx, &sc, hp, lp, pairCfg{reps: 1, tag: fmt.Sprintf("sparse %d", i+1)})
		r.addColoc(sc, err)
	}
	for i, p := range r.p.pairs {
		every := hpInterval(r.alone["bench/hp/"+p.HP])
		hp := hpSvc(p.HP, 0, r.p.hpRuns)
		hp.Poisson, hp.Seed = poissonRate(every), uint64(i+1)
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" %s, HP Poisson %.4g/s (mean every %s) × %d", p.name(), hp.Poisson, every, hp.Runs)
		sc := Scenario{Section: SecSparse, Name: p.name(), Variant: "Poisson, mean every " + every.String(), HP: hp.spec(), LP: lp.spec()}
		err := r.measurePair(ctx, &sc, hp, lp, pairCfg{eo: harness.Options{Timeline: true}, reps: 1, tag: fmt.Sprintf("poisson %d", i+1)})
		r.addColoc(sc, err)
	}
	return nil
}

// poissonRate is the arrival rate per second with mean interval every.
func poissonRate(every time.Duration) float64 {
	if every <= 0 {
		return 0
	}
	return 1 / every.Seconds()
}

// bursts is a bursty HP with the LP continuous: bursts of burstN requests
// back to back, burstGap of idle host time after each.
func (r *runner) bursts(ctx context.Context) error {
	for i, p := range r.p.pairs {
		hp := hpSvc(p.HP, r.p.burstGap, r.p.burstN*r.p.bursts)
		hp.Burst = r.p.burstN
		lp := lpSvc(p.LP, 0, 0)
		r.logf(" pair %d/%d %s, HP %d bursts of %d, %s idle between", i+1, len(r.p.pairs), p.name(), r.p.bursts, hp.Burst, hp.Every)
		sc := Scenario{Section: SecBursts, Name: p.name(), HP: hp.spec(), LP: lp.spec()}
		err := r.measurePair(ctx, &sc, hp, lp, pairCfg{eo: harness.Options{Timeline: true}, reps: 1, tag: fmt.Sprintf("bursts %d", i+1)})
		r.addColoc(sc, err)
	}
	return nil
}

// addColoc adds a co-location scenario and prints its ratios and the HP's
// GPU interference.
func (r *runner) addColoc(sc Scenario, err error) {
	r.add(sc, err)
	if err != nil || sc.Derived == nil {
		return
	}
	r.logf("  HP p50 vs alone: sharing %.2fx, fikit %.2fx; fill %s", sc.Derived.HPVsAloneP50[ModeSharing],
		sc.Derived.HPVsAloneP50[ModeFikit], fmtPtr(sc.Mode(ModeFikit).FillPct, "%.0f%%"))
	r.logInterference(&sc)
}
