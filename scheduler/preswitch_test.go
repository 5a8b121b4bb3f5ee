package scheduler

import (
	"testing"
	"time"
)

// preSwitchRig drives a core the way the daemon does — ticks at the
// deadlines Ready asks for — for a holder (task 1, priority 0, 600 µs runs)
// starting its runs at the times given, beside a low priority (task 2) that
// asks to launch after each of its runs.
type preSwitchRig struct {
	t        *testing.T
	n        *Node
	now      int64
	seq      uint32
	lseq     uint32
	deadline int64
	warmups  int
}

func newPreSwitchRig(t *testing.T, settings ...string) *preSwitchRig {
	t.Helper()
	cfg := DefaultConfig()
	for _, kv := range append([]string{"switch-cost=140us", "pre-switch=true"}, settings...) {
		k, v, _ := cutKV(kv)
		if err := setKey(&cfg, k, v); err != nil {
			t.Fatal(err)
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &preSwitchRig{t: t, n: n}
	hp := buildProfile(t, map[string]string{"name": "H", "jct": "600us", "p90": "500us", "typical_gap": "10us"}, "1 mean=500us")
	lp := buildProfile(t, map[string]string{"name": "L", "jct": "5ms", "p90": "100us", "typical_gap": "5us"}, "61 mean=100us p90=100us gap=5us")
	r.step(TaskRegistered{Now: 0, Task: 1, Key: "H", PID: 1, Priority: 0, GPU: "G0", Model: "sim", Profile: hp})
	r.step(TaskRegistered{Now: 1000, Task: 2, Key: "L", PID: 2, Priority: 5, GPU: "G0", Model: "sim", Profile: lp})
	return r
}

func cutKV(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func (r *preSwitchRig) step(ev Event) {
	r.t.Helper()
	if err := r.n.Step(ev); err != nil {
		r.t.Fatal(err)
	}
	rd := r.n.Ready()
	r.warmups += len(rd.Warmups)
	r.deadline = rd.Deadline
}

// until ticks at every deadline before at, then sets the clock to at.
func (r *preSwitchRig) until(at int64) {
	for r.deadline > r.now && r.deadline < at {
		r.now = r.deadline
		r.step(Tick{Now: r.now})
	}
	r.now = at
}

// run is one holder run starting at start.
func (r *preSwitchRig) run(start int64) {
	r.until(start)
	r.seq++
	r.step(LaunchNotified{Now: start, Task: 1, Seq: r.seq, Kernel: 1})
	r.until(start + int64(700*time.Microsecond))
	r.step(RunEnded{Now: r.now, Task: 1, Run: r.seq, Kernels: 1, RunNs: int64(600 * time.Microsecond), LastSeq: r.seq})
	r.lseq++ // the low priority wants the GPU again
	r.step(LaunchRequested{Now: r.now, Task: 2, Seq: r.lseq, Kernel: 61})
}

// TestPreSwitchPeriodicHits: a holder on a steady 10 ms clock beside a
// low priority that always wants the GPU gets a warm-up before each
// request once its arrivals are known periodic, and each is a hit.
func TestPreSwitchPeriodicHits(t *testing.T) {
	r := newPreSwitchRig(t)
	for i := 1; i <= 40; i++ {
		r.run(int64(i) * int64(10*time.Millisecond))
	}
	s := r.n.Stats()
	if s.PreSwitches < 25 || s.PreSwitchHits < 25 || s.PreSwitchMisses != 0 || s.PreSwitchOff != 0 {
		t.Fatalf("periodic holder: %d warm-ups, %d hits, %d early, %d misses, %d off", s.PreSwitches, s.PreSwitchHits,
			s.PreSwitchEarly, s.PreSwitchMisses, s.PreSwitchOff)
	}
	if r.warmups != int(s.PreSwitches) {
		t.Fatalf("%d warm-ups in Ready, %d counted", r.warmups, s.PreSwitches)
	}
}

// TestPreSwitchAutoOff: a holder whose requests come later than predicted
// two times in three (intervals 9, 11, 11 ms: steady enough for one)
// misses most pre-switches; after a window of them it gets none.
func TestPreSwitchAutoOff(t *testing.T) {
	r := newPreSwitchRig(t)
	at := int64(0)
	for i := 0; i < 120; i++ {
		at += []int64{9, 11, 11}[i%3] * int64(time.Millisecond)
		r.run(at)
	}
	s := r.n.Stats()
	if s.PreSwitchOff != 1 || !r.n.PreSwitches()[0].Off {
		t.Fatalf("low hit rate: %d hits, %d early, %d misses, off %d", s.PreSwitchHits, s.PreSwitchEarly, s.PreSwitchMisses, s.PreSwitchOff)
	}
	before := s.PreSwitches
	for i := 0; i < 30; i++ {
		at += 10 * int64(time.Millisecond)
		r.run(at)
	}
	if got := r.n.Stats().PreSwitches; got != before {
		t.Fatalf("off, yet %d more warm-ups", got-before)
	}
}

// TestPreSwitchSafeguards: no warm-up with the setting off (the default),
// for Poisson-like arrivals, on a MIG instance, or under MPS.
func TestPreSwitchSafeguards(t *testing.T) {
	drive := func(r *preSwitchRig, gaps func(i int) int64) uint64 {
		at := int64(0)
		for i := 0; i < 40; i++ {
			at += gaps(i)
			r.run(at)
		}
		return r.n.Stats().PreSwitches
	}
	steady := func(int) int64 { return int64(10 * time.Millisecond) }
	if n := drive(newPreSwitchRig(t, "pre-switch=false"), steady); n != 0 {
		t.Errorf("pre-switch off: %d warm-ups", n)
	}
	// Exponential-looking intervals (CV about 1): not periodic.
	irregular := []int64{2, 25, 4, 9, 1, 14, 30, 3, 7, 2, 18, 5}
	if n := drive(newPreSwitchRig(t), func(i int) int64 { return irregular[i%len(irregular)] * int64(time.Millisecond) }); n != 0 {
		t.Errorf("Poisson-like arrivals: %d warm-ups", n)
	}
	mig := newPreSwitchRig(t)
	mig.n.tasks[1].model = "NVIDIA A100-SXM4-40GB MIG 1g.5gb" // a MIG instance's device name
	if n := drive(mig, steady); n != 0 {
		t.Errorf("MIG: %d warm-ups", n)
	}
	mps := newPreSwitchRig(t, "switch-cost=auto")
	mps.n.gpus["G0"].sw.mps = true // a hook found MPS (SwitchCalibrated{MPS: true})
	if n := drive(mps, steady); n != 0 {
		t.Errorf("MPS: %d warm-ups", n)
	}
}
