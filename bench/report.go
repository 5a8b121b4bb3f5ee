package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Plot files WritePlots makes, in the order the report shows them.
var plotFiles = []struct{ File, Title string }{
	{"fig14_sharing_overhead.png", "Fig. 14 equivalent: JCT overhead of the sharing phase vs no hook"},
	{"fig15_profiling_overhead.png", "Fig. 15 equivalent: JCT overhead of the profiling phase vs no hook"},
	{"fig16_hp_speedup.png", "Fig. 16 equivalent: HP JCT speedup of fikit over default sharing (measured and simulated)"},
	{"fig17_lp_speedup.png", "Fig. 17 equivalent: LP JCT speedup of fikit over default sharing"},
	{"fig18_lp_vs_exclusive.png", "Fig. 18 equivalent: LP JCT, exclusive over fikit, by HP:LP task ratio"},
	{"fig19_preempt_hp_speedup.png", "Fig. 19 equivalent: HP JCT speedup with preemption (LP continuous)"},
	{"fig20_preempt_lp.png", "Fig. 20 equivalent: LP JCT, default sharing over fikit, with preemption"},
	{"fig21_lp_cv.png", "Fig. 21 / Table 3 equivalent: LP JCT coefficient of variation (HP continuous)"},
	{"hp_vs_alone.png", "HP p50 JCT over HP alone, per pair and mode"},
	{"sensitivity.png", "Sensitivity: HP p50 JCT over alone under each device assumption"},
}

// WriteReport writes the markdown report of res.
func WriteReport(w io.Writer, res *Results) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	m := res.Meta
	mode := "full"
	if m.Quick {
		mode = "quick (`--quick`: fewer pairs and runs)"
	}
	p("# fikit bench\n\n")
	p("FIKIT's evaluation (paper §4) re-run on the simulated GPU, every mode side by side in one invocation: ")
	p("**exclusive** (each service alone, one after another), **default sharing** (no scheduler, no hook: the device's ")
	p("time-slicing) and **fikit** (both services hooked under the daemon). See docs/bench.md for what each section does.\n\n")
	p("| | |\n|---|---|\n")
	p("| run | %s, version %s, started %s |\n", mode, m.Version, m.Started)
	p("| wall time | %s (estimated %s) |\n", dur(m.WallS), dur(m.EstimateS))
	p("| machine | %s, %d CPUs, load average %.2f at the start, %.2f at the end (other work shares this machine: absolute times are noise, ratios measured side by side are not) |\n",
		m.Host, m.CPUs, m.LoadStart, m.LoadEnd)
	p("| device | %s |\n", m.Device)
	if m.DevicePreset != "" {
		p("| device preset | `%s` (`--device`; docs/simgpu.md \"Presets\" says which of its numbers are measured, fitted or assumed) |\n", m.DevicePreset)
	}
	p("| GPU | %s |\n", m.GPU)
	pr := m.Params
	p("| services | HP: %s host time per launch (launch-bound, as eager PyTorch), prio 0, a request every %.0f× its JCT alone; LP: %s per launch, prio 5, closed loop; continuous HP (IV d, Fig. 18): %s pre- and %s post-processing per request |\n",
		us(pr.HPCPUNs), pr.IntervalX, us(pr.LPCPUNs), us(pr.HPPreNs), us(pr.HPPostNs))
	p("| simulator | notify latency %s, grant round trip %s (this run's micro-benchmarks when measured) |\n\n", us(pr.SimNotifyNs), us(pr.SimGrantNs))
	if len(m.Failures) > 0 {
		p("**Not measured** (errors):\n\n")
		for _, f := range m.Failures {
			p("- %s\n", oneLine(f))
		}
		p("\n")
	}

	p("## Summary\n\n")
	p("Each number is the worst case over the pairs (or services) of its section (p10: over every co-location scenario); the median is beside it. ")
	p("Targets are the issue's; the paper's figure is given where the paper has one.\n\n")
	p("| key | what | ours | median | target | | paper |\n|---|---|---|---|---|---|---|\n")
	for _, t := range res.Targets {
		p("| `%s` | %s | %s | %s | %s | %s | %s |\n", t.Key, t.What, num(t.Value), num(t.Median), t.Target, status(t), t.Paper)
	}
	p("\n")
	for _, t := range res.Targets {
		if t.SharingValue != nil || t.SharingMedian != nil {
			p("`%s` beside default sharing: under fikit %s worst, %s median; under default sharing (no scheduler) %s worst, %s median, ",
				t.Key, numPct(t.Value), numPct(t.Median), numPct(t.SharingValue), numPct(t.SharingMedian))
			p("over the same co-location scenarios (IV a/b, c, d, busy host, sparse HP, bursts, workloads).\n\n")
		}
	}
	for _, t := range res.Targets {
		if t.ReportOnly {
			p("`%s`'s target is report-only for now: it is checked and shown, not yet enforced.\n\n", t.Key)
		}
	}
	notes := findings(res)
	if len(notes) > 0 {
		p("### Findings\n\n")
		for _, n := range notes {
			p("- %s\n", n)
		}
		p("\n")
	}

	overheadSection(p, res, SecScheme2, "Scheme II — one service, sharing phase vs no hook (Fig. 14)",
		"Paper: 0.09–4.93 % JCT increase over seven models (1000 tasks each, mean JCT).")
	overheadSection(p, res, SecScheme3, "Scheme III — one service, profiling phase vs no hook (Fig. 15)",
		"Paper: 34.52–71.78 % JCT increase while measuring every kernel.")
	pairSection(p, res)
	preemptSection(p, res)
	stabilitySection(p, res)
	colocSection(p, res, SecBusyHost, "Busy host — IV a/b pairs with a CPU hog on every core",
		fmt.Sprintf("The IV a/b pairs again while %d processes (one per core, niced as the bench) spin through all three modes, the "+
			"exclusive baseline included: the ratios compare like with like, and the host part of the slowdown is what sharing "+
			"the device adds on a host that is already busy.", res.Meta.Params.HogThreads))
	colocSection(p, res, SecSparse, "Sparse HP — a request every 1.5 s, or Poisson arrivals",
		fmt.Sprintf("The LP runs back to back; the HP sends a request every %s (longer than the daemon's holder TTL, 1 s: it "+
			"comes back as a holder the scheduler had let go) on the headline pairs, and Poisson arrivals at IV a/b's mean "+
			"interval (a seed per pair, the same arrivals in every mode) on every pair, so its run starts are not on a clock.",
			time.Duration(res.Meta.Params.SparseEveryNs)))
	colocSection(p, res, SecBursts, "Bursts — the HP's requests in bursts",
		burstIntro(res.Meta.Params))
	colocSection(p, res, SecWorkloads, "Workloads — services users run today",
		"The frozen scenario traces (simgpu/trace/scenario/, derived from the Orion traces; docs/trace-format.md): a "+
			"CUDA-graph ResNet-50 batch 1 HP (one graph launch per request, 0.88 ms alone) every 8 ms or at Poisson arrivals "+
			"of that mean beside a BERT-base batch 16 LP, the H200's pair (docs/bench.md \"On a real GPU\"), and an eager, "+
			"launch-bound ResNet-50 batch 1 HP every 10 ms beside a ResNet-50 training job (forward, backward, optimizer "+
			"step, a synchronisation per step). The simulator's prediction of each is in `results.json` (`sim`).")
	ablationTable(p, sections(res, SecWorkloads))
	preSwitchSection(p, res)
	ratioSection(p, res)
	microSection(p, res)
	sensitivitySection(p, res)

	p("## Plots\n\n")
	for _, f := range plotFiles {
		p("**%s**\n\n![%s](%s)\n\n", f.Title, f.File, f.File)
	}
	p("## Modeled assumptions\n\n")
	p("Everything ran on simgpu (%s): one kernel at a time, NVIDIA-style time slices between processes (or FIFO), a context ", m.Device)
	p("switch costing idle device time, a launch latency; kernel durations are the traces' GPU times, host time per launch is ")
	p("added by the replayer. The preset's numbers come from an H200 where measured and are fitted or assumed elsewhere ")
	p("(docs/simgpu.md \"Presets\"); the sensitivity section shows how much the headline numbers move when the switch cost ")
	p("or the sharing model changes. The hook's and daemon's costs are real (this machine's CPU and loopback UDP); simgpu's ")
	p("own cost per launch is in the micro-benchmarks.\n")
	return bw.Flush()
}

type printer func(format string, args ...any)

func overheadSection(p printer, res *Results, sec, title, paper string) {
	p("## %s\n\n", title)
	p("Closed loop, repetitions of A (no hook), H (hooked), B (no hook) on one private device; overhead = H / mean(A, B) − 1 per ")
	p("repetition, median over repetitions. The noise floor is the median |B/A − 1|: two identical unhooked runs differ by that much. ")
	p("%s\n\n", paper)
	p("| service | runs × reps | no hook p50 | hooked p50 | overhead (p50) | noise floor (p50) | overhead (mean) | noise floor (mean) | per repetition (p50) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range res.Scenarios {
		if sc.Section != sec {
			continue
		}
		if sc.Error != "" || sc.Overhead == nil {
			p("| %s | error: %s | | | | | | |\n", sc.Name, oneLine(sc.Error))
			continue
		}
		o := sc.Overhead
		var per []string
		for _, v := range o.PerRep {
			per = append(per, fmt.Sprintf("%+.2f", v))
		}
		p("| %s | %d × %d | %s | %s | %+.2f %% | %.2f %% | %+.2f %% | %.2f %% | %s |\n", sc.Name, spec(sc.HP).Runs, o.Reps, ms(o.Base.P50), ms(o.Test.P50),
			o.PctP50, o.NoisePct, o.PctMean, o.NoiseMeanPct, strings.Join(per, ", "))
	}
	p("\n")
}

func pairSection(p printer, res *Results) {
	p("## Scheme IV a/b — two services together (Fig. 16, 17)\n\n")
	p("The HP sends a request every interval; the LP runs back to back, started first. HP JCTs are over all its requests ")
	p("(repetitions pooled); LP JCTs over its runs inside the HP's span. *Fill* is the share of the HP's idle GPU time (within ")
	p("its span) during which LP kernels ran, from simgpu's timeline. *sim* is the discrete-event simulator's prediction of ")
	p("the same pair; *fidelity* is measured / predicted.\n\n")
	p("Paper (Fig. 16): fikit's HP JCT 1.32–16.41× faster than default sharing, more than half of the pairs above 3.4×. ")
	p("(Fig. 17): under fikit the LP ran at under 30 %% of its default-sharing speed in most pairs.\n\n")
	p("*Control* is fikit with the LP on a second simulated device: the daemon schedules the two as if they shared the GPU, ")
	p("but LP kernels cannot delay the HP's, so the HP's slowdown there is the scheduler's host-side cost on this machine ")
	p("(the daemon, two sender threads and the LP's requests competing with the HP's host thread for 2 CPUs).\n\n")
	p("| pair | HP every | HP alone p50 | sharing p50 (× alone) | fikit p50 (× alone) | fikit p99 × alone p99 | control × alone | speedup | sim: sharing × / fikit × / speedup | fidelity fikit × / speedup |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range sections(res, SecPair) {
		if bad(p, sc, 10) {
			continue
		}
		ex, sh, fk, d := mode(sc, ModeExclusive), mode(sc, ModeSharing), mode(sc, ModeFikit), sc.Derived
		p("| %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s | %s / %s / %s | %s / %s |\n", sc.Name, ms(float64(spec(sc.HP).EveryNs)), ms(ex.HP.P50),
			ms(sh.HP.P50), x(d.HPVsAloneP50[ModeSharing]), ms(fk.HP.P50), x(d.HPVsAloneP50[ModeFikit]), x(d.HPVsAloneP99[ModeFikit]),
			x(d.HPVsAloneP50[ModeFikitCPU]), x(d.Speedup), x(d.SimHPVsAloneP50[ModeSharing]), x(d.SimHPVsAloneP50[ModeFikit]), x(d.SimSpeedup),
			f2(d.Fidelity["hp_p50_vs_alone_fikit"]), f2(d.Fidelity["hp_speedup"]))
	}
	p("\n| pair | LP alone p50 | LP sharing p50 (runs) | LP fikit p50 (runs) | LP speedup fikit/sharing (Fig. 17) | fill sharing | fill fikit | sim fill fikit | fidelity fill |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range sections(res, SecPair) {
		if sc.Error != "" || sc.Derived == nil {
			continue
		}
		ex, sh, fk, d := mode(sc, ModeExclusive), mode(sc, ModeSharing), mode(sc, ModeFikit), sc.Derived
		p("| %s | %s | %s (%d) | %s (%d) | %s | %s | %s | %s | %s |\n", sc.Name, ms(ex.LP.P50), ms(sh.LP.P50), sh.LP.Runs, ms(fk.LP.P50), fk.LP.Runs,
			x(d.LPSpeedup), pctp(sh.FillPct), pctp(fk.FillPct), pctv(d.SimFillPct), f2(d.Fidelity["fill"]))
	}
	p("\n")
	interferenceTable(p, sections(res, SecPair), true)
}

func preemptSection(p printer, res *Results) {
	p("## Scheme IV c — preemption: LP continuous, HP at an interval (Fig. 19, 20)\n\n")
	p("Paper: every 1 s × 100 HP tasks; here scaled down (interval and count in the table). Paper (Fig. 19): fikit's mean HP ")
	p("JCT up to 15.77× faster than default sharing, one pair (deeplabv3_resnet50 + resnet101) slower; (Fig. 20) the LP's ")
	p("JCT about the same in both modes, the exception 0.86.\n\n")
	p("| pair | HP every × runs | HP alone mean | sharing mean | fikit mean | speedup (mean) | speedup (p50) | fikit × alone (p50) | LP sharing/fikit (Fig. 20) | sim speedup |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range sections(res, SecPreempt) {
		if bad(p, sc, 10) {
			continue
		}
		ex, sh, fk, d := mode(sc, ModeExclusive), mode(sc, ModeSharing), mode(sc, ModeFikit), sc.Derived
		p("| %s | %s × %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc.Name, ms(float64(spec(sc.HP).EveryNs)), spec(sc.HP).Runs, ms(ex.HP.Mean), ms(sh.HP.Mean),
			ms(fk.HP.Mean), x(d.SpeedupMean), x(d.Speedup), x(d.HPVsAloneP50[ModeFikit]), f2(d.LPSpeedup), x(d.SimSpeedup))
	}
	p("\n")
	interferenceTable(p, sections(res, SecPreempt), false)
}

func stabilitySection(p printer, res *Results) {
	p("## Scheme IV d — stability: HP continuous, LP at an interval (Fig. 21, Table 3)\n\n")
	p("The HP serves requests back to back (with pre- and post-processing on the host); the LP sends a request every interval ")
	p("(paper: 1 s × 100, scaled down). CV = σ/μ of the LP JCT. Paper (Table 3): CV 0.095–0.164 under fikit, μ 7–177 ms.\n\n")
	p("| pair | LP every × runs | LP alone μ (CV) | sharing μ (CV) | fikit μ | fikit σ | fikit CV | sim fikit CV | HP p50 fikit × alone |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range sections(res, SecStability) {
		if bad(p, sc, 9) {
			continue
		}
		ex, sh, fk := mode(sc, ModeExclusive), mode(sc, ModeSharing), mode(sc, ModeFikit)
		simCV := "–"
		if s := sc.SimMode(ModeFikit); s != nil {
			simCV = fmt.Sprintf("%.3f", s.LP.CV)
		}
		p("| %s | %s × %d | %s (%.3f) | %s (%.3f) | %s | %s | **%.3f** | %s | %s |\n", sc.Name, ms(float64(spec(sc.LP).EveryNs)), spec(sc.LP).Runs,
			ms(ex.LP.Mean), ex.LP.CV, ms(sh.LP.Mean), sh.LP.CV, ms(fk.LP.Mean), ms(fk.LP.CV*fk.LP.Mean), fk.LP.CV, simCV,
			x(ratio(fk.HP.P50, ex.HP.P50)))
	}
	p("\n")
	interferenceTable(p, sections(res, SecStability), false)
}

func ratioSection(p printer, res *Results) {
	p("## LP JCT vs exclusive by HP:LP task ratio (Fig. 18)\n\n")
	p("For K HP tasks per LP task, both arriving together: under exclusive use the LP task waits for the K HP tasks, so its ")
	p("JCT is K·T_A + T_B (the paper's computation, from the services' mean JCTs alone); under fikit it is measured with ")
	p("both services hooked and started together. *HP tasks ahead* counts the HP tasks not done when the LP task started ")
	p("(process starts are not synchronised exactly: see the lag). Paper: about 1 at 1:1, rising linearly up to 50:1 while ")
	p("fikit's LP JCT stays constant.\n\n")
	p("The replayer is a Go program, and Go's os.Exit skips the atexit handler in which the hook says goodbye: the daemon ")
	p("notices the HP process's exit itself (a pidfd), as it would a crash.\n\n")
	p("| pair | K:1 | trials | LP fikit | LP exclusive | exclusive / fikit | HP tasks ahead | LP start − HP start |\n|---|---|---|---|---|---|---|---|\n")
	for _, sc := range sections(res, SecRatio) {
		if sc.Error != "" {
			p("| %s | error: %s | | | | | | |\n", sc.Name, oneLine(sc.Error))
		}
		for _, pt := range sc.Ratio {
			p("| %s | %d:1 | %d | %s | %s | %s | %.1f | %s |\n", sc.Name, pt.K, pt.Trials, ms(pt.LPFikitNs), ms(pt.LPExclusiveNs),
				x(pt.Speedup), pt.HPAhead, ms(pt.LagNs))
		}
	}
	p("\n")
}

func microSection(p printer, res *Results) {
	p("## Micro-benchmarks\n\n")
	var mi *Micro
	for _, sc := range sections(res, SecMicro) {
		mi = sc.Micro
	}
	if mi == nil {
		p("Not measured.\n\n")
		return
	}
	if h := mi.Hook; h != nil {
		p("**Hook cost per `cuLaunchKernel`** (bin/hook-bench: median of %d rounds × %d launches, modes alternated; zero-length ", h.Rounds, h.Launches)
		p("kernels on simgpu, so the driver's own cost is simgpu's):\n\n")
		p("| no hook | hook disabled | pass-through (no daemon) | holder (sharing phase) | profiling phase | holder − no hook (p7) |\n|---|---|---|---|---|---|\n")
		p("| %.0f ns | %.0f ns | %.0f ns | %.0f ns | %.0f ns | **%+.0f ns** |\n\n", h.NoHookNs, h.DisabledNs, h.PassNs, h.HolderNs, h.ProfilingNs, h.HolderAddedNs)
		p("Sender notify latency (launch → datagram at the scheduler's socket, a launch every 10 µs): p50 %s, p99 %s; sender thread CPU %.1f %% active, %.1f %% idle.\n\n",
			us(int64(h.NotifyP50Ns)), us(int64(h.NotifyP99Ns)), h.SenderActive, h.SenderIdle)
		if h.NoHookGraphNs > 0 {
			p("**Hook cost per request** (medians; a request ends with a stream synchronization, its run end): CUDA-graph request (one graph launch) %s without the hook, holder %+.0f ns, holder waking a lower priority on the board at each run end %+.0f ns; eager request (20 launches) %s, holder %+.0f ns, waking %+.0f ns.\n\n",
				us(int64(h.NoHookGraphNs)), h.GraphAddedNs, h.BoardGraphAdd, us(int64(h.NoHookEagerNs)), h.EagerAddedNs, h.BoardEagerAdd)
		}
	} else {
		p("Hook cost: not measured (%s).\n\n", oneLine(mi.HookError))
	}
	if g := mi.Grant; g != nil {
		p("**Grant round trip** (%s) vs a raw UDP echo server in the same process, %d samples each, interleaved blocks: ", g.Daemon, g.Samples)
		p("grant p50 %s (p99 %s), echo p50 %s (p99 %s): **%.2f×** (p8).", us(int64(g.GrantP50)), us(int64(g.GrantP99)),
			us(int64(g.EchoP50)), us(int64(g.EchoP99)), g.RatioP50)
		if g.SlotP50 > 0 {
			p(" Answered in the task's board slot instead (a futex wake, no datagram back): p50 %s (p99 %s), %.2f× the echo.",
				us(int64(g.SlotP50)), us(int64(g.SlotP99)), ratio(g.SlotP50, g.EchoP50))
		}
		p("\n\n")
	} else {
		p("Grant round trip: not measured (%s).\n\n", oneLine(mi.GrantError))
	}
	if len(mi.Throughput) > 0 {
		p("**Daemon throughput** (`fikit serve` limited to %s; one sender thread on the other core, sendmmsg; processed = the daemon's `fikit_messages_received_total`):\n\n", mi.Throughput[0].Limit)
		p("| message | launches each | sent/s | processed msgs/s | launches/s | lost |\n|---|---|---|---|---|---|\n")
		for _, b := range mi.Throughput {
			p("| %s | %d | %.0f | %.0f | %.0f | %.1f %% |\n", b.Type, b.PerMessage, b.SentPerS, b.MsgsPerS, b.LaunchesPerS, b.LostPct)
		}
		p("\n")
		for _, b := range mi.Throughput {
			if b.LostPct > 1 {
				p("%s: datagrams were lost, so the daemon was saturated: its capacity on one core is about %.0f messages/s.\n", b.Type, b.MsgsPerS)
			} else {
				p("%s: nothing was lost, so the daemon kept up with the sender: its capacity on one core is at least %.0f messages/s.\n", b.Type, b.MsgsPerS)
			}
		}
		p("\n")
	} else {
		p("Daemon throughput: not measured (%s).\n\n", oneLine(mi.BlastError))
	}
	if s := mi.SimGPU; s != nil {
		p("simgpu itself (bin/simgpu/simgpu-bench): %.0f ns per simulated launch, %.0f ns per event record, synchronize lateness p50 %s, p99 %s.\n\n",
			s.LaunchNs, s.EventRecNs, us(int64(s.WaitP50Ns)), us(int64(s.WaitP99Ns)))
	}
}

func sensitivitySection(p printer, res *Results) {
	p("## Sensitivity to the device model\n\n")
	p("The headline pairs again, on the run's device and on variants of it (the scheduler keeps its defaults, which assume a ")
	p("25 µs switch). Each row is measured side by side with its own exclusive and default-sharing baselines.\n\n")
	p("| pair | device | HP alone p50 | sharing × alone | fikit × alone | fikit p99 × | speedup | fill fikit | sim fikit × / fill |\n|---|---|---|---|---|---|---|---|---|\n")
	byPair := map[string][]Scenario{}
	var names []string
	for _, sc := range sections(res, SecSensitivity) {
		if _, ok := byPair[sc.Name]; !ok {
			names = append(names, sc.Name)
		}
		byPair[sc.Name] = append(byPair[sc.Name], sc)
		if sc.Error != "" || sc.Derived == nil {
			p("| %s | %s | error: %s | | | | | | |\n", sc.Name, sc.Variant, oneLine(sc.Error))
			continue
		}
		ex, fk, d := mode(sc, ModeExclusive), mode(sc, ModeFikit), sc.Derived
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", sc.Name, sc.Variant, ms(ex.HP.P50), x(d.HPVsAloneP50[ModeSharing]),
			x(d.HPVsAloneP50[ModeFikit]), x(d.HPVsAloneP99[ModeFikit]), x(d.Speedup), pctp(fk.FillPct), x(d.SimHPVsAloneP50[ModeFikit]), pctv(d.SimFillPct))
	}
	p("\n")
	for _, n := range names {
		var fx, sp, fill []float64
		for _, sc := range byPair[n] {
			if sc.Derived == nil {
				continue
			}
			fx = append(fx, sc.Derived.HPVsAloneP50[ModeFikit])
			sp = append(sp, sc.Derived.Speedup)
			if f := mode(sc, ModeFikit).FillPct; f != nil {
				fill = append(fill, *f)
			}
		}
		if len(fx) < 2 {
			continue
		}
		p("Dependence, %s: across the %d device assumptions fikit's HP p50 stays within %s–%s of alone; the speedup over ",
			n, len(fx), x(lo(fx)), x(hi(fx)))
		p("default sharing ranges %s–%s (it is set by how badly the device's own sharing treats the HP); the fill %s–%s.\n\n",
			x(lo(sp)), x(hi(sp)), pctv(lo(fill)), pctv(hi(fill)))
	}
	interferenceTable(p, sections(res, SecSensitivity), false)
}

// colocSection is one of the co-location sections beyond the paper's:
// exclusive, default sharing and fikit side by side, then the HP's
// slowdown split into GPU interference and the host's part.
func colocSection(p printer, res *Results, sec, title, intro string) {
	p("## %s\n\n", title)
	p("%s HP JCTs are over all its requests; LP JCTs over its runs inside the HP's span; *fill* as in IV a/b.\n\n", intro)
	p("| pair | HP arrivals | HP alone p50 | sharing p50 (× alone) | fikit p50 (× alone) | fikit p99 × alone p99 | speedup | LP alone p50 | LP fikit p50 (runs) | fill fikit |\n|---|---|---|---|---|---|---|---|---|---|\n")
	scs := sections(res, sec)
	for _, sc := range scs {
		if bad(p, sc, 10) {
			continue
		}
		ex, sh, fk, d := mode(sc, ModeExclusive), mode(sc, ModeSharing), mode(sc, ModeFikit), sc.Derived
		p("| %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s | %s (%d) | %s |\n", sc.Name, arrivals(spec(sc.HP)), ms(ex.HP.P50),
			ms(sh.HP.P50), x(d.HPVsAloneP50[ModeSharing]), ms(fk.HP.P50), x(d.HPVsAloneP50[ModeFikit]), x(d.HPVsAloneP99[ModeFikit]),
			x(d.Speedup), ms(ex.LP.P50), ms(fk.LP.P50), fk.LP.Runs, pctp(fk.FillPct))
	}
	p("\n")
	interferenceTable(p, scs, false)
}

func burstIntro(pr Params) string {
	if pr.Burst == 0 {
		return "The LP runs back to back; the HP sends its requests in bursts."
	}
	return fmt.Sprintf("The LP runs back to back; the HP sends %d requests back to back, then idles %s, %d times.",
		pr.Burst, ms(float64(pr.BurstGapNs)), pr.Bursts)
}

// arrivals describes how the HP's requests arrived.
func arrivals(s *Service) string {
	switch {
	case s.PoissonRate > 0:
		return fmt.Sprintf("Poisson, mean every %s", ms(1e9/s.PoissonRate))
	case s.Burst > 0:
		return fmt.Sprintf("bursts of %d, %s idle", s.Burst, ms(float64(s.EveryNs)))
	case s.EveryNs > 0:
		return "every " + ms(float64(s.EveryNs))
	}
	return "back to back"
}

// interferenceTable splits the HP's wall-clock slowdown in each co-located
// mode of scs into GPU interference and the host's part
// (harness.Interference); explain defines the columns (the first table).
func interferenceTable(p printer, scs []Scenario, explain bool) {
	var rows []string
	for _, sc := range scs {
		if sc.Error != "" {
			continue
		}
		name := sc.Name
		if sc.Variant != "" {
			name += " (" + sc.Variant + ")"
		}
		for _, mr := range sc.Modes {
			m := mr.Mode
			if m == ModeExclusive {
				continue
			}
			es := "–"
			if e := mr.EarlyStop; e != nil && m != ModeFikitCPU {
				es = fmt.Sprintf("%.0f / %.0f µs, %.2f", float64(e.StopP50Ns)/1e3, float64(e.StopP99Ns)/1e3, e.LPKernelsPerRun)
			}
			in := mr.HPInterference
			if in == nil {
				rows = append(rows, fmt.Sprintf("| %s | %s | not measured | | | | %s |", name, modeName(m), es))
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |", name, modeName(m), x(in.WallRatio), x(in.HostRatio),
				pctf(in.P50Pct), pctf(in.P99Pct), es))
		}
	}
	if len(rows) == 0 {
		return
	}
	if explain {
		p("**Where the HP's slowdown comes from.** *Wall* is the HP's p50 JCT over its p50 alone; *host part* the same with each ")
		p("run's blocked time taken out of its JCT (CPU contention, the scheduler's notification lag); *GPU interference* a run's ")
		p("blocked time — its kernels ready while the device ran another context's kernels or switched contexts, simgpu's ground ")
		p("truth — over the HP's p50 alone, at the runs' p50 and p99 (`p10_hp_interference_pct` is fikit's p50, worst scenario). ")
		p("Wall − 1 ≈ (host part − 1) + GPU interference p50 where blocked time adds to the JCT one for one; under default ")
		p("sharing the host part can be below 1×: while the HP's kernels wait, its host thread goes on launching, so part of the ")
		p("blocked time overlaps host time the run spends anyway. *Early stop*: for each HP run, how long after its first kernel ")
		p("reached the device the LP's stream of launches then under way went on arriving (launches less than 30 µs apart: ")
		p("none of them asked the daemon first; 0 when the LP was not launching), at the runs' p50 / p99, and the mean count ")
		p("of LP kernels that reached the device in the run's first 500 µs (fills granted into its first gaps included); *fikit, FIKIT_BOARD=off* is fikit with the hooks ignoring the ")
		p("board, every decision by UDP as in the paper.\n\n")
	} else {
		p("**Where the HP's slowdown comes from** (columns as in IV a/b):\n\n")
	}
	p("| scenario | mode | wall × alone (p50) | host part × alone | GPU interference p50 | GPU interference p99 | early stop p50 / p99, LP kernels per run |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p("%s\n", r)
	}
	p("\n")
}

func pctf(v float64) string { return fmt.Sprintf("%.1f %%", v) }

// findings are the observations a reader should not miss, derived from the
// numbers: missed targets and where fikit did badly.
func findings(res *Results) []string {
	var out []string
	for _, t := range res.Targets {
		if t.Pass != nil && !*t.Pass {
			if t.ReportOnly {
				out = append(out, fmt.Sprintf("Report-only target over: `%s` = %s (target %s).", t.Key, num(t.Value), t.Target))
				continue
			}
			out = append(out, fmt.Sprintf("Target missed: `%s` = %s (target %s).", t.Key, num(t.Value), t.Target))
		}
	}
	for _, sc := range res.Scenarios {
		if sc.Error != "" || sc.Derived == nil || sc.Section == SecRatio {
			continue
		}
		d := sc.Derived
		where := sc.Section + " " + sc.Name
		if sc.Variant != "" {
			where += " (" + sc.Variant + ")"
		}
		fk := sc.Mode(ModeFikit)
		if v := d.HPVsAloneP50[ModeFikit]; v > 1.10 {
			split := ""
			if in := fk.HPInterference; in != nil {
				split = fmt.Sprintf(" (host part %s, GPU interference p50 %s)", x(in.HostRatio), pctf(in.P50Pct))
			}
			out = append(out, fmt.Sprintf("%s: fikit's HP p50 is %s its JCT alone%s.", where, x(v), split))
		}
		if isColoc(sc.Section) && fk != nil && fk.HPInterference != nil && fk.HPInterference.P50Pct > p10Target {
			in, sh := fk.HPInterference, "–"
			if s := sc.Mode(ModeSharing); s != nil && s.HPInterference != nil {
				sh = pctf(s.HPInterference.P50Pct)
			}
			out = append(out, fmt.Sprintf("%s: under fikit the HP's GPU interference is %s of its JCT alone at p50 (p99 %s; default sharing %s).",
				where, pctf(in.P50Pct), pctf(in.P99Pct), sh))
		}
		if d.Speedup > 0 && d.Speedup < 0.95 { // a margin for noise
			out = append(out, fmt.Sprintf("%s: the HP is slower under fikit than under default sharing (%s).", where, x(d.Speedup)))
		}
		if fk != nil && fk.LP.Runs == 0 {
			out = append(out, fmt.Sprintf("%s: the LP completed no run inside the HP's span under fikit.", where))
		}
		if f, ok := d.Fidelity["hp_p50_vs_alone_fikit"]; ok && (f > 1.10 || f < 0.90) {
			out = append(out, fmt.Sprintf("%s: the simulator predicted fikit's HP at %s of alone, measured %s.", where,
				x(d.SimHPVsAloneP50[ModeFikit]), x(d.HPVsAloneP50[ModeFikit])))
		}
		if f, ok := d.Fidelity["fill"]; ok && (f > 1.25 || f < 0.8) && sc.Section == SecPair {
			out = append(out, fmt.Sprintf("%s: the simulator predicted %s of the HP's idle time filled, measured %s.", where,
				pctv(d.SimFillPct), pctp(mode(sc, ModeFikit).FillPct)))
		}
	}
	out = append(out, moreFindings(res)...)
	sort.SliceStable(out, func(i, j int) bool {
		return strings.HasPrefix(out[i], "Target") && !strings.HasPrefix(out[j], "Target")
	})
	return out
}

func sections(res *Results, sec string) []Scenario {
	var out []Scenario
	for _, sc := range res.Scenarios {
		if sc.Section == sec {
			out = append(out, sc)
		}
	}
	return out
}

// bad prints an error row for a scenario that has no results.
func bad(p printer, sc Scenario, cols int) bool {
	if sc.Error == "" && sc.Derived != nil {
		return false
	}
	msg := sc.Error
	if msg == "" {
		msg = "incomplete"
	}
	p("| %s | error: %s |%s\n", sc.Name, oneLine(msg), strings.Repeat(" |", cols-2))
	return true
}

func ms(ns float64) string {
	if ns == 0 || math.IsNaN(ns) {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", ns/1e6)
}

func us(ns int64) string { return fmt.Sprintf("%.1f µs", float64(ns)/1e3) }

func x(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func f2(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func pctp(v *float64) string {
	if v == nil {
		return "–"
	}
	return pctv(*v)
}

func pctv(v float64) string { return fmt.Sprintf("%.0f %%", v) }

func num(v *float64) string {
	if v == nil {
		return "not measured"
	}
	a := math.Abs(*v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", *v)
	case a >= 10:
		return fmt.Sprintf("%.1f", *v)
	}
	return fmt.Sprintf("%.3g", *v)
}

// status is a target's pass/fail cell; a report-only target says so.
func status(t Target) string {
	if !t.ReportOnly || t.Pass == nil {
		return passFail(t.Pass)
	}
	if *t.Pass {
		return "pass (report-only)"
	}
	return "over (report-only)"
}

// numPct is num with a percent sign.
func numPct(v *float64) string {
	if v == nil {
		return num(v)
	}
	return num(v) + " %"
}

func passFail(b *bool) string {
	switch {
	case b == nil:
		return ""
	case *b:
		return "pass"
	}
	return "**FAIL**"
}

func dur(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func lo(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func hi(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// moreFindings covers the overhead sections, the control mode and the
// ratio section.
func moreFindings(res *Results) []string {
	var out []string
	for _, sc := range res.Scenarios {
		if sc.Error != "" {
			continue
		}
		switch sc.Section {
		case SecScheme2, SecScheme3:
			o := sc.Overhead
			if o != nil && len(o.PerRep) > 1 && hi(o.PerRep)-lo(o.PerRep) > 10 {
				out = append(out, fmt.Sprintf("%s %s: the overhead varies between repetitions from %+.1f %% to %+.1f %% (median %+.1f %%).",
					sc.Section, sc.Name, lo(o.PerRep), hi(o.PerRep), o.PctP50))
			}
			if o != nil && o.PctMean > 1 && o.PctMean > 2*o.NoiseMeanPct && o.PctMean > 2*o.PctP50 {
				out = append(out, fmt.Sprintf("%s %s: by mean JCT (the paper's measure) the overhead is %+.2f %% (noise floor %.2f %%), "+
					"against %+.2f %% by median: the hooked runs have a heavier tail.", sc.Section, sc.Name, o.PctMean, o.NoiseMeanPct, o.PctP50))
			}
		case SecPair:
			d := sc.Derived
			if d == nil {
				continue
			}
			fk, ctl := d.HPVsAloneP50[ModeFikit], d.HPVsAloneP50[ModeFikitCPU]
			if fk > 1.02 && ctl > 0 {
				share := 100 * (ctl - 1) / (fk - 1)
				out = append(out, fmt.Sprintf("iv_ab %s: fikit's HP is %s alone; with the LP on another device (no GPU contention) %s, "+
					"so about %.0f %% of the slowdown is host-side cost on this machine, the rest the GPU.", sc.Name, x(fk), x(ctl), math.Max(0, math.Min(100, share))))
			}
		}
	}
	return out
}

// mode is sc's mode m, or an empty one (a table cell shows "–").
func mode(sc Scenario, m string) *ModeResult {
	if r := sc.Mode(m); r != nil {
		return r
	}
	return &ModeResult{Mode: m}
}

// spec is s, or an empty service.
func spec(s *Service) *Service {
	if s == nil {
		return &Service{}
	}
	return s
}
