package bench

import "fmt"

// ablationTable shows the gate's ablations (ablationModes: today's gate,
// each mechanism alone on top of it, all together) side by side for each
// scenario of scs that ran them: the HP's JCT against alone, its GPU
// interference (simgpu ground truth), and the LP's throughput against alone
// and against default sharing.
func ablationTable(p printer, scs []Scenario) {
	var rows []string
	for _, sc := range scs {
		if sc.Error != "" || sc.Derived == nil {
			continue
		}
		ex, sh, d := mode(sc, ModeExclusive), mode(sc, ModeSharing), sc.Derived
		for _, m := range ablationModes {
			mr := sc.Mode(m)
			if mr == nil {
				continue
			}
			gpu := "–"
			if in := mr.HPInterference; in != nil && in.Runs > 0 {
				gpu = pctv(in.P99Pct)
			}
			name := modeName(m)
			if m == ModeFikit {
				name = "fikit, all together (the defaults)"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc.Name, name,
				x(d.HPVsAloneP50[m]), x(ratio(mr.HP.P99, ex.HP.P50)), x(d.HPVsAloneP99[m]), gpu,
				pctOf(mr.LP.Rate, ex.LP.Rate), pctOf(mr.LP.Rate, sh.LP.Rate), pctp(mr.FillPct)))
		}
	}
	if len(rows) == 0 {
		return
	}
	p("### Ablations of the gate\n\n")
	p("Each mechanism of switch-aware, time-bounded gating (docs/scheduler.md \"Switches, bounds and arrivals\"; " +
		"`bench/variant`) alone on top of today's gate, and all together (fikit's defaults), in the same run. " +
		"*GPU p99*: the HP's blocked time at its p99 run over its p50 alone; *LP*: its runs per second inside the " +
		"HP's span.\n\n")
	p("%s", "| workload | gate | HP p50 × alone | HP p99 × alone p50 | HP p99 × alone p99 | GPU p99 | LP % of alone | LP % of sharing | fill |\n"+
		"|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p("%s", r)
	}
	p("\n")
}

// pctOf is a over b in percent ("–" where either is unknown).
func pctOf(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return pctv(100 * a / b)
}
