package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RunAnnotation prefixes the torch.profiler annotation that marks one run
// (request or training step) of a traced service:
// torch.profiler.record_function("fikit.run 7") around it, as
// tests/gpu/torch_service.py does.
const RunAnnotation = "fikit.run"

// TorchProfile is what a torch.profiler trace (Chrome trace-event JSON, the
// GPU's kernels from CUPTI; export_chrome_trace) says about a service's
// runs.
type TorchProfile struct {
	Runs []TorchRun
	// Kernels the profile holds in no run, kernels whose launch call it
	// does not have (CUPTI's correlation id matches none), and copies and
	// memsets (the replayer has neither) inside runs.
	Outside, Unlaunched, Copies int
}

// TorchRun is one run: its kernels in launch order, each with the host time
// before its launch (from the previous launch call's start, the first from
// the run's start) as a replay trace has it.
type TorchRun struct {
	Index        int   // N of the "fikit.run N" annotation, or 0 for a whole profile without any
	StartNs, Ns  int64 // the annotation's start and length (host clock)
	Graph        bool  // its kernels came from CUDA graph launches
	Kernels      []Kernel
	DeviceTimeNs int64

	lastLaunch int64 // while reading: the latest launch call in the run
}

// ReadTorchProfile reads a torch.profiler Chrome trace and splits its
// kernels into the runs its "fikit.run N" annotations mark (one run of
// everything if there are none). A kernel belongs to the run during which
// the host launched it (its launch call is matched by CUPTI's correlation
// id); a kernel of a CUDA graph to the graph launch's run.
func ReadTorchProfile(r io.Reader, file string) (*TorchProfile, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc struct {
		TraceEvents []torchEvent `json:"traceEvents"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: not a torch.profiler trace: %w", ErrHeader, err)}
	}
	if doc.TraceEvents == nil {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: no traceEvents", ErrHeader)}
	}
	type launch struct {
		ts    int64
		graph bool
	}
	launches := map[int64]launch{}
	var kernels []torchEvent
	var runs []TorchRun
	var copies []int64
	for i := range doc.TraceEvents {
		e := &doc.TraceEvents[i]
		if e.Ph != "X" {
			continue
		}
		ts, err := micros(e.Ts)
		if err != nil {
			return nil, &ParseError{File: file, Err: fmt.Errorf("%w: event %d (%q) ts: %w", ErrValue, i, e.Name, err)}
		}
		dur, err := micros(e.Dur)
		if err != nil {
			return nil, &ParseError{File: file, Err: fmt.Errorf("%w: event %d (%q) dur: %w", ErrValue, i, e.Name, err)}
		}
		e.ts, e.dur = ts, dur
		switch {
		case e.Cat == "kernel":
			kernels = append(kernels, *e)
		case e.Cat == "gpu_memcpy" || e.Cat == "gpu_memset":
			copies = append(copies, ts)
		case e.Cat == "cuda_runtime" || e.Cat == "cuda_driver":
			if c, ok := e.correlation(); ok && isLaunch(e.Name) {
				launches[c] = launch{ts: ts, graph: strings.Contains(e.Name, "GraphLaunch")}
			}
		case e.Cat == "user_annotation" || e.Cat == "cpu_op":
			if n, ok := strings.CutPrefix(e.Name, RunAnnotation+" "); ok {
				idx, err := strconv.Atoi(strings.TrimSpace(n))
				if err != nil {
					return nil, &ParseError{File: file, Err: fmt.Errorf("%w: annotation %q is not %q N", ErrValue, e.Name, RunAnnotation)}
				}
				runs = append(runs, TorchRun{Index: idx, StartNs: ts, Ns: dur})
			}
		}
	}
	if len(kernels) == 0 {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: no GPU kernels (was CUDA activity profiled?)", ErrEmpty)}
	}
	p := &TorchProfile{}
	type placed struct {
		k        torchEvent
		launchTs int64
		graph    bool
	}
	var ks []placed
	for _, k := range kernels {
		c, ok := k.correlation()
		l, found := launches[c]
		if !ok || !found {
			p.Unlaunched++
			continue
		}
		ks = append(ks, placed{k, l.ts, l.graph})
	}
	if len(ks) == 0 {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: no kernel's launch call is in the profile (was CPU activity profiled?)", ErrEmpty)}
	}
	// Launch order; a graph's kernels (one launch) in the order they ran.
	sort.SliceStable(ks, func(i, j int) bool {
		if ks[i].launchTs != ks[j].launchTs {
			return ks[i].launchTs < ks[j].launchTs
		}
		return ks[i].k.ts < ks[j].k.ts
	})
	if len(runs) == 0 {
		first, last := ks[0].launchTs, ks[len(ks)-1].launchTs
		runs = []TorchRun{{StartNs: first, Ns: last - first + 1}}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartNs < runs[j].StartNs })
	ri := 0
	for _, pk := range ks {
		for ri < len(runs) && pk.launchTs >= runs[ri].StartNs+runs[ri].Ns {
			ri++
		}
		if ri == len(runs) || pk.launchTs < runs[ri].StartNs {
			p.Outside++
			continue
		}
		run := &runs[ri]
		from := run.StartNs
		if n := len(run.Kernels); n > 0 {
			from = run.lastLaunch
		}
		k, err := pk.k.kernel(max(0, pk.launchTs-from))
		if err != nil {
			return nil, &ParseError{File: file, Err: fmt.Errorf("%w: kernel %q: %w", ErrValue, truncate(pk.k.Name, 64), err)}
		}
		run.lastLaunch = pk.launchTs
		run.Graph = run.Graph || pk.graph
		run.Kernels = append(run.Kernels, k)
		run.DeviceTimeNs += k.DurationNs
	}
	for _, ts := range copies {
		for _, run := range runs {
			if ts >= run.StartNs && ts < run.StartNs+run.Ns {
				p.Copies++
				break
			}
		}
	}
	for _, run := range runs {
		if len(run.Kernels) > 0 {
			p.Runs = append(p.Runs, run)
		}
	}
	if len(p.Runs) == 0 {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: no kernel was launched inside a %q annotation", ErrEmpty, RunAnnotation)}
	}
	return p, nil
}

// Trace is run index's kernels as a replay trace (with host times); index
// < 0 picks the typical run: among the runs with the most common kernel
// count, the one of median device time.
func (p *TorchProfile) Trace(index int) (*Trace, *TorchRun, error) {
	var run *TorchRun
	if index >= 0 {
		for i := range p.Runs {
			if p.Runs[i].Index == index {
				run = &p.Runs[i]
			}
		}
		if run == nil {
			return nil, nil, fmt.Errorf("%w: no run %d with kernels in the profile", ErrNotFound, index)
		}
	} else {
		count := map[int]int{}
		mode := 0
		for _, r := range p.Runs {
			count[len(r.Kernels)]++
			if c := count[len(r.Kernels)]; c > count[mode] || c == count[mode] && len(r.Kernels) > mode {
				mode = len(r.Kernels)
			}
		}
		var same []*TorchRun
		for i := range p.Runs {
			if len(p.Runs[i].Kernels) == mode {
				same = append(same, &p.Runs[i])
			}
		}
		sort.SliceStable(same, func(i, j int) bool { return same[i].DeviceTimeNs < same[j].DeviceTimeNs })
		run = same[(len(same)-1)/2] // the lower median
	}
	t := &Trace{Format: FormatFikit, HasHostTime: true, Kernels: append([]Kernel(nil), run.Kernels...)}
	return t, run, t.Validate()
}

// torchEvent is one trace event of a Chrome trace as torch.profiler writes it.
type torchEvent struct {
	Ph   string                     `json:"ph"`
	Cat  string                     `json:"cat"`
	Name string                     `json:"name"`
	Ts   json.Number                `json:"ts"`
	Dur  json.Number                `json:"dur"`
	Args map[string]json.RawMessage `json:"args"`

	ts, dur int64
}

func (e *torchEvent) correlation() (int64, bool) {
	raw, ok := e.Args["correlation"]
	if !ok {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	c, err := n.Int64()
	return c, err == nil
}

// kernel is the event as a trace kernel with hostNs before its launch.
func (e *torchEvent) kernel(hostNs int64) (Kernel, error) {
	name := e.Name
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
		for !utf8.ValidString(name) {
			name = name[:len(name)-1]
		}
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, name)
	if name == "" {
		name = "kernel"
	}
	k := Kernel{Name: name, DurationNs: e.dur, HostNs: min(hostNs, MaxDurationNs), Grid: [3]uint32{1, 1, 1},
		Block: DerivedBlock(), Profile: ProfileUnknown}
	for key, dst := range map[string]*[3]uint32{"grid": &k.Grid, "block": &k.Block} {
		raw, ok := e.Args[key]
		if !ok {
			continue
		}
		var v []uint32
		if err := json.Unmarshal(raw, &v); err != nil || len(v) == 0 || len(v) > 3 {
			return k, fmt.Errorf("%s %s is not [x, y, z]", key, raw)
		}
		d := [3]uint32{1, 1, 1}
		copy(d[:], v)
		*dst = d
	}
	if err := k.validate(); err != nil {
		return k, err
	}
	return k, nil
}

// isLaunch: the runtime or driver call launched kernels (CUPTI correlates
// each kernel with it).
func isLaunch(name string) bool {
	for _, p := range []string{"cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var errMicros = errors.New("not a number of microseconds")

// micros converts a JSON number of microseconds (Chrome traces write
// fractions down to the nanosecond) to nanoseconds, exactly: a float64
// would lose nanoseconds at today's epoch-based timestamps.
func micros(n json.Number) (int64, error) {
	s := string(n)
	if s == "" {
		return 0, nil
	}
	if strings.ContainsAny(s, "eE") {
		f, err := n.Float64()
		if err != nil || math.IsNaN(f) || math.Abs(f) > 9e15 {
			return 0, errMicros
		}
		return int64(math.Round(f * 1000)), nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, errMicros
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1000 || w < math.MinInt64/1000 {
		return 0, errMicros
	}
	ns := w * 1000
	if frac != "" {
		f := (frac + "000")[:3]
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, errMicros
		}
		if len(frac) > 3 && frac[3] >= '5' {
			v++
		}
		if strings.HasPrefix(whole, "-") {
			v = -v
		}
		ns += v
	}
	return ns, nil
}
