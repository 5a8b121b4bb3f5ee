package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/sim"
	"github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/store"
)

func simCommand() *cli.Command {
	return &cli.Command{
		Name:      "sim",
		Usage:     "predict how services fare sharing a GPU, in a discrete-event simulation",
		ArgsUsage: " ",
		Description: "Runs the scheduling core over simulated services on simgpu's device model and\n" +
			"reports each service's JCT under exclusive use, default sharing and fikit.\n\n" +
			"A service is a trace:   --service trace=h100/resnet50_4_fwd,prio=0,cpu=12us,every=5ms,runs=200\n" +
			"or a stored profile:    --profile 'KEY:prio=0,every=5ms'  (kernels re-created from the profile)\n" +
			"Service options: prio=0..9, cpu=DUR (host time per launch), graph=true (each run one CUDA graph\n" +
			"launch of the trace's kernels, as fikit-replay --graph), every=DUR or poisson=RATE\n" +
			"(open-loop arrivals; default closed loop), burst=N (N runs back to back, then idle\n" +
			"every=DUR), runs=N, pre=DUR, post=DUR, weight=N (share among its priority), name=NAME.\n" +
			"The first service is the one whose idle GPU time the fill share refers to; services\n" +
			"without runs= run alongside until the others finish, and --runs times alone (mode\n" +
			"exclusive). When no service sets runs=, the first runs --runs times (a back-to-back\n" +
			"service would otherwise run for the whole simulated horizon).",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "service", Usage: "a service from a trace (repeatable)"},
			&cli.StringSliceFlag{Name: "profile", Usage: "a service from a stored profile KEY[:options] (repeatable)"},
			&cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), Usage: "profile store for --profile", EnvVars: []string{"FIKIT_DATA_DIR"}},
			&cli.StringFlag{Name: "gpu", Usage: "GPU model of the --profile profiles, when a key has several"},
			&cli.StringFlag{Name: "mode", Value: "all", Usage: "exclusive, sharing, fikit or all"},
			&cli.StringFlag{Name: "device", Value: devmodel.DefaultPreset, Usage: "simgpu device preset: " + strings.Join(devmodel.PresetNames(), ", ") + " (docs/simgpu.md); the flags below override single parameters"},
			&cli.StringFlag{Name: "model", Usage: "device model: timeslice or fifo (default: the preset's)"},
			&cli.DurationFlag{Name: "switch", Usage: "context-switch cost (default: the preset's)"},
			&cli.DurationFlag{Name: "slice", Usage: "time slice (default: the preset's)"},
			&cli.DurationFlag{Name: "launch-latency", Usage: "launch to device arrival (default: the preset's)"},
			&cli.DurationFlag{Name: "notify-latency", Value: 30 * time.Microsecond, Usage: "hook launch notification to daemon"},
			&cli.DurationFlag{Name: "grant-rtt", Value: 60 * time.Microsecond, Usage: "waiter request to grant round trip"},
			&cli.IntFlag{Name: "profile-runs", Value: 20, Usage: "runs to profile trace services with (simulated, exact)"},
			&cli.IntFlag{Name: "runs", Value: defaultSimRuns, Usage: "runs of a service without runs= alone (exclusive), and of the first service when none sets runs="},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringFlag{Name: "variants", Usage: "also run fikit under these ablations of the gate, comma-separated, or all: " +
				strings.Join(variantNames(), ", ") + " (docs/scheduler.md \"Switches, bounds and arrivals\"); rows fikit/NAME"},
		}, schedulerFlags("profile-runs")...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "unexpected argument %q (services go in --service or --profile)", c.Args().First())
			}
			dev, err := devmodel.Preset(c.String("device"))
			if err != nil {
				return usageError(c, "--device: %v", err)
			}
			if m := c.String("model"); m != "" {
				if dev.Model, err = devmodel.ParseModel(m); err != nil {
					return usageError(c, "--model must be timeslice or fifo")
				}
			}
			for flag, dst := range map[string]*time.Duration{"switch": &dev.Switch, "slice": &dev.Timeslice, "launch-latency": &dev.LaunchLatency} {
				if c.IsSet(flag) {
					*dst = c.Duration(flag)
				}
			}
			modes := []sim.Mode{sim.Exclusive, sim.Sharing, sim.Fikit}
			if name := c.String("mode"); name != "all" {
				m, err := sim.ParseMode(name)
				if err != nil {
					return usageError(c, "--mode: %v, or all", err)
				}
				modes = []sim.Mode{m}
			}
			var svcs []sim.Service
			for _, spec := range c.StringSlice("service") {
				sv, err := sim.ServiceFromSpec(spec)
				if err != nil {
					return usageError(c, "--service %q: %v", spec, err)
				}
				svcs = append(svcs, sv)
			}
			if specs := c.StringSlice("profile"); len(specs) > 0 {
				ps, err := servicesFromProfiles(c, specs)
				if err != nil {
					return err
				}
				svcs = append(svcs, ps...)
			}
			if len(svcs) == 0 {
				// The demo's pair.
				for _, spec := range []string{"trace=h100/resnet50_4_fwd,prio=0,cpu=12us,every=5ms,runs=200,name=high",
					"trace=h100/bert_2_fwd,prio=5,cpu=5us,name=low"} {
					sv, _ := sim.ServiceFromSpec(spec)
					svcs = append(svcs, sv)
				}
			}
			if err := sim.BoundRuns(svcs, c.Int("runs")); err != nil {
				return usageError(c, "--runs: %v", err)
			}
			for i := range svcs {
				if svcs[i].Profile == nil {
					p, err := sim.BuildProfile(dev, svcs[i], c.Int("profile-runs"))
					if err != nil {
						return fmt.Errorf("profiling %s: %w", svcs[i].Name, err)
					}
					svcs[i].Profile = p
				}
			}
			opts := sim.DefaultOptions()
			opts.Device = dev
			sched, err := schedulerConfig(c, "profile-runs")
			if err != nil {
				return err
			}
			opts.Scheduler = sched
			opts.Scheduler.ProfileRuns = c.Int("profile-runs")
			opts.NotifyLatency, opts.GrantRTT = c.Duration("notify-latency"), c.Duration("grant-rtt")
			variants, err := parseVariants(c.String("variants"))
			if err != nil {
				return usageError(c, "--variants: %v", err)
			}
			rep, err := sim.Compare(opts, svcs, modes, variants, c.Int("runs"))
			if err != nil {
				return err
			}
			rep.Device = c.String("device")
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printSim(c.App.Writer, rep)
			return nil
		},
	}
}

// variantNames are the variants' names (bench/variant).
func variantNames() []string { return variant.Names() }

// parseVariants reads --variants: names of variant.Variants, or all.
func parseVariants(list string) ([]variant.Variant, error) {
	if list == "" {
		return nil, nil
	}
	if list == "all" {
		return variant.Variants, nil
	}
	var out []variant.Variant
	for _, name := range strings.Split(list, ",") {
		v, ok := variant.Lookup(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("no variant %q (%s, or all)", name, strings.Join(variantNames(), ", "))
		}
		out = append(out, v)
	}
	return out, nil
}

func printSim(w io.Writer, r *sim.Report) {
	fmt.Fprintf(w, "simulated device %s: %s model, %s slice, context switch %s, launch latency %s\n\n", r.Device, r.Model,
		time.Duration(r.SliceNs), time.Duration(r.SwitchNs), time.Duration(r.LaunchNs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tservice\tprio\truns\truns/s\tp50 JCT\tp99 JCT\tp50 vs alone\tGPU time\tGPU util\tfilled\t")
	for _, m := range r.Modes {
		for i, s := range m.Services {
			util, fill, vs := "", "", "-"
			if i == 0 {
				util = fmt.Sprintf("%.0f%%", 100*m.Utilization)
				if m.Mode != sim.Exclusive.String() && len(m.Services) > 1 {
					fill = fmt.Sprintf("%.0f%%", m.FillPct)
				}
			}
			if s.VsAlone > 0 {
				vs = fmt.Sprintf("%.2fx", s.VsAlone)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Mode, s.Name, s.Priority, s.Runs, s.RunsPerSec,
				sim.Ms(s.P50Ns), sim.Ms(s.P99Ns), vs, sim.Ms(float64(s.GPUTimeNs)), util, fill)
		}
	}
	tw.Flush()
}

// defaultSimRuns bounds a simulation none of whose services sets runs=.
const defaultSimRuns = 100

// servicesFromProfiles loads each --profile KEY[:options] from the store.
func servicesFromProfiles(c *cli.Context, specs []string) ([]sim.Service, error) {
	var svcs []sim.Service
	err := withStore(c, false, func(s store.Store) error {
		for _, spec := range specs {
			key, rest, _ := strings.Cut(spec, ":")
			opts, err := sim.ParseSpec(rest)
			if err != nil {
				return usageError(c, "--profile %q: %v", spec, err)
			}
			p, err := getProfile(s, c.String("data-dir"), key, c.String("gpu"))
			if err != nil {
				return err
			}
			sv, err := sim.ServiceFromProfile(p, opts)
			if err != nil {
				return usageError(c, "--profile %q: %v", spec, err)
			}
			svcs = append(svcs, sv)
		}
		return nil
	})
	return svcs, err
}
