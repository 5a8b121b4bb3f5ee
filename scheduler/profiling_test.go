package scheduler

import (
	"testing"

	"github.com/fikit/fikit/profiler"
)

// TestProfilingCompletes drives a task through T clean runs: it must leave
// the profiling phase with a persisted profile whose means are the measured
// ones, and start sharing (others may then fill its gaps).
func TestProfilingCompletes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ProfileRuns = 10
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	step := func(ev Event) {
		t.Helper()
		if err := n.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	step(TaskRegistered{Now: 0, Task: 1, Key: "hp", PID: 1, Priority: 0, GPU: "G", Model: "m"})
	if r := n.Ready(); len(r.Acks) != 1 || r.Acks[0].Phase != PhaseProfiling || r.Acks[0].Role != RoleHolder {
		t.Fatalf("ack = %+v", r.Acks)
	}
	now := int64(1000)
	var updates []ProfileUpdate
	var states []StateChange
	for run := uint32(1); run <= 10; run++ {
		step(LaunchNotified{Now: now, Task: 1, Seq: 2*run - 1, Kernel: 7})
		step(LaunchNotified{Now: now + 30_000, Task: 1, Seq: 2 * run, Kernel: 8})
		step(KernelInfoReceived{Now: now + 60_000, Task: 1, Info: profiler.KernelInfo{ID: 7, Name: "k7", Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}})
		step(MeasurementsReceived{Now: now + 60_000, Task: 1, Run: run, Records: []profiler.Record{
			{KernelID: 7, DurationNs: 20_000, GapNs: 600_000},
			{KernelID: 8, DurationNs: 10_000, Flags: profiler.FlagGapSpansRunEnd},
		}})
		step(RunEnded{Now: now + 70_000, Task: 1, Run: run, Kernels: 2, RunNs: 10_000_000})
		r := n.Ready()
		updates = append(updates, r.Profiles...)
		states = append(states, r.States...)
		now += 1_000_000
	}
	// Every committed run is kept (a restarted daemon continues from it);
	// the last one completes the profile.
	if len(updates) != 10 || !updates[9].Complete || updates[9].Runs != 10 || updates[8].Complete || updates[8].Runs != 9 {
		t.Fatalf("profile updates = %+v", updates)
	}
	p := updates[9].Profile
	k, ok := p.Kernel(7)
	if !ok || k.Duration.Mean != 20_000 || k.Gap.Mean != 600_000 || k.Name != "k7" {
		t.Fatalf("kernel 7 = %+v", k)
	}
	if k8, _ := p.Kernel(8); k8 == nil || k8.Gap.Count != 0 {
		t.Fatalf("kernel 8's run-end gap must not count: %+v", k8)
	}
	if len(states) != 1 || states[0].Phase != PhaseSharing {
		t.Fatalf("states = %+v", states)
	}
	if s := n.Stats(); s.RunsCommitted != 10 || s.ProfilesCompleted != 1 {
		t.Fatalf("stats = %+v", s)
	}
	// Sharing now: a waiter's kernel fits the 600us gap after kernel 7, with
	// both switches (the prior, 140us) around it.
	step(TaskRegistered{Now: now, Task: 2, Key: "lp", PID: 2, Priority: 5, GPU: "G", Model: "m"})
	step(LaunchRequested{Now: now + 1000, Task: 2, Seq: 1, Kernel: 99})
	step(LaunchNotified{Now: now + 2000, Task: 1, Seq: 21, Kernel: 7})
	if r := n.Ready(); len(r.Grants) != 1 || r.Grants[0].Task != 2 {
		t.Fatalf("after kernel 7 the waiter should be granted: %s", r.String())
	}
}

// TestOverlapToleranceResolvesAutoSwitch: a sharing task's sampled run may
// be covered by two switches of foreign work (and the hooks' in-flight
// budget) and still count as clean. Under the default switch cost, auto
// (-1), the tolerance must use the switch the policy assumes for the GPU
// (the prior until measured), not the raw setting: a run covered by
// foreign work a little under two assumed switches plus the budget was
// discarded as overlapped.
func TestOverlapToleranceResolvesAutoSwitch(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.SwitchCost != SwitchCostAuto || !cfg.HookBound {
		t.Fatalf("the default config changed: switch %d, hook bound %v", cfg.SwitchCost, cfg.HookBound)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step(TaskRegistered{Now: 0, Task: 1, Key: "hp", PID: 1, Priority: 0, GPU: "G", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	tk := n.tasks[1]
	tk.phase = PhaseSharing // a sampled run of a sharing task
	tk.meas = &measured{}
	sw := n.switchCost(tk.gpu)
	if sw != cfg.SwitchCostPrior {
		t.Fatalf("switch cost of an unmeasured GPU %d, want the prior %d", sw, cfg.SwitchCostPrior)
	}
	const runStart, runNs = int64(1_000_000), int64(1_000_000)
	covered := 2*sw + cfg.InflightBudget - 10_000 // within the tolerance the comment promises
	tk.meas.addForeign(span{from: runStart - 50_000, to: runStart + covered, owner: 2, settled: true})
	r := endedRun{run: 1, kernels: 3, runNs: runNs, start: runStart, end: runStart + runNs, placed: true}
	why, ok := n.verdict(tk, &r)
	if !ok || why != 0 {
		t.Fatalf("a sampled run covered %d ns by foreign work (tolerance %d): verdict %v (decided %v), want clean",
			covered, n.overlapTolerance(tk, &r), why, ok)
	}
	// More than the tolerance is still overlapped.
	tk.meas.addForeign(span{from: runStart + runNs/2, to: runStart + runNs/2 + runNs/50 + 20_000, owner: 3, settled: true})
	if why, ok := n.verdict(tk, &r); !ok || why != profiler.DiscardOverlap {
		t.Fatalf("a run covered past the tolerance: verdict %v (decided %v), want overlap", why, ok)
	}
}
