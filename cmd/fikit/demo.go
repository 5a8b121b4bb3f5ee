package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/simgpu/timeline"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "show FIKIT on the simulated GPU: a high-priority service alone, shared by default, and under fikit",
		Description: "Starts a daemon, profiles two embedded inference traces (a launch-bound high-priority\n" +
			"service with requests at a fixed interval, and a closed-loop low-priority one), then runs\n" +
			"them together without a scheduler (the GPU's default time-slicing) and under fikit, and\n" +
			"prints the high-priority JCT beside its JCT alone and the low-priority work done.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "hp-trace", Value: "h100/resnet50_4_fwd", Usage: "high-priority trace (file or embedded name)"},
			&cli.StringFlag{Name: "lp-trace", Value: "h100/bert_2_fwd", Usage: "low-priority trace (file or embedded name)"},
			&cli.Int64Flag{Name: "hp-cpu-ns", Value: 12000, Usage: "host time per high-priority launch (framework overhead); -1: the trace's own"},
			&cli.Int64Flag{Name: "lp-cpu-ns", Value: 5000, Usage: "host time per low-priority launch; -1: the trace's own"},
			&cli.BoolFlag{Name: "hp-graph", Usage: "each high-priority request is one CUDA graph launch of its trace's kernels (fikit-replay --graph)"},
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Millisecond, Usage: "high-priority request interval"},
			&cli.IntFlag{Name: "runs", Value: 200, Usage: "high-priority requests per mode"},
			&cli.IntFlag{Name: "profile-runs", Value: 20, Usage: "profiling runs (T)"},
			&cli.StringFlag{Name: "device", Usage: "simgpu device preset: " + strings.Join(devmodel.PresetNames(), ", ") + " (default " + devmodel.DefaultPreset + "; docs/simgpu.md)"},
			&cli.StringFlag{Name: "model", Usage: "simgpu device model: timeslice (the preset's) or fifo"},
			&cli.StringFlag{Name: "keep", Usage: "keep the work files (timeline, logs) in this directory"},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
			&cli.BoolFlag{Name: "verbose", Usage: "show the daemon's log"},
			&cli.BoolFlag{Name: "gpu", Usage: "run on this machine's GPU (the CUDA driver the loader finds) instead of simgpu: wall-clock figures only, no ground truth"},
			&cli.StringFlag{Name: variantFlag, Hidden: true,
				Usage: "for the bench's before/after only: NAME[,setting=value...], an ablation of the scheduler (bench/variant)"},
			&cli.StringFlag{Name: "board", Value: "on", Usage: "the hooks' board gate: on, or off (every decision by UDP, as in the paper)"},
			&cli.BoolFlag{Name: "record", Usage: "record the daemon's decisions to decisions.jsonl in the work directory (with --keep; for fikit trace)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "demo takes no arguments")
			}
			if b := c.String("board"); b != "on" && b != "off" {
				return usageError(c, "--board must be on or off, not %q", b)
			}
			if c.Int64("hp-cpu-ns") < -1 || c.Int64("lp-cpu-ns") < -1 {
				return usageError(c, "--hp-cpu-ns and --lp-cpu-ns must be ≥ 0, or -1 for the trace's own host times")
			}
			if c.Bool("gpu") && (c.String("model") != "" || c.String("device") != "") {
				return usageError(c, "--model and --device are simgpu's; they have no meaning with --gpu")
			}
			if d := c.String("device"); d != "" {
				if _, err := devmodel.Preset(d); err != nil {
					return usageError(c, "--device: %v", err)
				}
			}
			bin, err := companionDir(replayBin)
			if err != nil {
				return err
			}
			dir := c.String("keep")
			if dir == "" {
				if dir, err = os.MkdirTemp("", "fikit-demo-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			progress := c.App.ErrWriter
			if c.Bool("json") {
				progress = os.Stderr
			}
			res, err := runDemo(c.Context, demoOptions{
				bin: bin, dir: dir, hpTrace: c.String("hp-trace"), lpTrace: c.String("lp-trace"),
				hpCPU: c.Int64("hp-cpu-ns"), lpCPU: c.Int64("lp-cpu-ns"), interval: c.Duration("interval"), hpGraph: c.Bool("hp-graph"),
				runs: c.Int("runs"), profileRuns: c.Int("profile-runs"), model: c.String("model"), device: c.String("device"),
				verbose: c.Bool("verbose"), progress: progress, record: c.Bool("record"),
				gpu: c.Bool("gpu"), boardOff: c.String("board") == "off", variant: c.String(variantFlag),
			})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printDemo(c.App.Writer, res)
			return nil
		},
	}
}

type demoOptions struct {
	bin, dir, hpTrace, lpTrace, model string
	device                            string
	hpCPU, lpCPU                      int64
	interval                          time.Duration
	runs, profileRuns                 int
	verbose, record, gpu, boardOff    bool
	hpGraph                           bool
	progress                          io.Writer
	variant                           string // bench/variant spec, "" the defaults
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

func runDemo(ctx context.Context, o demoOptions) (*DemoResult, error) {
	logf := harness.Printer(o.progress)
	env, err := harness.New(harness.Options{Bin: o.bin, Dir: o.dir, Device: harness.Device{Preset: o.device, Model: o.model},
		Timeline: true, GPU: o.gpu})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	cfg := scheduler.DefaultConfig()
	if o.variant != "" {
		apply, err := variant.Parse(o.variant)
		if err == nil {
			err = apply(&cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", variantFlag, err)
		}
	}
	cfg.ProfileRuns = o.profileRuns
	var dlog io.Writer
	if o.verbose {
		dlog = o.progress
	}
	d, err := harness.StartDaemon(ctx, cfg, dlog)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if o.record {
		if err := d.RecordTo(filepath.Join(o.dir, "decisions.jsonl")); err != nil {
			return nil, err
		}
	}

	hp := harness.Service{Name: "high-priority", Trace: o.hpTrace, CPUNs: o.hpCPU, Prio: 0, TaskKey: "demo-hp", Warmup: 3}
	lp := harness.Service{Name: "low-priority", Trace: o.lpTrace, CPUNs: o.lpCPU, Prio: 5, TaskKey: "demo-lp"}
	if o.hpGraph {
		hp.Args = []string{"--graph"}
	}
	if o.boardOff {
		hp.Env = []string{"FIKIT_BOARD=off"}
		lp.Env = hp.Env
	}
	device := "the simulated GPU"
	if o.gpu {
		device = "this machine's GPU"
	}
	logf("fikit demo on %s (work files in %s)", device, o.dir)
	logf("1/5 profiling %s (%s) and %s (%s), %d runs each", hp.Name, o.hpTrace, lp.Name, o.lpTrace, o.profileRuns)
	if err := env.Profile(ctx, d, hp, o.profileRuns, logf); err != nil {
		return nil, err
	}
	if err := env.Profile(ctx, d, lp, o.profileRuns, logf); err != nil {
		return nil, err
	}
	res := &DemoResult{Device: harness.SimGPUModel, Board: "on", HPTrace: o.hpTrace, LPTrace: o.lpTrace,
		Timeline: env.TimelinePath(), Profiles: map[string]DemoProfile{}}
	if o.boardOff {
		res.Board = "off"
	}
	if !o.gpu {
		res.SimGPU = harness.Device{Preset: o.device, Model: o.model}.String()
	}
	for _, s := range []harness.Service{hp, lp} {
		if p, err := d.ProfileOf(s.TaskKey); err == nil {
			res.Device = p.GPU
			res.Profiles[s.Name] = DemoProfile{Kernels: len(p.Kernels), Runs: p.Runs, RunTime: p.RunTime, Duration: p.Duration, Gap: p.Gap}
		}
	}

	hpRun := hp
	hpRun.Runs, hpRun.Every = o.runs, o.interval
	logf("2/5 %s alone under the hook: %d requests every %s", hp.Name, o.runs, o.interval)
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
	res.Alone = modeOf(ar, nil, nil)

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
	res.SharingStart = monotonicNs()
	sh, err := env.RunPair(ctx, hpRun, lp)
	if err != nil {
		return nil, err
	}
	res.Sharing = modeOf(sh.HP, sh, ar.JCTs())

	logf("5/5 both at once under fikit")
	hpF, lpF := hpRun, lp
	hpF.Hooked, hpF.Scheduler = true, d.Addr()
	lpF.Hooked, lpF.Scheduler = true, d.Addr()
	res.FikitStart = monotonicNs()
	fk, err := env.RunPair(ctx, hpF, lpF)
	if err != nil {
		return nil, err
	}
	res.Fikit = modeOf(fk.HP, fk, ar.JCTs())
	res.Stats = d.Status().Stats

	if o.gpu {
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

func modeOf(hp *harness.Result, pair *harness.PairResult, aloneJCTs []int64) DemoMode {
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

func printDemo(w io.Writer, r *DemoResult) {
	dev := r.Device
	if r.SimGPU != "" {
		dev += " (device " + r.SimGPU + ")"
	}
	fmt.Fprintf(w, "\non %s (board %s): high priority %s, one request every interval; low priority %s, back to back\n\n",
		dev, r.Board, r.HPTrace, r.LPTrace)
	printDemoTable(w, r)
	fk, sh := r.Fikit.Interference, r.Sharing.Interference
	fmt.Fprintf(w, "\nUnder fikit the high-priority p50 JCT is %.2fx its JCT alone (default sharing: %.2fx),\n"+
		"while the low-priority service still completes %.0f%% of the runs it completes under default sharing.\n",
		r.Fikit.HPRatio, r.Sharing.HPRatio, pct(r.Fikit.LPRate, r.Sharing.LPRate))
	if fk.Runs > 0 && sh.Runs > 0 {
		fmt.Fprintf(w, "Of the slowdown, the GPU (other services' kernels ahead of the high-priority ones, ground truth\n"+
			"from the simulated device) accounts for %.1f%% of its JCT alone at the median under fikit (%.1f%% under\n"+
			"default sharing); the rest is the host's (runs without their GPU wait: %.2fx and %.2fx alone).\n",
			fk.P50Pct, sh.P50Pct, fk.HostRatio, sh.HostRatio)
	}
}

// printDemoTable is the demo's table of modes (the README's is generated
// from a committed run's --json by it: docs_test.go).
func printDemoTable(w io.Writer, r *DemoResult) {
	ms := func(ns int64) string { return fmt.Sprintf("%.2f ms", float64(ns)/1e6) }
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tHP p50 JCT\tHP p99 JCT\tHP p50 vs alone\tHP GPU interference p50 / p99\tLP runs done\tLP runs/s\tHP idle GPU filled\t")
	fmt.Fprintf(tw, "HP alone\t%s\t%s\t%.2fx\t-\t-\t-\t-\t\n", ms(r.Alone.HPp50Ns), ms(r.Alone.HPp99Ns), 1.0)
	fmt.Fprintf(tw, "LP alone\t-\t-\t-\t-\t-\t%.0f\t-\t\n", r.LPAloneRate)
	for _, m := range []struct {
		name string
		m    DemoMode
	}{{"default sharing", r.Sharing}, {"fikit", r.Fikit}} {
		fill := "-" // no timeline on a real GPU
		if r.Timeline != "" {
			fill = fmt.Sprintf("%.0f%%", m.m.FillPct)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\t%s\t%d\t%.0f\t%s\t\n", m.name, ms(m.m.HPp50Ns), ms(m.m.HPp99Ns),
			m.m.HPRatio, interferenceCell(m.m.Interference), m.m.LPRuns, m.m.LPRate, fill)
	}
	tw.Flush()
}

// interferenceCell is "p50% / p99%", or "-" where the device could not say.
func interferenceCell(in harness.Interference) string {
	if in.Runs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% / %.1f%%", in.P50Pct, in.P99Pct)
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

// monotonicNs reads CLOCK_MONOTONIC, the clock of simgpu's timeline and of
// fikit-replay's start_ns.
func monotonicNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
