package bench

import (
	"slices"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/bench/sim"
	"github.com/fikit/fikit/internal/stats"
)

// Sections of the evaluation, as Scenario.Section names them.
const (
	SecScheme2     = "scheme2"     // sharing phase vs no hook (Fig. 14)
	SecScheme3     = "scheme3"     // profiling phase vs no hook (Fig. 15)
	SecPair        = "iv_ab"       // two services together (Fig. 16, 17)
	SecPreempt     = "iv_c"        // LP continuous, HP at an interval (Fig. 19, 20)
	SecStability   = "iv_d"        // HP continuous, LP at an interval (Fig. 21, Table 3)
	SecRatio       = "ratio"       // LP JCT vs exclusive at HP:LP task ratios (Fig. 18)
	SecMicro       = "micro"       // hook cost, grant round trip, daemon throughput
	SecSensitivity = "sensitivity" // headline pairs under other device assumptions
	SecBusyHost    = "busy_host"   // IV a/b pairs with a CPU hog on every core
	SecSparse      = "sparse_hp"   // HP every 1.5 s, or Poisson arrivals; LP continuous
	SecBursts      = "bursts"      // HP in bursts of back-to-back requests; LP continuous
	SecWorkloads   = "workloads"   // services users run today (frozen traces): CUDA graph, eager, training
)

// colocSections are the sections whose scenarios run the HP on one device
// with an LP (their HP GPU interference makes p10); sensitivity variants
// are not in the summary.
var colocSections = []string{SecPair, SecPreempt, SecStability, SecBusyHost, SecSparse, SecBursts, SecWorkloads}

func isColoc(sec string) bool { return slices.Contains(colocSections, sec) }

// Modes, as ModeResult.Mode names them: the simulator's (one list, so a
// measured mode and its prediction share a name), and the bench's control.
var (
	ModeExclusive = sim.Exclusive.String()
	ModeSharing   = sim.Sharing.String()
	ModeFikit     = sim.Fikit.String()
)

// ModeFikitCPU is a control: fikit with the LP on another device, so only
// the scheduler's host-side cost reaches the HP.
const ModeFikitCPU = "fikit_lp_other_device"

// ModeFikitUDP is fikit with the hooks ignoring the daemon's board
// (FIKIT_BOARD=off): every decision by UDP, as in the paper, beside the
// board's gate (docs/design.md "Board").
const ModeFikitUDP = "fikit_udp"

// Results is everything one `fikit bench` run measured: the JSON results
// file. Summary and Targets are derived from Scenarios (Summarize, Check).
type Results struct {
	Meta      Meta       `json:"meta"`
	Summary   Summary    `json:"summary"`
	Targets   []Target   `json:"targets"`
	Scenarios []Scenario `json:"scenarios"`
}

// Meta describes the run.
type Meta struct {
	Version   string  `json:"version"`
	Policy    string  `json:"policy"` // the daemon's fill policy (--policy)
	Quick     bool    `json:"quick"`
	Started   string  `json:"started"` // RFC 3339
	WallS     float64 `json:"wall_s"`
	EstimateS float64 `json:"estimate_s"`
	Host      string  `json:"host"`
	CPUs      int     `json:"cpus"`
	// LoadAvg is /proc/loadavg's 1-minute figure at the start and the end:
	// other work on the machine shows here.
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`
	// Device is the device the services ran on; DevicePreset its simgpu
	// preset (--device).
	Device       string `json:"device"`
	DevicePreset string `json:"device_preset"`
	// GPU says what a real-GPU column would need (none was measured).
	GPU    string `json:"gpu"`
	Params Params `json:"params"`
	// Failures lists scenarios that could not be measured.
	Failures []string `json:"failures,omitempty"`
}

// Params are the run's settings.
type Params struct {
	HPCPUNs      int64   `json:"hp_cpu_ns"`
	LPCPUNs      int64   `json:"lp_cpu_ns"`
	HPPreNs      int64   `json:"hp_continuous_pre_ns"`
	HPPostNs     int64   `json:"hp_continuous_post_ns"`
	IntervalX    float64 `json:"hp_interval_x_alone"`
	HPRuns       int     `json:"hp_runs"`
	Reps         int     `json:"reps"`
	OverheadReps int     `json:"overhead_reps"`
	ProfileRuns  int     `json:"profile_runs"`
	PreemptEvery int64   `json:"preempt_every_ns"`
	PreemptRuns  int     `json:"preempt_runs"`
	StableRuns   int     `json:"stable_runs"`
	RatioTrials  int     `json:"ratio_trials"`
	Ratios       []int   `json:"ratios"`
	// SparseEveryNs and SparseRuns: the sparse HP's interval and requests;
	// Burst, BurstGapNs and Bursts: the bursty HP's requests per burst, idle
	// time between bursts and bursts per mode; HogThreads: the busy host's
	// spinning processes.
	SparseEveryNs int64 `json:"sparse_every_ns"`
	SparseRuns    int   `json:"sparse_runs"`
	Burst         int   `json:"burst"`
	BurstGapNs    int64 `json:"burst_gap_ns"`
	Bursts        int   `json:"bursts"`
	HogThreads    int   `json:"hog_threads"`
	// Sim latencies fed to the simulator (measured in this run's micro
	// section when available).
	SimNotifyNs int64 `json:"sim_notify_latency_ns"`
	SimGrantNs  int64 `json:"sim_grant_rtt_ns"`
}

// Summary is the contract of `fikit bench --json`: one number per target
// (docs/bench.md defines each). A nil value was not measured.
type Summary struct {
	P1OverheadPct   *float64 `json:"p1_overhead_pct"`
	P2OverheadPct   *float64 `json:"p2_overhead_pct"`
	P3HPRatioP50    *float64 `json:"p3_hp_ratio_p50"`
	P3HPRatioP99    *float64 `json:"p3_hp_ratio_p99"`
	P4SpeedupMin    *float64 `json:"p4_speedup_min"`
	P4SpeedupMax    *float64 `json:"p4_speedup_max"`
	P5FillPct       *float64 `json:"p5_fill_pct"`
	P6LPCV          *float64 `json:"p6_lp_cv"`
	P7HookNs        *float64 `json:"p7_hook_ns"`
	P8GrantRTTRatio *float64 `json:"p8_grant_rtt_ratio"`
	// P10HPInterferencePct is the HP's GPU interference p50 under fikit,
	// worst over the co-location scenarios (harness.Interference.P50Pct).
	P10HPInterferencePct *float64 `json:"p10_hp_interference_pct"`
	// The same with FIKIT_BOARD=off (ModeFikitUDP), and the early stop of
	// both: LP kernels arriving early in an HP run, per run, worst scenario
	// (harness.EarlyStop.LPKernelsPerRun).
	P10UDPHPInterferencePct *float64 `json:"p10_udp_hp_interference_pct"`
	EarlyStopLPKernels      *float64 `json:"early_stop_lp_kernels"`
	EarlyStopUDPLPKernels   *float64 `json:"early_stop_udp_lp_kernels"`
	// EarlyStopP99Us and EarlyStopUDPP99Us are the stop latencies' p99
	// (HP launch → LP stream stopped, harness.EarlyStop.StopP99Ns) in µs,
	// worst scenario.
	EarlyStopP99Us    *float64 `json:"early_stop_p99_us"`
	EarlyStopUDPP99Us *float64 `json:"early_stop_udp_p99_us"`
}

// Service is how a service was run.
type Service struct {
	Trace  string `json:"trace"`
	Prio   int    `json:"priority"`
	CPUNs  int64  `json:"cpu_ns"`
	PreNs  int64  `json:"pre_ns,omitempty"`
	PostNs int64  `json:"post_ns,omitempty"`
	// EveryNs is the open-loop request interval (0: closed loop; with
	// Burst, the idle time between bursts).
	EveryNs int64 `json:"every_ns,omitempty"`
	Runs    int   `json:"runs,omitempty"`
	// PoissonRate > 0: Poisson arrivals at this rate per second (Seed).
	PoissonRate float64 `json:"poisson_per_s,omitempty"`
	Seed        uint64  `json:"seed,omitempty"`
	// Burst > 0: requests in bursts of Burst back to back.
	Burst int `json:"burst,omitempty"`
	// Graph: each request one CUDA graph launch. CPUNs < 0: the trace's
	// own host times.
	Graph bool `json:"graph,omitempty"`
}

// Scenario is one measured case of one section.
type Scenario struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	// Variant names a sensitivity case ("fifo", "switch 100µs").
	Variant string `json:"variant,omitempty"`
	// Device is the simulated GPU it ran on (preset and overrides).
	Device string   `json:"device,omitempty"`
	HP     *Service `json:"hp,omitempty"`
	LP     *Service `json:"lp,omitempty"`
	// Modes measured, and the simulator's prediction of the same modes.
	Modes []ModeResult `json:"modes,omitempty"`
	Sim   []ModeResult `json:"sim,omitempty"`
	// Derived figures of Modes (and Sim), see Derive.
	Derived  *Derived  `json:"derived,omitempty"`
	Overhead *Overhead `json:"overhead,omitempty"`
	Ratio    []Point   `json:"ratio,omitempty"`
	Micro    *Micro    `json:"micro,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// JCT summarizes a service's JCTs (ns).
type JCT struct {
	Runs  int     `json:"runs"`
	P50   float64 `json:"p50_ns"`
	P99   float64 `json:"p99_ns"`
	Mean  float64 `json:"mean_ns"`
	CV    float64 `json:"cv"`
	Rate  float64 `json:"runs_per_s,omitempty"`
	Notes string  `json:"notes,omitempty"`
}

// ModeResult is one mode of a scenario: the high- and low-priority
// services' JCTs (exclusive: each alone), and from the simgpu timeline the
// share of the high-priority service's idle GPU time that low-priority
// kernels filled.
type ModeResult struct {
	Mode    string   `json:"mode"`
	HP      JCT      `json:"hp"`
	LP      JCT      `json:"lp"`
	FillPct *float64 `json:"fill_pct,omitempty"`
	SpanNs  int64    `json:"span_ns,omitempty"`
	// HPInterference splits the HP's slowdown against the exclusive mode's
	// HP p50 into GPU interference (its runs' blocked time, simgpu ground
	// truth) and the host's part, over the same runs as HP (repetitions
	// pooled). Nil where not measured (the simulator's modes).
	HPInterference *harness.Interference `json:"hp_interference,omitempty"`
	// EarlyStop: how soon the LP stopped launching when an HP run began
	// (harness.EarlyStopOf; timeline scenarios).
	EarlyStop *harness.EarlyStop `json:"early_stop,omitempty"`
}

// Derived are the ratios the figures show, from a scenario's modes.
type Derived struct {
	HPVsAloneP50  map[string]float64 `json:"hp_p50_vs_alone"`
	HPVsAloneP99  map[string]float64 `json:"hp_p99_vs_alone"`
	HPVsAloneMean map[string]float64 `json:"hp_mean_vs_alone"`
	// Speedup is the high-priority p50 JCT under default sharing over that
	// under fikit (Fig. 16, 19); SpeedupMean the same of the means (the
	// paper's averages).
	Speedup     float64 `json:"hp_speedup_p50"`
	SpeedupMean float64 `json:"hp_speedup_mean"`
	// LPSpeedup is the low-priority p50 JCT under default sharing over that
	// under fikit (Fig. 17, 20: below 1, fikit slows it).
	LPSpeedup float64 `json:"lp_speedup_p50"`
	// LPVsAlone is the low-priority p50 JCT under fikit over its JCT alone.
	LPVsAlone float64 `json:"lp_p50_vs_alone"`
	// Sim* are the simulator's predictions of the same figures; Fidelity
	// is measured / predicted.
	SimHPVsAloneP50 map[string]float64 `json:"sim_hp_p50_vs_alone,omitempty"`
	SimSpeedup      float64            `json:"sim_hp_speedup_p50,omitempty"`
	SimFillPct      float64            `json:"sim_fill_pct,omitempty"`
	Fidelity        map[string]float64 `json:"fidelity,omitempty"`
}

// Overhead is Scheme II or III: one service alone, hooked (sharing or
// profiling phase) against not hooked, in repetitions A (no hook), H
// (hooked), B (no hook) so that drift cancels.
type Overhead struct {
	Phase string `json:"phase"` // "sharing" or "profiling"
	Reps  int    `json:"reps"`
	Base  JCT    `json:"no_hook"`
	Test  JCT    `json:"hooked"`
	// PctP50 is the median over repetitions of H's p50 JCT over the mean
	// of A's and B's, minus 1, in percent; PctMean the same of mean JCTs.
	PctP50  float64 `json:"overhead_p50_pct"`
	PctMean float64 `json:"overhead_mean_pct"`
	// NoisePct is the median over repetitions of |B/A − 1| (p50s): what
	// two identical unhooked runs differ by on this machine right now.
	NoisePct float64 `json:"noise_pct"`
	// NoiseMeanPct is the same of the mean JCTs.
	NoiseMeanPct float64   `json:"noise_mean_pct"`
	PerRep       []float64 `json:"per_rep_p50_pct"`
	PerRepMean   []float64 `json:"per_rep_mean_pct"`
}

// Point is one HP:LP task ratio of Fig. 18.
type Point struct {
	K      int `json:"hp_tasks_per_lp_task"`
	Trials int `json:"trials"`
	// LPFikitNs is the measured mean LP JCT under fikit while the HP runs
	// its K tasks; LPExclusiveNs = K·T_A + T_B from the services' mean
	// JCTs alone (the paper's computation).
	LPFikitNs     float64 `json:"lp_fikit_mean_ns"`
	LPExclusiveNs float64 `json:"lp_exclusive_ns"`
	Speedup       float64 `json:"exclusive_over_fikit"`
	// HPAhead is the mean number of HP tasks not yet done when the LP task
	// started; LagNs the mean LP start minus the HP's first start.
	HPAhead float64 `json:"hp_tasks_ahead"`
	LagNs   float64 `json:"lp_start_lag_ns"`
}

// Micro is the micro-benchmark section.
type Micro struct {
	Hook       *HookBench  `json:"hook,omitempty"`
	HookError  string      `json:"hook_error,omitempty"`
	Grant      *GrantRTT   `json:"grant_rtt,omitempty"`
	GrantError string      `json:"grant_error,omitempty"`
	Throughput []Blast     `json:"daemon_throughput,omitempty"`
	BlastError string      `json:"throughput_error,omitempty"`
	SimGPU     *SimGPUCost `json:"simgpu,omitempty"`
}

// HookBench is bin/hook-bench --json: median ns per cuLaunchKernel call by
// mode, the sender's notify latency and CPU use.
type HookBench struct {
	Launches     int     `json:"launches"`
	Rounds       int     `json:"rounds"`
	NoHookNs     float64 `json:"nohook_ns"`
	DisabledNs   float64 `json:"disabled_ns"`
	PassNs       float64 `json:"passthrough_ns"`
	HolderNs     float64 `json:"holder_ns"`
	ProfilingNs  float64 `json:"profiling_ns"`
	NotifyP50Ns  float64 `json:"notify_p50_ns"`
	NotifyP99Ns  float64 `json:"notify_p99_ns"`
	SenderActive float64 `json:"sender_cpu_active_pct"`
	SenderIdle   float64 `json:"sender_cpu_idle_pct"`
	// HolderAddedNs = HolderNs − NoHookNs (p7).
	HolderAddedNs float64 `json:"holder_added_ns"`
	// Per request (median): a CUDA-graph request (one graph launch and a
	// synchronization, its run end) and an eager one (20 launches and
	// the synchronization), without the hook, as a holder, and as a holder
	// whose run ends wake a lower priority sleeping on the board (the
	// worst case: a futex wake per request).
	NoHookGraphNs float64 `json:"nohook_graph_request_ns"`
	HolderGraphNs float64 `json:"holder_graph_request_ns"`
	BoardGraphNs  float64 `json:"board_graph_request_ns"`
	NoHookEagerNs float64 `json:"nohook_eager_request_ns"`
	HolderEagerNs float64 `json:"holder_eager_request_ns"`
	BoardEagerNs  float64 `json:"board_eager_request_ns"`
	GraphAddedNs  float64 `json:"graph_request_added_ns"`
	BoardGraphAdd float64 `json:"board_graph_request_added_ns"`
	EagerAddedNs  float64 `json:"eager_request_added_ns"`
	BoardEagerAdd float64 `json:"board_eager_request_added_ns"`
}

// GrantRTT compares a LaunchRequest→Grant round trip against the in-process
// daemon with a raw UDP echo in the same process, interleaved in blocks.
type GrantRTT struct {
	Samples  int     `json:"samples"`
	GrantP50 float64 `json:"grant_p50_ns"`
	GrantP99 float64 `json:"grant_p99_ns"`
	EchoP50  float64 `json:"echo_p50_ns"`
	EchoP99  float64 `json:"echo_p99_ns"`
	RatioP50 float64 `json:"ratio_p50"`
	// SlotP50 and SlotP99: the same request answered in the task's board
	// slot, a futex wake instead of a datagram back (0: no board).
	SlotP50   float64 `json:"slot_p50_ns,omitempty"`
	SlotP99   float64 `json:"slot_p99_ns,omitempty"`
	Daemon    string  `json:"daemon"`
	ReplyType string  `json:"reply"`
}

// Blast is the daemon's throughput for one message type: datagrams sent as
// fast as one sender can, and what the daemon counted as received.
type Blast struct {
	Type         string  `json:"type"`
	PerMessage   int     `json:"launches_per_message"`
	DurationS    float64 `json:"duration_s"`
	SentPerS     float64 `json:"sent_per_s"`
	MsgsPerS     float64 `json:"processed_per_s"`
	LaunchesPerS float64 `json:"launches_per_s"`
	LostPct      float64 `json:"lost_pct"`
	Limit        string  `json:"daemon_limited_to"`
}

// SimGPUCost is bin/simgpu/simgpu-bench --json (the simulated driver's own
// cost, for reading the other numbers).
type SimGPUCost struct {
	LaunchNs   float64 `json:"launch_ns"`
	WaitP50Ns  float64 `json:"wait_p50_ns"`
	WaitP99Ns  float64 `json:"wait_p99_ns"`
	EventRecNs float64 `json:"event_record_ns"`
}

// Mode returns the scenario's measured mode m (nil if absent).
func (s *Scenario) Mode(m string) *ModeResult { return findMode(s.Modes, m) }

// SimMode returns the simulator's prediction of mode m (nil if absent).
func (s *Scenario) SimMode(m string) *ModeResult { return findMode(s.Sim, m) }

func findMode(ms []ModeResult, m string) *ModeResult {
	for i := range ms {
		if ms[i].Mode == m {
			return &ms[i]
		}
	}
	return nil
}

// Summarize JCTs (ns) with nearest-rank quantiles; elapsedNs > 0 also
// gives the rate.
func Summarize(jcts []int64, elapsedNs int64) JCT {
	j := JCT{Runs: len(jcts)}
	if len(jcts) == 0 {
		return j
	}
	v := slices.Sorted(slices.Values(jcts))
	j.P50, j.P99 = float64(stats.QuantileSorted(v, 0.5)), float64(stats.QuantileSorted(v, 0.99))
	j.Mean, j.CV = stats.MeanCV(v)
	if elapsedNs > 0 {
		j.Rate = float64(len(v)) / (float64(elapsedNs) / 1e9)
	}
	return j
}

// Derive computes a scenario's ratios from its measured and simulated
// modes.
func Derive(s *Scenario) *Derived {
	ex := s.Mode(ModeExclusive)
	if ex == nil || ex.HP.P50 == 0 {
		return nil
	}
	d := &Derived{HPVsAloneP50: map[string]float64{}, HPVsAloneP99: map[string]float64{}, HPVsAloneMean: map[string]float64{}}
	for _, m := range s.Modes {
		if m.Mode == ModeExclusive || m.HP.Runs == 0 {
			continue
		}
		d.HPVsAloneP50[m.Mode] = m.HP.P50 / ex.HP.P50
		d.HPVsAloneP99[m.Mode] = ratio(m.HP.P99, ex.HP.P99)
		d.HPVsAloneMean[m.Mode] = ratio(m.HP.Mean, ex.HP.Mean)
	}
	sh, fk := s.Mode(ModeSharing), s.Mode(ModeFikit)
	if sh != nil && fk != nil {
		d.Speedup = ratio(sh.HP.P50, fk.HP.P50)
		d.SpeedupMean = ratio(sh.HP.Mean, fk.HP.Mean)
		d.LPSpeedup = ratio(sh.LP.P50, fk.LP.P50)
	}
	if fk != nil {
		d.LPVsAlone = ratio(fk.LP.P50, ex.LP.P50)
	}
	sex := s.SimMode(ModeExclusive)
	if sex != nil && sex.HP.P50 > 0 {
		d.SimHPVsAloneP50 = map[string]float64{}
		for _, m := range s.Sim {
			if m.Mode != ModeExclusive {
				d.SimHPVsAloneP50[m.Mode] = m.HP.P50 / sex.HP.P50
			}
		}
		ssh, sfk := s.SimMode(ModeSharing), s.SimMode(ModeFikit)
		if ssh != nil && sfk != nil {
			d.SimSpeedup = ratio(ssh.HP.P50, sfk.HP.P50)
		}
		if sfk != nil && sfk.FillPct != nil {
			d.SimFillPct = *sfk.FillPct
		}
		d.Fidelity = map[string]float64{}
		for m, v := range d.HPVsAloneP50 {
			if p := d.SimHPVsAloneP50[m]; p > 0 {
				d.Fidelity["hp_p50_vs_alone_"+m] = v / p
			}
		}
		if d.SimSpeedup > 0 && d.Speedup > 0 {
			d.Fidelity["hp_speedup"] = d.Speedup / d.SimSpeedup
		}
		if fk != nil && fk.FillPct != nil && d.SimFillPct > 0 {
			d.Fidelity["fill"] = *fk.FillPct / d.SimFillPct
		}
		if sfk != nil && fk != nil && sfk.LP.P50 > 0 && fk.LP.P50 > 0 {
			d.Fidelity["lp_p50_fikit"] = fk.LP.P50 / sfk.LP.P50
		}
	}
	return d
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
