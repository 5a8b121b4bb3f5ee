//go:build scratch

package sim

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

func TestScratch3(t *testing.T) {
	runs := 300
	if v := os.Getenv("RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	dn := "h200"
	if v := os.Getenv("DEV"); v != "" {
		dn = v
	}
	dev, _ := devmodel.Preset(dn)
	late := WakeLate
	if os.Getenv("NOLATE") != "" {
		late = 0
	}
	graph := Service{Name: "hp", Kernels: GraphFromTrace(loadTrace(t, "scenario/graph_resnet50_b1"), 0), Every: 8 * time.Millisecond, Runs: runs, Seed: 1, Late: late}
	eager := Service{Name: "hp", Kernels: KernelsFromTrace(loadTrace(t, "scenario/eager_resnet50_b1"), -1), Every: 10 * time.Millisecond, Runs: runs, Seed: 1, Late: late}
	pois := graph
	pois.Every, pois.Poisson = 0, 125
	bert := Service{Name: "lp", Priority: 5, Kernels: KernelsFromTrace(loadTrace(t, "scenario/bert_base_b16"), -1)}
	train := Service{Name: "lp", Priority: 5, Kernels: KernelsFromTrace(loadTrace(t, "scenario/train_resnet50_b16"), -1)}
	profile(t, dev, &graph, &eager, &pois, &bert, &train)
	type wl struct {
		name   string
		hp, lp Service
	}
	wls := []wl{{"graph+bert", graph, bert}, {"eager+train", eager, train}, {"poisson+bert", pois, bert}}
	only := os.Getenv("ONLY")
	for _, w := range wls {
		if only != "" && !strings.Contains(w.name, only) {
			continue
		}
		opts := DefaultOptions()
		opts.Device = dev
		opts.Scheduler.ProfileRuns = 20
		rate := func(r *Result) float64 {
			s, from, to := r.Services[1], r.Services[0].Span[0], r.Services[0].Span[1]
			n := 0
			for i, st := range s.Starts {
				if st >= from && st+s.JCTs[i] <= to {
					n++
				}
			}
			return float64(n) / (float64(to-from) / 1e9)
		}
		q := func(r *Result, f float64) float64 {
			v := append([]int64(nil), r.Services[0].JCTs...)
			sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
			return float64(v[int(math.Round(f*float64(len(v)-1)))])
		}
		o := opts
		o.Mode = Exclusive
		l := w.lp
		l.Runs = 30
		ex, err := Run(o, []Service{w.hp, l})
		if err != nil {
			t.Fatal(err)
		}
		a := q(ex, 0.5)
		exl := ex.Services[1]
		lpAlone := float64(exl.Runs) / (float64(exl.Span[1]-exl.Span[0]) / 1e9)
		o.Mode = Sharing
		sh, err := Run(o, []Service{w.hp, w.lp})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("== %s on %s: alone %.3f ms, LP alone %.1f/s; sharing p50 %.2fx p99 %.2fx LP %.0f%%\n", w.name, dn, a/1e6, lpAlone,
			q(sh, .5)/a, q(sh, .99)/a, 100*rate(sh)/lpAlone)
		for _, v := range scheduler.Variants {
			if vs := os.Getenv("VARIANTS"); vs != "" && !strings.Contains(","+vs+",", ","+v.Name+",") {
				continue
			}
			o := opts
			o.Mode = Fikit
			if err := v.Apply(&o.Scheduler); err != nil {
				t.Fatal(err)
			}
			for _, kv := range strings.Fields(os.Getenv("SET")) {
				k, val, _ := strings.Cut(kv, "=")
				s, _ := scheduler.LookupSetting(k)
				if err := s.Set(&o.Scheduler, val); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Run(o, []Service{w.hp, w.lp})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("  %-22s p50 %.3fx p90 %.3fx p99 %.3fx  LP %3.0f%% of alone, %3.0f%% of sharing  fill %.0f%% grants %d\n",
				v.Title, q(r, .5)/a, q(r, .9)/a, q(r, .99)/a, 100*rate(r)/lpAlone, 100*rate(r)/rate(sh), r.FillPct, r.Grants)
		}
	}
}

