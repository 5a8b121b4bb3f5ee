package tests

// End to end, the pre-switch (docs/scheduler.md "The pre-switch") on simgpu's
// h200 device (a 140 µs switch): the periodic CUDA-graph HP of the H200's
// pair (a request every 8 ms) beside the BERT-base batch 16 LP, under
// `fikit serve --variant fikit+pre-switch` (the pre-switch is off by
// default: an ablation, no user flag). The daemon asks the HP's hook for warm-ups and
// most of them hit; on the device, the HP's median request is no longer
// blocked by the switch back (simgpu's ground truth: its blocked time, the
// warm-up's own left out). The gain is by construction on simgpu, whose
// device keeps an idle context resident until another submits: what is
// tested is that the daemon, the wire and the hook make the warm-up happen
// in time, not that a GPU rewards it (tests/gpu/preswitch.sh).

import (
	"slices"
	"testing"
	"time"

	variants "github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/internal/stats"
)

func TestPreSwitchEndToEnd(t *testing.T) {
	const (
		hpRuns     = 120
		hpInterval = 8 * time.Millisecond
		switchNs   = 140_000
		guardNs    = 1_000_000 // the pre-switch guard's default (scheduler.DefaultConfig)
	)
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	// The margin is this host's: with two spinning replayers and the
	// daemon on two cores, the warm-up's trip from the daemon's stop to
	// the device takes longer than the default margin (docs/scheduler.md
	// "The pre-switch" has it), and a late warm-up leaves part of the
	// switch in the request.
	d := startServe(t, t.TempDir(), "", "--profile-runs", "20", "--variant", variants.PreSwitchOn+",pre-switch-margin=500us")
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_SIMGPU_DEVICE=h200")
	hp := replaySpec{trace: "scenario/graph_resnet50_b1", graph: true, cpuNs: -1, prio: 0, key: "preswitch-hp", sched: d.addr}
	lp := replaySpec{trace: "scenario/bert_base_b16", cpuNs: -1, prio: 5, key: "preswitch-lp", sched: d.addr}
	hp.warmup = 3
	var st preSwitchStatusJSON
	hr := periodicPair(t, d, env, hp, lp, hpRuns, hpInterval, func() { st = preSwitchStatus(t, d) })
	runs := parseRuns(t, hr.Stdout)
	s := st.Stats
	seen := min(hpRuns*2/3, len(runs)) // the runs before the status was read
	// A pre-switch needs steady arrivals: the last four intervals between
	// run starts within 0.35 of the least (scheduler/preswitch.go). How
	// many requests met that is this host's doing (a busy host wakes the
	// service late), so it is counted here from the runs' own starts, as
	// the replayer saw them, and the warm-ups are judged against it.
	steady := 0
	for i := 5; i < seen; i++ {
		lo, hi := int64(1<<62), int64(0)
		for j := i - 4; j < i; j++ {
			iv := runs[j].StartNs - runs[j-1].StartNs
			lo, hi = min(lo, iv), max(hi, iv)
		}
		if float64(hi-lo) <= 0.35*float64(lo) {
			steady++
		}
	}
	t.Logf("pre-switch: %d warm-ups, %d hits, %d early, %d misses, %d tasks off, over %d of %d HP runs (%d after steady arrivals)",
		s.PreSwitches, s.Hits, s.Early, s.Misses, s.Off, seen, hpRuns, steady)
	if steady < 10 {
		t.Fatalf("only %d of %d HP runs followed steady arrivals: this host kept the service off its clock, nothing to judge", steady, seen)
	}
	// A request the host woke more than the guard late (the replayer's
	// wait_ns: how long after its tick the run started) comes after the
	// low priorities went on: a miss the daemon could not avoid.
	late := 0
	for _, r := range runs[:seen] {
		if r.WaitNs != nil && *r.WaitNs > guardNs {
			late++
		}
	}
	t.Logf("%d of %d HP runs started over %s after their tick", late, seen, us(guardNs))
	// Most requests after steady arrivals are warmed; most warm-ups hit,
	// but for those the host made late. The daemon turns a task's
	// pre-switches off when fewer than 8 of 16 hit (preSwitchWindow,
	// preSwitchMinHits in scheduler/preswitch.go): right where the host
	// made more than 8 requests late (a late request is a miss), a fault
	// of the pre-switch where it did not.
	const offMisses = 16 - 8
	if s.PreSwitches < steady/3 || s.Hits < (s.PreSwitches-late)/2 || s.Off != 0 && late <= offMisses {
		t.Errorf("pre-switch: %d warm-ups, %d hits (%d early, %d misses, %d off) in %d periodic HP runs, %d after steady arrivals, %d late; want ≥ %d warm-ups, half of those not late hits, none turned off unless over %d runs were late",
			s.PreSwitches, s.Hits, s.Early, s.Misses, s.Off, seen, steady, late, steady/3, offMisses)
	}
	// On the device (simgpu's blocked time, ground truth): a hit run pays
	// no switch. Runs without a warm-up pay it every time (the low
	// priority ran last), so at least half as many runs as the daemon
	// counted hits must have been blocked less than half a switch; a
	// warm-up that did not reach the device leaves none.
	var blocked []int64
	for _, r := range runs[min(10, len(runs)):] {
		if r.BlockedNs == nil {
			t.Fatalf("run %d has no blocked_ns: the replayer did not read simgpu's totals", r.Run)
		}
		blocked = append(blocked, *r.BlockedNs)
	}
	if len(blocked) == 0 {
		t.Fatal("no HP runs")
	}
	unblocked := 0
	for _, b := range blocked {
		if b <= switchNs/2 {
			unblocked++
		}
	}
	slices.Sort(blocked)
	p50, p90 := stats.QuantileSorted(blocked, 0.5), stats.QuantileSorted(blocked, 0.9)
	t.Logf("HP blocked per run: p50 %s, p90 %s, max %s (switch %s); %d of %d runs blocked ≤ half a switch",
		us(p50), us(p90), us(blocked[len(blocked)-1]), us(switchNs), unblocked, len(blocked))
	// The hits were counted over the first seen runs; the unblocked runs
	// over all but the first ten: scaled to the same count.
	if want := s.Hits * len(blocked) / seen / 2; unblocked < want || unblocked == 0 {
		t.Errorf("%d of %d HP runs were blocked ≤ %s, want ≥ %d (half the %d hits over as many runs): the warm-ups did not reach the device",
			unblocked, len(blocked), us(switchNs/2), want, s.Hits)
	}
}

// preSwitchStatus is what TestPreSwitchEndToEnd reads of the status.
type preSwitchStatusJSON struct {
	Stats struct {
		PreSwitches int `json:"pre_switches"`
		Hits        int `json:"pre_switch_hits"`
		Early       int `json:"pre_switch_early"`
		Misses      int `json:"pre_switch_misses"`
		Off         int `json:"pre_switch_off"`
	} `json:"stats"`
}

func preSwitchStatus(t testing.TB, d *daemonProc) preSwitchStatusJSON {
	t.Helper()
	var st preSwitchStatusJSON
	d.statusInto(t, &st)
	return st
}
