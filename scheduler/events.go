package scheduler

import "github.com/fikit/fikit/profiler"

// TaskID names one registered task instance (one process on one GPU). The
// daemon assigns it; it never repeats within one core's lifetime.
type TaskID uint32

// Role says whether a task's launches wait.
type Role uint8

const (
	RoleNone   Role = iota
	RoleHolder      // launches freely, notifies after the fact
	RoleWaiter      // asks before each launch (unless it has credit)
)

func (r Role) String() string {
	switch r {
	case RoleHolder:
		return "holder"
	case RoleWaiter:
		return "waiter"
	}
	return "none"
}

// Phase is a task's life stage (paper Fig. 3): the profile's phase, defined
// once in profiler (the daemon maps it to the wire's, tested).
type Phase = profiler.Phase

const (
	PhaseProfiling = profiler.PhaseProfiling // its launches are measured
	PhaseSharing   = profiler.PhaseSharing   // it has a profile and shares the GPU
)

// Event is one input to Step. Every event carries Now, the daemon's
// monotonic time in nanoseconds when it happened; time never goes backwards
// (Step clamps it).
type Event interface{ at() int64 }

// TaskRegistered: a hook registered a task on a GPU.
type TaskRegistered struct {
	Now      int64
	Task     TaskID
	Key      string // task key
	PID      uint32
	Priority uint8  // 0 (highest) … 9
	GPU      string // device UUID: each GPU is scheduled independently
	Model    string // GPU model name: profiles are per task key and model
	// Profile is the task's stored profile for this GPU model, nil if it
	// has none. A complete profile puts the task in the sharing phase; an
	// incomplete one is resumed by profiling.
	Profile *profiler.Profile
	// Weight is the task's share among tasks of its priority on its GPU
	// (fair.go): with weights 2 and 1, the first gets twice the GPU time
	// when both want it. 0 counts as 1.
	Weight uint32
	// Owner is whom the task's GPU time is accounted to (the daemon's
	// tenant: the task key's owner); the core only carries it to TaskInfo
	// and Account.
	Owner string
	// Local: the daemon expects to watch the task's process (it registered
	// from this machine with a pid). Until a TaskWatched says otherwise its
	// silence is judged as a watched task's: establishing the watch takes
	// the daemon a moment, longer than DeadAfter on a CPU-starved host.
	Local bool
}

// TaskLeft: a hook said goodbye (or the daemon dropped it).
type TaskLeft struct {
	Now  int64
	Task TaskID
}

// LaunchNotified: a holder (or a task with credit) launched a kernel.
type LaunchNotified struct {
	Now    int64
	Task   TaskID
	Seq    uint32
	Kernel uint64
}

// LaunchesNotified: several launches of one task, reported together (a
// hook's LaunchBatch): seqs Seq, Seq+1, …, kernel Kernels[i] launched at
// Times[i] (≤ Now). They are applied as one event: one scheduling decision
// after all of them.
type LaunchesNotified struct {
	Now     int64
	Task    TaskID
	Seq     uint32
	Kernels []uint64
	Times   []int64
}

// LaunchRequested: a waiter asks to launch a kernel.
type LaunchRequested struct {
	Now    int64
	Task   TaskID
	Seq    uint32
	Kernel uint64
}

// RunEnded: a task's run ended at a host-blocking synchronization.
type RunEnded struct {
	Now     int64
	Task    TaskID
	Run     uint32
	Kernels uint32
	RunNs   int64
	// LastSeq is the seq of the run's last launch (0: unknown). With it the
	// core places the run exactly — launches LastSeq−Kernels+1 … LastSeq —
	// whatever it saw of it (a task that registered mid-run, lost reports).
	LastSeq uint32
}

// MeasurementsReceived: measured kernels of a profiling run.
type MeasurementsReceived struct {
	Now     int64
	Task    TaskID
	Run     uint32
	Records []profiler.Record
}

// KernelInfoReceived: the name and geometry of a kernel ID.
type KernelInfoReceived struct {
	Now  int64
	Task TaskID
	Info profiler.KernelInfo
}

// Heartbeat: the task is alive.
type Heartbeat struct {
	Now  int64
	Task TaskID
}

// TaskWatched: whether the daemon sees the task's process end at once (a
// pidfd on this machine). A watched task's silence need not be taken for
// death so soon: it is dropped after DeadAfterWatched rather than DeadAfter.
// A CPU-starved host delays heartbeats by hundreds of milliseconds; a crash
// is seen anyway.
type TaskWatched struct {
	Now     int64
	Task    TaskID
	Watched bool // false: the watch could not be established
}

// BoardObserved: the board of the task's GPU (docs/design.md "Board")
// shows Levels[p], the latest launch or launch request a hook of priority
// p wrote there. The daemon steps it before a launch request of a hook on
// its host: a better priority's launches may show there before their
// reports arrive, and a task of that priority is then active (it holds);
// a holder's launch newer than its reports is an early stop.
type BoardObserved struct {
	Now    int64
	Task   TaskID
	Levels [10]int64
}

// Tick advances time; the daemon sends one at the deadline Ready asked for
// (and whenever else it likes).
type Tick struct {
	Now int64
	// Heard: every message that reached the daemon before Heard has been
	// stepped (0: before Now). A task is judged silent only up to Heard: a
	// daemon that could not read for a while (waiting for a CPU) has
	// heartbeats queued in its socket, and they are not silence.
	Heard int64
}

func (e TaskRegistered) at() int64       { return e.Now }
func (e TaskLeft) at() int64             { return e.Now }
func (e LaunchNotified) at() int64       { return e.Now }
func (e LaunchRequested) at() int64      { return e.Now }
func (e LaunchesNotified) at() int64     { return e.Now }
func (e RunEnded) at() int64             { return e.Now }
func (e Heartbeat) at() int64            { return e.Now }
func (e TaskWatched) at() int64          { return e.Now }
func (e BoardObserved) at() int64        { return e.Now }
func (e MeasurementsReceived) at() int64 { return e.Now }
func (e KernelInfoReceived) at() int64   { return e.Now }
func (e Tick) at() int64                 { return e.Now }
