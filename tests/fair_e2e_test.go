package tests

// Fair shares among equals, end to end (`fikit bench fair`, one simgpu
// device per mode): two continuous priority-5 services, one of short
// kernels and one of long ones, beside a priority-0 service with a request
// every 10 ms. Judged by simgpu's timeline (the GPU time each got) and
// each run's blocked time, with margins wide enough for a loaded 2-core
// host: the measured figures are in docs/scheduler.md.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fairMode is one mode of `fikit bench fair --json`.
type fairMode struct {
	Policy       string  `json:"policy"`
	WeightShort  uint32  `json:"weight_short"`
	WeightLong   uint32  `json:"weight_long"`
	ShortNs      int64   `json:"short_gpu_time_ns"`
	LongNs       int64   `json:"long_gpu_time_ns"`
	Ratio        float64 `json:"weighted_ratio"`
	ShortAccNs   int64   `json:"short_accounted_ns"`
	LongAccNs    int64   `json:"long_accounted_ns"`
	ShortLifeNs  int64   `json:"short_life_gpu_time_ns"`
	LongLifeNs   int64   `json:"long_life_gpu_time_ns"`
	Interference struct {
		P50Pct float64 `json:"p50_pct"`
		P99Pct float64 `json:"p99_pct"`
	} `json:"hp_interference"`
	Holders    bool              `json:"holders"`
	Throttles  uint64            `json:"fair_throttles"`
	Tenants    []tenantJSON      `json:"tenants"`
	SpanNs     int64             `json:"span_ns"`
	ShortStall int64             `json:"short_longest_stall_ns"`
	LongStall  int64             `json:"long_longest_stall_ns"`
	Stalls     []json.RawMessage `json:"stalls"`
}

// The daemon's GPU-time accounting against the device's, as a ratio.
const accountedMin, accountedMax = 0.88, 1.12

func TestFairSharesAmongEquals(t *testing.T) {
	fikit := requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")[0]
	// FIKIT_TEST_FAIR_POLICY runs the fair modes under another policy: how
	// the fair policy is turned off to show that this test then fails
	// (docs/operations.md "Mechanism-off runs").
	fairPolicy := "fair-prio-fit"
	if p := os.Getenv("FIKIT_TEST_FAIR_POLICY"); p != "" {
		fairPolicy = p
		t.Logf("FIKIT_TEST_FAIR_POLICY: the fair modes run under %s", p)
	}
	// One measurement; a second where the daemon accounted clearly less
	// than the device ran in some mode: it had lost track of the services
	// (a host that starves a hook past --dead-after gets it dropped, and
	// its launches go unscheduled), which says nothing about the policy. A
	// policy that is wrong is wrong both times; accounting over what ran
	// (a launch billed twice) fails at once, below.
	var res struct {
		Modes []fairMode `json:"modes"`
	}
	for attempt := 1; ; attempt++ {
		out := filepath.Join(t.TempDir(), "fair.json")
		r := runCmd(t, 5*time.Minute, nil, fikit, "bench", "fair", "--hp-runs", "150", "--json", out, "--record",
			"--mode", "best-prio-fit", "--mode", fairPolicy, "--mode", fairPolicy+":2:1",
			"--mode", "best-prio-fit:holders", "--mode", fairPolicy+":holders")
		if r.ExitCode != 0 {
			t.Fatalf("fikit bench fair: %s", r)
		}
		t.Logf("%s", r.Stdout)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &res); err != nil || len(res.Modes) != 5 {
			t.Fatalf("results: %v, %d modes", err, len(res.Modes))
		}
		lost := ""
		for _, m := range res.Modes {
			if acc, life := float64(m.ShortAccNs+m.LongAccNs), float64(m.ShortLifeNs+m.LongLifeNs); acc < accountedMin*life {
				lost = m.Policy
			}
		}
		if lost == "" || attempt == 2 {
			break
		}
		t.Logf("%s: the daemon accounted less than the device ran (it lost track of the services): measuring again", lost)
	}
	best, fair, weighted, bestHolders, fairHolders := res.Modes[0], res.Modes[1], res.Modes[2], res.Modes[3], res.Modes[4]
	// Nobody starved: the high-priority service leaves most of every
	// 10 ms idle, and two holders share; a loaded host kept a service off
	// the device for 195 ms of a 1.5 s span at most (docs/operations.md), one
	// stuck in the scheduler for all of it (the bench's --record says what
	// the daemon decided about it meanwhile).
	for _, m := range res.Modes {
		if m.ShortNs <= 0 || m.LongNs <= 0 || max(m.ShortStall, m.LongStall) > m.SpanNs/3 {
			t.Errorf("%s (weights %d:%d, holders %v): short %v, long %v of GPU time; longest without any: short %v, long %v of %v",
				m.Policy, m.WeightShort, m.WeightLong, m.Holders, time.Duration(m.ShortNs), time.Duration(m.LongNs),
				time.Duration(m.ShortStall), time.Duration(m.LongStall), time.Duration(m.SpanNs))
			for _, s := range m.Stalls {
				t.Logf("stall: %s", s)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// The unfairness fixed: BestPrioFit takes the longest kernel that fits.
	if best.LongNs < 2*best.ShortNs {
		t.Logf("best-prio-fit: long %v, short %v: less unfair than measured before", time.Duration(best.LongNs), time.Duration(best.ShortNs))
	}
	// Equal shares (docs: within 10 %; here 35 % for a loaded host, where
	// best-prio-fit's ratio is still above 2).
	if fair.Ratio > 1.35 {
		t.Errorf("fair-prio-fit: short %v, long %v of GPU time (ratio %.2f), want within 35%%",
			time.Duration(fair.ShortNs), time.Duration(fair.LongNs), fair.Ratio)
	}
	// Weights 2:1: the short service clearly ahead. On a busy host the
	// short service (5 µs of host time per 2–60 µs kernel) cannot always
	// launch its share, and the long one fills what it leaves (work
	// conserving), so the ratio is judged loosely; weights ignored give 2.
	if wShare := float64(weighted.ShortNs) / float64(weighted.LongNs); weighted.WeightShort != 2 || weighted.Ratio > 1.6 || wShare < 1.25 {
		t.Errorf("weights 2:1: short %v, long %v of GPU time (%.2f from 2:1, short/long %.2f), want within 60%% and short/long ≥ 1.25",
			time.Duration(weighted.ShortNs), time.Duration(weighted.LongNs), weighted.Ratio, wShare)
	}
	// The GPU time both got together depends on how fast this host
	// launches the short service's kernels: logged, not judged (fikit
	// bench fair's tables, docs/scheduler.md).
	t.Logf("fair-prio-fit: %v of GPU time in all, best-prio-fit %v", time.Duration(fair.ShortNs+fair.LongNs), time.Duration(best.ShortNs+best.LongNs))
	// Equal holders (no better priority active): throttled, not by launch
	// order. A holder runs unthrottled while the other is idle past
	// --fair-idle, which a busy host makes happen (a descheduled launcher
	// of short kernels cannot keep its share, and the policy is work
	// conserving), so the split is not compared with best-prio-fit's: two
	// measurements that a loaded host moves by as much as they differ
	// (docs/operations.md). A policy that does not act
	// fails on its throttles (the daemon's decisions, counted), one whose
	// throttles do nothing on the 50 % bound.
	if fairHolders.Throttles == 0 || fairHolders.Ratio > 1.5 {
		t.Errorf("fair-prio-fit, equal holders: short %v, long %v of GPU time (ratio %.2f; best-prio-fit %.2f), %d throttles; want a ratio within 50%%, by throttles",
			time.Duration(fairHolders.ShortNs), time.Duration(fairHolders.LongNs), fairHolders.Ratio, bestHolders.Ratio, fairHolders.Throttles)
	}
	// The high-priority service no worse off (a loaded host moves p50
	// interference by a few points either way).
	if f, b := fair.Interference.P50Pct, best.Interference.P50Pct; f > 2*b+5 {
		t.Errorf("HP GPU interference p50 %.1f%% under fair-prio-fit, %.1f%% under best-prio-fit", f, b)
	}
	// What the daemon accounted is what the device ran: its predictions
	// from the profiles, billed once per launch, against the GPU time of
	// the kernels launched before the status was read. Billing a launch
	// twice (a drift sample's measurements, a grant crossing the launch's
	// report) put it clearly over.
	for _, m := range res.Modes {
		if m.Holders {
			if len(m.Tenants) != 1 || len(m.Tenants[0].TaskKeys) != 2 {
				t.Errorf("%s, holders: tenants %+v, want one with two task keys", m.Policy, m.Tenants)
			}
		} else if len(m.Tenants) != 1 || m.Tenants[0].UsedNs <= 0 || len(m.Tenants[0].TaskKeys) != 3 {
			t.Errorf("%s: tenants %+v, want one with three task keys", m.Policy, m.Tenants)
		}
		acc, life := float64(m.ShortAccNs+m.LongAccNs), float64(m.ShortLifeNs+m.LongLifeNs)
		if acc < accountedMin*life || acc > accountedMax*life {
			t.Errorf("%s: accounted %v of GPU time, the timeline says %v", m.Policy, time.Duration(acc), time.Duration(life))
		}
	}
}
