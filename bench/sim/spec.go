package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/simgpu/trace"
	"github.com/fikit/fikit/udp"
)

// A service spec is how `fikit sim` names a service: comma-separated
// key=value options — trace=NAME (for ServiceFromSpec), prio, cpu, graph,
// every, poisson, burst, runs, pre, post, seed, weight, name.

// ServiceFromSpec builds a service from a trace spec,
// "trace=NAME,prio=N,cpu=DUR,every=DUR,…".
func ServiceFromSpec(spec string) (Service, error) {
	opts, err := ParseSpec(spec)
	if err != nil {
		return Service{}, err
	}
	name, ok := opts["trace"]
	if !ok {
		return Service{}, fmt.Errorf("trace= is required")
	}
	tr, err := trace.Load(name)
	if err != nil {
		return Service{}, err
	}
	cpu := int64(-1) // the trace's own host times, if it has them
	if !tr.HasHostTime {
		cpu = 0
	}
	if v, ok := opts["cpu"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Service{}, fmt.Errorf("cpu: %w", err)
		}
		cpu = int64(d)
	}
	sv := Service{Name: name, Kernels: KernelsFromTrace(tr, cpu)}
	if v, ok := opts["graph"]; ok {
		g, err := strconv.ParseBool(v)
		if err != nil {
			return sv, fmt.Errorf("graph: %w", err)
		}
		if g {
			sv.Kernels = GraphFromTrace(tr, 0)
		}
	}
	return sv, applySpec(&sv, opts)
}

// ServiceFromProfile builds a service from a stored profile (kernels
// re-created from it) and spec options.
func ServiceFromProfile(p *profiler.Profile, opts map[string]string) (Service, error) {
	ks, err := KernelsFromProfile(p)
	if err != nil {
		return Service{}, err
	}
	sv := Service{Name: p.TaskKey, Kernels: ks, Profile: p}
	return sv, applySpec(&sv, opts)
}

// ParseSpec splits a spec into its options.
func ParseSpec(spec string) (map[string]string, error) {
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

func applySpec(sv *Service, opts map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(opts)) {
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
