package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/simgpu/trace"
)

// Device is what a replay needs from a GPU. All calls come from one goroutine
// locked to its OS thread (a CUDA context is current per thread).
type Device interface {
	// Load loads the PTX module and resolves its entries; Launch's fn
	// indexes entries.
	Load(ptx string, entries []string) error
	// Launch launches entry fn asynchronously on the replay's stream with
	// its one parameter, the duration in ns.
	Launch(fn int, grid, block [3]uint32, durationNs uint64) error
	// Synchronize waits until the stream's work is done.
	Synchronize() error
	// Close releases the module, stream and context.
	Close() error
}

// Config is one replay.
type Config struct {
	Trace    *trace.Trace
	Name     string // how the trace was named on the command line, for output
	Runs     int    // measured runs, ≥ 1
	Warmup   int    // runs before the measured ones, not reported
	CPUNs    int64  // host time before each launch; < 0: the trace's own
	PreNs    int64  // busy host time at the start of a run (part of its JCT)
	PostNs   int64  // busy host time after a run's synchronisation (not part of its JCT)
	Arrivals Arrivals
	JSON     bool
	// Change, from measured run ChangeAt on (ChangeAt > 0), scales every
	// kernel's duration by its DurationScale and every grid's x by its
	// GridScale: a service that drifts from its profile mid-run (a clock
	// or driver change: same kernel IDs, longer; a batch size doubling: new
	// grids, so new kernel IDs).
	ChangeAt int
	Change   Change
	// Graph replays each run as one launch of a CUDA graph captured from
	// the run's kernels (per-kernel host times do not apply; PreNs does).
	Graph bool
	// FootprintBytes of device memory are reserved for the replay.
	FootprintBytes uint64
}

// Change is how a replay's kernels change mid-run (Config.ChangeAt).
type Change struct {
	DurationScale float64 // 0: unchanged
	GridScale     uint32  // 0: unchanged
}

// apply returns the launches of a run after the change.
func (c Change) apply(ls []launch) []launch {
	out := append([]launch(nil), ls...)
	for i := range out {
		if c.DurationScale > 0 {
			out[i].durNs = uint64(float64(out[i].durNs)*c.DurationScale + 0.5)
		}
		if c.GridScale > 1 {
			out[i].grid[0] *= c.GridScale
		}
	}
	return out
}

// RunRecord is one measured run, as printed with --json.
type RunRecord struct {
	Run     int   `json:"run"`
	StartNs int64 `json:"start_ns"` // CLOCK_MONOTONIC
	JCTNs   int64 `json:"jct_ns"`
	Kernels int   `json:"kernels"`
	// WaitNs (open loop only): how long after its arrival the run started,
	// because the previous run was still going.
	WaitNs *int64 `json:"wait_ns,omitempty"`
	// BlockedNs (simgpu only) is the time the run's kernels were ready but
	// waited for other contexts' kernels or context switches: the GPU
	// interference the run suffered, ground truth (docs/simgpu.md).
	BlockedNs *int64 `json:"blocked_ns,omitempty"`
	// RunqNs (Linux) is how long the replay's thread waited in the run
	// queue for a CPU during the run: host load, part of JCTNs.
	RunqNs *int64 `json:"runq_ns,omitempty"`
	// HookWaitNs (under fikit's hook) is how long the run waited inside
	// the hook for the hook's own work, not for the scheduler: part of
	// JCTNs that a service alone should never pay (hookclient/README.md
	// "Own waits").
	HookWaitNs *int64 `json:"hook_wait_ns,omitempty"`
	// HookWaitLapses (under fikit's hook): how often during the run the
	// hook's sender went through a whole iteration and left undone what the
	// run waited for (hookclient/README.md "Own waits"): 0 unless the hook
	// holds back its own work.
	HookWaitLapses *int64 `json:"hook_wait_lapses,omitempty"`
}

// DeviceTotals is what the replay's context got from the device.
type DeviceTotals struct {
	Kernels   uint64 `json:"kernels"`
	BusyNs    int64  `json:"busy_ns"`
	BlockedNs int64  `json:"blocked_ns"`
}

// Grapher is a Device that can replay a run as one CUDA graph: the
// launches are captured once (stream capture, then instantiation) and each
// run is one graph launch, as a service using CUDA graphs serves a request.
type Grapher interface {
	// CaptureGraph records the launches, in order, into the graph that
	// LaunchGraph launches (replacing any earlier one).
	CaptureGraph(ls []GraphLaunch) error
	// LaunchGraph launches the captured graph on the replay's stream.
	LaunchGraph() error
}

// GraphLaunch is one kernel of a captured graph.
type GraphLaunch struct {
	Fn          int
	Grid, Block [3]uint32
	DurationNs  uint64
}

// Reserver is a Device that can hold device memory for the whole replay,
// written once: the footprint a framework's service keeps on the GPU
// (weights, activations, its allocator's cache). On a real GPU it is what
// the context's page tables map; simgpu charges nothing for it.
type Reserver interface {
	Reserve(bytes uint64) error
}

// Totaler is a Device that can say what its context got from the device so
// far (simgpu's fikit_simgpu_ctx_totals_get); false where it cannot (a real
// GPU).
type Totaler interface {
	Totals() (DeviceTotals, bool)
}

// HookWaits is what a process's threads have waited inside fikit's hook
// for the hook's own work so far: how long (fikit_own_wait_ns), and how
// often the hook's sender left what they waited for undone although it ran
// (fikit_own_wait_lapses).
type HookWaits struct{ Ns, Lapses int64 }

// HookWaiter is a Device whose process may run under fikit's hook; false
// without the hook.
type HookWaiter interface {
	HookWaits() (HookWaits, bool)
}

// Flusher is a Device whose process may run under fikit's hook, which must
// be told to ship what it measured before the process exits: a Go program's
// exit runs no atexit handler (hookclient/README.md "Flush"). Flush reports
// whether the hook is there (hooked) and whether it confirmed that the
// daemon has everything (ok).
type Flusher interface {
	Flush() (hooked, ok bool)
}

type launch struct {
	fn          int
	grid, block [3]uint32
	durNs       uint64
	hostNs      int64
}

// plan turns the trace into the launches of one run and the PTX to load.
func plan(t *trace.Trace, cpuNs int64) ([]launch, string, []string) {
	ptx, _ := trace.PTX(t)
	names := t.Names()
	index := make(map[string]int, len(names))
	entries := make([]string, len(names))
	for i, n := range names {
		index[n] = i
		entries[i] = kernelid.ReplayEntryName(n)
	}
	host := t.HostTimesNs(cpuNs)
	ls := make([]launch, len(t.Kernels))
	for i, k := range t.Kernels {
		ls[i] = launch{fn: index[k.Name], grid: k.Grid, block: k.Block, durNs: uint64(k.DurationNs), hostNs: host[i]}
	}
	return ls, ptx, entries
}

// Replay loads the trace onto dev and runs it as cfg says, writing a JSON line
// per measured run to out when cfg.JSON. It returns the JCTs of the measured
// runs completed; on cancellation it returns them with ErrInterrupted.
func Replay(ctx context.Context, cfg Config, dev Device, out io.Writer) ([]int64, error) {
	ls, ptx, entries := plan(cfg.Trace, cfg.CPUNs)
	if err := dev.Load(ptx, entries); err != nil {
		return nil, fmt.Errorf("load %d spin kernels: %w", len(entries), err)
	}
	if cfg.FootprintBytes > 0 {
		r, ok := dev.(Reserver)
		if !ok {
			return nil, fmt.Errorf("%w: this device cannot reserve memory", ErrUsage)
		}
		if err := r.Reserve(cfg.FootprintBytes); err != nil {
			return nil, fmt.Errorf("reserve %d bytes: %w", cfg.FootprintBytes, err)
		}
	}
	launchRun := func(run []launch, done <-chan struct{}) (int64, int64, error) {
		return runOnce(run, cfg.PreNs, dev, done)
	}
	if cfg.Graph {
		g, ok := dev.(Grapher)
		if !ok {
			return nil, fmt.Errorf("%w: this device cannot replay CUDA graphs", ErrUsage)
		}
		gl := make([]GraphLaunch, len(ls))
		for i, l := range ls {
			gl[i] = GraphLaunch{Fn: l.fn, Grid: l.grid, Block: l.block, DurationNs: l.durNs}
		}
		if err := g.CaptureGraph(gl); err != nil {
			return nil, fmt.Errorf("capture a graph of %d kernels: %w", len(gl), err)
		}
		launchRun = func(_ []launch, done <-chan struct{}) (int64, int64, error) { return runGraph(g, cfg.PreNs, dev, done) }
	}
	done := ctx.Done()
	enc := json.NewEncoder(out)
	jcts := make([]int64, 0, cfg.Runs)
	offsets := cfg.Arrivals.Offsets(cfg.Runs)
	// A run's blocked time is the growth of the context's total over the
	// run, read after its synchronisation (outside its JCT): nothing of the
	// context is pending between runs.
	totaler, _ := dev.(Totaler)
	var blockedBefore int64
	if totaler != nil {
		if t, ok := totaler.Totals(); ok {
			blockedBefore = t.BlockedNs
		} else {
			totaler = nil
		}
	}
	hw, _ := dev.(HookWaiter)
	if hw != nil {
		if _, ok := hw.HookWaits(); !ok {
			hw = nil
		}
	}
	runq := openRunq()
	if runq != nil {
		defer runq.close()
	}
	var base int64
	changed := ls
	if cfg.ChangeAt > 0 {
		changed = cfg.Change.apply(ls)
	}
	for r := 0; r < cfg.Warmup+cfg.Runs; r++ {
		j := r - cfg.Warmup // measured run index, < 0 during warmup
		run := ls
		if cfg.ChangeAt > 0 && j >= cfg.ChangeAt {
			run = changed
		}
		var arrival int64
		if j >= 0 && offsets != nil {
			if j == 0 {
				base = MonoNs()
			}
			arrival = base + offsets[j]
			if _, ok := waitUntil(arrival, done); !ok {
				return jcts, ErrInterrupted
			}
		} else if idle := cfg.Arrivals.IdleBefore(j); idle > 0 {
			if _, ok := waitUntil(MonoNs()+int64(idle), done); !ok {
				return jcts, ErrInterrupted
			}
		}
		var rq0 int64
		var hw0 HookWaits
		rqOK := false
		if hw != nil {
			hw0, _ = hw.HookWaits()
		}
		if runq != nil {
			rq0, rqOK = runq.read()
		}
		start, end, err := launchRun(run, done) // a graph has no change (replayConfig)
		if err != nil {
			if err == ErrInterrupted {
				return jcts, err
			}
			return jcts, fmt.Errorf("run %d: %w", j, err)
		}
		var blocked *int64
		if totaler != nil {
			if t, ok := totaler.Totals(); ok {
				b := t.BlockedNs - blockedBefore
				blocked, blockedBefore = &b, t.BlockedNs
			}
		}
		var waited *int64
		if rqOK {
			if rq1, ok := runq.read(); ok && rq1 >= rq0 {
				w := rq1 - rq0
				waited = &w
			}
		}
		var hookWait, hookLapses *int64
		if hw != nil {
			if hw1, ok := hw.HookWaits(); ok {
				w, l := hw1.Ns-hw0.Ns, hw1.Lapses-hw0.Lapses
				hookWait, hookLapses = &w, &l
			}
		}
		spinUntil(end + cfg.PostNs)
		if j < 0 {
			continue
		}
		jcts = append(jcts, end-start)
		if cfg.JSON {
			rec := RunRecord{Run: j, StartNs: start, JCTNs: end - start, Kernels: len(run), BlockedNs: blocked, RunqNs: waited, HookWaitNs: hookWait,
				HookWaitLapses: hookLapses}
			if offsets != nil {
				w := max(start-arrival, 0)
				rec.WaitNs = &w
			}
			if err := enc.Encode(rec); err != nil {
				return jcts, fmt.Errorf("write: %w", err)
			}
		}
	}
	return jcts, nil
}

// lateSlackNs is how late a launch may be and still count as on time.
const lateSlackNs = 1000

// pace spins until due and returns the time the host work that follows
// counts from: due when on time (keeping the schedule free of clock-reading
// drift), else the late time, so that a late launch shifts the rest.
func pace(due int64) int64 {
	if now := spinUntil(due); now-due > lateSlackNs {
		return now
	}
	return due
}

// runOnce is one run; it returns its start and the time the final
// synchronisation returned.
func runOnce(ls []launch, preNs int64, dev Device, done <-chan struct{}) (int64, int64, error) {
	start := MonoNs()
	next := pace(start + preNs)
	for i := range ls {
		l := &ls[i]
		select {
		case <-done:
			_ = dev.Synchronize() // leave nothing running behind us
			return 0, 0, ErrInterrupted
		default:
		}
		// The launch is due host time after the previous launch call began;
		// if we are already past that, the rest of the run shifts.
		next = pace(next + l.hostNs)
		if err := dev.Launch(l.fn, l.grid, l.block, l.durNs); err != nil {
			return 0, 0, fmt.Errorf("launch kernel %d: %w", i, err)
		}
	}
	if err := dev.Synchronize(); err != nil {
		return 0, 0, fmt.Errorf("synchronize: %w", err)
	}
	return start, MonoNs(), nil
}

// runGraph is one run of a captured graph: the pre-processing, one graph
// launch, the synchronisation.
func runGraph(g Grapher, preNs int64, dev Device, done <-chan struct{}) (int64, int64, error) {
	start := MonoNs()
	pace(start + preNs)
	select {
	case <-done:
		return 0, 0, ErrInterrupted
	default:
	}
	if err := g.LaunchGraph(); err != nil {
		return 0, 0, fmt.Errorf("launch graph: %w", err)
	}
	if err := dev.Synchronize(); err != nil {
		return 0, 0, fmt.Errorf("synchronize: %w", err)
	}
	return start, MonoNs(), nil
}
