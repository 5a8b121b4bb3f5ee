package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/bench/sim"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
	"github.com/fikit/fikit/simgpu/trace"
)

// Options configure a benchmark run.
type Options struct {
	// Bin holds fikit, fikit-replay, the hook, simgpu and the C benches.
	Bin string
	// WorkDir is a scratch directory (timelines, daemon files).
	WorkDir string
	// Quick: fewer pairs and runs, every section still present.
	Quick bool
	// MaxPairs, if > 0, limits the model pairs of sections IV a–d.
	MaxPairs int
	Version  string
	// Progress receives one line per step (stderr).
	Progress io.Writer
	// DaemonLog, if set, receives the in-process daemon's log.
	DaemonLog io.Writer
	// TraceDir, if set, receives a trace (Chrome trace-event JSON and a
	// PNG) of the first fikit repetition of each co-location pair.
	TraceDir string
	// Scheduler is the daemon's configuration (zero: the defaults); the
	// bench sets ProfileRuns itself.
	Scheduler *scheduler.Config
	// Device is the simulated GPU every scenario runs on (the zero value:
	// simgpu's default preset); sensitivity variants change one parameter.
	Device harness.Device
}

// Service parameters shared by every scenario. The high-priority services
// are launch-bound the way eager PyTorch inference is: host time per launch
// at the top of the 10–15 µs range (framework overhead per op), so a small
// model's kernels leave gaps between them; the low-priority ones are
// batch-like, with little host time.
const (
	hpCPUNs  = 15_000
	lpCPUNs  = 5_000
	hpPreNs  = 500_000   // continuous HP: pre-processing per request (in its JCT)
	hpPostNs = 1_000_000 // continuous HP: post-processing per request (not in its JCT)
	// intervalX: an HP request every intervalX × its JCT alone, which
	// leaves inter-arrival idle time as a service under moderate load has.
	intervalX = 3.0
	hpPrio    = 0
	lpPrio    = 5
)

// pair is a high-priority (H) and a low-priority (L) model, from one GPU's
// traces, in the style of the paper's Fig. 16 combinations.
type pair struct{ HP, LP string }

func (p pair) name() string { return p.HP + " (H) + " + p.LP + " (L)" }

// allPairs: the first is the headline pair (the demo's); launch-bound
// small models as HP against heavier LPs, one GPU-bound HP last.
var allPairs = []pair{
	{"h100/resnet50_4_fwd", "h100/bert_2_fwd"},
	{"h100/resnet50_4_fwd", "h100/transformer_inf_bs4"},
	{"h100/resnet101_4_fwd", "h100/bert_2_fwd"},
	{"h100/resnet101_4_fwd", "h100/resnet50_4_fwd"},
	{"h100/mobilenet_4_fwd", "h100/bert_2_fwd"},
	{"h100/mobilenet_4_fwd", "h100/resnet101_4_fwd"},
	{"h100/mobilenet_4_fwd", "h100/transformer_inf_bs4"},
	{"h100/resnet50_4_fwd", "h100/mobilenet_4_fwd"},
	{"v100/mobilenetv2_4_fwd", "v100/transformer_xl_4_fwd"},
	{"v100/resnet50_4_fwd", "v100/bert_2_fwd"},
}

// variant is a device assumption of the sensitivity section: the run's
// device with one thing changed.
type variant struct {
	Name   string
	Preset string         // another preset ("": the run's)
	Model  string         // simgpu model ("": the preset's)
	Switch *time.Duration // switch cost (nil: the preset's)
}

// device is the variant of the run's device d.
func (v variant) device(d harness.Device) harness.Device {
	if v.Preset != "" {
		d = harness.Device{Preset: v.Preset}
	}
	if v.Model != "" {
		d.Model = v.Model
	}
	if v.Switch != nil {
		d.Switch = v.Switch
	}
	return d
}

func durPtr(d time.Duration) *time.Duration { return &d }

// plan is what a run does.
type plan struct {
	pairs       []pair   // IV a/b, c, d
	overhead    []string // Scheme II/III services
	headline    []pair   // Fig. 18 ratios and sensitivity
	variants    []variant
	ratios      []int
	hpRuns      int // IV a/b HP requests per mode and repetition
	reps        int
	ovReps      int
	ovBudget    time.Duration // Scheme II/III time per mode and repetition
	profileRuns int
	preEvery    time.Duration // IV c: an HP request every …
	preRuns     int
	stableRuns  int // IV d: LP requests per mode
	ratioTrials int
	// workloads: services users run today (the frozen scenario traces).
	workloads []workload
	// Co-location under other conditions (each exclusive, default sharing
	// and fikit): a busy host (a CPU hog on every core) with the IV a/b
	// pairs; a sparse HP, every sparseEvery (longer than the daemon's
	// holder TTL) on the headline pairs and with Poisson arrivals at the
	// IV a/b mean interval on the pairs; a bursty HP, bursts of burstN
	// requests back to back with burstGap idle between them.
	sparseEvery time.Duration
	sparseRuns  int
	burstN      int
	burstGap    time.Duration
	bursts      int
	hookRounds  int
	hookLaunch  int
	rttSamples  int
	blastDur    time.Duration
}

func newPlan(o Options) plan {
	p := plan{
		pairs:    allPairs,
		overhead: []string{"h100/resnet50_4_fwd", "h100/resnet101_4_fwd", "h100/mobilenet_4_fwd", "v100/mobilenetv2_4_fwd", "v100/resnet50_4_fwd", "h100/transformer_inf_bs4", "h100/bert_2_fwd"},
		headline: []pair{allPairs[0], allPairs[4], allPairs[8]},
		variants: []variant{{Name: "as run"}, {Name: "switch 0 µs", Switch: durPtr(0)},
			{Name: "legacy preset (switch 25 µs)", Preset: "legacy"}, {Name: "fifo model", Model: "fifo"}},
		ratios: []int{1, 10, 20, 30, 40, 50},
		hpRuns: 150, reps: 2, ovReps: 5, ovBudget: 600 * time.Millisecond, profileRuns: 30,
		preEvery: 60 * time.Millisecond, preRuns: 50, stableRuns: 40, ratioTrials: 4,
		sparseEvery: 1500 * time.Millisecond, sparseRuns: 8, burstN: 5, burstGap: 200 * time.Millisecond, bursts: 8,
		hookRounds: 7, hookLaunch: 100000, rttSamples: 10000, blastDur: time.Second,
	}
	if o.Quick {
		p.pairs = []pair{allPairs[0], allPairs[5], allPairs[8]}
		p.overhead = []string{"h100/resnet50_4_fwd", "h100/mobilenet_4_fwd"}
		p.headline = []pair{allPairs[0]}
		p.hpRuns, p.reps, p.ovReps, p.ovBudget, p.profileRuns = 100, 1, 4, 300*time.Millisecond, 20
		p.preEvery, p.preRuns, p.stableRuns, p.ratioTrials = 40*time.Millisecond, 40, 20, 3
		p.sparseRuns, p.bursts = 5, 5
		p.hookRounds, p.hookLaunch, p.rttSamples, p.blastDur = 5, 40000, 3000, 500*time.Millisecond
	}
	if o.MaxPairs > 0 && o.MaxPairs < len(p.pairs) {
		p.pairs = p.pairs[:o.MaxPairs]
	}
	p.workloads = workloadPlan(p.hpRuns)
	return p
}

// svc is one service as a scenario runs it, live or simulated.
type svc struct {
	Trace              string
	Key                string // task key under the daemon
	Prio               int
	CPUNs, PreNs, Post int64
	Every              time.Duration
	Runs, Warmup       int
	// Poisson > 0: Poisson arrivals at this rate per second (seed Seed)
	// instead of Every. Burst > 0: bursts of Burst runs back to back, Every
	// of idle time between them (not simulated).
	Poisson float64
	Seed    uint64
	Burst   int
	// Graph: each run is one CUDA graph launch (fikit-replay --graph).
	// CPUNs < 0: the trace's own host times.
	Graph bool
}

func hpSvc(tr string, every time.Duration, runs int) svc {
	return svc{Trace: tr, Key: "bench/hp/" + tr, Prio: hpPrio, CPUNs: hpCPUNs, Every: every, Runs: runs, Warmup: 3}
}

func hpContinuous(tr string, runs int) svc {
	return svc{Trace: tr, Key: "bench/hpc/" + tr, Prio: hpPrio, CPUNs: hpCPUNs, PreNs: hpPreNs, Post: hpPostNs,
		Runs: runs, Warmup: 2}
}

func lpSvc(tr string, every time.Duration, runs int) svc {
	return svc{Trace: tr, Key: "bench/lp/" + tr, Prio: lpPrio, CPUNs: lpCPUNs, Every: every, Runs: runs}
}

// live is the service for the harness; hooked ones talk to sched.
func (s svc) live(hooked bool, sched string) harness.Service {
	h := harness.Service{Name: s.Key, Trace: s.Trace, Runs: s.Runs, Warmup: s.Warmup, CPUNs: s.CPUNs, PreNs: s.PreNs,
		PostNs: s.Post, Every: s.Every}
	if hooked {
		h.Hooked, h.Prio, h.TaskKey, h.Scheduler = true, s.Prio, s.Key, sched
	}
	if s.Graph {
		h.Args = append(h.Args, "--graph")
	}
	switch {
	case s.Poisson > 0:
		h.Every = 0
		h.Args = append(h.Args, "--poisson", strconv.FormatFloat(s.Poisson, 'g', -1, 64), "--seed", strconv.FormatUint(s.Seed, 10))
	case s.Burst > 0:
		h.Args = append(h.Args, "--burst", strconv.Itoa(s.Burst))
	}
	return h
}

// spec is the service as the results record it.
func (s svc) spec() *Service {
	sp := &Service{Trace: s.Trace, Prio: s.Prio, CPUNs: s.CPUNs, PreNs: s.PreNs, PostNs: s.Post, EveryNs: int64(s.Every), Runs: s.Runs,
		Burst: s.Burst, Graph: s.Graph}
	if s.Poisson > 0 {
		sp.EveryNs, sp.PoissonRate, sp.Seed = 0, s.Poisson, s.Seed
	}
	return sp
}

// simService is the service for the simulator (without its profile).
func (s svc) simService() (sim.Service, error) {
	t, err := trace.Load(s.Trace)
	if err != nil {
		return sim.Service{}, err
	}
	ks := sim.KernelsFromTrace(t, s.CPUNs)
	if s.Graph {
		ks = sim.GraphFromTrace(t, 0)
	}
	ss := sim.Service{Name: s.Key, Priority: uint8(s.Prio), Kernels: ks, PreNs: s.PreNs,
		PostNs: s.Post, Every: s.Every, Runs: s.Runs, Poisson: s.Poisson, Seed: s.Seed}
	if s.Every > 0 || s.Poisson > 0 {
		ss.Late = sim.WakeLate // a real open-loop service starts its requests late
	}
	return ss, nil
}

// aloneJCT predicts a service's p50 JCT alone on device dev (the simulator
// is deterministic and takes milliseconds): it sets request intervals and
// run counts before anything is measured.
func aloneJCT(s svc, dev devmodel.Config) (float64, error) {
	ss, err := s.simService()
	if err != nil {
		return 0, err
	}
	ss.Every, ss.Runs, ss.Poisson = 0, 10, 0
	opts := sim.DefaultOptions()
	opts.Mode, opts.Device = sim.Sharing, dev
	r, err := sim.Run(opts, []sim.Service{ss})
	if err != nil {
		return 0, fmt.Errorf("predicting %s alone: %w", s.Trace, err)
	}
	return sim.Summarize(r.Services[0].JCTs).P50, nil
}

// hpInterval is an HP request interval: intervalX × its JCT alone, whole
// milliseconds.
func hpInterval(aloneNs float64) time.Duration {
	ms := math.Ceil(intervalX * aloneNs / 1e6)
	return time.Duration(ms) * time.Millisecond
}

// lpInterval (IV d) leaves room for an LP request slowed down by a busy HP.
func lpInterval(aloneNs float64) time.Duration {
	ms := math.Max(20, math.Ceil(4*aloneNs/1e7)*10)
	return time.Duration(ms) * time.Millisecond
}

// runsFor is how many closed-loop runs fill budget, within [lo, hi].
func runsFor(budget time.Duration, jctNs float64, lo, hi int) int {
	if jctNs <= 0 {
		return lo
	}
	n := int(float64(budget) / jctNs)
	return min(max(n, lo), hi)
}
