//go:build scratch

package sim

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

func TestScratchWorst(t *testing.T) {
	dev, _ := devmodel.Preset("h200")
	graph := Service{Name: "hp", Kernels: GraphFromTrace(loadTrace(t, "scenario/graph_resnet50_b1"), 0), Every: 8 * time.Millisecond, Runs: 150, Seed: 1, Late: WakeLate}
	if os.Getenv("POIS") != "" {
		graph.Every, graph.Poisson = 0, 125
	}
	bert := Service{Name: "lp", Priority: 5, Kernels: KernelsFromTrace(loadTrace(t, "scenario/bert_base_b16"), -1)}
	profile(t, dev, &graph, &bert)
	opts := DefaultOptions()
	opts.Device = dev
	opts.Scheduler.ProfileRuns = 20
	v, _ := scheduler.LookupVariant(os.Getenv("VARIANT"))
	v.Apply(&opts.Scheduler)
	s, err := newSim(opts, []Service{graph, bert})
	if err != nil {
		t.Fatal(err)
	}
	defer s.dev.Close()
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	hp := s.svcs[0].res
	idx := make([]int, len(hp.JCTs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return hp.JCTs[idx[a]] > hp.JCTs[idx[b]] })
	for _, i := range idx[:2] {
		st, en := hp.Starts[i], hp.Starts[i]+hp.JCTs[i]
		fmt.Printf("run %d start %.3f ms jct %.0f us (prev start %.3f)\n", i, float64(st)/1e6, float64(hp.JCTs[i])/1e3, float64(hp.Starts[max(i-1, 0)])/1e6)
		for _, g := range s.segs {
			if g.End > st-600000 && g.Start < en && g.Ctx != 0 {
				fmt.Printf("   ctx %d seq %d [%7.0f, %7.0f] us rel, %4.0f us\n", g.Ctx, g.Seq, float64(g.Start-st)/1e3, float64(g.End-st)/1e3, float64(g.End-g.Start)/1e3)
			}
		}
	}
}
