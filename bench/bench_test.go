package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/bench/harness"
	variants "github.com/fikit/fikit/bench/variant"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSummarizeJCT(t *testing.T) {
	j := Summarize([]int64{4, 1, 3, 2}, 2e9)
	if j.Runs != 4 || j.P50 != 2 || j.P99 != 4 || !near(j.Mean, 2.5) || !near(j.Rate, 2) {
		t.Fatalf("got %+v", j)
	}
	if want := math.Sqrt(1.25) / 2.5; !near(j.CV, want) {
		t.Errorf("CV %v, want %v", j.CV, want)
	}
	if e := Summarize(nil, 0); e.Runs != 0 || e.P50 != 0 || e.CV != 0 {
		t.Errorf("empty: %+v", e)
	}
}

// pairScenario is an IV a/b scenario with the given p50s (alone, sharing,
// fikit) for the HP, p99s, and fill.
func pairScenario(name string, alone, sharing, fikit, aloneP99, fikitP99, fill float64) Scenario {
	sc := Scenario{Section: SecPair, Name: name,
		Modes: []ModeResult{
			{Mode: ModeExclusive, HP: JCT{Runs: 10, P50: alone, P99: aloneP99, Mean: alone}, LP: JCT{Runs: 5, P50: 30, Mean: 30}},
			{Mode: ModeSharing, HP: JCT{Runs: 10, P50: sharing, P99: sharing, Mean: sharing}, LP: JCT{Runs: 5, P50: 40, Mean: 40}, FillPct: ptr(97)},
			{Mode: ModeFikit, HP: JCT{Runs: 10, P50: fikit, P99: fikitP99, Mean: fikit}, LP: JCT{Runs: 5, P50: 80, Mean: 80}, FillPct: ptr(fill)},
		},
		Sim: []ModeResult{
			{Mode: ModeExclusive, HP: JCT{Runs: 10, P50: alone}, LP: JCT{Runs: 5, P50: 30}},
			{Mode: ModeSharing, HP: JCT{Runs: 10, P50: 2 * alone}, LP: JCT{Runs: 5, P50: 40}},
			{Mode: ModeFikit, HP: JCT{Runs: 10, P50: alone}, LP: JCT{Runs: 5, P50: 40}, FillPct: ptr(fill * 2)},
		},
	}
	sc.Derived = Derive(&sc)
	return sc
}

func TestDerive(t *testing.T) {
	sc := pairScenario("a", 10, 25, 11, 20, 24, 40)
	d := sc.Derived
	if !near(d.HPVsAloneP50[ModeSharing], 2.5) || !near(d.HPVsAloneP50[ModeFikit], 1.1) || !near(d.HPVsAloneP99[ModeFikit], 1.2) {
		t.Errorf("vs alone: %+v %+v", d.HPVsAloneP50, d.HPVsAloneP99)
	}
	if !near(d.Speedup, 25.0/11) || !near(d.LPSpeedup, 0.5) || !near(d.LPVsAlone, 80.0/30) {
		t.Errorf("speedups: %v %v %v", d.Speedup, d.LPSpeedup, d.LPVsAlone)
	}
	if !near(d.SimSpeedup, 2) || !near(d.SimFillPct, 80) {
		t.Errorf("sim: %v %v", d.SimSpeedup, d.SimFillPct)
	}
	if !near(d.Fidelity["hp_p50_vs_alone_fikit"], 1.1) || !near(d.Fidelity["fill"], 0.5) || !near(d.Fidelity["lp_p50_fikit"], 2) {
		t.Errorf("fidelity: %v", d.Fidelity)
	}
	if Derive(&Scenario{Modes: []ModeResult{{Mode: ModeFikit}}}) != nil {
		t.Error("no exclusive mode: want nil")
	}
}

func TestComputeSummaryTakesWorstCases(t *testing.T) {
	scs := []Scenario{
		{Section: SecScheme2, Name: "a", Overhead: &Overhead{PctP50: 0.2}},
		{Section: SecScheme2, Name: "b", Overhead: &Overhead{PctP50: 0.7}},
		{Section: SecScheme2, Name: "broken", Overhead: &Overhead{PctP50: 50}, Error: "boom"},
		{Section: SecScheme3, Name: "a", Overhead: &Overhead{PctP50: 12}},
		pairScenario("p1", 10, 25, 10.3, 20, 21, 85),
		pairScenario("p2", 10, 14, 10.8, 20, 26, 60),
		{Section: SecStability, Modes: []ModeResult{{Mode: ModeFikit, LP: JCT{Runs: 10, CV: 0.08}}}},
		{Section: SecStability, Modes: []ModeResult{{Mode: ModeFikit, LP: JCT{Runs: 10, CV: 0.12}}}},
		{Section: SecSensitivity, Name: "ignored", Overhead: &Overhead{PctP50: 99}},
		{Section: SecMicro, Micro: &Micro{Hook: &HookBench{HolderAddedNs: 180}, Grant: &GrantRTT{RatioP50: 1.3}}},
	}
	s := ComputeSummary(scs)
	check := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || !near(*got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("p1", s.P1OverheadPct, 0.7)
	check("p2", s.P2OverheadPct, 12)
	check("p3 p50", s.P3HPRatioP50, 1.08)
	check("p3 p99", s.P3HPRatioP99, 1.3)
	check("p4 min", s.P4SpeedupMin, 14/10.8)
	check("p4 max", s.P4SpeedupMax, 25/10.3)
	check("p5", s.P5FillPct, 60)
	check("p6", s.P6LPCV, 0.12)
	check("p7", s.P7HookNs, 180)
	check("p8", s.P8GrantRTTRatio, 1.3)
	if s.P10HPInterferencePct != nil {
		t.Errorf("p10 = %v without interference measured, want null", *s.P10HPInterferencePct)
	}

	ts := Check(s, scs)
	pass := map[string]*bool{}
	for _, tg := range ts {
		pass[tg.Key] = tg.Pass
	}
	for key, want := range map[string]bool{"p1_overhead_pct": true, "p2_overhead_pct": true, "p3_hp_ratio_p50": false,
		"p3_hp_ratio_p99": false, "p5_fill_pct": false, "p6_lp_cv": false, "p7_hook_ns": true, "p8_grant_rtt_ratio": false} {
		if pass[key] == nil || *pass[key] != want {
			t.Errorf("%s pass = %v, want %v", key, pass[key], want)
		}
	}
	if pass["p4_speedup_min"] != nil {
		t.Error("p4 has no target")
	}
}

func TestSummaryJSONContract(t *testing.T) {
	// Unmeasured numbers are null, and every key is there.
	b, err := json.Marshal(Results{Summary: ComputeSummary(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"p1_overhead_pct", "p2_overhead_pct", "p3_hp_ratio_p50", "p3_hp_ratio_p99", "p4_speedup_min",
		"p4_speedup_max", "p5_fill_pct", "p6_lp_cv", "p7_hook_ns", "p8_grant_rtt_ratio", "p10_hp_interference_pct"} {
		v, ok := m["summary"][k]
		if !ok || v != nil {
			t.Errorf("summary[%q] = %v (present %v), want null", k, v, ok)
		}
	}
	if !strings.Contains(string(b), `"scenarios":null`) && !strings.Contains(string(b), `"scenarios":[]`) {
		t.Errorf("no scenarios key: %s", b)
	}
}

// withInterference sets the HP GPU interference p50 (and p99 = 2 × p50) of
// sc's default-sharing and fikit modes, as setInterference would.
func withInterference(sc Scenario, sharingP50, fikitP50 float64) Scenario {
	sc.Modes = append([]ModeResult(nil), sc.Modes...)
	for i := range sc.Modes {
		var p50 float64
		switch sc.Modes[i].Mode {
		case ModeSharing:
			p50 = sharingP50
		case ModeFikit:
			p50 = fikitP50
		default:
			continue
		}
		w := sc.Derived.HPVsAloneP50[sc.Modes[i].Mode]
		sc.Modes[i].HPInterference = &harness.Interference{P50Pct: p50, P99Pct: 2 * p50, WallRatio: w, HostRatio: w - p50/100, Runs: 10}
	}
	return sc
}

// TestP10Interference: p10 is fikit's HP GPU interference p50, worst and
// median over every co-location section (the new ones included), with
// default sharing's beside it; report-only: a miss is shown, not failed.
func TestP10Interference(t *testing.T) {
	pair := func(sec, name string, sharing, fikit float64) Scenario {
		sc := withInterference(pairScenario(name, 10, 25, 10.5, 20, 21, 85), sharing, fikit)
		sc.Section = sec
		return sc
	}
	broken := pair(SecBursts, "broken", 90, 90)
	broken.Error = "boom"
	noBlocked := pairScenario("no blocked_ns", 10, 25, 10.5, 20, 21, 85) // device could not tell
	scs := []Scenario{
		pair(SecPair, "a", 60, 0.5),
		pair(SecPreempt, "b", 40, 1.0),
		pair(SecBusyHost, "c", 80, 3.5),
		pair(SecSparse, "d", 30, 0.2),
		pair(SecBursts, "e", 50, 1.5),
		pair(SecSensitivity, "not in the summary", 99, 50),
		broken, noBlocked,
	}
	for _, sec := range []string{SecBusyHost, SecSparse, SecBursts, SecPair, SecPreempt, SecStability} {
		if !isColoc(sec) {
			t.Errorf("%s is not a co-location section", sec)
		}
	}
	if isColoc(SecSensitivity) || isColoc(SecScheme2) {
		t.Error("sensitivity or Scheme II counted as co-location")
	}
	s := ComputeSummary(scs)
	if s.P10HPInterferencePct == nil || !near(*s.P10HPInterferencePct, 3.5) {
		t.Fatalf("p10 = %v, want 3.5 (busy host)", s.P10HPInterferencePct)
	}
	var tg *Target
	for _, x := range Check(s, scs) {
		if x.Key == "p10_hp_interference_pct" {
			tg = &x
		}
	}
	if tg == nil {
		t.Fatal("no p10 target")
	}
	if tg.Median == nil || !near(*tg.Median, 1.0) || tg.SharingValue == nil || !near(*tg.SharingValue, 80) ||
		tg.SharingMedian == nil || !near(*tg.SharingMedian, 50) {
		t.Errorf("p10 median %v, sharing %v / %v", tg.Median, tg.SharingValue, tg.SharingMedian)
	}
	if !tg.ReportOnly || tg.Pass == nil || *tg.Pass || !strings.Contains(tg.Target, "2 %") {
		t.Errorf("p10 target %+v: want report-only ≤ 2 %%, not met", tg)
	}

	res := &Results{Scenarios: scs}
	res.Summary, res.Targets = s, Check(s, scs)
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| `p10_hp_interference_pct` |", "over (report-only)", "Report-only target over: `p10_hp_interference_pct` = 3.5",
		"under fikit 3.5 % worst, 1 % median; under default sharing (no scheduler) 80.0 % worst, 50.0 % median",
		"## Busy host", "## Sparse HP", "## Bursts", "Where the HP's slowdown comes from",
		"| c | fikit | 1.05× | 1.02× | 3.5 % | 7.0 % |", "| c | default sharing | 2.50× | 1.70× | 80.0 % | 160.0 % |",
		"busy_host c: under fikit the HP's GPU interference is 3.5 %",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "Target missed: `p10") {
		t.Error("a report-only target reported as missed")
	}
}

// TestSetInterference: a mode's interference pools its runs over
// repetitions against the exclusive mode's pooled p50, the one definition
// (harness.InterferenceOf); a mode with a run the device could not account
// for has none.
func TestSetInterference(t *testing.T) {
	b := func(v int64) *int64 { return &v }
	alone := []harness.Run{{JCTNs: 10}, {JCTNs: 10}, {JCTNs: 12}, {JCTNs: 9}}
	rep1 := []harness.Run{{JCTNs: 12, BlockedNs: b(1)}, {JCTNs: 14, BlockedNs: b(3)}}
	rep2 := []harness.Run{{JCTNs: 11, BlockedNs: b(0)}, {JCTNs: 20, BlockedNs: b(8)}}
	var aloneJCTs []int64
	for _, r := range alone {
		aloneJCTs = append(aloneJCTs, r.JCTNs)
	}
	modes := []ModeResult{
		{Mode: ModeExclusive, HP: Summarize(aloneJCTs, 0)},
		{Mode: ModeSharing, HP: JCT{Runs: 4}},
		{Mode: ModeFikit, HP: JCT{Runs: 1}},
	}
	setInterference(modes, map[string][]harness.Run{
		ModeSharing: append(append([]harness.Run(nil), rep1...), rep2...),
		ModeFikit:   {{JCTNs: 10}}, // no blocked_ns
	})
	want := harness.InterferenceOf(&harness.Result{Runs: append(append([]harness.Run(nil), rep1...), rep2...)}, 10)
	if got := modes[1].HPInterference; got == nil || *got != want || want.Runs != 4 {
		t.Errorf("sharing: %+v, want %+v", got, want)
	}
	if modes[2].HPInterference != nil || modes[0].HPInterference != nil {
		t.Errorf("fikit %+v / exclusive %+v: want none", modes[2].HPInterference, modes[0].HPInterference)
	}
}

// TestArrivalsPlumbing: the sparse HP's Poisson arrivals and the bursty
// HP's bursts reach fikit-replay's arguments and the results.
func TestArrivalsPlumbing(t *testing.T) {
	every := 8 * time.Millisecond
	hp := hpSvc("h100/resnet50_4_fwd", 0, 100)
	hp.Poisson, hp.Seed = poissonRate(every), 3
	h := hp.live(true, "127.0.0.1:1")
	if h.Every != 0 || strings.Join(h.Args, " ") != "--poisson 125 --seed 3" || !h.Hooked {
		t.Errorf("Poisson: every %v, args %q", h.Every, h.Args)
	}
	if sp := hp.spec(); sp.PoissonRate != 125 || sp.Seed != 3 || sp.EveryNs != 0 || arrivals(sp) != "Poisson, mean every 8.00 ms" {
		t.Errorf("Poisson spec %+v (%s)", sp, arrivals(sp))
	}
	bs := hpSvc("h100/resnet50_4_fwd", 200*time.Millisecond, 20)
	bs.Burst = 5
	h = bs.live(false, "")
	if h.Every != 200*time.Millisecond || strings.Join(h.Args, " ") != "--burst 5" || h.Hooked {
		t.Errorf("bursts: every %v, args %q", h.Every, h.Args)
	}
	if sp := bs.spec(); sp.Burst != 5 || arrivals(sp) != "bursts of 5, 200.00 ms idle" {
		t.Errorf("burst spec %+v (%s)", sp, arrivals(sp))
	}
	if h := hpSvc("x", time.Second, 1).live(false, ""); len(h.Args) != 0 {
		t.Errorf("plain interval: args %q", h.Args)
	}
}

// TestHog: the CPU hog's processes run until Stop, and until the context
// it was started with is done.
func TestHog(t *testing.T) {
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }
	h, err := startHog(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	pids := h.pids()
	if len(pids) != 2 || !alive(pids[0]) || !alive(pids[1]) {
		t.Fatalf("hog pids %v not running", pids)
	}
	h.Stop()
	h.Stop() // idempotent
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("hog process %d still there after Stop", pid)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err = startHog(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	pid := h.pids()[0]
	cancel()
	<-h.done
	if alive(pid) {
		t.Errorf("hog process %d outlived its context", pid)
	}
}

func sampleResults() *Results {
	scs := []Scenario{
		{Section: SecScheme2, Name: "h100/resnet50_4_fwd", HP: &Service{Runs: 100}, Overhead: &Overhead{Reps: 3, PctP50: 0.3, PctMean: 2.5,
			NoiseMeanPct: 0.2, PerRep: []float64{0.1, 0.3, 0.5}, Base: JCT{P50: 2.7e6}, Test: JCT{P50: 2.71e6}}},
		{Section: SecScheme3, Name: "h100/resnet50_4_fwd", HP: &Service{Runs: 100}, Error: "profiling daemon: boom"},
		pairScenario("h100/resnet50_4_fwd (H) + h100/bert_2_fwd (L)", 2.7e6, 5.6e6, 3.2e6, 3e6, 4e6, 70),
		{Section: SecStability, Name: "x (H) + y (L)", HP: &Service{}, LP: &Service{EveryNs: 1e8, Runs: 10}, Modes: []ModeResult{
			{Mode: ModeExclusive, HP: JCT{Runs: 5, P50: 3e6}, LP: JCT{Runs: 10, Mean: 3e7, CV: 0.01}},
			{Mode: ModeSharing, HP: JCT{Runs: 5, P50: 6e6}, LP: JCT{Runs: 10, Mean: 5e7, CV: 0.02}},
			{Mode: ModeFikit, HP: JCT{Runs: 5, P50: 3.1e6}, LP: JCT{Runs: 10, Mean: 1e8, CV: 0.15}},
		}},
		{Section: SecRatio, Name: "x (H) + y (L)", Ratio: []Point{{K: 1, Trials: 2, LPFikitNs: 4e7, LPExclusiveNs: 3.6e7, Speedup: 0.9},
			{K: 50, Trials: 2, LPFikitNs: 1e8, LPExclusiveNs: 2e8, Speedup: 2}}},
		{Section: SecMicro, Name: "micro-benchmarks", Micro: &Micro{Hook: &HookBench{NoHookNs: 200, HolderNs: 350, HolderAddedNs: 150},
			GrantError: "no daemon"}},
	}
	sc := pairScenario("h100/resnet50_4_fwd (H) + h100/bert_2_fwd (L)", 2.7e6, 5.6e6, 3.0e6, 3e6, 3.3e6, 75)
	sc.Section, sc.Variant = SecSensitivity, "fifo, switch 25 µs"
	scs = append(scs, sc)
	for i := range scs {
		if scs[i].Section == SecStability {
			scs[i].Derived = Derive(&scs[i])
		}
	}
	res := &Results{Meta: Meta{Version: "test", Quick: true, WallS: 100, Failures: []string{"scheme3 x: boom"}}, Scenarios: scs}
	res.Summary = ComputeSummary(scs)
	res.Targets = Check(res.Summary, scs)
	return res
}

func TestWriteReport(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteReport(&buf, sampleResults()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| `p1_overhead_pct` |", "0.3", "pass", "**FAIL**", // p3: 3.2/2.7 > 1.05
		"0.09–4.93 %", "34.52–71.78 %", "1.32–16.41×", "0.095–0.164", // the paper's numbers beside ours
		"error: profiling daemon: boom", "Target missed: `p3_hp_ratio_p50`",
		"by mean JCT (the paper's measure) the overhead is +2.50 %", // a heavy tail is called out
		"notices the HP process's exit itself", "fifo, switch 25 µs", "Grant round trip: not measured (no daemon)",
		"p8_grant_rtt_ratio` | LaunchRequest→Grant round trip p50 / raw UDP echo p50, same process | not measured",
		"![fig16_hp_speedup.png](fig16_hp_speedup.png)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// An empty run still makes a report.
	buf.Reset()
	empty := &Results{}
	empty.Targets = Check(empty.Summary, nil)
	if err := WriteReport(&buf, empty); err != nil || !strings.Contains(buf.String(), "not measured") {
		t.Errorf("empty report: %v", err)
	}
}

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	if err := WritePlots(dir, sampleResults()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"fig14_sharing_overhead.png", "fig16_hp_speedup.png", "fig18_lp_vs_exclusive.png", "fig21_lp_cv.png", "sensitivity.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fig19_preempt_hp_speedup.png")); err == nil {
		t.Error("a figure without data was drawn")
	}
}

func TestPlanQuickIsSmaller(t *testing.T) {
	q, f := newPlan(Options{Quick: true}), newPlan(Options{})
	if len(f.pairs) < 10 {
		t.Errorf("full plan has %d pairs, want ≥ 10 (Fig. 16 has 10)", len(f.pairs))
	}
	if len(q.pairs) >= len(f.pairs) || q.hpRuns >= f.hpRuns || len(q.headline) == 0 || len(q.variants) != len(f.variants) {
		t.Errorf("quick plan %+v", q)
	}
	// The new co-location scenarios run in --quick too: a sparse HP slower
	// than the daemon's holder TTL (1 s), a few requests; bursts.
	for _, p := range []plan{q, f} {
		if p.sparseEvery <= time.Second || p.sparseRuns < 4 || p.burstN < 2 || p.burstGap <= 0 || p.bursts < 2 {
			t.Errorf("co-location plan: sparse %v × %d, bursts %d × %d / %v", p.sparseEvery, p.sparseRuns, p.bursts, p.burstN, p.burstGap)
		}
	}
	if q.sparseRuns > 6 {
		t.Errorf("quick: %d sparse requests, want ≤ 6", q.sparseRuns)
	}
	if p := newPlan(Options{MaxPairs: 2}); len(p.pairs) != 2 {
		t.Errorf("MaxPairs: %d pairs", len(p.pairs))
	}
	for _, pr := range f.pairs {
		if strings.Split(pr.HP, "/")[0] != strings.Split(pr.LP, "/")[0] {
			t.Errorf("pair %v mixes GPUs", pr)
		}
	}
}

func TestIntervals(t *testing.T) {
	if got := hpInterval(2.63e6); got.Milliseconds() != 8 {
		t.Errorf("hpInterval(2.63 ms) = %v, want 8ms", got)
	}
	if got := lpInterval(33.3e6); got.Milliseconds() != 140 {
		t.Errorf("lpInterval(33.3 ms) = %v", got)
	}
	if got := lpInterval(1e6); got.Milliseconds() != 20 {
		t.Errorf("lpInterval(1 ms) = %v", got)
	}
	if n := runsFor(1e9, 1e7, 5, 50); n != 50 {
		t.Errorf("runsFor = %d", n)
	}
}

func TestCounter(t *testing.T) {
	text := "# HELP x\nfikit_messages_received_total{type=\"LaunchBatch\"} 1234\nfikit_messages_received_total{type=\"Register\"} 1\n"
	if v, err := counter(text, "fikit_messages_received_total", `type="LaunchBatch"`); err != nil || v != 1234 {
		t.Errorf("got %v, %v", v, err)
	}
	if _, err := counter(text, "fikit_messages_received_total", `type="LaunchNotify"`); err == nil {
		t.Error("missing sample: want an error")
	}
}

// The workloads run in --quick too: the H200's CUDA-graph pair, an eager HP
// beside training, a Poisson HP; every one of their traces is a frozen
// scenario trace the simulator can predict on the bench's device, and the
// graph HP alone takes the H200's 0.88 ms.
func TestWorkloadPlan(t *testing.T) {
	for _, o := range []Options{{Quick: true}, {}} {
		p := newPlan(o)
		if len(p.workloads) < 3 {
			t.Fatalf("%d workloads, want the three of issue 22", len(p.workloads))
		}
		graph, eager, poisson := p.workloads[0].HP, p.workloads[1].HP, p.workloads[2].HP
		if !graph.Graph || graph.Every != 8*time.Millisecond || eager.Graph || poisson.Poisson <= 0 || !poisson.Graph {
			t.Errorf("workload HPs %+v %+v %+v", graph, eager, poisson)
		}
		if math.Abs(1/poisson.Poisson-graph.Every.Seconds()) > 1e-9 {
			t.Errorf("the Poisson HP's mean interval %.4f s is not the periodic one's %v", 1/poisson.Poisson, graph.Every)
		}
	}
	dev, err := harness.Device{}.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range newPlan(Options{Quick: true}).workloads {
		for _, s := range []svc{w.HP, w.LP} {
			if !strings.HasPrefix(s.Trace, "scenario/") || s.CPUNs >= 0 {
				t.Errorf("%s: %s with %d ns per launch, want a scenario trace with its own host times", w.Name, s.Trace, s.CPUNs)
			}
			j, err := aloneJCT(s, dev)
			if err != nil {
				t.Fatal(err)
			}
			if s.Trace == "scenario/graph_resnet50_b1" && (j < 0.87e6 || j > 0.89e6) {
				t.Errorf("the graph HP alone takes %.3f ms, want 0.88", j/1e6)
			}
		}
		for _, m := range w.Modes {
			if _, ok := modeByName(m); !ok {
				t.Errorf("%s: mode %q has no row", w.Name, m)
			}
		}
		// The gate's ablations, side by side in the same run, each once.
		for _, m := range ablationModes {
			if n := slices.Index(w.Modes, m); n < 0 || slices.Index(w.Modes[n+1:], m) >= 0 {
				t.Errorf("%s: ablation %q not run once (%v)", w.Name, m, w.Modes)
			}
		}
	}
	if len(ablationModes) != len(variants.Variants) || !slices.Contains(ablationModes, ModeFikit) {
		t.Errorf("ablation modes %v for %d variants", ablationModes, len(variants.Variants))
	}
}

// The ablation table has a row per ablation run, the LP's throughput
// against alone and default sharing.
func TestAblationTable(t *testing.T) {
	in := &harness.Interference{P99Pct: 12, Runs: 3}
	sc := Scenario{Section: SecWorkloads, Name: "w", Modes: []ModeResult{
		{Mode: ModeExclusive, HP: JCT{Runs: 10, P50: 1e6, P99: 1.1e6}, LP: JCT{Runs: 10, Rate: 100}},
		{Mode: ModeSharing, HP: JCT{Runs: 10, P50: 2e6, P99: 3e6}, LP: JCT{Runs: 10, Rate: 80}},
		{Mode: ModeFikit, HP: JCT{Runs: 10, P50: 1.1e6, P99: 1.2e6}, LP: JCT{Runs: 10, Rate: 64}, HPInterference: in},
		{Mode: ablationMode("today"), HP: JCT{Runs: 10, P50: 1.2e6, P99: 1.8e6}, LP: JCT{Runs: 10, Rate: 40}},
	}}
	sc.Derived = Derive(&sc)
	var b strings.Builder
	ablationTable(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, []Scenario{sc})
	out := b.String()
	for _, want := range []string{
		"| w | fikit, today's gate | 1.20× | 1.80× | 1.64× | – | 40 % | 50 % | – |",
		"| w | fikit, all together (the defaults) | 1.10× | 1.20× | 1.09× | 12 % | 64 % | 80 % | – |",
	} {
		if !strings.Contains(out, want) || strings.Contains(out, "MISSING") {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	if strings.Index(out, "today's gate |") > strings.Index(out, "| fikit, all together") {
		t.Errorf("rows out of the variants' order:\n%s", out)
	}
}

// Modes are rows: each names a distinct mode, and a scenario naming a mode
// without a row is refused before anything runs.
func TestModeRows(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range modeSpecs {
		if seen[m.Name] || m.Name == "" || m.Title == "" || m.Name == ModeExclusive {
			t.Errorf("mode row %+v", m)
		}
		seen[m.Name] = true
	}
	for _, m := range controlModes {
		if !seen[m] {
			t.Errorf("mode %q has no row", m)
		}
	}
	r := &runner{siblings: map[string]*harness.Daemon{}}
	if _, err := r.pairModes(context.Background(), nil, svc{}, svc{}, 1, "t", []string{"fikit_no_such_mode"}); err == nil ||
		!strings.Contains(err.Error(), "fikit_no_such_mode") {
		t.Errorf("an unknown mode: %v", err)
	}
	if modeName(ModeFikitUDP) != "fikit, FIKIT_BOARD=off" || modeName("x") != "x" {
		t.Error("modeName")
	}
}

// Sensitivity variants are the run's device with one thing changed.
func TestVariantDevices(t *testing.T) {
	run := harness.Device{Preset: "h200"}
	for _, v := range newPlan(Options{}).variants {
		d := v.device(run)
		cfg, err := d.Config()
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		h200, _ := harness.Device{Preset: "h200"}.Config()
		switch {
		case v.Preset == "legacy":
			if cfg.Switch != 25*time.Microsecond {
				t.Errorf("%s: %v", v.Name, cfg)
			}
		case v.Switch != nil:
			if cfg.Switch != *v.Switch || cfg.Timeslice != h200.Timeslice {
				t.Errorf("%s: %v", v.Name, cfg)
			}
		case v.Model == "fifo":
			if cfg.Model.String() != "fifo" || cfg.Switch != h200.Switch {
				t.Errorf("%s: %v", v.Name, cfg)
			}
		default:
			if cfg != h200 {
				t.Errorf("%s: %v, want the run's device", v.Name, cfg)
			}
		}
	}
}
