package bench

import (
	"fmt"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/bench/sim"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// predict is the simulator's version of a measured scenario: the same
// services on the same device model, in the same modes. With hpFirst the HP
// is the foreground service (it has the run count) and the LP runs
// alongside until it is done; otherwise the other way round. The LP's JCTs
// are those of its runs inside the foreground span, as measured.
func (r *runner) predict(hp, lp svc, device harness.Device, hpFirst bool) ([]ModeResult, error) {
	dev, err := device.Config()
	if err != nil {
		return nil, err
	}
	h, err := r.simSvc(hp, dev)
	if err != nil {
		return nil, err
	}
	l, err := r.simSvc(lp, dev)
	if err != nil {
		return nil, err
	}
	if hpFirst {
		l.Runs, l.Every = 0, 0
	} else {
		h.Runs, h.Every = 0, 0
	}
	opts := sim.DefaultOptions()
	opts.Device = dev
	opts.Scheduler.ProfileRuns = r.p.profileRuns
	opts.NotifyLatency, opts.GrantRTT = r.simNotify, r.simGrant

	var out []ModeResult
	// Exclusive: each alone; a background service alone runs a fixed
	// number of closed-loop runs.
	opts.Mode = sim.Sharing
	ah, al := h, l
	if ah.Runs == 0 {
		ah.Runs = max(hp.Runs, 20)
	}
	if al.Runs == 0 {
		al.Runs = 10
	}
	rh, err := sim.Run(opts, []sim.Service{ah})
	if err != nil {
		return nil, fmt.Errorf("sim exclusive: %w", err)
	}
	rl, err := sim.Run(opts, []sim.Service{al})
	if err != nil {
		return nil, fmt.Errorf("sim exclusive: %w", err)
	}
	out = append(out, ModeResult{Mode: ModeExclusive, HP: simJCT(rh.Services[0], rh.Services[0].Span[0], rh.Services[0].Span[1]),
		LP: simJCT(rl.Services[0], rl.Services[0].Span[0], rl.Services[0].Span[1])})
	for _, m := range []sim.Mode{sim.Sharing, sim.Fikit} {
		opts.Mode = m
		res, err := sim.Run(opts, []sim.Service{h, l})
		if err != nil {
			return nil, fmt.Errorf("sim %s: %w", m, err)
		}
		fg := res.Services[0]
		if !hpFirst {
			fg = res.Services[1]
		}
		from, to := fg.Span[0], fg.Span[1]
		mr := ModeResult{Mode: m.String(), HP: simJCT(res.Services[0], from, to), LP: simJCT(res.Services[1], from, to), SpanNs: to - from}
		if hpFirst {
			mr.FillPct = ptr(res.FillPct)
		}
		out = append(out, mr)
	}
	return out, nil
}

// simSvc is s for the simulator, with a profile built on dev the way the
// profiling phase would (cached per service and device).
func (r *runner) simSvc(s svc, dev devmodel.Config) (sim.Service, error) {
	ss, err := s.simService()
	if err != nil {
		return ss, err
	}
	key := fmt.Sprintf("%s|%+v", s.Key, dev)
	p, ok := r.simProf[key]
	if !ok {
		base := ss
		base.Every, base.Runs = 0, 0
		if p, err = sim.BuildProfile(dev, base, r.p.profileRuns); err != nil {
			return ss, fmt.Errorf("sim profile of %s: %w", s.Key, err)
		}
		r.simProf[key] = p
	}
	ss.Profile = p
	return ss, nil
}

// simJCT summarizes a simulated service's runs that started inside
// [from, to] and ended by to.
func simJCT(s sim.ServiceResult, from, to int64) JCT {
	var j []int64
	for i, x := range s.JCTs {
		if i < len(s.Starts) && s.Starts[i] >= from && s.Starts[i]+x <= to {
			j = append(j, x)
		}
	}
	return Summarize(j, to-from)
}
