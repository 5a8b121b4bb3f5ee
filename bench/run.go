package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
)

// procCostS is the wall time one replay process costs beyond its runs
// (fork/exec, cuInit, loading the spin kernels, the hook's registration,
// exit), measured on this machine; it feeds the time estimate only.
const procCostS = 0.12

// runner carries one benchmark run.
type runner struct {
	o       Options
	p       plan
	d       *harness.Daemon
	res     *Results
	start   time.Time
	alone   map[string]float64 // predicted JCT alone by task key
	simProf map[string]*profiler.Profile
	envs    int // simgpu devices made so far (work directory names)
	// simNotify and simGrant are the hook latencies the simulator uses:
	// this run's measurements when the micro section got them.
	simNotify, simGrant time.Duration
	// schedCfg is the daemon's configuration; siblings are the daemons of
	// modes with settings of their own (modeSpec.Scheduler), by mode.
	schedCfg scheduler.Config
	siblings map[string]*harness.Daemon
}

// Estimate is the expected wall time of a run with these options, from the
// simulator's JCTs alone and per-process costs measured on this machine.
func Estimate(o Options) (time.Duration, error) {
	r := &runner{o: o, p: newPlan(o), alone: map[string]float64{}}
	if err := r.predictAlone(); err != nil {
		return 0, err
	}
	return time.Duration(r.estimate() * float64(time.Second)), nil
}

// Run measures every section and returns the results; a section that fails
// is recorded in its scenario's Error and in Meta.Failures, and the run
// goes on.
func Run(ctx context.Context, o Options) (*Results, error) {
	r := &runner{o: o, p: newPlan(o), start: time.Now(), alone: map[string]float64{}, simProf: map[string]*profiler.Profile{},
		simNotify: 30 * time.Microsecond, simGrant: 60 * time.Microsecond, siblings: map[string]*harness.Daemon{}}
	if err := r.predictAlone(); err != nil {
		return nil, err
	}
	dev, _ := o.Device.Config() // predictAlone checked it
	host, _ := os.Hostname()
	r.res = &Results{Meta: Meta{
		Version: o.Version, Quick: o.Quick, Started: r.start.UTC().Format(time.RFC3339), Host: host, CPUs: runtime.NumCPU(),
		LoadStart: loadAvg(), EstimateS: r.estimate(),
		DevicePreset: o.Device.PresetName(),
		Device: fmt.Sprintf("simgpu (simulated libcuda.so.1), device %s: %s, unless a scenario says otherwise (docs/simgpu.md)",
			o.Device, dev),
		GPU: "none: no GPU machine was available to this run; every number is on simgpu. A GPU column needs the same scenarios " +
			"with real PyTorch models (torchvision resnet50/resnet101/mobilenet_v2, random weights) under the hook",
	}}
	r.logf("fikit bench (%s): %d model pairs, expected about %s", map[bool]string{true: "quick", false: "full"}[o.Quick],
		len(r.p.pairs), (time.Duration(r.res.Meta.EstimateS) * time.Second).Round(time.Second))

	cfg := scheduler.DefaultConfig()
	if o.Scheduler != nil {
		cfg = *o.Scheduler
	}
	cfg.ProfileRuns = r.p.profileRuns
	r.res.Meta.Policy = cfg.Policy
	r.schedCfg = cfg
	d, err := harness.StartDaemon(ctx, cfg, o.DaemonLog)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	r.d = d
	defer d.Stop()
	defer r.stopSiblings()

	steps := []struct {
		name string
		f    func(context.Context) error
	}{
		{"micro-benchmarks", r.micro},
		{"profiling", r.profileAll},
		{"Scheme II (sharing phase vs no hook)", func(ctx context.Context) error { return r.overhead(ctx, SecScheme2) }},
		{"Scheme III (profiling phase vs no hook)", func(ctx context.Context) error { return r.overhead(ctx, SecScheme3) }},
		{"Scheme IV a/b (pairs together)", r.pairs},
		{"Scheme IV c (preemption)", r.preemption},
		{"Scheme IV d (stability)", r.stability},
		{"busy host (IV a/b pairs with a CPU hog on every core)", r.busyHost},
		{"sparse HP (every 1.5 s; Poisson arrivals)", r.sparse},
		{"bursts (HP bursts of back-to-back requests)", r.bursts},
		{"workloads (CUDA-graph and eager HP, BERT-base and training LP)", r.workloads},
		{"Fig. 18 (LP JCT vs exclusive by task ratio)", r.ratio},
		{"sensitivity (device assumptions)", r.sensitivity},
	}
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return r.finish(), err
		}
		r.logf("%d/%d %s", i+1, len(steps), s.name)
		if err := s.f(ctx); err != nil {
			if ctx.Err() != nil {
				return r.finish(), ctx.Err()
			}
			r.fail(s.name, err)
		}
	}
	return r.finish(), nil
}

// finish derives the summary and closes the metadata.
func (r *runner) finish() *Results {
	res := r.res
	res.Meta.WallS = time.Since(r.start).Seconds()
	res.Meta.LoadEnd = loadAvg()
	res.Meta.Params = Params{HPCPUNs: hpCPUNs, LPCPUNs: lpCPUNs, HPPreNs: hpPreNs, HPPostNs: hpPostNs, IntervalX: intervalX,
		HPRuns: r.p.hpRuns, Reps: r.p.reps, OverheadReps: r.p.ovReps, ProfileRuns: r.p.profileRuns,
		PreemptEvery: int64(r.p.preEvery), PreemptRuns: r.p.preRuns, StableRuns: r.p.stableRuns, RatioTrials: r.p.ratioTrials,
		Ratios: r.p.ratios, SimNotifyNs: int64(r.simNotify), SimGrantNs: int64(r.simGrant),
		SparseEveryNs: int64(r.p.sparseEvery), SparseRuns: r.p.sparseRuns, Burst: r.p.burstN, BurstGapNs: int64(r.p.burstGap),
		Bursts: r.p.bursts, HogThreads: runtime.NumCPU()}
	res.Summary = ComputeSummary(res.Scenarios)
	res.Targets = Check(res.Summary, res.Scenarios)
	return res
}

func (r *runner) logf(format string, args ...any) {
	if r.o.Progress == nil {
		return
	}
	el := 0.0
	if !r.start.IsZero() {
		el = time.Since(r.start).Seconds()
	}
	fmt.Fprintf(r.o.Progress, "[%5.0fs] %s\n", el, fmt.Sprintf(format, args...))
}

// fail records a failure that is not any one scenario's.
func (r *runner) fail(what string, err error) {
	r.logf("  FAILED %s: %v", what, err)
	r.res.Meta.Failures = append(r.res.Meta.Failures, what+": "+err.Error())
}

// add appends a scenario, recording its error if any.
func (r *runner) add(sc Scenario, err error) {
	if err != nil {
		sc.Error = err.Error()
		r.logf("  FAILED %s %s: %v", sc.Section, sc.Name, err)
		r.res.Meta.Failures = append(r.res.Meta.Failures, sc.Section+" "+sc.Name+": "+err.Error())
	}
	r.res.Scenarios = append(r.res.Scenarios, sc)
}

// services lists every service the plan runs under the daemon (each is
// profiled once).
func (r *runner) services() []svc {
	seen := map[string]bool{}
	var out []svc
	addSvc := func(s svc) {
		if !seen[s.Key] {
			seen[s.Key] = true
			out = append(out, s)
		}
	}
	for _, p := range r.p.pairs {
		addSvc(hpSvc(p.HP, 0, 0))
		addSvc(lpSvc(p.LP, 0, 0))
		addSvc(hpContinuous(p.HP, 0))
	}
	for _, p := range r.p.headline {
		addSvc(hpSvc(p.HP, 0, 0))
		addSvc(lpSvc(p.LP, 0, 0))
		addSvc(hpContinuous(p.HP, 0))
	}
	for _, tr := range r.p.overhead {
		addSvc(hpSvc(tr, 0, 0))
	}
	for _, w := range r.p.workloads {
		addSvc(w.HP)
		addSvc(w.LP)
	}
	return out
}

// predictAlone predicts every service's JCT alone (intervals, run counts,
// the estimate).
func (r *runner) predictAlone() error {
	dev, err := r.o.Device.Config()
	if err != nil {
		return err
	}
	for _, s := range r.services() {
		j, err := aloneJCT(s, dev)
		if err != nil {
			return err
		}
		r.alone[s.Key] = j
	}
	return nil
}

// profileAll profiles every service under the daemon, as a new service is:
// T clean runs alone (paper §3.2), on the default device. A service whose
// profile does not complete is reported and the others go on (its
// scenarios then run it unprofiled, and say so through their numbers).
func (r *runner) profileAll(ctx context.Context) error {
	env, err := r.env("profile", harness.Options{})
	if err != nil {
		return err
	}
	defer env.Close()
	var failed []string
	for _, s := range r.services() {
		if err := r.profile(ctx, env, s); err != nil {
			if ctx.Err() != nil {
				return err
			}
			r.logf("  %s: %v", s.Key, err)
			failed = append(failed, s.Key)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("no complete profile for %s", strings.Join(failed, ", "))
	}
	return nil
}

// profile replays s under the hook until the daemon has its complete
// profile, each attempt alone on the daemon (see quiesce).
func (r *runner) profile(ctx context.Context, env *harness.Env, s svc) error {
	for attempt := 1; attempt <= 3; attempt++ {
		quiesce(r.d)
		hs := s.live(true, r.d.Addr())
		hs.Every, hs.Runs = 0, r.p.profileRuns+5*attempt
		p, err := env.Start(ctx, hs)
		if err != nil {
			return err
		}
		_, err = p.Wait()
		if err != nil {
			return fmt.Errorf("profiling: %w", err)
		}
		prof, err := r.d.Profile(harness.SimGPUModel, s.Key)
		if err == nil && prof.Phase == profiler.PhaseSharing {
			r.logf("  %s profiled: %d kernels, %d runs (%d discarded)", s.Key, len(prof.Kernels), prof.Runs, prof.DiscardedRuns)
			return nil
		}
		r.logf("  %s: profile not complete after attempt %d", s.Key, attempt)
	}
	return errors.New("no complete profile after 3 attempts")
}

// quiesce waits (up to half a second) until daemon d has no task: the
// processes of the previous step have exited (the replayer, a Go program,
// exits without the hook's Goodbye; the daemon notices the exit itself).
func quiesce(d *harness.Daemon) {
	deadline := time.Now().Add(500 * time.Millisecond)
	for len(d.Status().Tasks) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// env is a fresh private simgpu device with its own work directory.
func (r *runner) env(name string, o harness.Options) (*harness.Env, error) {
	r.envs++
	clean := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '_'
	}, name)
	o.Bin = r.o.Bin
	o.Dir = filepath.Join(r.o.WorkDir, strconv.Itoa(r.envs)+"-"+clean)
	if o.Device == (harness.Device{}) {
		o.Device = r.o.Device
	}
	return harness.New(o)
}

// loadAvg is the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
