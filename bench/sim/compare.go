package sim

import (
	"fmt"
	"time"

	"github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/scheduler"
)

// What `fikit sim` reports: the services run under each mode (and fikit
// under ablations of its configuration), each service's JCTs summarized
// beside its JCT alone.

// Report is a comparison of modes over one set of services.
type Report struct {
	Device   string       `json:"device"` // the preset the parameters start from
	Model    string       `json:"model"`
	SwitchNs int64        `json:"switch_ns"`
	SliceNs  int64        `json:"timeslice_ns"`
	LaunchNs int64        `json:"launch_latency_ns"`
	Modes    []ModeReport `json:"modes"`
}

// ModeReport is one mode's (or one fikit variant's) run.
type ModeReport struct {
	Mode        string  `json:"mode"` // a Mode's name, or fikit/VARIANT
	Utilization float64 `json:"device_utilization"`
	FillPct     float64 `json:"fill_pct"`
	// WallMs is the host time the simulation took.
	WallMs   float64         `json:"wall_ms"`
	Services []ServiceReport `json:"services"`
}

// ServiceReport is a service's JCTs under one mode.
type ServiceReport struct {
	Name       string  `json:"name"`
	Priority   uint8   `json:"priority"`
	Runs       int     `json:"runs"`
	RunsPerSec float64 `json:"runs_per_s"`
	P50Ns      float64 `json:"p50_ns"`
	P99Ns      float64 `json:"p99_ns"`
	MeanNs     float64 `json:"mean_ns"`
	CV         float64 `json:"cv"`
	// VsAlone is its p50 over its p50 alone (mode exclusive run first).
	VsAlone float64 `json:"p50_vs_alone,omitempty"`
	// GPUTimeNs is the device time its kernels ran.
	GPUTimeNs int64 `json:"gpu_time_ns"`
}

// Compare runs svcs under each of modes, then under fikit with each of
// variants applied to opts.Scheduler (rows fikit/NAME). In mode exclusive
// each service runs alone, aloneRuns times where it sets no runs. The
// services need their profiles (Profile).
func Compare(opts Options, svcs []Service, modes []Mode, variants []variant.Variant, aloneRuns int) (*Report, error) {
	dev := opts.Device
	rep := &Report{Model: dev.Model.String(), SwitchNs: int64(dev.Switch), SliceNs: int64(dev.Timeslice),
		LaunchNs: int64(dev.LaunchLatency)}
	type run struct {
		name  string
		mode  Mode
		sched scheduler.Config
	}
	var runs []run
	for _, m := range modes {
		runs = append(runs, run{m.String(), m, opts.Scheduler})
	}
	for _, v := range variants {
		cfg := opts.Scheduler
		if err := v.Apply(&cfg); err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		runs = append(runs, run{"fikit/" + v.Name, Fikit, cfg})
	}
	var alone []int64
	for _, rn := range runs {
		o := opts
		o.Mode, o.Scheduler = rn.mode, rn.sched
		start := time.Now()
		ran := svcs
		if rn.mode == Exclusive {
			ran = AloneRuns(svcs, aloneRuns)
		}
		r, err := Run(o, ran)
		if err != nil {
			return nil, err
		}
		mr := ModeReport{Mode: rn.name, FillPct: r.FillPct, WallMs: float64(time.Since(start).Microseconds()) / 1e3}
		if r.EndNs > 0 {
			mr.Utilization = float64(r.DeviceBusyNs) / float64(r.EndNs)
		}
		for i, s := range r.Services {
			sum := Summarize(s.JCTs)
			sr := ServiceReport{Name: s.Name, Priority: svcs[i].Priority, Runs: sum.Runs, P50Ns: sum.P50,
				P99Ns: sum.P99, MeanNs: sum.Mean, CV: sum.CV, GPUTimeNs: s.BusyNs}
			if span := s.Span[1] - s.Span[0]; span > 0 {
				sr.RunsPerSec = float64(s.Runs) / (float64(span) / 1e9)
			}
			if rn.mode == Exclusive {
				alone = append(alone, int64(sum.P50))
			} else if i < len(alone) && alone[i] > 0 {
				sr.VsAlone = sum.P50 / float64(alone[i])
			}
			mr.Services = append(mr.Services, sr)
		}
		rep.Modes = append(rep.Modes, mr)
	}
	return rep, nil
}

// BoundRuns gives the first service runs when no service has a run count:
// the simulation ends when every bounded service is done, and with none
// only at the horizon (Options.Horizon), which for a back-to-back service
// is many thousands of runs and a long wait.
func BoundRuns(svcs []Service, runs int) error {
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

// AloneRuns is svcs for the exclusive mode, where each runs alone: one
// without runs= (it ran alongside the others) runs runs times, not for the
// whole horizon.
func AloneRuns(svcs []Service, runs int) []Service {
	out := append([]Service(nil), svcs...)
	for i := range out {
		if out[i].Runs == 0 {
			out[i].Runs = runs
		}
	}
	return out
}
