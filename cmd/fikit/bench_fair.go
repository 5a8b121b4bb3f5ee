package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/fairbench"
	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// benchFairCommand is `fikit bench fair`: fair shares among equal
// priorities, today's policy beside fair queuing, on one simgpu preset.
func benchFairCommand() *cli.Command {
	return &cli.Command{
		Name:  "fair",
		Usage: "measure fair shares among equal priorities on the simulated GPU (docs/scheduler.md \"Equals\")",
		Description: "Two continuous priority-5 services, one of short kernels (2–60 µs) and one of long ones\n" +
			"(150–900 µs), beside a priority-0 resnet50 with a request every 10 ms: under best-prio-fit, under\n" +
			"fair-prio-fit and under fair-prio-fit with weights 2:1, one after another on one simgpu preset. GPU\n" +
			"time per service is simgpu's timeline within the high-priority service's span. A mode with :holders\n" +
			"runs the two without the high-priority service, for as long: both hold the GPU (no better priority).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "device", Value: devmodel.DefaultPreset, Usage: "simgpu device preset: " + strings.Join(devmodel.PresetNames(), ", ")},
			&cli.IntFlag{Name: "switch-us", Usage: "simgpu's context-switch cost in µs, replacing the preset's (0: the preset's)"},
			&cli.IntFlag{Name: "hp-runs", Value: 400, Usage: "high-priority requests per mode (one every 10 ms)"},
			&cli.StringSliceFlag{Name: "mode", Usage: "a mode to measure, POLICY or POLICY:WEIGHT_SHORT:WEIGHT_LONG, with :holders for no " +
				"high-priority service (the two hold the GPU) (repeatable; default: best-prio-fit, fair-prio-fit, fair-prio-fit:2:1)"},
			&cli.StringFlag{Name: "json", Usage: "also write the results as JSON to this file"},
			&cli.StringFlag{Name: "keep", Usage: "keep the work files (traces, timelines) in this directory"},
			&cli.BoolFlag{Name: "record", Usage: "record each mode's daemon decisions into its work directory (decisions.jsonl, kept with --keep); " +
				"a low-priority service kept off the GPU for long is then described with the decisions about it"},
		}, schedulerFlags("profile-runs", "policy")...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "bench fair takes no arguments, got %q", c.Args().First())
			}
			if _, err := devmodel.Preset(c.String("device")); err != nil {
				return usageError(c, "--device: %v", err)
			}
			if c.Int("switch-us") < 0 || c.Int("hp-runs") < 10 {
				return usageError(c, "--switch-us must be ≥ 0 and --hp-runs ≥ 10")
			}
			bin, err := binDir()
			if err != nil {
				return err
			}
			sched, err := schedulerConfig(c, "profile-runs", "policy")
			if err != nil {
				return err
			}
			dir := c.String("keep")
			if dir == "" {
				if dir, err = os.MkdirTemp("", "fikit-bench-fair-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			var modes []fairbench.Mode
			for _, spec := range c.StringSlice("mode") {
				m, err := fairbench.ParseMode(spec)
				if err != nil {
					return usageError(c, "--mode %q: %v", spec, err)
				}
				modes = append(modes, m)
			}
			o := fairbench.Options{Bin: bin, Dir: dir, Preset: c.String("device"), SwitchUs: c.Int("switch-us"), HPRuns: c.Int("hp-runs"),
				Modes: modes, Scheduler: &sched, Log: harness.Printer(os.Stderr), Record: c.Bool("record")}
			res, err := fairbench.Run(c.Context, o)
			if res != nil && len(res.Modes) > 0 {
				if werr := res.Write(c.App.Writer); werr != nil {
					return werr
				}
				if p := c.String("json"); p != "" {
					b, jerr := json.MarshalIndent(res, "", "  ")
					if jerr != nil {
						return jerr
					}
					if werr := os.WriteFile(p, append(b, '\n'), 0o644); werr != nil {
						return fmt.Errorf("results: %w", werr)
					}
				}
				fmt.Fprintf(c.App.Writer, "\n%s wall time\n", time.Duration(res.WallS*float64(time.Second)).Round(time.Second))
			}
			return err
		},
	}
}
