package sim

import (
	"testing"
	"time"

	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// h200Pair is a pair an NVIDIA H200 ran (issues 22 and 36; docs/bench.md "On
// a real GPU"), with what it measured under the defaults of the day: the HP's p50 (and p10) JCT ratio to
// alone under fikit and under default sharing, and the LP's throughput
// under fikit as a share of alone (0: not measured).
type h200Pair struct {
	name           string
	hp, lp         string
	graph          bool
	hpCPU, lpCPU   int64 // host time per launch; -1: the trace's own
	every          time.Duration
	fikitLo, fikHi float64 // the H200's fikit p50 ratio (a range over its runs)
	fikitP10       bool    // the H200's p10 ratio was in the same range
	sharLo, sharHi float64 // its default-sharing p50 ratio
	lpLo, lpHi     float64 // its LP share under fikit, %
}

// h200Pairs: the CUDA-graph pair the presets are fitted to (sharing, the
// slice) and checked against (fikit, from the measured switch), and the two
// replayed pairs of `fikit demo --gpu` that held them out.
var h200Pairs = []h200Pair{
	{name: "CUDA-graph ResNet-50 b1 + BERT-base b16", hp: "scenario/graph_resnet50_b1", lp: "scenario/bert_base_b16",
		graph: true, hpCPU: -1, lpCPU: -1, every: 8 * time.Millisecond, fikitLo: 1.14, fikHi: 1.17, fikitP10: true,
		sharLo: 1.97, sharHi: 2.32, lpLo: 71, lpHi: 73},
	{name: "replayed resnet50 + bert", hp: "h100/resnet50_4_fwd", lp: "h100/bert_2_fwd", hpCPU: 12000, lpCPU: 5000,
		every: 5 * time.Millisecond, fikitLo: 1.05, fikHi: 1.05, sharLo: 2.63, sharHi: 2.63},
	{name: "replayed mobilenet + resnet101", hp: "h100/mobilenet_4_fwd", lp: "h100/resnet101_4_fwd", hpCPU: 12000, lpCPU: 5000,
		every: 8 * time.Millisecond, fikitLo: 1.005, fikHi: 1.005, sharLo: 1.49, sharHi: 1.49},
}

type pairFigures struct {
	alone                       float64 // HP p50 JCT alone, ns
	sharing, fikitP10, fikitP50 float64 // HP ratios to alone
	fikitP99, sharingP99, lpPct float64
}

// simulatePair runs an h200Pair's three modes on dev, 300 HP requests.
func simulatePair(t *testing.T, p h200Pair, dev devmodel.Config, late time.Duration) pairFigures {
	t.Helper()
	ht, lt := loadTrace(t, p.hp), loadTrace(t, p.lp)
	hk := KernelsFromTrace(ht, p.hpCPU)
	if p.graph {
		hk = GraphFromTrace(ht, 0)
	}
	hp := Service{Name: "hp", Kernels: hk, Every: p.every, Runs: 300, Late: late, Seed: 1}
	lp := Service{Name: "lp", Priority: 5, Kernels: KernelsFromTrace(lt, p.lpCPU)}
	profile(t, dev, &hp, &lp)
	res := map[Mode]*Result{}
	for _, m := range []Mode{Exclusive, Sharing, Fikit} {
		opts := DefaultOptions()
		opts.Mode, opts.Device = m, dev
		opts.Scheduler.ProfileRuns = 20
		l := lp
		if m == Exclusive {
			l.Runs = 30 // alone, a closed-loop LP would run until the horizon
		}
		r, err := Run(opts, []Service{hp, l})
		if err != nil {
			t.Fatal(err)
		}
		res[m] = r
	}
	q := func(r *Result, f float64) float64 { return float64(stats.Quantile(r.Services[0].JCTs, f)) }
	// The LP's runs per second inside the HP's span, as tests/gpu's
	// summary counts them, against its rate alone.
	rate := func(r *Result) float64 {
		from, to := r.Services[0].Span[0], r.Services[0].Span[1]
		return float64(lpRunsInSpan(r)) / (float64(to-from) / 1e9)
	}
	ex := res[Exclusive].Services[1]
	lpAlone := float64(ex.Runs) / (float64(ex.Span[1]-ex.Span[0]) / 1e9)
	a := q(res[Exclusive], 0.5)
	return pairFigures{alone: a, sharing: q(res[Sharing], 0.5) / a, sharingP99: q(res[Sharing], 0.99) / a,
		fikitP10: q(res[Fikit], 0.1) / a, fikitP50: q(res[Fikit], 0.5) / a, fikitP99: q(res[Fikit], 0.99) / a,
		lpPct: 100 * rate(res[Fikit]) / lpAlone}
}

// TestCalibratedH200 is issue 22's "done when", in the deterministic
// simulator: on the h200 preset the CUDA-graph pair reproduces the H200
// (fikit's p10 and p50 within 0.05 of 1.14–1.17×, both runs' range without
// the pre-switch; default sharing's p50 within 20 % of both runs' range, the
// LP's share within 15 points of 71–73 %),
// and so do the two held-out pairs (fikit within 0.05, sharing within 20 %
// of what the H200 gave). The legacy preset is logged beside: it misses the
// graph pair's fikit ratio by a whole switch. The same pairs on simgpu with
// the real daemon and hooks are in docs/simgpu.md.
func TestCalibratedH200(t *testing.T) {
	h200, err := devmodel.Preset("h200")
	if err != nil {
		t.Fatal(err)
	}
	legacy, _ := devmodel.Preset("legacy")
	within := func(v, lo, hi, tol float64, rel bool) bool {
		if rel {
			return v >= lo*(1-tol) && v <= hi*(1+tol)
		}
		return v >= lo-tol && v <= hi+tol
	}
	for _, p := range h200Pairs {
		t.Run(p.name, func(t *testing.T) {
			f := simulatePair(t, p, h200, WakeLate)
			l := simulatePair(t, p, legacy, WakeLate)
			for _, row := range []struct {
				dev string
				f   pairFigures
			}{{"h200", f}, {"legacy", l}} {
				t.Logf("%-6s alone %.3f ms; sharing p50 %.2fx p99 %.2fx; fikit p10 %.3fx p50 %.3fx p99 %.2fx; LP under fikit %.0f%% of alone",
					row.dev, row.f.alone/1e6, row.f.sharing, row.f.sharingP99, row.f.fikitP10, row.f.fikitP50, row.f.fikitP99, row.f.lpPct)
			}
			if !within(f.fikitP50, p.fikitLo, p.fikHi, 0.05, false) {
				t.Errorf("fikit p50 %.3fx, the H200's %.3f–%.3fx ± 0.05", f.fikitP50, p.fikitLo, p.fikHi)
			}
			if p.fikitP10 && !within(f.fikitP10, p.fikitLo, p.fikHi, 0.05, false) {
				t.Errorf("fikit p10 %.3fx, the H200's %.3f–%.3fx ± 0.05", f.fikitP10, p.fikitLo, p.fikHi)
			}
			if !within(f.sharing, p.sharLo, p.sharHi, 0.20, true) {
				t.Errorf("default sharing p50 %.2fx, the H200's %.2f–%.2fx ± 20 %%", f.sharing, p.sharLo, p.sharHi)
			}
			if p.lpHi > 0 && !within(f.lpPct, p.lpLo, p.lpHi, 15, false) {
				t.Errorf("LP under fikit %.0f%% of alone, the H200's %.0f–%.0f%% ± 15 points", f.lpPct, p.lpLo, p.lpHi)
			}
		})
	}
}

// lpRunsInSpan counts the second service's runs inside the first's span.
func lpRunsInSpan(r *Result) int {
	s, from, to := r.Services[1], r.Services[0].Span[0], r.Services[0].Span[1]
	n := 0
	for i, st := range s.Starts {
		if st >= from && st+s.JCTs[i] <= to {
			n++
		}
	}
	return n
}
