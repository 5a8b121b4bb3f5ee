package bench

import (
	variants "github.com/fikit/fikit/bench/variant"
	"github.com/fikit/fikit/scheduler"
)

// ModeFikitPreSwitch is fikit with the pre-switch on (docs/scheduler.md "The
// pre-switch"), under a daemon of its own: the workloads run it beside
// fikit with it off, the default.
const ModeFikitPreSwitch = "fikit_pre_switch"

func preSwitchOn(c *scheduler.Config) {
	v, _ := variants.Lookup(variants.PreSwitchOn)
	if err := v.Apply(c); err != nil {
		panic(err) // the variant's own tests check it
	}
}

// lpRate is a mode's LP runs per second of the HP's span (0: not measured).
func lpRate(m *ModeResult) float64 {
	if m == nil || m.SpanNs <= 0 {
		return 0
	}
	return float64(m.LP.Runs) / (float64(m.SpanNs) / 1e9)
}

// preSwitchSection compares fikit with the pre-switch off and on in the
// workloads that ran both. On simgpu its gain is by construction: the
// device keeps an idle context resident until another submits, so a
// warm-up is bound to save the switch; an H200 does the same
// (docs/simgpu.md "What the GPU settled").
func preSwitchSection(p printer, res *Results) {
	var scs []Scenario
	for _, sc := range sections(res, SecWorkloads) {
		if sc.Error == "" && sc.Mode(ModeFikitPreSwitch) != nil {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	p("## Pre-switch — off vs on (gain by construction on simgpu)\n\n")
	p("The same workloads under fikit with the pre-switch off (the default) and on (variant `fikit+pre-switch`): ahead of the HP's predicted " +
		"request the LP stops, the HP's hook makes its context resident, and the request pays no switch " +
		"(docs/scheduler.md \"The pre-switch\"). **On simgpu the gain is by construction**: its device keeps an idle " +
		"context resident until another submits, as an H200 does (docs/bench.md \"On a real GPU\"); " +
		"the LP's share is the price, paid on any device. HP ratios are wall clock: p50 and p99 against the p50 alone, " +
		"and p99 against the p99 alone (interference: simgpu's blocked time, p50 / p99 %% of the JCT alone); LP " +
		"share is its runs per second of the HP's span against default sharing's.\n\n")
	p("| workload | HP arrivals | fikit p50 / p99 × alone p50 / p99 × alone p99 | interference | + pre-switch p50 / p99 × alone p50 / p99 × alone p99 | interference | LP share of sharing's: fikit | + pre-switch |\n|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		fk, on, sh, ex := sc.Mode(ModeFikit), sc.Mode(ModeFikitPreSwitch), sc.Mode(ModeSharing), mode(sc, ModeExclusive)
		ratios := func(m *ModeResult) string {
			if m == nil || ex.HP.P50 <= 0 || ex.HP.P99 <= 0 {
				return "–"
			}
			return x(m.HP.P50/ex.HP.P50) + " / " + x(m.HP.P99/ex.HP.P50) + " / " + x(m.HP.P99/ex.HP.P99)
		}
		share := func(m *ModeResult) string {
			if s := lpRate(sh); s > 0 && m != nil {
				return pctv(100 * lpRate(m) / s)
			}
			return "–"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc.Name, arrivals(spec(sc.HP)), ratios(fk), interference(fk),
			ratios(on), interference(on), share(fk), share(on))
	}
	p("\n")
}

// interference is a mode's HP GPU interference, p50 / p99 %.
func interference(m *ModeResult) string {
	if m == nil || m.HPInterference == nil {
		return "–"
	}
	return pctv(m.HPInterference.P50Pct) + " / " + pctv(m.HPInterference.P99Pct)
}
