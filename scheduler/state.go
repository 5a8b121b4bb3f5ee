package scheduler

import (
	"sort"

	"github.com/fikit/fikit/profiler"
)

// task is the core's view of one registered task instance: its identity,
// role and phase, and its liveness. What each mechanism keeps of it is a
// type of that mechanism's own, embedded (the fields are promoted): seqs,
// credits, prediction, runBudget, arrivalState, profilingState, driftWatch,
// fairness, and pre.
type task struct {
	id       TaskID
	key      string
	pid      uint32
	prio     uint8
	gpu      *gpu
	model    string
	role     Role
	phase    Phase
	lastSeen int64 // any message
	watched  bool  // its exit is seen at once: see TaskWatched
	// lastActive is the last launch (or registration): activity for HolderTTL.
	lastActive int64
	lastLaunch int64 // last launch of any kind, 0 if none
	registered int64
	// recent are its launches not yet attributed to an ended run, in
	// arrival order: when each happened, and its predicted duration for a
	// holder. Run ends may arrive after the next run's launches; these
	// place that run in time.
	recent []launchRec
	// calibMissed: calibration requests it left unanswered in a row.
	calibMissed int

	seqs
	credits
	prediction
	runBudget
	arrivalState
	profilingState
	driftWatch
	fairness
	pre preSwitchTask // its pre-switches (preswitch.go)
}

// seqs is what the core knows of a task's launch sequence numbers
// (countSeq).
type seqs struct {
	seq uint32
	// runStartSeq is the seq of the current (or next) run's first launch:
	// a launch's position in its run is its seq minus this, modulo the
	// run's length.
	runStartSeq uint32
	lostSeq     uint64 // launches whose notification never arrived
	missing     uint64 // seqs not (yet) arrived, below seq: see countSeq
}

// credits are the launches a task may make without asking (credit.go).
type credits struct {
	credit uint32 // launches it may still make without asking
	// resv is the GPU time reserved for each outstanding credited launch,
	// in launch order (len(resv) == credit); resvSum their sum.
	resv    []int64
	resvSum int64
}

// prediction is what the core predicts of a task's work (predict.go,
// fill.go): its estimates, the online corrections, and, for a holder, when
// its launched work ends and when it launches next.
type prediction struct {
	est *Estimates
	// profile is the complete profile est comes from (the base of the next
	// version if the task drifts).
	profile *profiler.Profile
	// gapCorr and posCorr hold online-corrected gap predictions by kernel
	// ID and by position in the run (GapEWMA > 0).
	gapCorr    map[uint64]int64
	posCorr    map[int]int64
	lastPos    int    // position of the last holder kernel (-1: off the sequence)
	lastKernel uint64 // its last launch's kernel
	busyUntil  int64  // predicted end of this task's launched device work
	nextLaunch int64  // predicted time of its next launch (0: unknown)
	// predicted is the prediction the next launch will be compared with.
	predicted int64
	inRun     bool
	// offSequence: a launch of the current run was not the kernel its
	// position in the profile's sequence holds, so positions are not to be
	// trusted (a run's last kernel opens no window) until the next run.
	offSequence bool
	runStart    int64
	runEnd      int64 // time of the last RunEnd
	lag         int64 // how late its launch reports arrive (decaying max)
	// sighted is the latest launch of this holder that the board showed
	// before its report came (boardObserved).
	sighted int64
	// runGaps are recent times from a run end to the next run's first
	// launch, runStarts recent intervals between run starts.
	runGaps, runStarts recent
	jct                int64 // EWMA of observed run times in the sharing phase
}

// runBudget is the expected delay filling charged to a holder's runs.
type runBudget struct {
	delayUsed    int64 // expected delay charged to the current (or next) run
	delayPending int64 // charged between runs, moves to the next run
}

// arrivalState is a task's recent intervals between run starts
// (arrivals.go), from lastRunStart, the start of its latest run.
type arrivalState struct {
	arr          arrivals
	lastRunStart int64
}

// profilingState is a task's profiling (profiling.go): its turn when it
// profiles alone, and the runs being measured.
type profilingState struct {
	// Profiling alone: when its turn began (0: not alone), its last run
	// end of any outcome, and whether it lost its turn (turnOver).
	turnStart, lastRunEnd int64
	turnLost              bool
	prof                  *profiling // non-nil while profiling (or profiling again after a drift)
	// meas decides whether its measured runs were clean (profiling, or
	// sampled for drift).
	meas *measured
}

// driftWatch is a sharing task's check of its profile (drift.go): sample is
// what its hook was told (one run in sample measured, 0 none).
type driftWatch struct {
	drift  *driftState
	sample uint32
}

// fairness is a task's share among its equals and its account (fair.go).
type fairness struct {
	weight    int64  // ≥ 1
	owner     string // whom its GPU time is accounted to
	acct      Account
	vt        int64 // virtual time: GPU time used / weight (ns)
	fairSeen  int64 // its latest launch or request (fairActive)
	throttled bool  // a holder that ran more than FairLag ahead: it waits
}

// launchRec is one launch of a task.
type launchRec struct {
	seq     uint32
	at      int64
	dur     int64
	unknown bool // a sharing task's kernel its profile lacks
	// asked: a waiter's request (the hook waited for the answer);
	// released is when it was let go (granted, or launched on its own
	// at at), 0 while it waits.
	asked    bool
	released int64
}

// maxRecent bounds a task's recent launches (a task that never reports run
// ends must not grow them without limit).
const maxRecent = 1 << 16

// request is one waiting launch.
type request struct {
	t        *task
	seq      uint32
	kernel   uint64
	est      int64 // predicted duration
	arrived  int64
	lastHold int64
	skips    int    // fill opportunities that passed it over
	lastOpp  uint64 // the opportunity its last skip was counted for
	// solo: granted out of its task's turn (fairFit), so without credit.
	solo bool
}

// gpu is one device's independent scheduling state.
type gpu struct {
	uuid  string
	tasks []*task // sorted by id: deterministic iteration
	// queues[p] holds waiting requests of priority p in arrival order.
	queues [10][]*request
	// lpBusyUntil is the predicted end of the low-priority work granted or
	// launched; reservedNs the GPU time set aside for credit not used yet.
	lpBusyUntil int64
	reservedNs  int64
	// window is the currently open fill window (a predicted holder gap).
	window fillWindow
	// lpInWindow: low-priority work was granted since the holders last
	// launched, so the holders' next kernel pays a context switch back.
	lpInWindow bool
	// windowGrants: grants into the current window (Stats.ShortGapFills).
	windowGrants uint64
	idle         bool   // holders idle: low priority runs within the budget
	opp          uint64 // fill opportunities so far (windows, idle periods)
	idleCap      int64  // the idle period's low-priority backlog cap
	idleSince    int64  // when the idle period began
	// levelAt[p] is the latest launch (or launch request) of a holder of
	// priority p the core knows of: what a waiter's permission was given
	// against (Gate.Seen).
	levelAt [10]int64
	// measuring is the waiter whose profiling run is under way, if any:
	// while it lasts nothing of its priority or lower but its own
	// kernels is granted (see profilingRun).
	measuring *task
	// turn[p] is the task of priority p whose turn it is to fill (fair
	// policy, fair.go); nil: none yet.
	turn [10]*task
	// lpLast is the waiter whose work was last granted, launched on credit
	// or left queued (the end of lpBusyUntil is its); fairAt is when a
	// kernel of another task, held back so that it does not run beside
	// that work, may go (fairFit; 0: none held).
	lpLast *task
	fairAt int64
	// sw is the GPU's measured switch (switchcost.go); held the waiter
	// being calibrated, granted nothing meanwhile.
	sw   switchEstimate
	held *task
	pre  preSwitch // the pre-switch under way (preswitch.go)
	// awaited are the tasks known before a restart whose places are held
	// until awaitUntil (rejoin.go).
	awaited    []KnownTask
	awaitUntil int64
	// line is the lineup rankers choose from (gate.go), kept for reuse.
	line lineup
}

// fillWindow is a predicted stretch of holder idleness.
type fillWindow struct {
	open  bool
	start int64 // the holders' predicted device work ends
	end   int64 // the holders' predicted next launch
}

func (g *gpu) addTask(t *task) {
	i := sort.Search(len(g.tasks), func(i int) bool { return g.tasks[i].id >= t.id })
	g.tasks = append(g.tasks, nil)
	copy(g.tasks[i+1:], g.tasks[i:])
	g.tasks[i] = t
}

func (g *gpu) removeTask(t *task) {
	if g.turn[t.prio] == t {
		g.turn[t.prio] = nil
	}
	if g.lpLast == t {
		g.lpLast = nil
	}
	for i, x := range g.tasks {
		if x == t {
			g.tasks = append(g.tasks[:i], g.tasks[i+1:]...)
			break
		}
	}
	for p := range g.queues {
		q := g.queues[p][:0]
		for _, r := range g.queues[p] {
			if r.t != t {
				q = append(q, r)
			}
		}
		g.queues[p] = q
	}
}

// queued reports whether t has a request waiting in g's queues.
func (g *gpu) queued(t *task) bool {
	for _, r := range g.queues[t.prio] {
		if r.t == t {
			return true
		}
	}
	return false
}

func (g *gpu) waiting() int {
	n := 0
	for p := range g.queues {
		n += len(g.queues[p])
	}
	return n
}

func (g *gpu) holders() []*task {
	var hs []*task
	for _, t := range g.tasks {
		if t.role == RoleHolder {
			hs = append(hs, t)
		}
	}
	return hs
}

func maxi(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func mini(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
