package scheduler

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fikit/fikit/profiler"
)

// Node is the scheduling core. It is not safe for concurrent use: one owner
// (the daemon's loop or the simulator) calls Step and Ready.
type Node struct {
	cfg    Config
	policy policyRow
	now    int64
	tasks  map[TaskID]*task
	gpus   map[string]*gpu
	order  []*gpu // sorted by uuid: deterministic iteration
	out    Ready
	stats  Stats
	// rosterVer counts the changes of Roster (rejoin.go).
	rosterVer uint64
}

// New returns a core with the given configuration.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, policy: policyOf(cfg.Policy), tasks: map[TaskID]*task{}, gpus: map[string]*gpu{}}, nil
}

// Config returns the core's configuration.
func (n *Node) Config() Config { return n.cfg }

// Now is the latest time the core has seen.
func (n *Node) Now() int64 { return n.now }

// Step feeds one event to the core. Errors describe events the core ignored
// (an unknown task, a duplicate registration); the core stays consistent.
func (n *Node) Step(ev Event) error {
	if t := ev.at(); t > n.now {
		n.now = t
	}
	switch e := ev.(type) {
	case TaskRegistered:
		return n.register(e)
	case TaskLeft:
		t, err := n.task(e.Task)
		if err != nil {
			return err
		}
		n.remove(t)
		return nil
	case LaunchNotified:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		n.notified(t, e.Seq, e.Kernel, mini(e.Now, n.now))
		n.rebalance(t.gpu)
		n.schedule(t.gpu)
		return nil
	case LaunchesNotified:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		if len(e.Times) != len(e.Kernels) {
			return fmt.Errorf("%w: %d kernels, %d times", ErrInvalid, len(e.Kernels), len(e.Times))
		}
		for i, k := range e.Kernels {
			n.notified(t, e.Seq+uint32(i), k, mini(e.Times[i], n.now))
		}
		if len(e.Times) > 0 {
			t.noteLag(n.now - mini(e.Times[len(e.Times)-1], n.now))
		}
		n.rebalance(t.gpu)
		n.schedule(t.gpu)
		return nil
	case LaunchRequested:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		return n.requested(t, e.Seq, e.Kernel)
	case RunEnded:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		measuring := t.gpu.measuring == t
		n.runEnded(t, e)
		if measuring {
			// Its profiling run held the others' kernels back (profilingRun).
			n.schedule(t.gpu)
		}
		return nil
	case MeasurementsReceived:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		n.measuredRecords(t, e)
		return nil
	case KernelInfoReceived:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		n.kernelInfo(t, e)
		return nil
	case Heartbeat:
		_, err := n.seen(e.Task)
		return err
	case TaskWatched:
		t, err := n.task(e.Task)
		if err != nil {
			return err
		}
		t.watched = e.Watched
		return nil
	case BoardObserved:
		t, err := n.task(e.Task)
		if err != nil {
			return err
		}
		n.boardObserved(t.gpu, e.Levels)
		return nil
	case SwitchCalibrated:
		t, err := n.seen(e.Task)
		if err != nil {
			return err
		}
		n.calibrated(t, e)
		return nil
	case PlacesHeld:
		return n.holdPlaces(e)
	case Tick:
		heard := n.now
		if e.Heard > 0 {
			heard = mini(e.Heard, n.now)
		}
		n.tick(heard)
		return nil
	}
	return fmt.Errorf("%w: %T", ErrInvalid, ev)
}

// Ready returns and clears the decisions made since the last call, with the
// deadline for the next Tick.
func (n *Node) Ready() Ready {
	r := n.out
	n.out = Ready{}
	r.Deadline = n.deadline()
	return r
}

func (n *Node) task(id TaskID) (*task, error) {
	t, ok := n.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownTask, id)
	}
	return t, nil
}

// seen looks a task up and records that it is alive.
func (n *Node) seen(id TaskID) (*task, error) {
	t, err := n.task(id)
	if err == nil {
		t.lastSeen = n.now
	}
	return t, err
}

func (n *Node) register(e TaskRegistered) error {
	if _, dup := n.tasks[e.Task]; dup {
		return fmt.Errorf("%w: %d", ErrDuplicate, e.Task)
	}
	if e.Priority > 9 {
		return errPriority(e.Priority)
	}
	g := n.gpuOf(e.GPU)
	// A hook that re-registers (after a timeout, or a daemon it thought
	// gone) replaces its earlier instance on that GPU.
	for _, old := range g.tasks {
		if old.pid == e.PID && old.key == e.Key && e.PID != 0 {
			n.remove(old)
			break
		}
	}
	t := &task{
		id: e.Task, key: e.Key, pid: e.PID, prio: e.Priority, gpu: g, model: e.Model,
		lastSeen: n.now, lastActive: n.now, registered: n.now, watched: e.Local,
		fairness: fairness{weight: weightOf(e.Weight), owner: e.Owner},
	}
	sharing := e.Profile != nil && e.Profile.Phase == profiler.PhaseSharing
	if sharing {
		t.phase = PhaseSharing
	} else {
		prof, err := n.newProfiling(t, e.Profile)
		if err != nil {
			return err
		}
		t.phase = PhaseProfiling
		t.prof = prof
		t.meas = &measured{}
	}
	n.tasks[t.id] = t
	g.addTask(t)
	if sharing {
		n.useProfile(t, e.Profile)
	} else {
		n.seedForeign(t)
	}
	n.stats.Registered++
	n.rosterVer++
	n.returned(g, t.key, t.pid)
	n.electHolders(g, t)
	n.out.Acks = append(n.out.Acks, Ack{
		Task: t.id, Role: t.role, Phase: t.phase,
		ProfileRuns: n.cfg.ProfileRuns, HeartbeatNs: n.cfg.HeartbeatInterval, Sample: t.sample,
	})
	n.sendKernelTimes(t)
	n.schedule(g)
	return nil
}

func errPriority(p uint8) error { return fmt.Errorf("%w: priority %d > 9", ErrInvalid, p) }

// gpuOf returns the state of the GPU uuid, made at its first mention.
func (n *Node) gpuOf(uuid string) *gpu {
	g := n.gpus[uuid]
	if g == nil {
		g = &gpu{uuid: uuid}
		n.gpus[uuid] = g
		i := sort.Search(len(n.order), func(i int) bool { return n.order[i].uuid >= uuid })
		n.order = append(n.order, nil)
		copy(n.order[i+1:], n.order[i:])
		n.order[i] = g
	}
	return g
}

// remove forgets a task: its requests, credit and role go with it.
func (n *Node) remove(t *task) {
	g := t.gpu
	n.dropCredit(t)
	if t.meas != nil {
		// Its runs waiting for a verdict are decided now, on what is known.
		for _, r := range t.meas.waiting {
			why, ok := n.verdict(t, &r)
			if !ok {
				why = profiler.DiscardOverlap
			}
			n.decideRun(t, r, why)
		}
		t.meas.waiting = nil
	}
	n.settleAll(t)
	g.removeTask(t)
	n.recountLowWork(g) // its work went with it
	delete(n.tasks, t.id)
	n.rosterVer++
	n.out.Accounts = append(n.out.Accounts, t.account())
	n.stats.Left++
	n.decideRuns(g)
	n.electHolders(g, nil)
	n.schedule(g)
}

// wants reports whether t wants the GPU: it launched within its holder TTL,
// or a launch of it waits in the queues (a task held for long launches
// nothing, yet it is not idle).
func (n *Node) wants(t *task) bool {
	return n.now-t.lastActive <= n.holderTTL(t) || t.gpu.queued(t)
}

// electHolders recomputes the holders of g and tells every task whose role
// changed (except `quiet`, which learns its role from its Ack).
func (n *Node) electHolders(g *gpu, quiet *task) {
	best := uint8(10)
	for _, t := range g.tasks {
		if n.wants(t) && t.prio < best {
			best = t.prio
		}
	}
	// A place held for a better priority (rejoin.go) keeps the worse ones
	// from holding until it returns.
	best = min(best, g.awaitedPrio())
	if best == 10 { // nobody active: the best live task holds
		for _, t := range g.tasks {
			if t.prio < best {
				best = t.prio
			}
		}
	}
	// A task profiling at the best priority holds alone, so its measurements
	// are clean (the paper measures a task with the GPU to itself). One
	// held behind another counts though its last launch is old: else, with
	// none launching lately, every task of that priority held at once and
	// their runs overlapped (64 clients: profiles never completed).
	// Its turn is bounded (see turnOver): a task that ends no run holds no
	// one back for longer than ProfileTurn.
	var alone *task
	for _, t := range g.tasks {
		if t.prio == best && t.phase == PhaseProfiling && n.wants(t) && !t.turnLost && !n.turnOver(t) {
			alone = t
			break
		}
	}
	for _, t := range g.tasks {
		if t != alone {
			t.turnStart = 0
		} else if t.turnStart == 0 {
			t.turnStart = n.now
		}
	}
	if n.policy.holders != nil {
		n.policy.holders(n, g, best)
	}
	for _, t := range g.tasks {
		role := RoleWaiter
		if t.prio == best && (alone == nil || alone == t) && !t.throttled {
			role = RoleHolder
		}
		if role == t.role {
			continue
		}
		prev := t.role
		t.role = role
		if role == RoleHolder {
			n.dropCredit(t)
			// Nothing of a holder waits: let its queued launches go.
			for _, r := range g.queues[t.prio] {
				if r.t == t {
					n.grant(r, nil, 0)
				}
			}
			n.dequeueTask(g, t)
		} else if prev == RoleHolder {
			// Its launched work is still ahead of anything granted later.
			g.lpBusyUntil = maxi(g.lpBusyUntil, t.busyUntil)
			g.lpLast = t
			t.nextLaunch = 0
		}
		if t != quiet {
			n.out.States = append(n.out.States, n.stateOf(t))
		}
	}
	n.updateWindow(g)
}

func (n *Node) dequeueTask(g *gpu, t *task) {
	q := g.queues[t.prio][:0]
	for _, r := range g.queues[t.prio] {
		if r.t != t {
			q = append(q, r)
		}
	}
	g.queues[t.prio] = q
}

// deadAfter is how long t may stay silent before it is dropped.
func (n *Node) deadAfter(t *task) int64 {
	if t.watched {
		return max(n.cfg.DeadAfter, n.cfg.DeadAfterWatched)
	}
	return n.cfg.DeadAfter
}

// tick handles time passing: dead tasks (silent past their dead-after as
// of heard, see Tick), holder activity expiring, holds for queued requests,
// and windows or idle periods that opened.
func (n *Node) tick(heard int64) {
	var dead []*task
	for _, g := range n.order {
		for _, t := range g.tasks {
			if heard-t.lastSeen > n.deadAfter(t) {
				dead = append(dead, t)
			}
		}
	}
	for _, t := range dead {
		n.out.Dropped = append(n.out.Dropped, t.id)
		n.stats.Dropped++
		n.remove(t)
	}
	for _, g := range n.order {
		n.graceOver(g)
		n.decideRuns(g)
		if n.holdersExpired(g) {
			n.electHolders(g, nil)
		}
		n.rebalance(g)
		n.schedule(g)
		for p := range g.queues {
			for _, r := range g.queues[p] {
				if n.now-r.lastHold >= n.cfg.HoldInterval {
					r.lastHold = n.now
					n.out.Holds = append(n.out.Holds, Hold{Task: r.t.id, Seq: r.seq})
					n.stats.Holds++
				}
			}
		}
	}
}

// turnOver reports whether t, profiling alone, has ended no run for
// ProfileTurn (since its turn began or its last run ended); it then loses
// its turn until it ends a run. A squatter — a task that registers at the
// best priority, keeps launching and never ends a run — held every task of
// its priority back for as long as it lived.
func (n *Node) turnOver(t *task) bool {
	if t.turnStart == 0 {
		return false
	}
	if n.now-maxi(t.turnStart, t.lastRunEnd) > n.cfg.ProfileTurn {
		t.turnLost = true
	}
	return t.turnLost
}

// turnEnd is when the turn of g's task profiling alone runs out (0: none).
func (n *Node) turnEnd(g *gpu) int64 {
	for _, t := range g.tasks {
		if t.turnStart != 0 && !t.turnLost && t.role == RoleHolder {
			return maxi(t.turnStart, t.lastRunEnd) + n.cfg.ProfileTurn + 1
		}
	}
	return 0
}

// holdersExpired reports whether some holder's activity ran out while a
// lower-priority task is active, or a profiling task's turn ran out, so the
// holders must be re-elected.
func (n *Node) holdersExpired(g *gpu) bool {
	if e := n.turnEnd(g); e != 0 && n.now >= e {
		return true
	}
	for _, t := range g.tasks {
		if t.role == RoleHolder && n.now-t.lastActive > n.holderTTL(t) {
			for _, o := range g.tasks {
				if o.role == RoleWaiter && n.wants(o) {
					return true
				}
			}
		}
	}
	return false
}

// Stats returns counters for status output and benchmarks.
func (n *Node) Stats() Stats {
	s := n.stats
	s.Tasks = len(n.tasks)
	for _, g := range n.order {
		s.Waiting += g.waiting()
	}
	return s
}

// Stats counts what the core did, one type of counters per feature
// (features.go has their /metrics rows). The JSON names are the status
// API's (docs/status-api.md): snake_case, durations in ns with the suffix
// _ns; the features' fields are promoted, in JSON as in Go.
type Stats struct {
	Tasks   int `json:"tasks"`
	Waiting int `json:"waiting"`
	LivenessCounters
	GrantCounters
	PredictionCounters
	ProfilingCounters
	FairCounters
	DriftCounters
	RejoinCounters
	CalibrationCounters
	PreSwitchCounters
}

// Undecided is how many of a task's ended runs wait for a verdict (0 for
// an unknown task).
func (n *Node) Undecided(id TaskID) int {
	if t := n.tasks[id]; t != nil && t.meas != nil {
		return len(t.meas.waiting)
	}
	return 0
}

// TaskInfo describes one task for status output.
type TaskInfo struct {
	ID       TaskID
	Key      string
	PID      uint32
	Priority uint8
	GPU      string
	Model    string
	Role     Role
	Phase    Phase
	Credit   uint32
	Runs     int // profiled runs kept so far (profiling phase, or profiling again)
	// While it profiles: the runs its profile needs (T), how many of
	// Runs were measured beside a better priority's work (beside.go),
	// and the runs left out, in all and by reason.
	RunsNeeded    int
	RunsBeside    int
	RunsDiscarded int
	DiscardedBy   DiscardCounts
	Waiting       int
	JCTNs         int64
	// RegisteredAt is when it registered (the core's clock).
	RegisteredAt int64
	// ProfileVersion is the version of the profile in use (0: none yet);
	// Refreshing: the task drifted and version ProfileVersion+1 is being
	// built.
	ProfileVersion uint32
	Refreshing     bool
	// Weight is its share among its equals; Throttled: a holder that ran
	// the lag ahead of them waits (fair.go).
	Weight    uint32
	Throttled bool
	// VirtualNs is its virtual time (GPU time used / weight) as fair shares
	// compare it; Account its GPU time.
	VirtualNs int64
	Account   Account
}

// Tasks lists every task, by GPU then id.
func (n *Node) Tasks() []TaskInfo {
	var out []TaskInfo
	for _, g := range n.order {
		for _, t := range g.tasks {
			ti := TaskInfo{ID: t.id, Key: t.key, PID: t.pid, Priority: t.prio, GPU: g.uuid, Model: t.model,
				Role: t.role, Phase: t.phase, Credit: t.credit, JCTNs: t.meanJCT(), RegisteredAt: t.registered,
				Weight: uint32(t.weight), Throttled: t.throttled, VirtualNs: t.vt, Account: t.account()}
			if t.prof != nil {
				ti.Runs = t.prof.runs()
				ti.RunsNeeded, ti.RunsBeside = int(t.prof.b.TargetRuns()), int(t.prof.b.BesideRuns())
				d, by := t.prof.b.Discarded()
				ti.RunsDiscarded = int(d)
				for r := profiler.DiscardReason(1); r < profiler.NumDiscardReasons; r++ {
					ti.DiscardedBy[r] = uint64(by[r])
				}
			}
			if t.profile != nil {
				ti.ProfileVersion = t.profile.Version
			}
			ti.Refreshing = t.refreshing()
			for _, r := range g.queues[t.prio] {
				if r.t == t {
					ti.Waiting++
				}
			}
			out = append(out, ti)
		}
	}
	return out
}

// DiscardCounts counts discarded profiling runs by reason (index:
// profiler.DiscardReason). In JSON it is an object with one key per reason,
// its name (docs/status-api.md).
type DiscardCounts [profiler.NumDiscardReasons]uint64

func (d *DiscardCounts) add(r profiler.DiscardReason) {
	if r > 0 && r < profiler.NumDiscardReasons {
		d[r]++
	}
}

// MarshalJSON writes every reason, zeros included.
func (d DiscardCounts) MarshalJSON() ([]byte, error) {
	m := make(map[string]uint64, len(d))
	for _, r := range profiler.DiscardReasons() {
		m[r.String()] = d[r]
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes; reasons it does not know
// are ignored.
func (d *DiscardCounts) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		if r, ok := profiler.ParseDiscardReason(k); ok {
			d[r] = v
		}
	}
	return nil
}
