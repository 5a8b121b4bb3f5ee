package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/sim"
	"github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/simgpu/trace"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
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
				sv, err := serviceFromTrace(spec)
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
					sv, _ := serviceFromTrace(spec)
					svcs = append(svcs, sv)
				}
			}
			if err := boundRuns(svcs, c.Int("runs")); err != nil {
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
			rep := simReport{Device: c.String("device"), Model: dev.Model.String(), SwitchNs: int64(dev.Switch),
				SliceNs: int64(dev.Timeslice), LaunchNs: int64(dev.LaunchLatency)}
			type simRun struct {
				name  string
				mode  sim.Mode
				sched scheduler.Config
			}
			var runs []simRun
			for _, m := range modes {
				runs = append(runs, simRun{m.String(), m, opts.Scheduler})
			}
			variants, err := parseVariants(c.String("variants"))
			if err != nil {
				return usageError(c, "--variants: %v", err)
			}
			for _, v := range variants {
				cfg := opts.Scheduler
				if err := v.Apply(&cfg); err != nil {
					return err
				}
				runs = append(runs, simRun{"fikit/" + v.Name, sim.Fikit, cfg})
			}
			var alone []int64
			for _, run := range runs {
				m := run.mode
				opts.Mode, opts.Scheduler = m, run.sched
				start := time.Now()
				ran := svcs
				if m == sim.Exclusive {
					ran = aloneRuns(svcs, c.Int("runs"))
				}
				r, err := sim.Run(opts, ran)
				if err != nil {
					return err
				}
				mr := simModeReport{Mode: run.name, FillPct: r.FillPct, WallMs: float64(time.Since(start).Microseconds()) / 1e3}
				if r.EndNs > 0 {
					mr.Utilization = float64(r.DeviceBusyNs) / float64(r.EndNs)
				}
				for i, s := range r.Services {
					sum := sim.Summarize(s.JCTs)
					sr := simServiceReport{Name: s.Name, Priority: svcs[i].Priority, Runs: sum.Runs, P50Ns: sum.P50,
						P99Ns: sum.P99, MeanNs: sum.Mean, CV: sum.CV, GPUTimeNs: s.BusyNs}
					if span := s.Span[1] - s.Span[0]; span > 0 {
						sr.RunsPerSec = float64(s.Runs) / (float64(span) / 1e9)
					}
					if m == sim.Exclusive {
						alone = append(alone, int64(sum.P50))
					} else if i < len(alone) && alone[i] > 0 {
						sr.VsAlone = sum.P50 / float64(alone[i])
					}
					mr.Services = append(mr.Services, sr)
				}
				rep.Modes = append(rep.Modes, mr)
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printSim(c.App.Writer, &rep)
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

type simReport struct {
	Device   string          `json:"device"` // the preset the parameters start from
	Model    string          `json:"model"`
	SwitchNs int64           `json:"switch_ns"`
	SliceNs  int64           `json:"timeslice_ns"`
	LaunchNs int64           `json:"launch_latency_ns"`
	Modes    []simModeReport `json:"modes"`
}

type simModeReport struct {
	Mode        string             `json:"mode"`
	Utilization float64            `json:"device_utilization"`
	FillPct     float64            `json:"fill_pct"`
	WallMs      float64            `json:"wall_ms"`
	Services    []simServiceReport `json:"services"`
}

type simServiceReport struct {
	Name       string  `json:"name"`
	Priority   uint8   `json:"priority"`
	Runs       int     `json:"runs"`
	RunsPerSec float64 `json:"runs_per_s"`
	P50Ns      float64 `json:"p50_ns"`
	P99Ns      float64 `json:"p99_ns"`
	MeanNs     float64 `json:"mean_ns"`
	CV         float64 `json:"cv"`
	VsAlone    float64 `json:"p50_vs_alone,omitempty"`
	// GPUTimeNs is the device time its kernels ran.
	GPUTimeNs int64 `json:"gpu_time_ns"`
}

func printSim(w io.Writer, r *simReport) {
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

// serviceFromTrace parses "trace=NAME,prio=N,cpu=DUR,every=DUR,…".
func serviceFromTrace(spec string) (sim.Service, error) {
	opts, err := parseServiceOptions(spec)
	if err != nil {
		return sim.Service{}, err
	}
	name, ok := opts["trace"]
	if !ok {
		return sim.Service{}, fmt.Errorf("trace= is required")
	}
	tr, err := trace.Load(name)
	if err != nil {
		return sim.Service{}, err
	}
	cpu := int64(-1) // the trace's own host times, if it has them
	if !tr.HasHostTime {
		cpu = 0
	}
	if v, ok := opts["cpu"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return sim.Service{}, fmt.Errorf("cpu: %w", err)
		}
		cpu = int64(d)
	}
	sv := sim.Service{Name: name, Kernels: sim.KernelsFromTrace(tr, cpu)}
	if v, ok := opts["graph"]; ok {
		g, err := strconv.ParseBool(v)
		if err != nil {
			return sv, fmt.Errorf("graph: %w", err)
		}
		if g {
			sv.Kernels = sim.GraphFromTrace(tr, 0)
		}
	}
	return sv, applyServiceOptions(&sv, opts)
}

// defaultSimRuns bounds a simulation none of whose services sets runs=.
const defaultSimRuns = 100

// boundRuns gives the first service runs when no service has a run count:
// the simulation ends when every bounded service is done, and with none
// only at the horizon (Options.Horizon), which for a back-to-back service
// is many thousands of runs and a long wait.
func boundRuns(svcs []sim.Service, runs int) error {
	if runs < 1 {
		return fmt.Errorf("must be ≥ 1, got %d", runs)
	}
	for _, sv := range svcs {
		if sv.Runs > 0 {
			return nil
		}
	}
	if len(svcs) > 0 {
		svcs[0].Runs = runs
	}
	return nil
}

// aloneRuns is svcs for the exclusive mode, where each runs alone: one
// without runs= (it ran alongside the others) runs runs times, not for the
// whole horizon.
func aloneRuns(svcs []sim.Service, runs int) []sim.Service {
	out := append([]sim.Service(nil), svcs...)
	for i := range out {
		if out[i].Runs == 0 {
			out[i].Runs = runs
		}
	}
	return out
}

func parseServiceOptions(spec string) (map[string]string, error) {
	opts := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		opts[k] = v
	}
	return opts, nil
}

func applyServiceOptions(sv *sim.Service, opts map[string]string) error {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := opts[k]
		dur := func() (time.Duration, error) { return time.ParseDuration(v) }
		var err error
		switch k {
		case "trace", "cpu", "graph":
		case "name":
			sv.Name = v
		case "prio":
			var p int
			p, err = strconv.Atoi(v)
			if err == nil && (p < 0 || p > 9) {
				err = fmt.Errorf("must be 0–9")
			}
			sv.Priority = uint8(p)
		case "every":
			sv.Every, err = dur()
		case "poisson":
			sv.Poisson, err = strconv.ParseFloat(v, 64)
		case "burst":
			sv.Burst, err = strconv.Atoi(v)
			if err == nil && sv.Burst < 0 {
				err = fmt.Errorf("must be ≥ 0")
			}
		case "runs":
			sv.Runs, err = strconv.Atoi(v)
		case "pre":
			var d time.Duration
			d, err = dur()
			sv.PreNs = int64(d)
		case "post":
			var d time.Duration
			d, err = dur()
			sv.PostNs = int64(d)
		case "seed":
			sv.Seed, err = strconv.ParseUint(v, 10, 64)
		case "weight":
			var w uint64
			w, err = strconv.ParseUint(v, 10, 32)
			if err == nil && (w < 1 || w > udp.MaxWeight) {
				err = fmt.Errorf("must be 1–%d", udp.MaxWeight)
			}
			sv.Weight = uint32(w)
		default:
			return fmt.Errorf("unknown option %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// serviceFromProfile builds a service from a stored profile.
func serviceFromProfile(p *profiler.Profile, opts map[string]string) (sim.Service, error) {
	ks, err := sim.KernelsFromProfile(p)
	if err != nil {
		return sim.Service{}, err
	}
	sv := sim.Service{Name: p.TaskKey, Kernels: ks, Profile: p}
	return sv, applyServiceOptions(&sv, opts)
}

// servicesFromProfiles loads each --profile KEY[:options] from the store.
func servicesFromProfiles(c *cli.Context, specs []string) ([]sim.Service, error) {
	var svcs []sim.Service
	err := withStore(c, false, func(s store.Store) error {
		for _, spec := range specs {
			key, rest, _ := strings.Cut(spec, ":")
			opts, err := parseServiceOptions(rest)
			if err != nil {
				return usageError(c, "--profile %q: %v", spec, err)
			}
			p, err := getProfile(s, c.String("data-dir"), key, c.String("gpu"))
			if err != nil {
				return err
			}
			sv, err := serviceFromProfile(p, opts)
			if err != nil {
				return usageError(c, "--profile %q: %v", spec, err)
			}
			svcs = append(svcs, sv)
		}
		return nil
	})
	return svcs, err
}
