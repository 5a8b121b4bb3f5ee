package devmodel

import "testing"

// TestKernelMakesContextResident is what the pre-switch's warm-up relies on
// (docs/scheduler.md "The pre-switch"; a GPU has yet to confirm it:
// tests/gpu/preswitch.sh): an idle device keeps the last context loaded
// until another submits, so one tiny kernel of context A, launched while
// the device idles after B's work, pays the switch there, and A's request
// after it starts with no switch; without it the request pays the switch.
func TestKernelMakesContextResident(t *testing.T) {
	cfg, err := Preset("h200")
	if err != nil {
		t.Fatal(err)
	}
	lat, sw := int64(cfg.LaunchLatency), int64(cfg.Switch)
	for _, warm := range []bool{false, true} {
		d := newDev(t, cfg)
		a, b := openCtx(t, d), openCtx(t, d)
		ops := []timedOp{{0, b, kernel(0, 2000*us, 1)}} // B's work, done at 2 ms
		if warm {
			ops = append(ops, timedOp{7000 * us, a, kernel(2, 1*us, 2)}) // A's warm-up on its own stream
		}
		ops = append(ops, timedOp{8000 * us, a, kernel(0, 900*us, 3)}) // A's request, 8 ms in
		var req Segment
		for _, s := range run(t, d, ops) {
			if s.Tag == 3 {
				req = s
			}
		}
		want := 8000*us + lat
		if !warm {
			want += sw
		}
		if req.Start != want {
			t.Errorf("warm-up %v: A's request starts at %d ns, want %d (switch %d)", warm, req.Start, want, sw)
		}
	}
}
