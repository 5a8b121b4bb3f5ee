package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench"
	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/simgpu/devmodel"
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
			res, err := bench.RunDemo(c.Context, bench.DemoOptions{
				Bin: bin, Dir: dir, HPTrace: c.String("hp-trace"), LPTrace: c.String("lp-trace"),
				HPCPU: c.Int64("hp-cpu-ns"), LPCPU: c.Int64("lp-cpu-ns"), Interval: c.Duration("interval"), HPGraph: c.Bool("hp-graph"),
				Runs: c.Int("runs"), ProfileRuns: c.Int("profile-runs"), Model: c.String("model"), Device: c.String("device"),
				Verbose: c.Bool("verbose"), Progress: progress, Record: c.Bool("record"),
				GPU: c.Bool("gpu"), BoardOff: c.String("board") == "off", Variant: c.String(variantFlag),
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

func printDemo(w io.Writer, r *bench.DemoResult) {
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
func printDemoTable(w io.Writer, r *bench.DemoResult) {
	ms := func(ns int64) string { return fmt.Sprintf("%.2f ms", float64(ns)/1e6) }
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tHP p50 JCT\tHP p99 JCT\tHP p50 vs alone\tHP GPU interference p50 / p99\tLP runs done\tLP runs/s\tHP idle GPU filled\t")
	fmt.Fprintf(tw, "HP alone\t%s\t%s\t%.2fx\t-\t-\t-\t-\t\n", ms(r.Alone.HPp50Ns), ms(r.Alone.HPp99Ns), 1.0)
	fmt.Fprintf(tw, "LP alone\t-\t-\t-\t-\t-\t%.0f\t-\t\n", r.LPAloneRate)
	for _, m := range []struct {
		name string
		m    bench.DemoMode
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
