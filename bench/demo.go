package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/fikit/fikit/bench/harness"
	variants "github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/timeline"
)

// `fikit demo`: the pair of README.md's table, run end to end on one
// device (cmd/fikit prints it).

// DemoOptions configure RunDemo (`fikit demo`'s flags).
type DemoOptions struct {
	Bin, Dir         string // the binaries; the work files
	HPTrace, LPTrace string
	HPCPU, LPCPU     int64 // host time per launch; -1: the trace's own
	HPGraph          bool  // each HP request one CUDA graph launch
	Interval         time.Duration
	Runs             int // HP requests per mode
	ProfileRuns      int
	Device, Model    string // simgpu's preset and model ("": defaults)
	GPU              bool   // this machine's GPU, not simgpu
	BoardOff         bool   // the hooks' board gate off
	Verbose          bool   // the daemon's log to Progress
	Record           bool   // the decisions to Dir/decisions.jsonl
	Progress         io.Writer
	// Variant is a bench/variant spec the daemon runs under ("": the
	// defaults): the before of a before/after (`--variant fixed-bound`).
	Variant string
}

// DemoMode is one way of running the pair.
type DemoMode struct {
	HPp10Ns  int64   `json:"hp_p10_ns"`
	HPp50Ns  int64   `json:"hp_p50_ns"`
	HPp99Ns  int64   `json:"hp_p99_ns"`
	HPMeanNs float64 `json:"hp_mean_ns"`
	HPRatio  float64 `json:"hp_p50_vs_alone"`
	HPRuns   int     `json:"hp_runs"`
	LPRuns   int     `json:"lp_runs"`
	LPRate   float64 `json:"lp_runs_per_s"`
	FillPct  float64 `json:"fill_pct"`
	SpanNs   int64   `json:"span_ns"`
	HPPid    int     `json:"hp_pid"`
	LPPid    int     `json:"lp_pid"`
	// Interference is the HP's GPU interference (simgpu ground truth) and
	// the part of its slowdown that is the host's.
	Interference harness.Interference `json:"hp_interference"`
}

// DemoResult is what `fikit demo --json` prints.
type DemoResult struct {
	// Device is "simgpu" or the real GPU's model name (--gpu).
	Device string `json:"device"`
	// SimGPU is simgpu's device (preset and overrides; docs/simgpu.md),
	// empty on a real GPU.
	SimGPU       string   `json:"simgpu_device,omitempty"`
	Board        string   `json:"board"`
	HPTrace      string   `json:"hp_trace"`
	LPTrace      string   `json:"lp_trace"`
	Alone        DemoMode `json:"alone"`
	LPAloneRate  float64  `json:"lp_alone_runs_per_s"`
	Sharing      DemoMode `json:"default_sharing"`
	Fikit        DemoMode `json:"fikit"`
	Timeline     string   `json:"timeline,omitempty"`
	SharingStart int64    `json:"sharing_start_ns"`
	FikitStart   int64    `json:"fikit_start_ns"`
	// Stats are the daemon's counters after the fikit run (docs/status-api.md "stats").
	Stats scheduler.Stats `json:"stats"`
	// Profiles are what the hook measured of each service while profiling.
	Profiles map[string]DemoProfile `json:"profiles"`
}

// DemoProfile summarises a service's profile (times in ns).
type DemoProfile struct {
	Kernels  int           `json:"kernels"`
	Runs     uint32        `json:"runs"`
	RunTime  profiler.Dist `json:"run_time"`
	Duration profiler.Dist `json:"kernel_duration"`
	Gap      profiler.Dist `json:"gap"`
}

// RunDemo is `fikit demo`: it profiles a high- and a low-priority service,
// then runs the high priority alone, the pair under default sharing and
// under fikit, on one device.
func RunDemo(ctx context.Context, o DemoOptions) (*DemoResult, error) {
	logf := harness.Printer(o.Progress)
	env, err := harness.New(harness.Options{Bin: o.Bin, Dir: o.Dir, Device: harness.Device{Preset: o.Device, Model: o.Model},
		Timeline: true, GPU: o.GPU})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	cfg := scheduler.DefaultConfig()
	if o.Variant != "" {
		apply, err := variants.Parse(o.Variant)
		if err == nil {
			err = apply(&cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("variant: %w", err)
		}
	}
	cfg.ProfileRuns = o.ProfileRuns
	var dlog io.Writer
	if o.Verbose {
		dlog = o.Progress
	}
	d, err := harness.StartDaemon(ctx, cfg, dlog)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if o.Record {
		if err := d.RecordTo(filepath.Join(o.Dir, "decisions.jsonl")); err != nil {
			return nil, err
		}
	}

	hp := harness.Service{Name: "high-priority", Trace: o.HPTrace, CPUNs: o.HPCPU, Prio: 0, TaskKey: "demo-hp", Warmup: 3}
	lp := harness.Service{Name: "low-priority", Trace: o.LPTrace, CPUNs: o.LPCPU, Prio: 5, TaskKey: "demo-lp"}
	if o.HPGraph {
		hp.Args = []string{"--graph"}
	}
	if o.BoardOff {
		hp.Env = []string{"FIKIT_BOARD=off"}
		lp.Env = hp.Env
	}
	device := "the simulated GPU"
	if o.GPU {
		device = "this machine's GPU"
	}
	logf("fikit demo on %s (work files in %s)", device, o.Dir)
	logf("1/5 profiling %s (%s) and %s (%s), %d runs each", hp.Name, o.HPTrace, lp.Name, o.LPTrace, o.ProfileRuns)
	if err := env.Profile(ctx, d, hp, o.ProfileRuns, logf); err != nil {
		return nil, err
	}
	if err := env.Profile(ctx, d, lp, o.ProfileRuns, logf); err != nil {
		return nil, err
	}
	res := &DemoResult{Device: harness.SimGPUModel, Board: "on", HPTrace: o.HPTrace, LPTrace: o.LPTrace,
		Timeline: env.TimelinePath(), Profiles: map[string]DemoProfile{}}
	if o.BoardOff {
		res.Board = "off"
	}
	if !o.GPU {
		res.SimGPU = harness.Device{Preset: o.Device, Model: o.Model}.String()
	}
	for _, s := range []harness.Service{hp, lp} {
		if p, err := d.ProfileOf(s.TaskKey); err == nil {
			res.Device = p.GPU
			res.Profiles[s.Name] = DemoProfile{Kernels: len(p.Kernels), Runs: p.Runs, RunTime: p.RunTime, Duration: p.Duration, Gap: p.Gap}
		}
	}

	hpRun := hp
	hpRun.Runs, hpRun.Every = o.Runs, o.Interval
	logf("2/5 %s alone under the hook: %d requests every %s", hp.Name, o.Runs, o.Interval)
	alone := hpRun
	alone.Hooked, alone.Scheduler = true, d.Addr()
	p, err := env.Start(ctx, alone)
	if err != nil {
		return nil, err
	}
	ar, err := p.Wait()
	if err != nil {
		return nil, err
	}
	res.Alone = demoModeOf(ar, nil, nil)

	logf("3/5 %s alone for a second (its throughput)", lp.Name)
	lpAlone := lp
	lpAlone.Hooked, lpAlone.Scheduler, lpAlone.Runs = true, d.Addr(), 1_000_000
	lpProc, err := env.Start(ctx, lpAlone)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	lr := lpProc.Stop()
	if s, e := lr.Span(); e > s {
		res.LPAloneRate = float64(len(lr.Runs)) / (float64(e-s) / 1e9)
	}

	logf("4/5 both at once, default sharing (no scheduler: the GPU's time-slicing)")
	res.SharingStart = harness.MonotonicNs()
	sh, err := env.RunPair(ctx, hpRun, lp)
	if err != nil {
		return nil, err
	}
	res.Sharing = demoModeOf(sh.HP, sh, ar.JCTs())

	logf("5/5 both at once under fikit")
	hpF, lpF := hpRun, lp
	hpF.Hooked, hpF.Scheduler = true, d.Addr()
	lpF.Hooked, lpF.Scheduler = true, d.Addr()
	res.FikitStart = harness.MonotonicNs()
	fk, err := env.RunPair(ctx, hpF, lpF)
	if err != nil {
		return nil, err
	}
	res.Fikit = demoModeOf(fk.HP, fk, ar.JCTs())
	res.Stats = d.Status().Stats

	if o.GPU {
		return res, nil // no timeline on a real GPU
	}
	if segs, err := timeline.Read(env.TimelinePath()); err == nil {
		for _, m := range []struct {
			mode *DemoMode
			pair *harness.PairResult
		}{{&res.Sharing, sh}, {&res.Fikit, fk}} {
			from, to := m.pair.HP.Span()
			m.mode.FillPct = 100 * harness.FillShare(segs, m.pair.HPPid, m.pair.LPPid, from, to)
		}
	} else {
		logf("timeline: %v", err)
	}
	return res, nil
}

func demoModeOf(hp *harness.Result, pair *harness.PairResult, aloneJCTs []int64) DemoMode {
	j := hp.JCTs()
	m := DemoMode{HPp10Ns: stats.Quantile(j, 0.1), HPp50Ns: stats.Quantile(j, 0.5), HPp99Ns: stats.Quantile(j, 0.99), HPRuns: len(j)}
	m.HPMeanNs, _ = stats.MeanCV(j)
	base := stats.Quantile(aloneJCTs, 0.5)
	if aloneJCTs == nil {
		base = m.HPp50Ns
	}
	if base > 0 {
		m.HPRatio = float64(m.HPp50Ns) / float64(base)
	}
	m.Interference = harness.InterferenceOf(hp, base)
	if pair != nil {
		m.LPRuns, m.LPRate, m.SpanNs, m.HPPid, m.LPPid = pair.LPRuns, pair.LPRate, pair.SpanNs, pair.HPPid, pair.LPPid
	}
	return m
}
