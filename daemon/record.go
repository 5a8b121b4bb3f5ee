package daemon

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/scheduler"
)

// This file is the decision record (`fikit serve --record FILE`): what the
// core decided and what it predicted, one decisions.Record per line, for
// `fikit trace` to lay beside simgpu's timeline. The core stays pure: the
// recorder watches the events that go in, the decisions that come out of
// Ready, and the core's fill state and counters after each step.

// Record starts recording decisions to w, ending any recording in progress;
// nil only ends it. The recording begins with the tasks already registered.
// The server owns w: when its recording ends (or the server stops) what is
// queued is written and w is closed if it is an io.Closer.
func (s *Server) Record(w io.Writer) error {
	s.mu.Lock()
	old := s.rec
	s.rec = nil
	if w != nil {
		s.rec = newRecorder(w, s)
	}
	s.mu.Unlock()
	if old == nil {
		return nil
	}
	err := old.w.Close()
	if c, ok := old.dst.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// recorder turns the daemon's view into decision records. Called with the
// server's mu held.
type recorder struct {
	dst   io.Writer
	w     *decisions.Writer
	stats scheduler.Stats
	fill  []scheduler.FillState // after the previous step
	next  []scheduler.FillState
	tasks map[scheduler.TaskID]*recTask
	// pending are the kernels of waiting requests, for their grants.
	pending map[reqKey]uint64
	// batch is what each GPU's filling did since the last Ready: the window
	// (or idle period) the batch's grants went into.
	batch map[string]batchFill
}

type reqKey struct {
	task scheduler.TaskID
	seq  uint32
}

type batchFill struct {
	window     bool
	start, end int64
	idle       bool
}

// recTask is what the record needs of a task.
type recTask struct {
	key    string
	pid    uint32
	prio   uint8
	gpu    string
	holder bool
	// runStartSeq is the seq of its current run's first launch (0: not
	// seen yet); launches the recent launch times by seq, to place a run
	// in time when its end is reported (possibly after the next run began).
	runStartSeq uint32
	launches    *[launchRing]seqTime
}

type seqTime struct {
	seq uint32
	at  int64
}

// launchRing covers a run's launches: the run-end report of a run names
// its first launch, which is at most one run (plus a few) back.
const launchRing = 4096

func newRecorder(w io.Writer, s *Server) *recorder {
	r := &recorder{
		dst: w,
		w: decisions.NewWriter(w, func(err error) {
			s.log.Error("recording decisions stopped", "err", err)
		}),
		tasks: map[scheduler.TaskID]*recTask{}, pending: map[reqKey]uint64{}, batch: map[string]batchFill{},
	}
	now := s.now()
	for _, t := range s.core.Tasks() {
		rt := &recTask{key: t.Key, pid: t.PID, prio: t.Priority, gpu: t.GPU, holder: t.Role == scheduler.RoleHolder}
		r.tasks[t.ID] = rt
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindRegister, Task: uint32(t.ID), PID: t.PID, Key: t.Key,
			Priority: t.Priority, GPU: t.GPU, Role: t.Role.String(), Phase: t.Phase.String()})
	}
	r.stats = s.core.Stats()
	r.fill = s.core.FillStates(nil)
	for _, f := range r.fill {
		if f.Window {
			r.w.Add(decisions.Record{T: now, Kind: decisions.KindWindow, GPU: f.GPU, Start: f.WindowStartNs, End: f.WindowEndNs})
		}
		if f.Idle {
			r.w.Add(decisions.Record{T: now, Kind: decisions.KindIdle, GPU: f.GPU, CapNs: f.IdleCapNs})
		}
	}
	r.w.Flush()
	return r
}

// stepped records what event ev (accepted by the core) did.
func (r *recorder) stepped(ev scheduler.Event, core *scheduler.Node) {
	now := core.Now()
	var task scheduler.TaskID
	launchAt := int64(0) // the event's first launch, if it is one
	switch e := ev.(type) {
	case scheduler.TaskRegistered:
		// A hook that registers again replaces its earlier task (the core
		// removes it without a TaskLeft).
		for id, t := range r.tasks {
			if e.PID != 0 && t.pid == e.PID && t.key == e.Key && t.gpu == e.GPU {
				r.forget(id)
			}
		}
		r.tasks[e.Task] = &recTask{key: e.Key, pid: e.PID, prio: e.Priority, gpu: e.GPU}
	case scheduler.TaskLeft:
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindLeave, Task: uint32(e.Task)})
		r.forget(e.Task)
	case scheduler.LaunchNotified:
		task, launchAt = e.Task, e.Now
		r.launched(e.Task, e.Seq, e.Now)
	case scheduler.LaunchesNotified:
		task = e.Task
		for i, at := range e.Times {
			if i == 0 {
				launchAt = at
			}
			r.launched(e.Task, e.Seq+uint32(i), at)
		}
	case scheduler.LaunchRequested:
		task, launchAt = e.Task, e.Now
		r.pending[reqKey{e.Task, e.Seq}] = e.Kernel
		r.launched(e.Task, e.Seq, e.Now)
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindRequest, Task: uint32(e.Task), Seq: e.Seq, Kernel: decisions.KernelID(e.Kernel)})
	case scheduler.RunEnded:
		r.runEnded(e)
	}
	st := core.Stats()
	if n := st.PredictionSamples - r.stats.PredictionSamples; n > 0 {
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindPrediction, Task: uint32(task), Samples: n,
			ErrNs: st.PredictionErrNs - r.stats.PredictionErrNs, AbsErrNs: st.PredictionAbsErrNs - r.stats.PredictionAbsErrNs})
	}
	early := st.EarlyStops > r.stats.EarlyStops
	sighted := st.BoardStops > r.stats.BoardStops
	r.stats = st
	r.next = core.FillStates(r.next[:0])
	for _, f := range r.next {
		var old scheduler.FillState
		for _, o := range r.fill {
			if o.GPU == f.GPU {
				old = o
				break
			}
		}
		if old.Window && (!f.Window || f.WindowEndNs != old.WindowEndNs) {
			rec := decisions.Record{T: now, Kind: decisions.KindWindowEnd, GPU: f.GPU, Start: old.WindowStartNs, End: old.WindowEndNs}
			holderLaunch := launchAt != 0 && r.tasks[task] != nil && r.tasks[task].holder
			switch {
			case sighted:
				rec.Reason = "board"
			case early && launchAt != 0:
				rec.Reason, rec.T = "early_stop", launchAt
			case holderLaunch && launchAt >= old.WindowEndNs:
				rec.Reason, rec.T = "holder_launch", launchAt
			case now >= old.WindowEndNs:
				rec.Reason = "expired"
			default:
				rec.Reason = "closed"
			}
			r.w.Add(rec)
		}
		if f.Window && (!old.Window || f.WindowEndNs != old.WindowEndNs) {
			r.w.Add(decisions.Record{T: now, Kind: decisions.KindWindow, GPU: f.GPU, Start: f.WindowStartNs, End: f.WindowEndNs})
		}
		if f.Idle != old.Idle {
			rec := decisions.Record{T: now, Kind: decisions.KindIdleEnd, GPU: f.GPU}
			if f.Idle {
				rec.Kind, rec.CapNs = decisions.KindIdle, f.IdleCapNs
			} else if sighted {
				rec.Reason = "board"
			}
			r.w.Add(rec)
		}
		b := r.batch[f.GPU]
		if f.Window {
			b.window, b.start, b.end = true, f.WindowStartNs, f.WindowEndNs
		}
		b.idle = b.idle || f.Idle
		r.batch[f.GPU] = b
	}
	r.fill, r.next = r.next, r.fill
}

// launched notes t's launch seq at time at.
func (r *recorder) launched(id scheduler.TaskID, seq uint32, at int64) {
	t := r.tasks[id]
	if t == nil {
		return
	}
	if t.launches == nil {
		t.launches = new([launchRing]seqTime)
	}
	t.launches[seq%launchRing] = seqTime{seq, at}
	if t.runStartSeq == 0 {
		t.runStartSeq = seq
	}
}

// runEnded records a run: its first launch is LastSeq−Kernels+1 when the
// hook says which launch was its last, else the task's run start as the
// core counts it (the next run starts Kernels launches later).
func (r *recorder) runEnded(e scheduler.RunEnded) {
	rec := decisions.Record{T: e.Now, Kind: decisions.KindRun, Task: uint32(e.Task), Run: e.Run, Kernels: e.Kernels, RunNs: e.RunNs}
	if t := r.tasks[e.Task]; t != nil {
		first := t.runStartSeq
		if e.LastSeq != 0 && e.Kernels > 0 {
			first = e.LastSeq - e.Kernels + 1
		}
		if t.launches != nil && first != 0 && e.RunNs > 0 {
			if l := t.launches[first%launchRing]; l.seq == first {
				rec.Start, rec.End = l.at, l.at+e.RunNs
			}
		}
		switch {
		case e.LastSeq != 0:
			t.runStartSeq = e.LastSeq + 1
		case first != 0 && e.Kernels > 0:
			t.runStartSeq = first + e.Kernels
		default:
			t.runStartSeq = 0
		}
	}
	r.w.Add(rec)
}

func (r *recorder) forget(id scheduler.TaskID) {
	delete(r.tasks, id)
	for k := range r.pending {
		if k.task == id {
			delete(r.pending, k)
		}
	}
}

// ready records the decisions of one Ready and hands the batch to the
// writer.
func (r *recorder) ready(rd *scheduler.Ready, now int64) {
	for _, a := range rd.Acks {
		t := r.tasks[a.Task]
		if t == nil {
			continue
		}
		t.holder = a.Role == scheduler.RoleHolder
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindRegister, Task: uint32(a.Task), PID: t.pid, Key: t.key,
			Priority: t.prio, GPU: t.gpu, Role: a.Role.String(), Phase: a.Phase.String()})
	}
	for _, st := range rd.States {
		if t := r.tasks[st.Task]; t != nil {
			t.holder = st.Role == scheduler.RoleHolder
		}
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindState, Task: uint32(st.Task), Role: st.Role.String(),
			Phase: st.Phase.String(), Credit: st.Credit})
	}
	for _, g := range rd.Grants {
		rec := decisions.Record{T: now, Kind: decisions.KindGrant, Task: uint32(g.Task), Seq: g.Seq, Credit: g.Credit}
		k := reqKey{g.Task, g.Seq}
		if kernel, ok := r.pending[k]; ok {
			rec.Kernel = decisions.KernelID(kernel)
			delete(r.pending, k)
		}
		t := r.tasks[g.Task]
		switch b := r.batchOf(t); {
		case t != nil && t.holder:
			rec.Reason = "holder"
		case b.window:
			rec.Reason, rec.Deadline = "window", b.end
		case b.idle:
			rec.Reason = "idle"
		}
		r.w.Add(rec)
	}
	for _, h := range rd.Holds {
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindHold, Task: uint32(h.Task), Seq: h.Seq})
	}
	for _, v := range rd.Runs {
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindProfilingRun, Task: uint32(v.Task), Run: v.Run,
			Reason: v.Outcome, Why: v.Reason, Runs: v.Runs})
	}
	for _, d := range rd.Drifts {
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindDrift, Task: uint32(d.Task), Reason: d.Kind, Why: d.Reason,
			Version: d.Version})
	}
	for _, id := range rd.Dropped {
		r.w.Add(decisions.Record{T: now, Kind: decisions.KindDrop, Task: uint32(id)})
		r.forget(id)
	}
	clear(r.batch)
	r.w.Flush()
}

func (r *recorder) batchOf(t *recTask) batchFill {
	if t == nil {
		return batchFill{}
	}
	return r.batch[t.gpu]
}

// serveRecord is GET /v1/record on the admin socket: the decision record,
// streamed for ?seconds=N (default 10, at most 3600) or until the client
// goes away. One recording at a time: 409 while another runs (fikit serve
// --record).
func (s *Server) serveRecord(w http.ResponseWriter, r *http.Request) {
	secs := 10
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			http.Error(w, "seconds: want 1–3600", http.StatusBadRequest)
			return
		}
		secs = n
	}
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	w.Header().Set("Content-Type", "application/x-ndjson")
	s.mu.Lock()
	if s.rec != nil {
		s.mu.Unlock()
		http.Error(w, "the daemon is already recording its decisions", http.StatusConflict)
		return
	}
	rec := newRecorder(sw, s)
	s.rec = rec
	s.mu.Unlock()
	t := time.NewTimer(time.Duration(secs) * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	s.mu.Lock()
	if s.rec == rec {
		s.rec = nil
	}
	s.mu.Unlock()
	_ = rec.w.Close()
	sw.close()
}

// streamWriter writes to an HTTP response, flushing each write, until the
// handler returns: the record's writing goroutine may outlive it.
type streamWriter struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	done bool
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return 0, net.ErrClosed
	}
	n, err := s.w.Write(p)
	if err == nil {
		err = s.rc.Flush()
	}
	return n, err
}

func (s *streamWriter) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}
