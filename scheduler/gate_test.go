package scheduler

import (
	"testing"
	"time"
)

// withoutGate runs f with the gate named name left out of the list.
func withoutGate(t *testing.T, name string, f func()) {
	t.Helper()
	saved := gates
	defer func() { gates = saved }()
	var kept []gate
	for _, g := range saved {
		if g.name != name {
			kept = append(kept, g)
		}
	}
	if len(kept) != len(saved)-1 {
		t.Fatalf("no gate %q", name)
	}
	gates = kept
	f()
}

// The gate list is where a waiting kernel's fate is decided: the
// pre-switch is its row (gate_preswitch.go) and nothing else, so without
// the row no warm-up is asked, while with it a steady holder gets its
// warm-ups and its requests find the low priority off the device (a hit
// each).
func TestGateListIsTheOnePlace(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range gates {
		if g.name == "" || seen[g.name] {
			t.Errorf("gate %q: unnamed or listed twice", g.name)
		}
		seen[g.name] = true
		if g.step == nil && g.shut == nil && g.admits == nil && g.stop == nil {
			t.Errorf("gate %s judges nothing", g.name)
		}
	}
	drive := func() Stats {
		r := newPreSwitchRig(t)
		for i := 1; i <= 40; i++ {
			r.run(int64(i) * int64(10*time.Millisecond))
		}
		return r.n.Stats()
	}
	with := drive()
	var without Stats
	withoutGate(t, "pre-switch", func() { without = drive() })
	if with.PreSwitches < 25 || with.PreSwitchHits < 25 {
		t.Errorf("with the pre-switch gate: %d warm-ups, %d hits", with.PreSwitches, with.PreSwitchHits)
	}
	if without.PreSwitches != 0 || without.PreSwitchHits != 0 {
		t.Errorf("without the pre-switch gate: %d warm-ups, %d hits", without.PreSwitches, without.PreSwitchHits)
	}
}

// The switch calibration is its row too: with it the probed waiter is
// asked for probes and held meanwhile; without the row no probe is asked
// and the waiter's request goes into the window at once.
func TestCalibrationGateHoldsTheProbedWaiter(t *testing.T) {
	run := func() (grants uint64, asked uint64) {
		cfg := DefaultConfig()
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hp := buildProfile(t, map[string]string{"name": "H", "jct": "4ms", "p90": "50us", "typical_gap": "10us"}, "1 mean=50us gap=2ms")
		lp := buildProfile(t, map[string]string{"name": "L", "jct": "5ms", "p90": "20us", "typical_gap": "5us"}, "61 mean=20us p90=20us gap=5us")
		steps := []Event{
			TaskRegistered{Now: 0, Task: 1, Key: "H", PID: 1, Priority: 0, GPU: "G0", Model: "sim", Profile: hp},
			TaskRegistered{Now: 1000, Task: 2, Key: "L", PID: 2, Priority: 5, GPU: "G0", Model: "sim", Profile: lp},
			LaunchRequested{Now: 5000, Task: 2, Seq: 1, Kernel: 61},
			LaunchNotified{Now: 10000, Task: 1, Seq: 1, Kernel: 1},
		}
		for _, ev := range steps {
			if err := n.Step(ev); err != nil {
				t.Fatal(err)
			}
			n.Ready()
		}
		for at := int64(20000); at < 1_000_000; at += 10000 {
			if err := n.Step(Tick{Now: at}); err != nil {
				t.Fatal(err)
			}
			n.Ready()
		}
		s := n.Stats()
		return s.Grants, s.Calibrations
	}
	grants, asked := run()
	if asked == 0 || grants != 0 {
		t.Fatalf("with the gate: %d calibrations asked, %d grants (want the probed waiter held)", asked, grants)
	}
	withoutGate(t, "calibration", func() { grants, asked = run() })
	if grants == 0 {
		t.Errorf("without the calibration gate: %d calibrations, no grant: the gate is not where the hold is", asked)
	}
}
