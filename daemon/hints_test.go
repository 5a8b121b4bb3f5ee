package daemon

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// TestKernelTimesCalibrationHints: a hook on the daemon's host gets its
// task's kernel durations and bound after its RegisterAck (KernelTimes);
// the board carries each GPU's hints (the switch assumed, which waiter may
// resume);
// when a holder's gap opens with a waiter wanting the GPU the daemon asks
// the waiter's hook to calibrate the switch, and its answer becomes the
// GPU's estimate — in status, and on the board.
func TestKernelTimesCalibrationHints(t *testing.T) {
	st, cfg := boardTestSetup(t)
	path := filepath.Join(t.TempDir(), "board")
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg, Board: path})
	hp, lp := newFakeHook(t, s), newFakeHook(t, s)
	ha := hp.register("hp", 0)
	kt := recvType[*udp.KernelTimes](t, hp, 5*time.Second)
	slices.SortFunc(kt.Kernels, func(a, b udp.KernelTime) int { return int(a.KernelID) - int(b.KernelID) })
	if kt.TaskID != ha.TaskID || kt.BoundNS != uint32(cfg.InflightBudget) ||
		!slices.Equal(kt.Kernels, []udp.KernelTime{{KernelID: 7, DurationNS: 50_000}, {KernelID: 99, DurationNS: 20_000}}) {
		t.Fatalf("kernel times %+v, want task %d, bound %d, kernels 7: 50us and 99: 20us", kt, ha.TaskID, cfg.InflightBudget)
	}
	la := lp.register("lp", 5)
	recvType[*udp.KernelTimes](t, lp, 5*time.Second)

	section := func() (next, sw uint64, task, flags uint32) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		o := 64 // GPU section 0
		le := binary.LittleEndian
		return le.Uint64(raw[o+184:]), le.Uint64(raw[o+192:]), le.Uint32(raw[o+200:]), le.Uint32(raw[o+204:])
	}
	// A measurement is due: no waiter may resume until it is made.
	if _, sw, task, flags := section(); sw != uint64(cfg.SwitchCostPrior) || task != la.TaskID || flags&board.FlagResume != 0 {
		t.Fatalf("board: switch %d, resume task %d, flags %d; want the prior %d, %d, resume off", sw, task, flags,
			cfg.SwitchCostPrior, la.TaskID)
	}

	// Kernel 7's 20 ms gap: a window; the waiter is asked to calibrate.
	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 1, KernelID: 99})
	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 2, KernelID: 7})
	c := recvType[*udp.Calibrate](t, lp, 5*time.Second)
	if c.TaskID != la.TaskID || c.ProbeNS == 0 {
		t.Fatalf("calibrate %+v", c)
	}
	lp.send(&udp.Calibration{TaskID: la.TaskID, Seq: c.Seq + 1, HostNS: 900_000, DeviceNS: 10_000}) // not asked for
	lp.send(&udp.Calibration{TaskID: la.TaskID, Seq: c.Seq, HostNS: 165_000, DeviceNS: 10_000})
	const want = 155_000
	if !waitUntil(5*time.Second, func() bool {
		g := s.Status().GPUs
		return len(g) == 1 && g[0].SwitchMeasured && g[0].SwitchCostNs == want
	}) {
		t.Fatalf("status gpus %+v, want the switch measured at %d", s.Status().GPUs, want)
	}
	if st := s.Status().Stats; st.Calibrations != 1 || st.CalibrationsAnswered != 1 {
		t.Errorf("calibrations %d, answered %d; want 1, 1", st.Calibrations, st.CalibrationsAnswered)
	}
	if !waitUntil(5*time.Second, func() bool { _, sw, _, flags := section(); return sw == want && flags&board.FlagResume != 0 }) {
		_, sw, _, flags := section()
		t.Errorf("board switch %d, flags %d; want %d, resume on", sw, flags, want)
	}
}

// The core's hint on the board: the next run's window where predicted.
func TestBoardHint(t *testing.T) {
	for _, c := range []struct {
		in   scheduler.BoardHint
		want board.Hint
	}{
		{scheduler.BoardHint{NextNs: 10, NextLateNs: 30, SwitchNs: 5, Resume: true, ResumeTask: 3},
			board.Hint{NextNs: 10, NextLateNs: 30, SwitchNs: 5, Resume: true, ResumeTask: 3}},
		{scheduler.BoardHint{NextNs: 10}, board.Hint{NextNs: 10, NextLateNs: 10}},
		{scheduler.BoardHint{NextNs: scheduler.NoneExpected, NextLateNs: 7}, board.Hint{NextNs: board.NoneExpected}},
		{scheduler.BoardHint{NextLateNs: 7, SwitchNs: -1}, board.Hint{}},
		{scheduler.BoardHint{NextNs: 10, Slack: true, FillUntilNs: 9, BoundNs: 200},
			board.Hint{NextNs: 10, NextLateNs: 10, Slack: true, FillUntilNs: 9, BoundNs: 200}},
	} {
		if got := boardHint(c.in); got != c.want {
			t.Errorf("boardHint(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
