package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fikit/fikit/bench/harness"
)

// workload is a scenario of services users run today, from the frozen
// scenario traces (simgpu/trace/scenario/): a row of the workloads section.
// Modes names the co-located modes it runs (modeSpecs) beside exclusive.
type workload struct {
	Name   string
	HP, LP svc
	Modes  []string
}

// The workloads' request interval: the H200's CUDA-graph pair sent a
// request every 8 ms; the eager pair's HP (tests/gpu/torch.sh) every 10 ms.
const (
	graphEvery = 8 * time.Millisecond
	eagerEvery = 10 * time.Millisecond
)

// workloadPlan is the workloads section with hpRuns HP requests each:
// (a) a periodic CUDA-graph HP beside BERT-base batch 16, the H200's pair;
// (b) an eager, launch-bound HP beside a training job;
// (c) the CUDA-graph HP at Poisson arrivals of the same mean beside BERT.
func workloadPlan(hpRuns int) []workload {
	graph := func(runs int) svc {
		return svc{Trace: "scenario/graph_resnet50_b1", Key: "bench/hp/scenario/graph_resnet50_b1", Prio: hpPrio, CPUNs: -1,
			Graph: true, Every: graphEvery, Runs: runs, Warmup: 3}
	}
	eager := svc{Trace: "scenario/eager_resnet50_b1", Key: "bench/hp/scenario/eager_resnet50_b1", Prio: hpPrio, CPUNs: -1,
		Every: eagerEvery, Runs: hpRuns, Warmup: 3}
	bert := svc{Trace: "scenario/bert_base_b16", Key: "bench/lp/scenario/bert_base_b16", Prio: lpPrio, CPUNs: -1}
	train := svc{Trace: "scenario/train_resnet50_b16", Key: "bench/lp/scenario/train_resnet50_b16", Prio: lpPrio, CPUNs: -1}
	poisson := graph(hpRuns)
	poisson.Every, poisson.Poisson, poisson.Seed = 0, poissonRate(graphEvery), 1
	// Each runs the gate's ablations too, side by side (ablationTable).
	// (ModeFikit, all of them together, is one of colocModes already).
	modes := slices.Clone(colocModes)
	for _, m := range ablationModes {
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	modes = append(modes, ModeFikitPreSwitch) // fikit with the pre-switch (preswitch.go)
	return []workload{
		{Name: "CUDA-graph ResNet-50 b1 (H) + BERT-base b16 (L)", HP: graph(hpRuns), LP: bert, Modes: modes},
		{Name: "eager ResNet-50 b1 (H) + ResNet-50 b16 training (L)", HP: eager, LP: train, Modes: modes},
		{Name: "CUDA-graph ResNet-50 b1, Poisson (H) + BERT-base b16 (L)", HP: poisson, LP: bert, Modes: modes},
	}
}

// workloads measures each workload in its modes beside exclusive, with the
// simulator's prediction on the same device.
func (r *runner) workloads(ctx context.Context) error {
	for i, w := range r.p.workloads {
		r.logf(" %d/%d %s, HP %s", i+1, len(r.p.workloads), w.Name, arrivals(w.HP.spec()))
		sc := Scenario{Section: SecWorkloads, Name: w.Name, HP: w.HP.spec(), LP: w.LP.spec()}
		err := r.measurePair(ctx, &sc, w.HP, w.LP, pairCfg{eo: harness.Options{Timeline: true}, reps: 1,
			tag: fmt.Sprintf("workload %d", i+1), modes: w.Modes, sim: true})
		r.addColoc(sc, err)
	}
	return nil
}
