package chrometrace

import (
	"fmt"
	"sort"
	"time"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/simgpu/timeline"
)

// Options select what is drawn.
type Options struct {
	// From and To bound the span (CLOCK_MONOTONIC ns); 0: unbounded.
	// Slices crossing a bound are cut at it (their args keep the real
	// times).
	From, To int64
	// NoBlocked leaves out the "blocked" slices before kernels.
	NoBlocked bool
	// Title is the PNG's title ("" for a default one).
	Title string
}

// proc is one OS process: what the decision record says about it.
type proc struct {
	pid   int
	key   string
	prio  int // -1: unknown
	tasks []uint32
}

// label names a process for people: "demo-hp (priority 0)".
func (p *proc) label() string {
	switch {
	case p.key != "" && p.prio >= 0:
		return fmt.Sprintf("%s (priority %d)", p.key, p.prio)
	case p.key != "":
		return p.key
	}
	return fmt.Sprintf("pid %d", p.pid)
}

// model is the timeline and the decisions indexed for drawing.
type model struct {
	recs    []timeline.Record
	decs    []decisions.Record
	procs   map[int]*proc
	taskPid map[uint32]int
}

func newModel(recs []timeline.Record, decs []decisions.Record) *model {
	m := &model{recs: recs, decs: decs, procs: map[int]*proc{}, taskPid: map[uint32]int{}}
	for _, d := range decs {
		if d.Kind != decisions.KindRegister || d.PID == 0 {
			continue
		}
		pid := int(d.PID)
		p := m.procs[pid]
		if p == nil {
			p = &proc{pid: pid}
			m.procs[pid] = p
		}
		// A process that registers again (another GPU, or after a
		// timeout) keeps the latest name.
		p.key, p.prio = d.Key, int(d.Priority)
		p.tasks = append(p.tasks, d.Task)
		m.taskPid[d.Task] = pid
	}
	for _, r := range recs {
		if m.procs[r.PID] == nil {
			m.procs[r.PID] = &proc{pid: r.PID, prio: -1}
		}
	}
	return m
}

// proc returns the process of a task (nil if unknown).
func (m *model) procOfTask(task uint32) *proc {
	if pid, ok := m.taskPid[task]; ok {
		return m.procs[pid]
	}
	return nil
}

// sortedProcs lists the processes by priority (unknown last), then pid.
func (m *model) sortedProcs() []*proc {
	ps := make([]*proc, 0, len(m.procs))
	for _, p := range m.procs {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i].prio, ps[j].prio
		if a < 0 {
			a = 1 << 20
		}
		if b < 0 {
			b = 1 << 20
		}
		if a != b {
			return a < b
		}
		return ps[i].pid < ps[j].pid
	})
	return ps
}

// in reports whether [a, b] meets the span.
func (o *Options) in(a, b int64) bool {
	return (o.To == 0 || a <= o.To) && (o.From == 0 || b >= o.From)
}

// clip cuts [a, b] to the span.
func (o *Options) clip(a, b int64) (int64, int64) {
	if o.From != 0 && a < o.From {
		a = o.From
	}
	if o.To != 0 && b > o.To {
		b = o.To
	}
	return a, max(a, b)
}

// window is a predicted fill window and how it ended.
type window struct {
	gpu        string
	start, end int64
	closedAt   int64 // 0: not seen closing
	reason     string
}

// windows pairs window records with their ends.
func windows(decs []decisions.Record) []window {
	type key struct {
		gpu        string
		start, end int64
	}
	open := map[key]int{}
	var ws []window
	for _, d := range decs {
		switch d.Kind {
		case decisions.KindWindow:
			open[key{d.GPU, d.Start, d.End}] = len(ws)
			ws = append(ws, window{gpu: d.GPU, start: d.Start, end: d.End})
		case decisions.KindWindowEnd:
			k := key{d.GPU, d.Start, d.End}
			if i, ok := open[k]; ok {
				ws[i].closedAt, ws[i].reason = d.T, d.Reason
				delete(open, k)
			}
		}
	}
	return ws
}

// idlePeriod is a stretch during which the holders counted as idle.
type idlePeriod struct {
	gpu        string
	start, end int64 // end 0: still idle when the record ends
	capNs      int64
}

func idlePeriods(decs []decisions.Record) []idlePeriod {
	open := map[string]int{}
	var ps []idlePeriod
	for _, d := range decs {
		switch d.Kind {
		case decisions.KindIdle:
			open[d.GPU] = len(ps)
			ps = append(ps, idlePeriod{gpu: d.GPU, start: d.T, capNs: d.CapNs})
		case decisions.KindIdleEnd:
			if i, ok := open[d.GPU]; ok {
				ps[i].end = d.T
				delete(open, d.GPU)
			}
		}
	}
	return ps
}

// Run is one run of a task as the daemon recorded it.
type Run struct {
	Task     uint32
	PID      int
	Key      string
	Priority int // -1: unknown
	Run      uint32
	Kernels  uint32
	// Start and End: its first launch as the daemon saw it, and that plus
	// its length as the hook measured it (CLOCK_MONOTONIC ns).
	Start, End int64
}

// Runs lists the runs in decs whose start is known, by start. key selects
// a task key; "" selects the tasks of the best priority that recorded runs.
func Runs(decs []decisions.Record, key string) []Run {
	best := 1 << 20
	var out []Run
	for _, r := range allRuns(decs, newModel(nil, decs)) {
		if key != "" && r.Key != key {
			continue
		}
		if key == "" && r.Priority >= 0 {
			best = min(best, r.Priority)
		}
		out = append(out, r)
	}
	if key == "" && best < 1<<20 {
		kept := out[:0]
		for _, r := range out {
			if r.Priority == best {
				kept = append(kept, r)
			}
		}
		out = kept
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// allRuns is every run with a known start, on every task, in record order.
func allRuns(decs []decisions.Record, m *model) []Run {
	var out []Run
	for _, d := range decs {
		if d.Kind != decisions.KindRun || d.Start == 0 {
			continue
		}
		r := Run{Task: d.Task, Run: d.Run, Kernels: d.Kernels, Start: d.Start, End: max(d.End, d.Start), Priority: -1}
		if p := m.procOfTask(d.Task); p != nil {
			r.PID, r.Key, r.Priority = p.pid, p.key, p.prio
		}
		out = append(out, r)
	}
	return out
}

// AroundRuns spans runs n … n+count-1 (from 1) of the task with key (""
// the best priority) that start at or after from (and, with to, by to).
func AroundRuns(decs []decisions.Record, key string, from, to int64, n, count int, margin time.Duration) (int64, int64, error) {
	var runs []Run
	for _, r := range Runs(decs, key) {
		if r.Start >= from && (to == 0 || r.Start <= to) {
			runs = append(runs, r)
		}
	}
	if n > len(runs) {
		who := key
		if who == "" {
			who = "the best-priority task"
		}
		return 0, 0, fmt.Errorf("trace: run %d of %s asked for, the decision record has %d with a known start there", n, who, len(runs))
	}
	sel := runs[n-1 : min(len(runs), n-1+count)]
	end := sel[0].End
	for _, r := range sel {
		end = max(end, r.End)
	}
	return max(1, sel[0].Start-int64(margin)), end + int64(margin), nil
}
