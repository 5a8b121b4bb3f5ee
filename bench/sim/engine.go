package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/devmodel"
)

// event kinds on the virtual clock.
type evKind int

const (
	evArrive    evKind = iota // a service's next run arrives
	evLaunch                  // a service's host time before its next launch is over
	evGrant                   // a grant reaches a waiting service
	evState                   // a role/credit change reaches a service
	evCore                    // a message reaches the core
	evTick                    // the core's deadline
	evPostRun                 // a service's post-processing is over
	evHeartbeat               // a service's hook sends a heartbeat
	evGo                      // a granted (or resumed) launch goes once its bound allows
	evRequest                 // a launch request reaches the core, which reads the board first
	evTimes                   // kernel durations reach a service's hook
	evCalibrate               // a calibration request reaches a service's hook
	evResume                  // a waiting thread wakes at a better priority's run end
	evWarm                    // a warm-up request reaches a service's hook (pre-switch)
)

type event struct {
	at   int64
	seq  uint64 // insertion order: ties run in the order scheduled
	kind evKind
	svc  *svcState
	// core message or decision
	core  scheduler.Event
	grant scheduler.Grant
	state scheduler.StateChange
	times scheduler.KernelTimes
	calib scheduler.Calibration
	warm  scheduler.Warmup
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	opts     Options
	dev      *devmodel.Device
	core     *scheduler.Node
	svcs     []*svcState
	byCtx    map[int]*svcState
	byID     map[scheduler.TaskID]*svcState
	q        queue
	seq      uint64
	now      int64
	tickAt   int64 // the core tick currently scheduled (0: none)
	busy     map[int]int64
	segs     []devmodel.Segment
	drifts   []Drift
	keepSegs bool
	board    boardState
	hints    []scheduler.BoardHint
}

func newSim(opts Options, specs []Service) (*sim, error) {
	dev, err := devmodel.New(opts.Device, 0)
	if err != nil {
		return nil, fmt.Errorf("sim: device: %w", err)
	}
	s := &sim{opts: opts, dev: dev, byCtx: map[int]*svcState{}, byID: map[scheduler.TaskID]*svcState{},
		busy: map[int]int64{}, keepSegs: true}
	if opts.Mode == Fikit {
		if s.core, err = scheduler.New(opts.Scheduler); err != nil {
			dev.Close()
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	for i, sp := range specs {
		if len(sp.Kernels) == 0 {
			dev.Close()
			return nil, fmt.Errorf("sim: service %q has no kernels", sp.Name)
		}
		ctx, err := dev.OpenContext(uint32(i + 1))
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("sim: %w", err)
		}
		st := &svcState{spec: sp, id: scheduler.TaskID(i + 1), ctx: ctx, role: scheduler.RoleHolder,
			rng: rand.New(rand.NewPCG(sp.Seed, uint64(i)+1)), res: ServiceResult{Name: sp.Name}}
		st.res.Span[0] = -1
		s.svcs = append(s.svcs, st)
		s.byCtx[ctx] = st
		s.byID[st.id] = st
		st.arriv = int64(sp.Start)
		s.push(&event{at: st.arriv, kind: evArrive, svc: st})
		if s.core != nil {
			s.toCore(int64(sp.Start), scheduler.TaskRegistered{Task: st.id, Key: sp.Name, PID: uint32(i + 1),
				Priority: sp.Priority, Weight: sp.Weight, GPU: "sim0", Model: "sim", Profile: sp.Profile}, 0)
			s.push(&event{at: int64(sp.Start) + s.opts.Scheduler.HeartbeatInterval, kind: evHeartbeat, svc: st})
		}
	}
	return s, nil
}

func (s *sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.q, e)
}

// toCore delivers ev to the core after a delay (message latency).
func (s *sim) toCore(at int64, ev scheduler.Event, delay int64) {
	s.push(&event{at: at + delay, kind: evCore, core: ev})
}

// allDone: every service with a run count has completed it (services
// without one only run alongside; with none at all, the horizon ends it).
func (s *sim) allDone() bool {
	bounded := false
	for _, st := range s.svcs {
		if st.spec.Runs > 0 {
			bounded = true
			if !st.done() {
				return false
			}
		}
	}
	return bounded
}

func (s *sim) run() error {
	horizon := int64(s.opts.Horizon)
	for !s.allDone() {
		next := int64(math.MaxInt64)
		if len(s.q) > 0 {
			next = s.q[0].at
		}
		if d := s.dev.NextEvent(); d < next {
			next = d
		}
		if next == math.MaxInt64 {
			return fmt.Errorf("sim: deadlock at %d ns: nothing left to happen", s.now)
		}
		if next > horizon {
			s.now = horizon
			s.advance(horizon)
			return nil
		}
		s.now = max(s.now, next)
		s.advance(s.now)
		for len(s.q) > 0 && s.q[0].at <= s.now {
			e := heap.Pop(&s.q).(*event)
			s.handle(e)
		}
		s.flushCore()
	}
	return nil
}

// advance brings the device to t and completes runs whose last kernel ended.
func (s *sim) advance(t int64) {
	for _, g := range s.dev.Advance(t) {
		s.busy[g.Ctx] += g.End - g.Start
		if s.keepSegs {
			s.segs = append(s.segs, g)
		}
	}
	for _, st := range s.svcs {
		if st.waitSeq == 0 {
			continue
		}
		done, end, err := s.dev.Done(st.ctx, st.waitSeq)
		if err != nil || !done {
			continue
		}
		st.waitSeq = 0
		s.dev.Retire(st.ctx)
		s.runEnd(st, max(end, st.t0))
	}
}

func (s *sim) handle(e *event) {
	st := e.svc
	switch e.kind {
	case evArrive:
		if st.done() {
			return
		}
		st.run++
		st.t0 = s.now
		st.next = 0
		st.kernels = st.spec.kernelsAt(int(st.run))
		st.firstOp = 0
		st.segFrom = len(s.segs)
		st.started++
		st.measured = s.core != nil && (st.phase == scheduler.PhaseProfiling || (st.sample > 0 && st.started%st.sample == 0))
		if st.res.Span[0] < 0 {
			st.res.Span[0] = s.now
		}
		s.push(&event{at: s.now + st.spec.PreNs + st.kernels[0].HostNs, kind: evLaunch, svc: st})
	case evLaunch:
		s.launch(st)
	case evGrant:
		// Credit is a limit on the launch counter: launches up to
		// Seq+Credit go without asking (a renewal names the latest launch
		// the core had seen, so launches in flight are not counted twice).
		st.credLimit = e.grant.Seq + e.grant.Credit
		st.h.gateSeen, st.h.gateExpires = e.grant.Seen, e.grant.Expires
		if st.waiting && e.grant.Seq == st.seq {
			st.waiting = false
			st.h.granted++
			s.goGranted(st)
		}
	case evState:
		st.role = e.state.Role
		st.phase, st.sample = e.state.Phase, e.state.Sample
		st.h.asks = false
		st.h.gateSeen, st.h.gateExpires = e.state.Seen, e.state.Expires
		if e.state.Credit == 0 {
			st.credLimit = 0
		} else {
			st.credLimit = st.seq + e.state.Credit
		}
	case evGo:
		if st.launching {
			s.goGranted(st)
		}
	case evRequest:
		if s.opts.Board {
			var lv [10]int64
			for p, at := range s.board.level {
				lv[p] = min(at, s.now)
			}
			_ = s.core.Step(scheduler.BoardObserved{Now: s.now, Task: st.id, Levels: lv})
		}
		_ = s.core.Step(e.core)
	case evTimes:
		st.h.kt = map[uint64]int64{}
		for _, k := range e.times.Kernels {
			st.h.kt[k.ID] = k.Ns
		}
		st.h.ktBound, st.h.ktDef = e.times.BoundNs, e.times.DefaultNs
	case evCalibrate:
		s.calibrate(st, e.calib)
	case evWarm:
		s.warm(st, e.warm)
	case evResume:
		if st.waiting && s.resumeOK(st, st.kernels[st.next]) {
			st.waiting = false
			st.h.resumed++
			s.report(st)
			st.resuming = true
			s.goGranted(st)
		}
	case evCore:
		if err := s.core.Step(e.core); err != nil {
			return // a message about a task the core dropped
		}
	case evTick:
		s.tickAt = 0
		_ = s.core.Step(scheduler.Tick{Now: s.now})
	case evPostRun:
		s.scheduleArrival(st)
	case evHeartbeat:
		// A hook's sender heartbeats while its process lives (a finished
		// service's process is gone): a service idle between runs for
		// longer than dead-after is not dropped.
		if st.done() {
			return
		}
		s.toCore(s.now, scheduler.Heartbeat{Now: s.now + int64(s.opts.NotifyLatency), Task: st.id}, int64(s.opts.NotifyLatency))
		s.push(&event{at: s.now + s.opts.Scheduler.HeartbeatInterval, kind: evHeartbeat, svc: st})
	}
}

// launch: the host is ready to launch the service's next kernel. As the
// hook does: first the bound (hook.go) — the launch waits until it fits —
// then the permission: a holder's role (unless its gate closed), credit
// within its gate, a resume on the board, or else a request.
func (s *sim) launch(st *svcState) {
	k := st.kernels[st.next]
	if s.core == nil {
		st.seq++
		s.enqueue(st)
		return
	}
	if at := s.boundAt(st, k, false); at > s.now {
		s.push(&event{at: at, kind: evLaunch, svc: st})
		return
	}
	st.seq++
	if st.role == scheduler.RoleHolder && !st.h.asks && s.betterRegistered(st) && s.opts.Board && s.above(st) > st.h.gateSeen {
		st.h.asks = true // a lower holder sees a better priority launch: it asks from now on
	}
	holds := st.role == scheduler.RoleHolder && !st.h.asks
	if holds || (st.seq <= st.credLimit && !s.gateStale(st)) {
		s.report(st)
		s.enqueue(st)
		return
	}
	if s.resumeOK(st, k) {
		// Bounded as a holder's launch is, by count without a µs bound.
		if at := s.boundAt(st, k, true); at > s.now {
			st.seq--
			s.push(&event{at: at, kind: evLaunch, svc: st})
			return
		}
		st.h.resumed++
		s.report(st)
		s.enqueue(st)
		return
	}
	st.credLimit = min(st.credLimit, st.seq-1) // stale credit is dropped
	s.request(st)
}

// report sends the launch of st's seq to the core after the fact, with
// its launch time, and notes it on the board (a holder's level).
func (s *sim) report(st *svcState) {
	k := st.kernels[st.next]
	if st.role == scheduler.RoleHolder && !st.h.asks {
		s.board.level[st.spec.Priority] = max(s.board.level[st.spec.Priority], s.now)
	}
	s.toCore(s.now, scheduler.LaunchNotified{Now: s.now, Task: st.id, Seq: st.seq, Kernel: k.ID}, int64(s.opts.NotifyLatency))
}

// request asks the core for st's launch seq (the board shows the level
// first, so that lower priorities stop at once).
func (s *sim) request(st *svcState) {
	k := st.kernels[st.next]
	st.waiting = true
	s.board.level[st.spec.Priority] = max(s.board.level[st.spec.Priority], s.now)
	half := int64(s.opts.GrantRTT) / 2
	s.push(&event{at: s.now + half, kind: evRequest, svc: st,
		core: scheduler.LaunchRequested{Now: s.now + half, Task: st.id, Seq: st.seq, Kernel: k.ID}})
}

// goGranted launches st's granted (or resumed) seq once its bound allows;
// a grant the board shows stale by then is asked for again (a few times).
func (s *sim) goGranted(st *svcState) {
	k := st.kernels[st.next]
	if at := s.boundAt(st, k, st.resuming); at > s.now {
		st.launching = true
		s.push(&event{at: at, kind: evGo, svc: st})
		return
	}
	st.launching = false
	if st.resuming {
		st.resuming = false
		if !s.resumeOK(st, k) {
			s.request(st) // the board changed while it waited: ask after all
			return
		}
	} else if s.gateStale(st) && st.h.reasks < 4 {
		st.credLimit = min(st.credLimit, st.seq-1)
		st.h.reasks++
		s.request(st)
		return
	}
	st.h.reasks = 0
	s.enqueue(st)
}

// enqueue puts the service's next kernel on the device and schedules the
// host's next step.
func (s *sim) enqueue(st *svcState) {
	k := st.kernels[st.next]
	seq, err := s.dev.Enqueue(st.ctx, devmodel.Op{Type: devmodel.Kernel, Stream: 1, Duration: time.Duration(k.DurationNs),
		Tag: k.ID}, s.now)
	if err != nil {
		// A full ring: a real driver blocks the launching thread; retry
		// once the device has made progress.
		s.dev.Retire(st.ctx)
		s.push(&event{at: s.now + 1000, kind: evLaunch, svc: st})
		st.seq--
		return
	}
	st.last = seq
	if st.firstOp == 0 {
		st.firstOp = seq
	}
	st.lastOp = seq
	if s.core != nil {
		s.tookOff(st, seq, st.dur(k.ID))
	}
	st.next++
	if st.next < len(st.kernels) {
		s.push(&event{at: s.now + st.kernels[st.next].HostNs, kind: evLaunch, svc: st})
		return
	}
	st.waitSeq = seq // synchronize: the run ends when this kernel does
	s.dev.Retire(st.ctx)
}

// runEnd: the service's synchronization returned at end.
func (s *sim) runEnd(st *svcState, end int64) {
	st.res.Runs++
	st.res.JCTs = append(st.res.JCTs, end-st.t0)
	st.res.Starts = append(st.res.Starts, st.t0)
	st.res.Span[1] = end
	recs, blocked := s.runRecords(st)
	st.res.Blocked = append(st.res.Blocked, blocked)
	if s.core != nil {
		lat := int64(s.opts.NotifyLatency)
		if st.measured {
			// A hook ships a measured run's records before its run end.
			s.toCore(end, scheduler.MeasurementsReceived{Now: end + lat, Task: st.id, Run: st.run, Records: recs}, lat)
		}
		s.toCore(end, scheduler.RunEnded{Now: end + lat, Task: st.id, Run: st.run,
			Kernels: uint32(len(st.kernels)), RunNs: end - st.t0, LastSeq: uint32(st.seq)}, lat)
		// The sync returned: its work is done (the cursor's correction),
		// and the board shows the run ended; threads waiting there wake.
		if left := st.h.cursor - end; left > 0 {
			// What it was predicted to have left is done: the GPU's
			// cursor is that much early (no earlier than now).
			s.board.lpCursor = max(end, s.board.lpCursor-left)
		}
		st.h.cursor = end
		p := st.spec.Priority
		s.board.runEnd[p] = max(s.board.runEnd[p], end)
		for _, o := range s.svcs {
			if o != st && o.waiting && o.spec.Priority > p {
				s.push(&event{at: end + resumeWake, kind: evResume, svc: o})
			}
		}
	}
	if st.spec.PostNs > 0 {
		s.push(&event{at: end + st.spec.PostNs, kind: evPostRun, svc: st})
		return
	}
	s.nowAt(end, func() { s.scheduleArrival(st) })
}

func (s *sim) nowAt(t int64, f func()) {
	saved := s.now
	s.now = t
	f()
	s.now = saved
}

// scheduleArrival queues the service's next run.
func (s *sim) scheduleArrival(st *svcState) {
	if st.done() {
		return
	}
	switch {
	case st.spec.Burst > 0 && st.spec.Every > 0:
		st.arriv = s.now
		if st.res.Runs > 0 && st.res.Runs%st.spec.Burst == 0 {
			st.arriv += int64(st.spec.Every)
		}
	case st.spec.Poisson > 0:
		st.arriv += int64(st.rng.ExpFloat64() / st.spec.Poisson * 1e9)
	case st.spec.Every > 0:
		st.arriv += int64(st.spec.Every)
	default:
		st.arriv = s.now
	}
	at := st.arriv
	if st.spec.Late > 0 && (st.spec.Every > 0 || st.spec.Poisson > 0) {
		at += st.rng.Int64N(int64(st.spec.Late))
	}
	s.push(&event{at: max(at, s.now), kind: evArrive, svc: st})
}

// flushCore delivers the core's decisions after the reply latency.
func (s *sim) flushCore() {
	if s.core == nil {
		return
	}
	r := s.core.Ready()
	half := int64(s.opts.GrantRTT) / 2
	for _, d := range r.Drifts {
		s.drifts = append(s.drifts, Drift{AtNs: s.now, DriftEvent: d})
	}
	for _, a := range r.Acks {
		if st := s.byID[a.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evState, svc: st, state: scheduler.StateChange{Task: a.Task, Role: a.Role,
				Phase: a.Phase, Sample: a.Sample}})
		}
	}
	for _, c := range r.States {
		if st := s.byID[c.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evState, svc: st, state: c})
		}
	}
	for _, g := range r.Grants {
		if st := s.byID[g.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evGrant, svc: st, grant: g})
		}
	}
	for _, k := range r.KernelTimes {
		if st := s.byID[k.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evTimes, svc: st, times: k})
		}
	}
	for _, c := range r.Calibrations {
		if st := s.byID[c.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evCalibrate, svc: st, calib: c})
		}
	}
	for _, w := range r.Warmups {
		if st := s.byID[w.Task]; st != nil {
			s.push(&event{at: s.now + half, kind: evWarm, svc: st, warm: w})
		}
	}
	if s.hints = s.core.BoardHints(s.hints[:0]); len(s.hints) > 0 {
		s.board.hint = s.hints[0]
	}
	if r.Deadline > 0 && (s.tickAt == 0 || r.Deadline < s.tickAt) {
		s.tickAt = r.Deadline
		s.push(&event{at: r.Deadline, kind: evTick})
	}
}

func (s *sim) result() *Result {
	r := &Result{Mode: s.opts.Mode, EndNs: s.now}
	st := s.dev.Stats()
	r.DeviceBusyNs, r.SwitchingNs = int64(st.Busy), int64(st.Switching)
	for _, sv := range s.svcs {
		sv.res.BusyNs = s.busy[sv.ctx]
		sv.res.Warmups = sv.h.warmups
		r.Services = append(r.Services, sv.res)
	}
	if s.core != nil {
		r.Stats = s.core.Stats()
		r.Drifts = s.drifts
		r.Grants = r.Stats.Grants
	}
	if len(s.svcs) > 1 {
		hp := s.svcs[0]
		from, to := hp.res.Span[0], hp.res.Span[1]
		var hpBusy, other int64
		for _, g := range s.segs {
			a, b := max(g.Start, from), min(g.End, to)
			if b <= a {
				continue
			}
			if g.Ctx == hp.ctx {
				hpBusy += b - a
			} else {
				other += b - a
			}
		}
		if idle := (to - from) - hpBusy; idle > 0 {
			r.FillPct = 100 * float64(other) / float64(idle)
		}
	}
	return r
}

// runRecords are the measurement records of the service's run that just
// ended, exact from the device's segments (as its hook would measure it,
// without the hook's own error), and the run's ground-truth interference.
func (s *sim) runRecords(st *svcState) ([]profiler.Record, int64) {
	type kspan struct {
		id         uint64
		start, end int64
	}
	var ks []kspan
	var blocked int64
	open := map[uint64]int{}
	for _, g := range s.segs[min(st.segFrom, len(s.segs)):] {
		if g.Ctx != st.ctx || g.Seq < st.firstOp || g.Seq > st.lastOp {
			continue
		}
		blocked += int64(g.Blocked)
		if g.Index == 0 {
			open[g.Seq] = len(ks)
			ks = append(ks, kspan{id: g.Tag, start: g.Start})
		}
		if g.Last {
			if i, ok := open[g.Seq]; ok {
				ks[i].end = g.End
			}
		}
	}
	if !st.measured {
		return nil, blocked
	}
	recs := make([]profiler.Record, len(ks))
	for i, k := range ks {
		recs[i] = profiler.Record{KernelID: k.id, DurationNs: uint64(max(k.end-k.start, 0))}
		if i+1 < len(ks) {
			recs[i].GapNs = uint64(max(ks[i+1].start-k.end, 0))
		} else {
			recs[i].Flags = profiler.FlagGapSpansRunEnd
		}
	}
	return recs, blocked
}
