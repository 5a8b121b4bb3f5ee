package daemon

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// The status says per task what it did: the runs its hook reported
// (sharing or profiling, where profiled_runs counts only clean profiling
// runs), over the window their count and median, a closed loop as back to
// back, and a profiling task's discarded runs by reason.
func TestStatusTaskActivity(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	st := store.NewMemory()
	if err := st.Put(sharingProfile(t, "hp")); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, st, scheduler.DefaultConfig(), sock)
	hp, lp := newFakeHook(t, s), newFakeHook(t, s)
	hpID := hp.register("hp", 0).TaskID
	lpID := lp.register("lp", 5).TaskID
	// Each reports runs back to back: a RunEnd right after the last, each
	// run 40 ms long. The LP's are profiling runs the hook measured and
	// sent without records (a stalled launch), which profiling leaves out.
	const runs = 12
	runNs := []uint64{40e6, 41e6, 39e6, 40e6, 42e6, 38e6, 40e6, 40e6, 43e6, 37e6, 40e6, 40e6}
	for i := 0; i < runs; i++ {
		hp.send(&udp.RunEnd{TaskID: hpID, Run: uint32(i), Kernels: 1, RunNS: runNs[i], Reason: udp.ReasonStreamSync})
		lp.send(&udp.RunEnd{TaskID: lpID, Run: uint32(i), Kernels: 1, RunNS: runNs[i], Reason: udp.ReasonStreamSync, Unmeasured: udp.UnmeasuredStalled})
	}
	var doc Status
	ok := waitUntil(5*time.Second, func() bool {
		if err := json.Unmarshal(getStatus(t, sock), &doc); err != nil || len(doc.Tasks) != 2 {
			return false
		}
		return doc.Tasks[0].RunsDone == runs && doc.Tasks[1].RunsDone == runs
	})
	if !ok {
		t.Fatalf("runs_done not %d for both tasks: %+v", runs, doc.Tasks)
	}
	for _, ts := range doc.Tasks {
		if ts.WindowRuns != runs || ts.P50RunNs != 40e6 || !ts.BackToBack || ts.WindowNs <= 0 {
			t.Errorf("task %s: window %d ns, %d runs, p50 %d ns, back-to-back %v; want %d runs, p50 40 ms, back to back",
				ts.Key, ts.WindowNs, ts.WindowRuns, ts.P50RunNs, ts.BackToBack, runs)
		}
	}
	lpSt := doc.Tasks[1]
	if lpSt.Key != "lp" || lpSt.Phase != "profiling" || lpSt.Runs != 0 {
		t.Fatalf("lp: phase %s, %d clean runs; want profiling, 0", lpSt.Phase, lpSt.Runs)
	}
	var sum uint64
	for _, n := range lpSt.RunsDiscardedBy {
		sum += n
	}
	// The only profiling task: its discards are all the daemon's.
	if lpSt.RunsDiscarded == 0 || sum != lpSt.RunsDiscarded || lpSt.RunsDiscardedBy != doc.Stats.RunsDiscardedBy {
		t.Errorf("lp discarded %d, by reason %v (sum %d); the daemon's %v", lpSt.RunsDiscarded, lpSt.RunsDiscardedBy, sum,
			doc.Stats.RunsDiscardedBy)
	}
}
