// Package sim is a discrete-event simulator of services sharing one GPU. It
// drives the same scheduling core as the daemon (package scheduler) and
// simgpu's own device model (package devmodel: time slices, context-switch
// cost, launch latency) on a virtual clock, and reports per-service JCT
// distributions, device utilization and how much of the high-priority
// service's idle GPU time was filled. Nothing in it reads a clock, so a run
// is deterministic and much faster than real time.
//
// Services come from traces (ordered kernels with durations) or from stored
// profiles (kernels re-created from their mean durations and gaps), so that
// `fikit sim --profile A --profile B` predicts how two profiled services
// would fare together before they ever share a GPU.
package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// Mode is how the services share the GPU.
type Mode int

const (
	// Fikit: every service is hooked and scheduled by the core.
	Fikit Mode = iota
	// Sharing: no scheduler; the device's own sharing decides (NVIDIA's
	// default time-slicing in the timeslice model).
	Sharing
	// Exclusive: each service runs alone, one after another.
	Exclusive
)

// modeNames are the modes' names everywhere (fikit sim --mode, the bench's
// results): the one list of them.
var modeNames = [...]string{Fikit: "fikit", Sharing: "sharing", Exclusive: "exclusive"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode is the mode named s.
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if n == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("sim: no mode %q (want %s)", s, strings.Join(modeNames[:], ", "))
}

// Kernel is one launch of a service's run.
type Kernel struct {
	ID         uint64
	DurationNs int64
	// HostNs is the host time before this launch (framework overhead),
	// counted from the previous launch.
	HostNs int64
}

// Service describes one simulated service.
type Service struct {
	Name     string
	Priority uint8
	// Weight is its share among services of its priority (0: 1).
	Weight  uint32
	Kernels []Kernel // one run, in launch order
	PreNs   int64    // host time at the start of a run (in the JCT)
	PostNs  int64    // host time after a run (not in the JCT)
	// Every is the open-loop arrival interval (0: closed loop); Poisson,
	// if > 0, draws exponential inter-arrival times of that mean rate per
	// second instead (seeded by Seed).
	Every   time.Duration
	Poisson float64
	Seed    uint64
	// Late, if > 0, delays each open-loop run's start after its arrival by
	// a uniform random time in [0, Late) (seeded by Seed): the host's
	// wake-up lateness, which makes run starts jitter around their clock
	// (WakeLate is a typical figure).
	Late time.Duration
	// Burst > 0 (with Every): runs come in bursts of Burst, back to back;
	// after a burst's last run the service idles Every before the next.
	Burst int
	// Runs to complete (0: until the horizon).
	Runs int
	// Start delays the service's first arrival.
	Start time.Duration
	// Profile the core uses (mode Fikit); nil: the service profiles first,
	// as a real one would (its runs measured exactly, as a hook would).
	Profile *profiler.Profile
	// Change, if set, makes the service drift from its profile mid-run.
	Change *Change
}

// Change is how a service's kernels change from its run At (1-based) on:
// durations scaled by DurationScale (same kernel IDs: a clock or driver
// change), with NewIDs other kernel IDs (new grids: a batch size change),
// host time scaled by HostScale (the service's own code got faster or
// slower).
type Change struct {
	At            int
	DurationScale float64
	NewIDs        bool
	HostScale     float64 // host time before each launch scaled (0: unchanged)
}

// kernelsAt are the kernels of the service's run number run (1-based).
func (sv *Service) kernelsAt(run int) []Kernel {
	c := sv.Change
	if c == nil || run < c.At {
		return sv.Kernels
	}
	ks := append([]Kernel(nil), sv.Kernels...)
	for i := range ks {
		if c.DurationScale > 0 {
			ks[i].DurationNs = int64(float64(ks[i].DurationNs)*c.DurationScale + 0.5)
		}
		if c.NewIDs {
			ks[i].ID ^= 0x9e3779b97f4a7c15
		}
		if c.HostScale > 0 {
			ks[i].HostNs = int64(float64(ks[i].HostNs)*c.HostScale + 0.5)
		}
	}
	return ks
}

// WakeLate is how late a real open-loop service starts its requests, at
// most: a time.sleep or a busy host wakes it tens of µs after its clock.
// An assumption (docs/simgpu.md "Presets"): with requests exactly on their
// clock the core packs its fills to the µs, which no real host allows.
const WakeLate = 100 * time.Microsecond

// Options configure a simulation.
type Options struct {
	Mode      Mode
	Device    devmodel.Config
	Scheduler scheduler.Config
	// NotifyLatency is the time from a holder's launch to the daemon
	// seeing it; GrantRTT from a waiter's request to its grant arriving
	// (both measured by `fikit bench` on the real hook and daemon).
	NotifyLatency time.Duration
	GrantRTT      time.Duration
	// Board: the hooks share the daemon's board (as on one host): a
	// permission's gate, the bound on work in flight, resuming on the
	// board (hook.go).
	Board bool
	// Horizon bounds simulated time.
	Horizon time.Duration
}

// DefaultOptions: simgpu's default device, the default policy, and hook
// latencies typical of this machine's loopback UDP.
func DefaultOptions() Options {
	return Options{
		Mode:          Fikit,
		Device:        devmodel.DefaultConfig(),
		Scheduler:     scheduler.DefaultConfig(),
		NotifyLatency: 30 * time.Microsecond,
		GrantRTT:      60 * time.Microsecond,
		Board:         true,
		Horizon:       10 * time.Minute,
	}
}

// ServiceResult is what one service did.
type ServiceResult struct {
	Name   string
	Runs   int
	JCTs   []int64 // ns, one per completed run
	Starts []int64 // run start times, ns of simulated time
	// Blocked is each run's ground-truth interference: the time its
	// kernels were ready while the device ran other contexts or switched.
	Blocked []int64
	BusyNs  int64 // device time its kernels ran
	Span    [2]int64
	// Warmups: its hook's warm-ups launched (pre-switch).
	Warmups int
}

// Result is the outcome of a simulation.
type Result struct {
	Mode     Mode
	Services []ServiceResult
	// EndNs is when the simulation ended; DeviceBusyNs the time any kernel
	// ran, SwitchingNs the time spent switching contexts.
	EndNs, DeviceBusyNs, SwitchingNs int64
	// FillPct is the share of the first (highest-priority) service's idle
	// device time, over its span, during which other services' kernels ran.
	FillPct float64
	Grants  uint64
	// Stats are the core's counters at the end (mode Fikit), Drifts the
	// core's drift events, with when they came.
	Stats  scheduler.Stats
	Drifts []Drift
}

// Drift is a drift the core found.
type Drift struct {
	AtNs int64
	scheduler.DriftEvent
}

// Run simulates the services under opts.
func Run(opts Options, svcs []Service) (*Result, error) {
	if len(svcs) == 0 {
		return nil, fmt.Errorf("sim: no services")
	}
	if opts.Mode == Exclusive {
		return runExclusive(opts, svcs)
	}
	s, err := newSim(opts, svcs)
	if err != nil {
		return nil, err
	}
	defer s.dev.Close()
	if err := s.run(); err != nil {
		return nil, err
	}
	return s.result(), nil
}

// runExclusive runs each service alone, one after another: each starts when
// the previous one finished.
func runExclusive(opts Options, svcs []Service) (*Result, error) {
	out := &Result{Mode: Exclusive}
	opts.Mode = Sharing // alone, no scheduler
	offset := int64(0)
	for _, sv := range svcs {
		sv.Start = 0
		r, err := Run(opts, []Service{sv})
		if err != nil {
			return nil, err
		}
		sr := r.Services[0]
		for i := range sr.Starts {
			sr.Starts[i] += offset
		}
		sr.Span[0] += offset
		sr.Span[1] += offset
		out.Services = append(out.Services, sr)
		out.DeviceBusyNs += r.DeviceBusyNs
		out.SwitchingNs += r.SwitchingNs
		offset += r.EndNs
	}
	out.EndNs = offset
	return out, nil
}

// svcState is a service's simulation state.
type svcState struct {
	spec Service
	id   scheduler.TaskID
	ctx  int
	rng  *rand.Rand
	role scheduler.Role
	// credLimit: launches with seq ≤ credLimit go without asking.
	credLimit uint32
	res       ServiceResult
	seq       uint32 // launch counter (notify and request)
	run       uint32
	next      int   // next kernel index within the run
	t0        int64 // current run's start
	arriv     int64 // next arrival
	last      uint64
	// waitSeq: the device op whose completion ends the run (0: none).
	waitSeq uint64
	waiting bool // a launch request is outstanding
	// The run's kernels (its Change applied), the device ops it enqueued,
	// and whether it is measured (profiling, or a sampled run) as a hook
	// measures: the core's phase and sample rate as its hook knows them.
	kernels         []Kernel
	firstOp, lastOp uint64
	segFrom         int // s.segs before the run began: its segments come after
	measured        bool
	phase           scheduler.Phase
	sample, started uint32
	// launching: a granted launch waits for its bound (evGo).
	launching bool
	resuming  bool // … and was not granted: it resumes on the board
	h         hookState
}

func (s *svcState) done() bool { return s.spec.Runs > 0 && s.res.Runs >= s.spec.Runs }
