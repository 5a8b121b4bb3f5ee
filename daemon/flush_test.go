package daemon

import (
	"sync"
	"testing"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// gateStore holds every Put until the test lets it through.
type gateStore struct {
	store.Store
	gate chan struct{}
	mu   sync.Mutex
	runs []uint32
}

func (g *gateStore) Put(p *profiler.Profile) error {
	<-g.gate
	g.mu.Lock()
	g.runs = append(g.runs, p.Runs)
	g.mu.Unlock()
	return g.Store.Put(p)
}

// profilingRun sends one measured run of two kernels as a profiling hook
// does (launches, records, run end).
func profilingRun(h *fakeHook, task, run, seq uint32, unmeasured udp.Unmeasured) {
	h.send(&udp.LaunchBatch{TaskID: task, Seq: seq, Launches: []udp.Launch{{KernelID: 1}, {KernelID: 2, OffsetNS: 30_000}}})
	if unmeasured == 0 {
		h.send(&udp.Measurements{TaskID: task, Run: run, Records: []udp.Record{
			{KernelID: 1, DurationNS: 20_000, GapNS: 10_000},
			{KernelID: 2, DurationNS: 20_000, Flags: udp.FlagGapSpansRunEnd},
		}})
	}
	h.send(&udp.RunEnd{TaskID: task, Run: run, Kernels: 2, RunNS: 60_000, Reason: udp.ReasonStreamSync, LastSeq: seq + 1,
		Unmeasured: unmeasured})
}

// Flushed comes only once the runs sent before Flush are in the store: a
// daemon killed after it answered loses none of them.
func TestFlushAnsweredWhenDurable(t *testing.T) {
	st := &gateStore{Store: store.NewMemory(), gate: make(chan struct{})}
	cfg := scheduler.DefaultConfig()
	cfg.ProfileRuns = 10
	cfg.DeadAfter, cfg.HeartbeatInterval = int64(10*time.Second), int64(time.Second)
	s := startServer(t, st, cfg, "")
	h := newFakeHook(t, s)
	ack := h.register("svc", 0)
	if ack.Phase != udp.PhaseProfiling {
		t.Fatalf("ack %+v", ack)
	}
	for run := uint32(1); run <= 3; run++ {
		profilingRun(h, ack.TaskID, run, 2*run-1, 0)
	}
	h.send(&udp.Flush{TaskID: ack.TaskID, Seq: 7})
	if m := h.recv(300 * time.Millisecond); m != nil {
		t.Fatalf("answered before the store wrote anything: %#v", m)
	}
	close(st.gate)
	var got *udp.Flushed
	for until := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(until); {
		if f, ok := h.recv(time.Until(until)).(*udp.Flushed); ok {
			got = f
		}
	}
	if got == nil || got.Seq != 7 || got.TaskID != ack.TaskID {
		t.Fatalf("Flushed = %+v", got)
	}
	p, err := st.Get("test-gpu", "svc")
	if err != nil || p.Runs != 3 {
		t.Fatalf("stored when Flushed came: %v, %+v", err, p)
	}
	// A run the hook could not measure is counted by its reason.
	profilingRun(h, ack.TaskID, 4, 7, udp.UnmeasuredUncertain)
	h.send(&udp.Flush{TaskID: ack.TaskID, Seq: 8})
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); {
		if f, ok := h.recv(time.Until(until)).(*udp.Flushed); ok && f.Seq == 8 {
			break
		}
	}
	if st := s.Status().Stats; st.RunsDiscardedBy[profiler.DiscardUncertain] != 1 || st.RunsCommitted != 3 {
		t.Fatalf("stats %+v", st)
	}
	// A Flush for a task the daemon does not know: register again.
	h.send(&udp.Flush{TaskID: 999, Seq: 9})
	for until := time.Now().Add(5 * time.Second); ; {
		m := h.recv(time.Until(until))
		if m == nil {
			t.Fatal("no answer to a Flush of an unknown task")
		}
		if e, ok := m.(*udp.Error); ok && e.Code == udp.CodeUnknownTask {
			break
		}
		if _, ok := m.(*udp.Flushed); ok {
			t.Fatal("a Flush of an unknown task answered Flushed")
		}
	}
}

// A sharing task's hook is told to sample runs (drift detection).
func TestAckCarriesSample(t *testing.T) {
	st := store.NewMemory()
	if err := st.Put(sharingProfile(t, "hp")); err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.DefaultConfig()
	cfg.DriftSample = 8
	s := startServer(t, st, cfg, "")
	if a := newFakeHook(t, s).register("hp", 0); a.Sample != 8 || a.Phase != udp.PhaseSharing {
		t.Fatalf("ack %+v", a)
	}
	if a := newFakeHook(t, s).register("new", 0); a.Sample != 0 {
		t.Fatalf("a profiling task's ack %+v", a)
	}
}
