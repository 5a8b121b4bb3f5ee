package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/simgpu/trace"
)

// OpenFunc opens device ordinal for a replay; it is called on the goroutine
// (locked to its OS thread) that then makes every Device call.
type OpenFunc func(ordinal int) (Device, error)

// DefaultCPUNs is the host time before each launch when neither --cpu-ns nor
// the trace gives one: about what eager PyTorch spends per op (docs/trace-format.md).
const DefaultCPUNs = 5000

// DefaultLatencyNs is the launch latency assumed for the analytic JCT in the
// human summary (simgpu's default preset, h200: docs/simgpu.md).
const DefaultLatencyNs = 5000

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s (see 'fikit-replay --help')", ErrUsage, fmt.Sprintf(format, a...))
}

func onUsageError(_ *cli.Context, err error, _ bool) error {
	return usagef("%v", err)
}

// Run is the whole fikit-replay command: args as os.Args, normal output to
// stdout, progress to stderr. Use ExitCode for the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, open OpenFunc) error {
	app := &cli.App{
		Name:  "fikit-replay",
		Usage: "replay a kernel trace on a CUDA device (real, or simgpu's libcuda.so.1)",
		UsageText: "fikit-replay --trace FILE --runs N [--warmup N] [--cpu-ns NS] [--interval DUR [--burst N] | --poisson RATE] [--graph] [--footprint-mb MB] [--json]\n" +
			"fikit-replay gen --seed S [options] --out FILE\n" +
			"fikit-replay ptx --trace FILE\n" +
			"fikit-replay convert --torch-profile FILE [--run N] --out FILE",
		Description: "FILE is an Orion kernel CSV or a fikit trace (docs/trace-format.md), or the name of an\n" +
			"embedded trace: " + strings.Join(trace.EmbeddedNames(), ", ") + ".\n" +
			"Exit status: 0 success, 2 usage error, 1 any other error.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // never os.Exit from inside Run
		Flags:           replayFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unexpected argument %q", c.Args().First())
			}
			return replayAction(c, stderr, open)
		},
		Commands: []*cli.Command{genCommand(), ptxCommand(), convertCommand(stderr)},
	}
	return app.RunContext(ctx, args)
}

func replayFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "trace", Usage: "trace `FILE`, or embedded trace name such as h100/resnet50_4_fwd"},
		&cli.IntFlag{Name: "runs", Value: 10, Usage: "measured runs"},
		&cli.IntFlag{Name: "warmup", Usage: "runs before the measured ones, not reported"},
		&cli.Int64Flag{Name: "cpu-ns", Value: DefaultCPUNs,
			Usage: "busy host time before each launch in `NS`, counted from the previous launch call's start; if not given, a trace's own host times when it has them"},
		&cli.Int64Flag{Name: "pre-ns", Usage: "busy host time in `NS` at the start of each run (pre-processing, part of the JCT)"},
		&cli.Int64Flag{Name: "post-ns", Usage: "busy host time in `NS` after each run's synchronisation (not part of the JCT)"},
		&cli.DurationFlag{Name: "interval", Usage: "open loop: a run arrives every `DUR` (with --burst: the host idles DUR between bursts)"},
		&cli.IntFlag{Name: "burst", Usage: "with --interval: runs come in bursts of `N` back to back (each when the previous is done), the host idling --interval after each burst"},
		&cli.Float64Flag{Name: "poisson", Usage: "open loop: Poisson arrivals at `RATE` runs per second"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the Poisson arrivals"},
		&cli.BoolFlag{Name: "graph", Usage: "CUDA graph mode: capture the run's kernels into a graph once, then launch the graph once per run (per-launch host times do not apply; --pre-ns does)"},
		&cli.Uint64Flag{Name: "footprint-mb", Usage: "reserve `MB` of device memory for the replay and write it once: a framework's footprint on the GPU"},
		&cli.BoolFlag{Name: "json", Usage: "one JSON line per run and a final summary line"},
		&cli.IntFlag{Name: "device", Usage: "CUDA device ordinal"},
		&cli.Int64Flag{Name: "latency-ns", Value: DefaultLatencyNs, Usage: "launch latency in `NS` for the analytic JCT in the human summary"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
		&cli.IntFlag{Name: "change-at", Usage: "from measured run `N` on, change the kernels (--change-duration, --change-grid): a service drifting from its profile"},
		&cli.Float64Flag{Name: "change-duration", Usage: "with --change-at: scale every kernel's duration by `F` (same kernel IDs: a clock or driver change)"},
		&cli.UintFlag{Name: "change-grid", Usage: "with --change-at: multiply every grid's x by `G` (new kernel IDs: a batch size change)"},
	}
}

func checkNs(c *cli.Context, name string) (int64, error) {
	v := c.Int64(name)
	if v < 0 || v > trace.MaxDurationNs {
		return 0, usagef("--%s %d not in 0..%d", name, v, int64(trace.MaxDurationNs))
	}
	return v, nil
}

func replayConfig(c *cli.Context) (Config, error) {
	cfg := Config{Name: c.String("trace"), Runs: c.Int("runs"), Warmup: c.Int("warmup"), JSON: c.Bool("json"),
		Graph: c.Bool("graph")}
	if mb := c.Uint64("footprint-mb"); mb > 0 {
		if mb > 1<<24 {
			return cfg, usagef("--footprint-mb %d is more than 16 TB", mb)
		}
		cfg.FootprintBytes = mb << 20
	}
	if cfg.Name == "" {
		return cfg, usagef("--trace is required")
	}
	if cfg.Runs < 1 || cfg.Runs > 10_000_000 || cfg.Warmup < 0 || cfg.Warmup > 10_000_000 {
		return cfg, usagef("--runs must be ≥ 1 and --warmup ≥ 0")
	}
	var err error
	if cfg.PreNs, err = checkNs(c, "pre-ns"); err != nil {
		return cfg, err
	}
	if cfg.PostNs, err = checkNs(c, "post-ns"); err != nil {
		return cfg, err
	}
	if cfg.CPUNs, err = checkNs(c, "cpu-ns"); err != nil {
		return cfg, err
	}
	if _, err := checkNs(c, "latency-ns"); err != nil {
		return cfg, err
	}
	if c.Int("device") < 0 {
		return cfg, usagef("--device must be ≥ 0")
	}
	iv, rate := c.Duration("interval"), c.Float64("poisson")
	switch {
	case c.IsSet("interval") && c.IsSet("poisson"):
		return cfg, usagef("--interval and --poisson exclude each other")
	case c.IsSet("interval") && iv <= 0:
		return cfg, usagef("--interval must be positive")
	case c.IsSet("poisson") && !(rate > 0 && rate <= 1e7):
		return cfg, usagef("--poisson must be a rate in (0, 1e7] per second")
	case c.IsSet("burst") && (c.Int("burst") < 1 || !c.IsSet("interval")):
		return cfg, usagef("--burst must be ≥ 1 and needs --interval (the idle time between bursts)")
	}
	cfg.Arrivals = Arrivals{Interval: iv, Rate: rate, Seed: c.Uint64("seed"), Burst: c.Int("burst")}
	cfg.ChangeAt = c.Int("change-at")
	cfg.Change = Change{DurationScale: c.Float64("change-duration"), GridScale: uint32(c.Uint("change-grid"))}
	switch {
	case cfg.ChangeAt < 0:
		return cfg, usagef("--change-at must be ≥ 0")
	case (c.IsSet("change-duration") || c.IsSet("change-grid")) && cfg.ChangeAt == 0:
		return cfg, usagef("--change-duration and --change-grid need --change-at")
	case c.IsSet("change-duration") && !(cfg.Change.DurationScale > 0 && cfg.Change.DurationScale <= 100):
		return cfg, usagef("--change-duration must be in (0, 100]")
	case c.IsSet("change-grid") && (cfg.Change.GridScale < 1 || cfg.Change.GridScale > 1024):
		return cfg, usagef("--change-grid must be 1–1024")
	case cfg.ChangeAt > 0 && c.Bool("graph"):
		return cfg, usagef("--change-at replays kernels one by one: not with --graph")
	}
	t, err := trace.Load(cfg.Name)
	if err != nil {
		return cfg, err
	}
	cfg.Trace = t
	if t.HasHostTime && !c.IsSet("cpu-ns") {
		cfg.CPUNs = -1
	}
	return cfg, nil
}

func replayAction(c *cli.Context, stderr io.Writer, open OpenFunc) error {
	cfg, err := replayConfig(c)
	if err != nil {
		return err
	}
	t := cfg.Trace
	host := "trace's own host time per launch"
	if cfg.CPUNs >= 0 {
		host = fmt.Sprintf("%d ns host time per launch", cfg.CPUNs)
	}
	if cfg.Graph {
		host = "one CUDA graph launch per run"
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(stderr, "fikit-replay: %s: %d kernels (%d distinct), %s; %d runs (+%d warmup), %s\n",
			cfg.Name, len(t.Kernels), len(t.Names()), host, cfg.Runs, cfg.Warmup, cfg.Arrivals)
	}
	// A CUDA context is current per OS thread: every device call of this
	// replay is made from this goroutine, pinned to its thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := open(c.Int("device"))
	if err != nil {
		return fmt.Errorf("open device %d: %w", c.Int("device"), err)
	}
	jcts, rerr := Replay(c.Context, cfg, dev, c.App.Writer)
	// Under the hook, what it measured must reach the daemon before this
	// process exits (its exit runs no atexit handler), and while the
	// context is alive (the hook reads the runs' events in it).
	if f, ok := dev.(Flusher); ok {
		if hooked, done := f.Flush(); hooked && !done && !c.Bool("quiet") {
			fmt.Fprintln(stderr, "fikit-replay: the hook could not confirm that the daemon has its measurements (fikit_flush)")
		}
	}
	var totals *DeviceTotals
	if t, ok := dev.(Totaler); ok {
		if v, ok := t.Totals(); ok {
			totals = &v
		}
	}
	cerr := dev.Close()
	if len(jcts) > 0 || rerr == nil {
		if err := printSummary(c.App.Writer, cfg, jcts, totals, c.Int64("latency-ns")); err != nil && rerr == nil {
			rerr = err
		}
	}
	if rerr != nil {
		return fmt.Errorf("replay %s: %w", cfg.Name, rerr)
	}
	if cerr != nil {
		return fmt.Errorf("close device: %w", cerr)
	}
	return nil
}

func printSummary(w io.Writer, cfg Config, jcts []int64, totals *DeviceTotals, latencyNs int64) error {
	s := Summarize(jcts)
	if cfg.JSON {
		return json.NewEncoder(w).Encode(struct {
			Summary Summary       `json:"summary"`
			PID     int           `json:"pid"`
			Device  *DeviceTotals `json:"device,omitempty"`
		}{s, os.Getpid(), totals})
	}
	cpu := cfg.CPUNs
	if cfg.Graph {
		cpu = 0 // every kernel is on the device when the graph is launched
	}
	a := trace.AnalyticJCT(cfg.Trace, cpu, latencyNs)
	ms := func(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }
	_, err := fmt.Fprintf(w, "%s: %d runs  JCT p50 %s  p90 %s  p99 %s  mean %s  cv %.2f%%\n"+
		"analytic JCT alone on a fifo device (launch latency %d ns): %s (p50 %+.2f%%)\n",
		cfg.Name, s.Runs, ms(s.P50Ns), ms(s.P90Ns), ms(s.P99Ns), ms(s.MeanNs), 100*s.CV,
		latencyNs, ms(a.JCTNs+cfg.PreNs), 100*(float64(s.P50Ns)/float64(a.JCTNs+cfg.PreNs)-1))
	return err
}

func genCommand() *cli.Command {
	return &cli.Command{
		Name:         "gen",
		Usage:        "write a seeded synthetic trace in fikit's format",
		UsageText:    "fikit-replay gen --seed S [options] --out FILE",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed; the same seed and options give the same trace"},
			&cli.IntFlag{Name: "kernels", Value: trace.DefaultGenKernels, Usage: "launches in the trace"},
			&cli.IntFlag{Name: "layer-kernels", Value: trace.DefaultGenLayerKernels, Usage: "distinct kernels per repeated layer"},
			&cli.IntFlag{Name: "stages", Value: trace.DefaultGenStages, Usage: "body stages, each with its own kernel shapes"},
			&cli.Int64Flag{Name: "duration-median-ns", Value: trace.DefaultGenDurationNs, Usage: "median kernel duration"},
			&cli.Float64Flag{Name: "duration-sigma", Value: trace.DefaultGenDurationSigma, Usage: "log-normal sigma of kernel durations (negative: none)"},
			&cli.Float64Flag{Name: "jitter", Value: trace.DefaultGenJitter, Usage: "relative per-launch duration jitter (negative: none)"},
			&cli.Int64Flag{Name: "host-median-ns", Value: trace.DefaultGenHostNs, Usage: "median host time before a launch (negative: none)"},
			&cli.Float64Flag{Name: "host-sigma", Value: trace.DefaultGenHostSigma, Usage: "log-normal sigma of host times (negative: none)"},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output file, - for standard output"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unexpected argument %q", c.Args().First())
			}
			t, err := trace.Gen(c.Uint64("seed"), trace.GenOptions{
				Kernels: c.Int("kernels"), LayerKernels: c.Int("layer-kernels"), Stages: c.Int("stages"),
				DurationMedianNs: c.Int64("duration-median-ns"), DurationSigma: c.Float64("duration-sigma"),
				Jitter: c.Float64("jitter"), HostMedianNs: c.Int64("host-median-ns"), HostSigma: c.Float64("host-sigma"),
			})
			if err != nil {
				return fmt.Errorf("%w: %w (see 'fikit-replay gen --help')", ErrUsage, err)
			}
			return writeOut(c.String("out"), c.App.Writer, func(w io.Writer) error { return trace.Write(w, t) })
		},
	}
}

func ptxCommand() *cli.Command {
	return &cli.Command{
		Name:         "ptx",
		Usage:        "print the PTX module of spin kernels a replay of the trace loads",
		UsageText:    "fikit-replay ptx --trace FILE",
		OnUsageError: onUsageError,
		Flags:        []cli.Flag{&cli.StringFlag{Name: "trace", Usage: "trace file or embedded trace name"}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unexpected argument %q", c.Args().First())
			}
			if c.String("trace") == "" {
				return usagef("--trace is required")
			}
			t, err := trace.Load(c.String("trace"))
			if err != nil {
				return err
			}
			ptx, _ := trace.PTX(t)
			_, err = io.WriteString(c.App.Writer, ptx)
			return err
		},
	}
}

// writeOut writes to the file out, or to stdout for "-"; the file is only
// complete when writeOut succeeds.
func writeOut(out string, stdout io.Writer, write func(io.Writer) error) error {
	if out == "-" {
		return write(stdout)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create output: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close output: %w", err)
	}
	return nil
}

func convertCommand(stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "convert",
		Usage: "turn a torch.profiler trace (Chrome trace JSON, CUPTI kernels) into a replay trace",
		UsageText: "fikit-replay convert --torch-profile FILE [--run N] [--out FILE]\n\n" +
			"The profile's runs are the spans its \"" + trace.RunAnnotation + " N\" annotations mark (tests/gpu/torch_service.py\n" +
			"--trace-dir records them); one run's kernels, in launch order, with their GPU durations, geometry and the\n" +
			"host time before each launch, become the trace (a CUDA graph run: replay it with --graph).",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "torch-profile", Usage: "torch.profiler trace `FILE` (export_chrome_trace)"},
			&cli.IntFlag{Name: "run", Value: -1, Usage: "the run to take (its annotation's N); -1: the typical one (the most common kernel count, median device time)"},
			&cli.StringFlag{Name: "out", Value: "-", Usage: "output file, - for standard output"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unexpected argument %q", c.Args().First())
			}
			in := c.String("torch-profile")
			if in == "" {
				return usagef("--torch-profile is required")
			}
			f, err := os.Open(in)
			if err != nil {
				return fmt.Errorf("open profile: %w", err)
			}
			p, err := trace.ReadTorchProfile(f, in)
			f.Close()
			if err != nil {
				return err
			}
			t, run, err := p.Trace(c.Int("run"))
			if err != nil {
				return err
			}
			kind := "eager"
			if run.Graph {
				kind = "CUDA graph (replay with --graph)"
			}
			fmt.Fprintf(stderr, "fikit-replay: %s: %d runs; run %d: %d kernels, %.3f ms of device time, %s; "+
				"left out: %d kernels outside runs, %d without their launch, %d copies or memsets\n",
				in, len(p.Runs), run.Index, len(t.Kernels), float64(run.DeviceTimeNs)/1e6, kind, p.Outside, p.Unlaunched, p.Copies)
			return writeOut(c.String("out"), c.App.Writer, func(w io.Writer) error { return trace.Write(w, t) })
		},
	}
}
