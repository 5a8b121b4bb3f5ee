package bench

import (
	"fmt"
	"math"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/internal/stats"
)

// ComputeSummary derives the contract's numbers from the scenarios. Each is
// the worst case over the scenarios of its section (p10: of every
// co-location section; docs/bench.md): a
// scheduler's claim has to hold for every pair, and the median is in the
// report beside it. Sensitivity variants are not part of the summary.
func ComputeSummary(scs []Scenario) Summary {
	var s Summary
	var p1, p2, p3a, p3b, p4, p5, p6 []float64
	for i := range scs {
		sc := &scs[i]
		if sc.Error != "" {
			continue
		}
		switch sc.Section {
		case SecScheme2:
			if sc.Overhead != nil {
				p1 = append(p1, sc.Overhead.PctP50)
			}
		case SecScheme3:
			if sc.Overhead != nil {
				p2 = append(p2, sc.Overhead.PctP50)
			}
		case SecPair:
			d := sc.Derived
			if d == nil {
				continue
			}
			if v, ok := d.HPVsAloneP50[ModeFikit]; ok {
				p3a = append(p3a, v)
			}
			if v, ok := d.HPVsAloneP99[ModeFikit]; ok {
				p3b = append(p3b, v)
			}
			if d.Speedup > 0 {
				p4 = append(p4, d.Speedup)
			}
			if fk := sc.Mode(ModeFikit); fk != nil && fk.FillPct != nil {
				p5 = append(p5, *fk.FillPct)
			}
		case SecStability:
			if fk := sc.Mode(ModeFikit); fk != nil && fk.LP.Runs > 1 {
				p6 = append(p6, fk.LP.CV)
			}
		case SecMicro:
			if m := sc.Micro; m != nil {
				if m.Hook != nil {
					s.P7HookNs = ptr(m.Hook.HolderAddedNs)
				}
				if m.Grant != nil && m.Grant.RatioP50 > 0 {
					s.P8GrantRTTRatio = ptr(m.Grant.RatioP50)
				}
			}
		}
	}
	s.P1OverheadPct = maxOf(p1)
	s.P2OverheadPct = maxOf(p2)
	s.P3HPRatioP50 = maxOf(p3a)
	s.P3HPRatioP99 = maxOf(p3b)
	s.P4SpeedupMin = minOf(p4)
	s.P4SpeedupMax = maxOf(p4)
	s.P5FillPct = minOf(p5)
	s.P6LPCV = maxOf(p6)
	s.P10HPInterferencePct = maxOf(interferenceP50s(scs, ModeFikit))
	s.P10UDPHPInterferencePct = maxOf(interferenceP50s(scs, ModeFikitUDP))
	s.EarlyStopLPKernels = maxOf(earlyStopKernels(scs, ModeFikit))
	s.EarlyStopUDPLPKernels = maxOf(earlyStopKernels(scs, ModeFikitUDP))
	s.EarlyStopP99Us = maxOf(earlyStopP99s(scs, ModeFikit))
	s.EarlyStopUDPP99Us = maxOf(earlyStopP99s(scs, ModeFikitUDP))
	return s
}

// earlyStopKernels are the LP kernels per HP run that arrived early in the
// run (harness.EarlyStop) under mode m, per co-location scenario.
func earlyStopKernels(scs []Scenario, m string) []float64 {
	return earlyStops(scs, m, func(e *harness.EarlyStop) float64 { return e.LPKernelsPerRun })
}

// earlyStopP99s are the stop latencies' p99 in µs under mode m, per
// co-location scenario.
func earlyStopP99s(scs []Scenario, m string) []float64 {
	return earlyStops(scs, m, func(e *harness.EarlyStop) float64 { return float64(e.StopP99Ns) / 1e3 })
}

func earlyStops(scs []Scenario, m string, f func(*harness.EarlyStop) float64) []float64 {
	var out []float64
	for i := range scs {
		sc := &scs[i]
		if sc.Error != "" || !isColoc(sc.Section) {
			continue
		}
		if mr := sc.Mode(m); mr != nil && mr.EarlyStop != nil && mr.EarlyStop.Runs > 0 {
			out = append(out, f(mr.EarlyStop))
		}
	}
	return out
}

// interferenceP50s are the HP GPU interference p50s (%) of mode m in the
// co-location scenarios that measured it (p10: mode fikit; its contrast:
// default sharing).
func interferenceP50s(scs []Scenario, m string) []float64 {
	var out []float64
	for i := range scs {
		sc := &scs[i]
		if sc.Error != "" || !isColoc(sc.Section) {
			continue
		}
		if mr := sc.Mode(m); mr != nil && mr.HPInterference != nil && mr.HPInterference.Runs > 0 {
			out = append(out, mr.HPInterference.P50Pct)
		}
	}
	return out
}

// Target is one summary number beside its target and the paper's figure.
type Target struct {
	Key     string   `json:"key"`
	What    string   `json:"what"`
	Value   *float64 `json:"value"`
	Median  *float64 `json:"median,omitempty"`
	Target  string   `json:"target"`
	Pass    *bool    `json:"pass"` // nil: no target, or not measured
	Paper   string   `json:"paper"`
	Comment string   `json:"comment,omitempty"`
	// ReportOnly: the target is reported, not enforced yet; Pass still
	// says whether it was met, and a miss is no finding of "Target missed".
	ReportOnly bool `json:"report_only,omitempty"`
	// SharingValue and SharingMedian are the same figure under default
	// sharing (worst and median over the same scenarios), for contrast.
	SharingValue  *float64 `json:"sharing_value,omitempty"`
	SharingMedian *float64 `json:"sharing_median,omitempty"`
}

// p10Target is the report-only bound on p10 (%); the next issue tightens it
// and makes it binding.
const p10Target = 2.0

// Check sets each summary number beside its target (the issue's) and the
// paper's figure; medians across scenarios go beside the worst cases.
func Check(s Summary, scs []Scenario) []Target {
	med := medians(scs)
	le := func(v *float64, lim float64) *bool {
		if v == nil {
			return nil
		}
		b := *v <= lim
		return &b
	}
	ge := func(v *float64, lim float64) *bool {
		if v == nil {
			return nil
		}
		b := *v >= lim
		return &b
	}
	return []Target{
		{Key: "p1_overhead_pct", What: "Scheme II: JCT overhead of the sharing phase vs no hook, % (worst service)",
			Value: s.P1OverheadPct, Median: med["p1"], Target: "≤ 1 %", Pass: le(s.P1OverheadPct, 1), Paper: "0.09–4.93 % (Fig. 14)"},
		{Key: "p2_overhead_pct", What: "Scheme III: JCT overhead of the profiling phase vs no hook, % (worst service)",
			Value: s.P2OverheadPct, Median: med["p2"], Target: "≤ 15 %", Pass: le(s.P2OverheadPct, 15), Paper: "34.52–71.78 % (Fig. 15)"},
		{Key: "p3_hp_ratio_p50", What: "IV a/b: HP p50 JCT under fikit / HP alone (worst pair)",
			Value: s.P3HPRatioP50, Median: med["p3a"], Target: "≤ 1.05", Pass: le(s.P3HPRatioP50, 1.05), Paper: "not reported"},
		{Key: "p3_hp_ratio_p99", What: "IV a/b: HP p99 JCT under fikit / HP alone p99 (worst pair)",
			Value: s.P3HPRatioP99, Median: med["p3b"], Target: "≤ 1.10", Pass: le(s.P3HPRatioP99, 1.10), Paper: "not reported"},
		{Key: "p4_speedup_min", What: "IV a/b: HP p50 speedup of fikit over default sharing (smallest pair)",
			Value: s.P4SpeedupMin, Median: med["p4"], Target: "none", Paper: "1.32× (Fig. 16)"},
		{Key: "p4_speedup_max", What: "IV a/b: HP p50 speedup of fikit over default sharing (largest pair)",
			Value: s.P4SpeedupMax, Median: med["p4"], Target: "none", Paper: "16.41× (Fig. 16)"},
		{Key: "p5_fill_pct", What: "IV a/b: share of the HP's idle GPU time filled by LP kernels under fikit, % (worst pair)",
			Value: s.P5FillPct, Median: med["p5"], Target: "≥ 80 %", Pass: ge(s.P5FillPct, 80), Paper: "not reported"},
		{Key: "p6_lp_cv", What: "IV d: coefficient of variation of the LP JCT under fikit (worst pair)",
			Value: s.P6LPCV, Median: med["p6"], Target: "≤ 0.10", Pass: le(s.P6LPCV, 0.10), Paper: "0.095–0.164 (Table 3)"},
		{Key: "p7_hook_ns", What: "hook holder path: ns added per cuLaunchKernel (hook-bench holder − no hook)",
			Value: s.P7HookNs, Target: "≤ 300 ns", Pass: le(s.P7HookNs, 300), Paper: "not reported"},
		{Key: "p8_grant_rtt_ratio", What: "LaunchRequest→Grant round trip p50 / raw UDP echo p50, same process",
			Value: s.P8GrantRTTRatio, Target: "≤ 1.25", Pass: le(s.P8GrantRTTRatio, 1.25), Paper: "not reported"},
		{Key: "p10_hp_interference_pct", What: "co-location: HP GPU interference p50 under fikit, % of its p50 JCT alone (blocked time, simgpu; worst scenario)",
			Value: s.P10HPInterferencePct, Median: med["p10"], Target: fmt.Sprintf("≤ %g %%", p10Target),
			Pass: le(s.P10HPInterferencePct, p10Target), ReportOnly: true, Paper: "not reported",
			SharingValue: maxOf(interferenceP50s(scs, ModeSharing)), SharingMedian: med["p10_sharing"]},
		{Key: "p10_udp_hp_interference_pct", What: "the same with FIKIT_BOARD=off: every decision by UDP, as in the paper",
			Value: s.P10UDPHPInterferencePct, Median: med["p10_udp"], Target: "none", ReportOnly: true, Paper: "not reported"},
		{Key: "early_stop_lp_kernels", What: "co-location: LP kernels reaching the device in an HP run's first 500 µs, per run, under fikit (worst scenario)",
			Value: s.EarlyStopLPKernels, Median: med["es"], Target: "none", ReportOnly: true, Paper: "not reported"},
		{Key: "early_stop_udp_lp_kernels", What: "the same with FIKIT_BOARD=off",
			Value: s.EarlyStopUDPLPKernels, Median: med["es_udp"], Target: "none", ReportOnly: true, Paper: "not reported"},
		{Key: "early_stop_p99_us", What: "co-location: HP launch → LP stopped launching (the stream under way then), µs, p99 over runs under fikit (worst scenario)",
			Value: s.EarlyStopP99Us, Median: med["esl"], Target: "none", ReportOnly: true, Paper: "not reported"},
		{Key: "early_stop_udp_p99_us", What: "the same with FIKIT_BOARD=off",
			Value: s.EarlyStopUDPP99Us, Median: med["esl_udp"], Target: "none", ReportOnly: true, Paper: "not reported"},
	}
}

// medians are the medians across scenarios of the numbers whose worst case
// the summary holds.
func medians(scs []Scenario) map[string]*float64 {
	vals := map[string][]float64{}
	for i := range scs {
		sc := &scs[i]
		if sc.Error != "" {
			continue
		}
		switch sc.Section {
		case SecScheme2, SecScheme3:
			if sc.Overhead != nil {
				k := "p1"
				if sc.Section == SecScheme3 {
					k = "p2"
				}
				vals[k] = append(vals[k], sc.Overhead.PctP50)
			}
		case SecPair:
			if d := sc.Derived; d != nil {
				if v, ok := d.HPVsAloneP50[ModeFikit]; ok {
					vals["p3a"] = append(vals["p3a"], v)
				}
				if v, ok := d.HPVsAloneP99[ModeFikit]; ok {
					vals["p3b"] = append(vals["p3b"], v)
				}
				if d.Speedup > 0 {
					vals["p4"] = append(vals["p4"], d.Speedup)
				}
			}
			if fk := sc.Mode(ModeFikit); fk != nil && fk.FillPct != nil {
				vals["p5"] = append(vals["p5"], *fk.FillPct)
			}
		case SecStability:
			if fk := sc.Mode(ModeFikit); fk != nil && fk.LP.Runs > 1 {
				vals["p6"] = append(vals["p6"], fk.LP.CV)
			}
		}
	}
	if v := interferenceP50s(scs, ModeFikit); len(v) > 0 {
		vals["p10"] = v
	}
	if v := interferenceP50s(scs, ModeSharing); len(v) > 0 {
		vals["p10_sharing"] = v
	}
	if v := interferenceP50s(scs, ModeFikitUDP); len(v) > 0 {
		vals["p10_udp"] = v
	}
	if v := earlyStopKernels(scs, ModeFikit); len(v) > 0 {
		vals["es"] = v
	}
	if v := earlyStopKernels(scs, ModeFikitUDP); len(v) > 0 {
		vals["es_udp"] = v
	}
	if v := earlyStopP99s(scs, ModeFikit); len(v) > 0 {
		vals["esl"] = v
	}
	if v := earlyStopP99s(scs, ModeFikitUDP); len(v) > 0 {
		vals["esl_udp"] = v
	}
	out := map[string]*float64{}
	for k, v := range vals {
		out[k] = ptr(stats.Median(v))
	}
	return out
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func maxOf(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	m := v[0]
	for _, x := range v[1:] {
		m = math.Max(m, x)
	}
	return ptr(m)
}

func minOf(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	m := v[0]
	for _, x := range v[1:] {
		m = math.Min(m, x)
	}
	return ptr(m)
}

// fmtPtr formats an optional number.
func fmtPtr(v *float64, format string) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprintf(format, *v)
}
