package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/simgpu/trace"
)

// KernelsFromTrace turns a trace into one run of kernels whose IDs are the
// ones the hook computes for fikit-replay's spin kernels, so profiles made
// by replaying the trace under the hook apply to the simulation. cpuNs is
// the host time before each launch; < 0 uses the trace's own host times.
func KernelsFromTrace(t *trace.Trace, cpuNs int64) []Kernel {
	ks := make([]Kernel, len(t.Kernels))
	for i, k := range t.Kernels {
		host := cpuNs
		if cpuNs < 0 {
			host = k.HostNs
		}
		ks[i] = Kernel{
			ID:         kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block),
			DurationNs: k.DurationNs,
			HostNs:     host,
		}
	}
	return ks
}

// GraphFromTrace turns a trace into one run that is a single CUDA graph
// launch (fikit-replay --graph): one kernel whose ID is the one the hook
// gives the graph (kernelid.GraphID of its nodes' IDs) and whose duration is
// the trace's device time, launched hostNs into the run. On the device a
// graph's kernels follow each other with nothing between them, as one
// kernel of their summed duration does.
func GraphFromTrace(t *trace.Trace, hostNs int64) []Kernel {
	ids := make([]uint64, len(t.Kernels))
	for i, k := range t.Kernels {
		ids[i] = kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block)
	}
	return []Kernel{{ID: kernelid.GraphID(ids), DurationNs: t.GPUTimeNs(), HostNs: hostNs}}
}

// KernelsFromProfile re-creates one run from a profile: each kernel ID
// appears count/runs times, spread evenly over the run, with its mean
// duration, and the next launch follows after the kernel's mean duration
// plus its mean gap (launch-bound host behaviour). The kernel order is
// reconstructed, not recorded, which is what makes this a prediction.
func KernelsFromProfile(p *profiler.Profile) ([]Kernel, error) {
	if p.Runs == 0 || len(p.Kernels) == 0 {
		return nil, fmt.Errorf("sim: profile of %q has no measured runs", p.TaskKey)
	}
	type inst struct {
		pos float64
		id  uint64
	}
	var all []inst
	for _, k := range p.SortedKernels() {
		n := int(math.Round(float64(k.Count()) / float64(p.Runs)))
		for i := 0; i < n; i++ {
			all = append(all, inst{pos: (float64(i) + 0.5) / float64(n), id: k.ID})
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("sim: profile of %q has fewer than one kernel per run", p.TaskKey)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].pos < all[j].pos })
	ks := make([]Kernel, len(all))
	for i, in := range all {
		k := p.Kernels[in.id]
		ks[i] = Kernel{ID: in.id, DurationNs: int64(k.Duration.Mean)}
		if i > 0 {
			prev := p.Kernels[all[i-1].id]
			ks[i].HostNs = int64(prev.Duration.Mean + prev.Gap.Mean)
		}
	}
	return ks, nil
}

// BuildProfile measures a service alone on the simulated device, exactly
// (no measurement overhead), for runs runs, and folds the measurements into
// a complete profile as the profiling phase would.
func BuildProfile(dev devmodel.Config, svc Service, runs int) (*profiler.Profile, error) {
	b, err := profiler.NewBuilder(svc.Name, "sim", runs)
	if err != nil {
		return nil, err
	}
	opts := DefaultOptions()
	opts.Mode, opts.Device = Sharing, dev
	svc.Runs, svc.Every, svc.Poisson, svc.Start = runs, 0, 0, 0
	s, err := newSim(opts, []Service{svc})
	if err != nil {
		return nil, err
	}
	defer s.dev.Close()
	if err := s.run(); err != nil {
		return nil, err
	}
	// Kernel starts and ends from the segments, in completion order (one
	// stream: launch order).
	type span struct {
		id         uint64
		start, end int64
	}
	var spans []span
	starts := map[uint64]int64{}
	for _, g := range s.segs {
		if g.Index == 0 {
			starts[g.Seq] = g.Start
		}
		if g.Last {
			spans = append(spans, span{id: g.Tag, start: starts[g.Seq], end: g.End})
			delete(starts, g.Seq)
		}
	}
	per := len(svc.Kernels)
	res := s.svcs[0].res
	if len(spans) != per*len(res.JCTs) {
		return nil, fmt.Errorf("sim: profiling saw %d kernels for %d runs of %d", len(spans), len(res.JCTs), per)
	}
	for r := range res.JCTs {
		run := uint32(r + 1)
		recs := make([]profiler.Record, per)
		for i := 0; i < per; i++ {
			sp := spans[r*per+i]
			recs[i] = profiler.Record{KernelID: sp.id, DurationNs: uint64(sp.end - sp.start)}
			if i+1 < per {
				recs[i].GapNs = uint64(max(0, spans[r*per+i+1].start-sp.end))
			} else {
				recs[i].Flags = profiler.FlagGapSpansRunEnd
			}
		}
		b.AddRecords(run, recs)
		b.EndRun(run, uint32(per), uint64(res.JCTs[r]), true)
	}
	if !b.Complete() {
		return nil, fmt.Errorf("sim: profile incomplete after %d runs", runs)
	}
	return b.Profile(), nil
}

// Summary is a service's JCT distribution.
type Summary struct {
	Runs                       int
	P50, P90, P99, Mean, StdNs float64
	CV                         float64
}

// Summarize computes a JCT summary (nearest-rank quantiles).
func Summarize(jcts []int64) Summary {
	s := Summary{Runs: len(jcts)}
	if len(jcts) == 0 {
		return s
	}
	v := slices.Sorted(slices.Values(jcts))
	q := func(p float64) float64 { return float64(stats.QuantileSorted(v, p)) }
	s.P50, s.P90, s.P99 = q(0.5), q(0.9), q(0.99)
	s.Mean, s.StdNs = stats.MeanStd(v)
	if s.Mean > 0 {
		s.CV = s.StdNs / s.Mean
	}
	return s
}

// Ms formats nanoseconds as milliseconds.
func Ms(ns float64) string { return fmt.Sprintf("%.3f ms", ns/float64(time.Millisecond)) }
