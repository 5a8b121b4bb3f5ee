package chrometrace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/simgpu/timeline"
)

// Event is one trace event (Chrome's Trace Event Format). Times are µs from
// the trace's origin (otherData.origin_ns).
type Event struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	PID   int            `json:"pid"`
	TID   int            `json:"tid"`
	S     string         `json:"s,omitempty"`
	CName string         `json:"cname,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// DaemonPID is the trace process of the daemon's decisions: above Linux's
// largest pid (2^22), so it never meets a real one.
const DaemonPID = 1<<22 + 1

// Tracks of the daemon process, and of each task's runs.
const (
	tidWindows = 1
	tidIdle    = 2
	tidGrants  = 3
	tidHolds   = 4
	tidTasks   = 5
	tidRuns    = 0 // in each task's own process
)

// priorityColor is the reserved colour name (catapult's color scheme, which
// chrome://tracing honours) of a priority's kernels: the best priorities
// green, the worst red, "generic_work" when the priority is unknown.
var priorityColor = [10]string{
	"good", "rail_load", "thread_state_running", "rail_response", "thread_state_runnable",
	"bad", "rail_idle", "rail_animation", "terrible", "olive",
}

func colorOf(prio int) string {
	if prio < 0 || prio >= len(priorityColor) {
		return "generic_work"
	}
	return priorityColor[prio]
}

// streamTID is the track of a context's stream within its process.
func streamTID(ctx int, stream uint32) int { return 1 + ctx*1000 + int(stream) }

// Write writes recs (a simgpu timeline) and decs (a decision record, may be
// empty) within opt's span as a Chrome trace-event JSON object.
func Write(w io.Writer, recs []timeline.Record, decs []decisions.Record, opt Options) error {
	m := newModel(recs, decs)
	origin := opt.From
	if origin == 0 {
		origin = firstTime(recs, decs)
	}
	us := func(ns int64) float64 { return float64(ns-origin) / 1e3 }
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := fmt.Fprintf(bw, `{"displayTimeUnit":"ns","otherData":{"origin_ns":%d,"clock":"CLOCK_MONOTONIC","generator":"fikit trace"},"traceEvents":[`, origin); err != nil {
		return err
	}
	n := 0
	emit := func(e Event) error {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
		n++
		_, err = bw.Write(b)
		return err
	}
	slice := func(e Event, a, b int64) error {
		a, b = opt.clip(a, b)
		d := us(b) - us(a)
		e.Ph, e.Ts, e.Dur = "X", us(a), &d
		return emit(e)
	}
	instant := func(e Event, t int64, scope string) error {
		e.Ph, e.Ts, e.S = "i", us(t), scope
		return emit(e)
	}
	meta := func(name string, pid, tid int, args map[string]any) error {
		return emit(Event{Name: name, Ph: "M", PID: pid, TID: tid, Args: args})
	}

	// Processes and their tracks.
	streams := map[int]map[int]string{} // pid → tid → name
	for _, r := range recs {
		if !opt.in(r.StartNs, r.EndNs) {
			continue
		}
		if streams[r.PID] == nil {
			streams[r.PID] = map[int]string{}
		}
		name := fmt.Sprintf("stream %d", r.Stream)
		if r.Stream == 0 {
			name = "legacy stream"
		}
		if r.Ctx != 0 {
			name = fmt.Sprintf("ctx %d %s", r.Ctx, name)
		}
		streams[r.PID][streamTID(r.Ctx, r.Stream)] = name
	}
	runs := allRuns(decs, m)
	hasRuns := map[int]bool{}
	for _, r := range runs {
		if r.PID != 0 && opt.in(r.Start, r.End) {
			hasRuns[r.PID] = true
		}
	}
	for i, p := range m.sortedProcs() {
		if streams[p.pid] == nil && !hasRuns[p.pid] {
			continue
		}
		if err := meta("process_name", p.pid, 0, map[string]any{"name": p.label()}); err != nil {
			return err
		}
		if err := meta("process_sort_index", p.pid, 0, map[string]any{"sort_index": i + 1}); err != nil {
			return err
		}
		if hasRuns[p.pid] {
			if err := meta("thread_name", p.pid, tidRuns, map[string]any{"name": "runs (daemon's view)"}); err != nil {
				return err
			}
		}
		tids := make([]int, 0, len(streams[p.pid]))
		for tid := range streams[p.pid] {
			tids = append(tids, tid)
		}
		sort.Ints(tids)
		for _, tid := range tids {
			if err := meta("thread_name", p.pid, tid, map[string]any{"name": streams[p.pid][tid]}); err != nil {
				return err
			}
			if err := meta("thread_sort_index", p.pid, tid, map[string]any{"sort_index": tid}); err != nil {
				return err
			}
		}
	}

	// Kernels.
	names := map[string]string{}
	for _, r := range recs {
		if !opt.in(r.StartNs, r.EndNs) {
			continue
		}
		p := m.procs[r.PID]
		disp, ok := names[r.Name]
		if !ok {
			disp = kernelid.DisplayName(r.Name)
			names[r.Name] = disp
		}
		tid := streamTID(r.Ctx, r.Stream)
		if r.BlockedNs > 0 && !opt.NoBlocked && opt.in(r.StartNs-r.BlockedNs, r.StartNs) {
			if err := slice(Event{Name: "blocked", Cat: "interference", PID: r.PID, TID: tid, CName: "terrible",
				Args: map[string]any{"blocked_ns": r.BlockedNs, "kernel": disp}}, r.StartNs-r.BlockedNs, r.StartNs); err != nil {
				return err
			}
		}
		args := map[string]any{
			"kernel_id": kernelid.FormatID(kernelid.ID(r.Name, r.Grid, r.Block)), "name": r.Name,
			"grid": r.Grid, "block": r.Block, "seq": r.Seq, "seg": r.Seg, "last": r.Last,
			"start_ns": r.StartNs, "end_ns": r.EndNs, "arrive_ns": r.ArriveNs, "blocked_ns": r.BlockedNs,
		}
		if p.prio >= 0 {
			args["priority"] = p.prio
		}
		if r.Dropped {
			args["dropped"] = true
		}
		if err := slice(Event{Name: disp, Cat: "kernel", PID: r.PID, TID: tid, CName: colorOf(p.prio), Args: args},
			r.StartNs, r.EndNs); err != nil {
			return err
		}
	}

	// Runs, on their processes.
	for _, r := range runs {
		if r.PID == 0 || !opt.in(r.Start, r.End) {
			continue
		}
		if err := slice(Event{Name: fmt.Sprintf("run %d", r.Run), Cat: "run", PID: r.PID, TID: tidRuns,
			Args: map[string]any{"task": r.Task, "kernels": r.Kernels, "jct_ns": r.End - r.Start, "start_ns": r.Start, "end_ns": r.End}},
			r.Start, r.End); err != nil {
			return err
		}
	}

	if len(decs) == 0 {
		return finish(bw)
	}
	// The daemon.
	for _, x := range []struct {
		tid  int
		name string
	}{{tidWindows, "fill windows (predicted holder gaps)"}, {tidIdle, "holders idle"}, {tidGrants, "grants"},
		{tidHolds, "holds and state changes"}, {tidTasks, "tasks"}} {
		if err := meta("thread_name", DaemonPID, x.tid, map[string]any{"name": x.name}); err != nil {
			return err
		}
		if err := meta("thread_sort_index", DaemonPID, x.tid, map[string]any{"sort_index": x.tid}); err != nil {
			return err
		}
	}
	if err := meta("process_name", DaemonPID, 0, map[string]any{"name": "fikit daemon"}); err != nil {
		return err
	}
	if err := meta("process_sort_index", DaemonPID, 0, map[string]any{"sort_index": 0}); err != nil {
		return err
	}
	for _, wd := range windows(decs) {
		if !opt.in(wd.start, wd.end) {
			continue
		}
		args := map[string]any{"gpu": wd.gpu, "start_ns": wd.start, "end_ns": wd.end, "predicted_gap_us": float64(wd.end-wd.start) / 1e3}
		if wd.closedAt != 0 {
			args["closed_ns"], args["reason"] = wd.closedAt, wd.reason
			if wd.reason == "early_stop" || wd.reason == "holder_launch" {
				args["actual_gap_us"] = float64(wd.closedAt-wd.start) / 1e3
			}
		}
		if err := slice(Event{Name: "window", Cat: "decision", PID: DaemonPID, TID: tidWindows, CName: "rail_idle", Args: args},
			wd.start, wd.end); err != nil {
			return err
		}
	}
	last := lastTime(recs, decs)
	for _, ip := range idlePeriods(decs) {
		end := ip.end
		if end == 0 {
			end = max(last, ip.start)
		}
		if !opt.in(ip.start, end) {
			continue
		}
		if err := slice(Event{Name: "idle", Cat: "decision", PID: DaemonPID, TID: tidIdle, CName: "thread_state_sleeping",
			Args: map[string]any{"gpu": ip.gpu, "cap_ns": ip.capNs}}, ip.start, end); err != nil {
			return err
		}
	}
	for _, d := range decs {
		if !opt.in(d.T, d.T) {
			continue
		}
		who := ""
		if p := m.procOfTask(d.Task); p != nil {
			who = " " + p.label()
		}
		var err error
		switch d.Kind {
		case decisions.KindGrant:
			args := map[string]any{"task": d.Task, "seq": d.Seq, "credit": d.Credit, "reason": d.Reason}
			if d.Kernel != 0 {
				args["kernel_id"] = kernelid.FormatID(uint64(d.Kernel))
			}
			if d.Deadline != 0 {
				args["deadline_ns"] = d.Deadline
			}
			name := "grant" + who
			if d.Credit > 0 {
				name += fmt.Sprintf(" +%d", d.Credit)
			}
			err = instant(Event{Name: name, Cat: "decision", PID: DaemonPID, TID: tidGrants, Args: args}, d.T, "t")
		case decisions.KindRequest:
			err = instant(Event{Name: "request" + who, Cat: "decision", PID: DaemonPID, TID: tidHolds,
				Args: map[string]any{"task": d.Task, "seq": d.Seq, "kernel": d.Kernel}}, d.T, "t")
		case decisions.KindHold:
			err = instant(Event{Name: "hold" + who, Cat: "decision", PID: DaemonPID, TID: tidHolds,
				Args: map[string]any{"task": d.Task, "seq": d.Seq}}, d.T, "t")
		case decisions.KindState:
			err = instant(Event{Name: fmt.Sprintf("%s%s credit %d", d.Role, who, d.Credit), Cat: "decision", PID: DaemonPID, TID: tidHolds,
				Args: map[string]any{"task": d.Task, "role": d.Role, "phase": d.Phase, "credit": d.Credit}}, d.T, "t")
		case decisions.KindRegister, decisions.KindLeave, decisions.KindDrop:
			err = instant(Event{Name: d.Kind + who, Cat: "task", PID: DaemonPID, TID: tidTasks,
				Args: map[string]any{"task": d.Task, "pid": d.PID, "key": d.Key, "priority": d.Priority, "role": d.Role, "phase": d.Phase}}, d.T, "g")
		case decisions.KindProfilingRun:
			err = instant(Event{Name: "profiling run " + d.Reason + who, Cat: "task", PID: DaemonPID, TID: tidTasks,
				Args: map[string]any{"task": d.Task, "run": d.Run, "outcome": d.Reason, "runs": d.Runs}}, d.T, "t")
		case decisions.KindWindowEnd:
			if d.Reason == "early_stop" {
				err = instant(Event{Name: "early stop", Cat: "decision", PID: DaemonPID, TID: tidWindows, CName: "terrible",
					Args: map[string]any{"gpu": d.GPU, "window_start_ns": d.Start, "window_end_ns": d.End,
						"predicted_gap_us": float64(d.End-d.Start) / 1e3, "actual_gap_us": float64(d.T-d.Start) / 1e3}}, d.T, "p")
			}
		case decisions.KindPrediction:
			if d.Samples > 0 {
				err = emit(Event{Name: "holder launch prediction error (us)", Ph: "C", Ts: us(d.T), PID: DaemonPID,
					Args: map[string]any{"mean": float64(d.ErrNs) / float64(d.Samples) / 1e3,
						"mean_abs": float64(d.AbsErrNs) / float64(d.Samples) / 1e3}})
			}
		case decisions.KindLost:
			err = instant(Event{Name: fmt.Sprintf("%d records lost", d.Count), Cat: "decision", PID: DaemonPID, TID: tidTasks}, d.T, "p")
		}
		if err != nil {
			return err
		}
	}
	return finish(bw)
}

func finish(bw *bufio.Writer) error {
	if _, err := bw.WriteString("\n]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// Bounds is the earliest and the latest time in a timeline and a decision
// record (CLOCK_MONOTONIC ns; 0, 0 when both are empty).
func Bounds(recs []timeline.Record, decs []decisions.Record) (first, last int64) {
	return firstTime(recs, decs), lastTime(recs, decs)
}

// firstTime is the earliest time in the inputs (the trace's origin when no
// span is given).
func firstTime(recs []timeline.Record, decs []decisions.Record) int64 {
	first := int64(0)
	see := func(t int64) {
		if t > 0 && (first == 0 || t < first) {
			first = t
		}
	}
	for _, r := range recs {
		see(r.StartNs - r.BlockedNs)
	}
	for _, d := range decs {
		see(d.T)
		see(d.Start)
	}
	return first
}

func lastTime(recs []timeline.Record, decs []decisions.Record) int64 {
	last := int64(0)
	for _, r := range recs {
		last = max(last, r.EndNs)
	}
	for _, d := range decs {
		last = max(last, d.T, d.End)
	}
	return last
}
