package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fikit/fikit/daemon"
	"github.com/fikit/fikit/profiler"
)

// The status table shows each task's weight and GPU time, and the GPU time
// by tenant and task key.
func TestPrintStatusAccounts(t *testing.T) {
	st := &daemon.Status{Listen: "127.0.0.1:7070",
		Tasks: []daemon.TaskStatus{{ID: 3, Key: "svc", Priority: 5, Role: "waiter", Phase: "sharing", Tenant: "uid:1000",
			Weight: 2, Throttled: true, GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000, GrantedNs: 2_000}}},
		Tenants: []daemon.TenantStatus{{Tenant: "uid:1000", GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000},
			TaskKeys: []daemon.TaskKeyStatus{{TaskKey: "svc", GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000}}}}}}
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"WEIGHT", "waiter (throttled)", "1.5s", "2µs", "GPU time by tenant", "uid:1000", "(all 1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// The table explains: a profiling task's PHASE says how far it is and a
// line below says why its runs were left out; RUNS are the runs done (not
// only the clean profiling ones), with their rate, median and GPU share
// over the window; a closed loop's ARRIVALS read back-to-back.
func TestPrintStatusExplains(t *testing.T) {
	lp := daemon.TaskStatus{ID: 2, Key: "lp", Priority: 5, Role: "waiter", Phase: "profiling", Runs: 37, Arrivals: "poisson",
		ArrivalEveryNs: 909_730_000, RunsDone: 52, RunsDiscarded: 15}
	lp.RunsDiscardedBy[profiler.DiscardOverlap] = 12
	lp.RunsDiscardedBy[profiler.DiscardStalled] = 3
	lp.WindowStats = daemon.WindowStats{WindowNs: 10e9, WindowRuns: 40, P50RunNs: 250e6, InRunFraction: 0.97, GPUShare: 0.61, BackToBack: true}
	hp := daemon.TaskStatus{ID: 1, Key: "hp", Role: "holder", Phase: "sharing", Arrivals: "periodic", ArrivalEveryNs: 5e6, RunsDone: 1234,
		JCTNs: 4_400_000, WindowStats: daemon.WindowStats{WindowNs: 10e9, WindowRuns: 2000, P50RunNs: 2_860_000, InRunFraction: 0.57, GPUShare: 0.35}}
	st := &daemon.Status{Listen: "127.0.0.1:7070", Tasks: []daemon.TaskStatus{hp, lp}}
	st.Scheduler.ProfileRuns = 100
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	row := func(key string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == key {
				return f
			}
		}
		t.Fatalf("no row for %s:\n%s", key, out)
		return nil
	}
	for _, want := range []string{"RUNS  RUNS/S  P50 RUN  GPU SHARE  ARRIVALS",
		"task 2 profiling: 37/100 runs kept, 15 discarded: overlap 12, hook_stalled 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "JCT") || strings.Contains(out, "poisson") {
		t.Errorf("a moving-average JCT column, or a back-to-back task's arrivals as poisson:\n%s", out)
	}
	if f := strings.Join(row("hp"), " "); !strings.Contains(f, "sharing 1234 200.0 2.86ms 35% periodic /5ms") {
		t.Errorf("hp row: %s", f)
	}
	if f := strings.Join(row("lp"), " "); !strings.Contains(f, "profiling 37/100 52 4.0 250ms 61% back-to-back") {
		t.Errorf("lp row: %s", f)
	}
}
