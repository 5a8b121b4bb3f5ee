package fairbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/daemon"
	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/simgpu/timeline"
	"github.com/fikit/fikit/simgpu/trace"
	"github.com/fikit/fikit/udp"
)

// The services. The high-priority one is the demo's (resnet50 on an H100,
// 12 µs of host time per launch), a request every 10 ms.
const (
	hpTrace = "h100/resnet50_4_fwd"
	hpCPUNs = 12_000
	hpEvery = 10 * time.Millisecond
	lpCPUNs = 5_000
	hpPrio  = 0
	lpPrio  = 5
)

// Mode is one measured configuration: a policy, and the low-priority
// services' weights.
type Mode struct {
	Policy      string `json:"policy"`
	WeightShort uint32 `json:"weight_short"`
	WeightLong  uint32 `json:"weight_long"`
	// Holders: no high-priority service; the two hold the GPU (they are
	// the best priority active), for as long as the HP would have run.
	Holders bool `json:"holders"`
}

func (m Mode) String() string {
	s := m.Policy
	if m.WeightShort != m.WeightLong {
		s += fmt.Sprintf(", weights %d:%d", m.WeightShort, m.WeightLong)
	}
	if m.Holders {
		s += ", holders (no HP)"
	}
	return s
}

// ParseMode parses POLICY or POLICY:WEIGHT_SHORT:WEIGHT_LONG, either with
// a suffix :holders (no high-priority service).
func ParseMode(spec string) (Mode, error) {
	f := strings.Split(spec, ":")
	m := Mode{Policy: f[0], WeightShort: 1, WeightLong: 1}
	if len(f) > 1 && f[len(f)-1] == "holders" {
		m.Holders, f = true, f[:len(f)-1]
	}
	if !slices.Contains(scheduler.PolicyNames(), m.Policy) {
		return m, fmt.Errorf("no policy %q (want one of %s)", m.Policy, strings.Join(scheduler.PolicyNames(), ", "))
	}
	switch len(f) {
	case 1:
		return m, nil
	case 3:
		ws, err1 := strconv.ParseUint(f[1], 10, 32)
		wl, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || ws < 1 || wl < 1 || ws > udp.MaxWeight || wl > udp.MaxWeight {
			return m, fmt.Errorf("weights %q:%q: want 1–%d each", f[1], f[2], udp.MaxWeight)
		}
		m.WeightShort, m.WeightLong = uint32(ws), uint32(wl)
		return m, nil
	}
	return m, fmt.Errorf("want POLICY or POLICY:WEIGHT_SHORT:WEIGHT_LONG, and :holders for no HP")
}

// DefaultModes: today's policy, fair queuing, fair queuing with weights 2:1.
func DefaultModes() []Mode {
	return []Mode{{Policy: scheduler.PolicyBestPrioFit, WeightShort: 1, WeightLong: 1}, {Policy: scheduler.PolicyFairPrioFit, WeightShort: 1, WeightLong: 1}, {Policy: scheduler.PolicyFairPrioFit, WeightShort: 2, WeightLong: 1}}
}

// Options configure a measurement.
type Options struct {
	Bin, Dir string // the binaries; a scratch directory
	// Preset is simgpu's device preset ("": its default); SwitchUs, if
	// above 0, replaces the preset's context-switch cost.
	Preset   string
	SwitchUs int
	// HPRuns is how many high-priority requests each mode lasts (every 10
	// ms); ProfileRuns how many runs each service is profiled for.
	HPRuns, ProfileRuns int
	Modes               []Mode
	// Scheduler is the daemon's configuration but for the policy and the
	// profile runs (zero: the defaults).
	Scheduler *scheduler.Config
	Log       harness.Logf
	// Record: each mode's daemon records its decisions into the mode's
	// directory (decisions.jsonl), and its status is read every 100 ms: a
	// stall's diagnosis counts the one and shows the other.
	Record bool
}

// ModeResult is what one mode measured.
type ModeResult struct {
	Mode
	// ShortNs and LongNs are the GPU time each low-priority service got
	// within the high-priority service's span (SpanNs), from simgpu's
	// timeline; Ratio is the larger over the smaller divided by the
	// weights' ratio (1: shares as weighted).
	ShortNs int64   `json:"short_gpu_time_ns"`
	LongNs  int64   `json:"long_gpu_time_ns"`
	SpanNs  int64   `json:"span_ns"`
	Ratio   float64 `json:"weighted_ratio"`
	// ShortAccountedNs and LongAccountedNs are the GPU time the daemon
	// accounted to their tasks (`fikit status`: predicted from their
	// profiles), beside ShortLifeNs and LongLifeNs, the GPU time their
	// processes ran on the timeline (until the status was read, and the
	// kernels then queued).
	ShortAccountedNs int64 `json:"short_accounted_ns"`
	LongAccountedNs  int64 `json:"long_accounted_ns"`
	ShortLifeNs      int64 `json:"short_life_gpu_time_ns"`
	LongLifeNs       int64 `json:"long_life_gpu_time_ns"`
	// HP is the high-priority service: its JCTs and GPU interference.
	HPP50Ns      int64                `json:"hp_p50_jct_ns"`
	HPP99Ns      int64                `json:"hp_p99_jct_ns"`
	Interference harness.Interference `json:"hp_interference"`
	// Switches counts the device's changes of context within the span,
	// LPSwitches those from one low-priority service straight to the
	// other: what sharing among them costs (each a context switch).
	Switches   int `json:"switches"`
	LPSwitches int `json:"lp_switches"`
	// Turns and Throttles are the daemon's fair-share counters.
	Turns     uint64 `json:"fair_turns"`
	Throttles uint64 `json:"fair_throttles"`
	// Tenants is `fikit status --json`'s tenants at the end.
	Tenants []daemon.TenantStatus `json:"tenants"`
	// ShortStallNs and LongStallNs are the longest time within the span
	// that each low-priority service had nothing on the device: how long
	// it was kept off the GPU (the high-priority service leaves most of
	// every 10 ms idle).
	ShortStallNs int64 `json:"short_longest_stall_ns"`
	// SwitchNs is the context switch the daemon assumed at the end (its
	// measured estimate, --switch-cost auto).
	SwitchNs    int64 `json:"switch_cost_ns"`
	LongStallNs int64 `json:"long_longest_stall_ns"`
	// Stalls describes each stall over StallNoted: what the daemon said of
	// the service then, for whoever must find out why.
	Stalls []Stall `json:"stalls,omitempty"`
}

// StallNoted is the stall of a low-priority service that a mode describes
// (ModeResult.Stalls): twenty of the high-priority service's intervals.
const StallNoted = 20 * hpEvery

// Stall is one low-priority service kept off the GPU for long.
type Stall struct {
	Service string `json:"service"`
	// FromNs is when it began (CLOCK_MONOTONIC), DurationNs how long.
	FromNs     int64 `json:"from_ns"`
	DurationNs int64 `json:"duration_ns"`
	// Task is the daemon's status of its task at the end of the mode;
	// Decisions counts the decision records about it during the stall, by
	// kind (with Options.Record); Stderr is the end of what its process
	// (the hook, the replayer) wrote.
	Task      *daemon.TaskStatus `json:"task,omitempty"`
	Decisions map[string]int     `json:"decisions,omitempty"`
	Stderr    string             `json:"stderr,omitempty"`
	// During is what the daemon's status said while it stalled (read
	// every 100 ms, with Options.Record; the first, middle and last
	// reading): the GPU's fill state and the low-priority tasks.
	During []Reading `json:"during,omitempty"`
}

// Reading is one status reading during a stall.
type Reading struct {
	AtNs int64 `json:"at_ns"`
	// GPU is the GPU's status then: its fill state, the board's cursor,
	// the switch cost the policy assumed.
	GPU   *daemon.GPUStatus   `json:"gpu,omitempty"`
	Tasks []daemon.TaskStatus `json:"tasks"`
}

func (s Stall) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Result is a measurement.
type Result struct {
	Device     string       `json:"device"`
	SwitchUs   int          `json:"switch_us"`
	HPAloneNs  int64        `json:"hp_alone_p50_jct_ns"`
	Modes      []ModeResult `json:"modes"`
	WallS      float64      `json:"wall_s"`
	StartedUTC string       `json:"started"`
}

// Run measures every mode of o, one after another, each with a daemon and
// a simgpu device of its own.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.HPRuns <= 0 {
		o.HPRuns = 400
	}
	if o.ProfileRuns <= 0 {
		o.ProfileRuns = 20
	}
	if len(o.Modes) == 0 {
		o.Modes = DefaultModes()
	}
	if o.Log == nil {
		o.Log = harness.Discard
	}
	start := time.Now()
	res := &Result{SwitchUs: o.SwitchUs, StartedUTC: start.UTC().Format(time.RFC3339),
		Device: deviceName(o)}
	short, long, err := writeTraces(o.Dir)
	if err != nil {
		return nil, err
	}
	alone, err := hpAlone(ctx, o)
	if err != nil {
		return nil, err
	}
	res.HPAloneNs = alone
	o.Log("HP alone: p50 JCT %v", time.Duration(alone))
	for i, m := range o.Modes {
		o.Log("mode %d/%d: %s", i+1, len(o.Modes), m)
		mr, err := runMode(ctx, o, m, i, short, long, alone)
		if err != nil {
			return res, fmt.Errorf("%s: %w", m, err)
		}
		o.Log("  short %v, long %v of GPU time (weighted ratio %.2f); HP p50 %v, interference p50 %.1f%% p99 %.1f%%",
			time.Duration(mr.ShortNs).Round(time.Millisecond), time.Duration(mr.LongNs).Round(time.Millisecond), mr.Ratio,
			time.Duration(mr.HPP50Ns).Round(time.Microsecond), mr.Interference.P50Pct, mr.Interference.P99Pct)
		res.Modes = append(res.Modes, *mr)
	}
	res.WallS = time.Since(start).Seconds()
	return res, nil
}

func deviceName(o Options) string {
	d := device(o)
	cfg, err := d.Config()
	if err != nil {
		return "simgpu " + d.PresetName()
	}
	return fmt.Sprintf("simgpu %s preset, context switch %v", d.PresetName(), cfg.Switch)
}

func device(o Options) harness.Device {
	d := harness.Device{Preset: o.Preset}
	if o.SwitchUs > 0 {
		sw := time.Duration(o.SwitchUs) * time.Microsecond
		d.Switch = &sw
	}
	return d
}

// writeTraces writes the two low-priority services' traces.
func writeTraces(dir string) (short, long string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	write := func(o trace.UniformOptions, seed uint64) (string, error) {
		t, err := trace.Uniform(seed, o)
		if err != nil {
			return "", err
		}
		p := filepath.Join(dir, o.Name+".csv")
		f, err := os.Create(p)
		if err != nil {
			return "", err
		}
		if err := trace.Write(f, t); err != nil {
			f.Close()
			return "", err
		}
		return p, f.Close()
	}
	if short, err = write(trace.EqualsShort, 1); err != nil {
		return "", "", err
	}
	long, err = write(trace.EqualsLong, 2)
	return short, long, err
}

func env(o Options, name string) (*harness.Env, error) {
	return harness.New(harness.Options{Bin: o.Bin, Dir: filepath.Join(o.Dir, name), Device: device(o), Timeline: true})
}

// hpAlone is the high-priority service's p50 JCT alone, unhooked.
func hpAlone(ctx context.Context, o Options) (int64, error) {
	e, err := env(o, "alone")
	if err != nil {
		return 0, err
	}
	defer e.Close()
	p, err := e.Start(ctx, harness.Service{Name: "hp alone", Trace: hpTrace, Runs: 100, Warmup: 3, CPUNs: hpCPUNs, Every: hpEvery})
	if err != nil {
		return 0, err
	}
	r, err := p.Wait()
	if err != nil {
		return 0, err
	}
	if len(r.Runs) == 0 {
		return 0, fmt.Errorf("HP alone completed no runs")
	}
	return stats.Quantile(r.JCTs(), 0.5), nil
}

func runMode(ctx context.Context, o Options, m Mode, idx int, shortTrace, longTrace string, alone int64) (*ModeResult, error) {
	cfg := scheduler.DefaultConfig()
	if o.Scheduler != nil {
		cfg = *o.Scheduler
	}
	cfg.Policy, cfg.ProfileRuns = m.Policy, o.ProfileRuns
	d, err := harness.StartDaemon(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	e, err := env(o, fmt.Sprintf("mode%d", idx))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	recPath := ""
	if o.Record {
		recPath = filepath.Join(o.Dir, fmt.Sprintf("mode%d", idx), "decisions.jsonl")
		f, err := os.Create(recPath)
		if err != nil {
			return nil, err
		}
		if err := d.Record(f); err != nil {
			return nil, err
		}
	}
	svc := func(name, tr string, prio int, cpu int64, w uint32) harness.Service {
		s := harness.Service{Name: name, Trace: tr, CPUNs: cpu, Hooked: true, Prio: prio, TaskKey: "fair/" + name,
			Scheduler: d.Addr()}
		if w > 0 {
			s.Env = []string{fmt.Sprintf("FIKIT_WEIGHT=%d", w)}
		}
		return s
	}
	hp := svc("hp", hpTrace, hpPrio, hpCPUNs, 0)
	hp.Every, hp.Runs, hp.Warmup = hpEvery, o.HPRuns, 3
	short, long := svc("short", shortTrace, lpPrio, lpCPUNs, m.WeightShort), svc("long", longTrace, lpPrio, lpCPUNs, m.WeightLong)
	profiled := []harness.Service{short, long}
	if !m.Holders {
		profiled = append(profiled, hp)
	}
	for _, s := range profiled {
		if err := e.Profile(ctx, d, s, o.ProfileRuns, o.Log); err != nil {
			return nil, err
		}
	}
	// The low-priority services run in a closed loop until the
	// high-priority one is done.
	short.Runs, long.Runs = 1_000_000, 1_000_000
	var lps []*harness.Proc
	stop := func() []*harness.Result {
		var out []*harness.Result
		for _, p := range lps {
			out = append(out, p.Stop())
		}
		return out
	}
	for _, s := range []harness.Service{short, long} {
		p, err := e.Start(ctx, s)
		if err != nil {
			stop()
			return nil, err
		}
		lps = append(lps, p)
	}
	for deadline := time.Now().Add(30 * time.Second); len(lps[0].Runs()) < 2 || len(lps[1].Runs()) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the low-priority services did not get going")
		}
	}
	var hpRes *harness.Result
	var hpErr error
	// The status readings a stall's diagnosis shows, with Record only:
	// each reading takes the daemon's lock, load on a plain measurement.
	watch := func() []Reading { return nil }
	if o.Record {
		watch = watchStatus(d, 100*time.Millisecond)
	}
	from := harness.MonotonicNs()
	if m.Holders {
		time.Sleep(time.Duration(o.HPRuns) * hpEvery)
	} else {
		hpProc, err := e.Start(ctx, hp)
		if err != nil {
			stop()
			return nil, err
		}
		hpRes, hpErr = hpProc.Wait()
	}
	to := harness.MonotonicNs() // the timeline's clock
	readings := watch()
	st := d.Status() // before the low-priority services leave
	stAt := harness.MonotonicNs()
	lpRes := stop()
	if hpErr != nil {
		return nil, hpErr
	}
	if hpRes != nil {
		if len(hpRes.Runs) == 0 {
			return nil, fmt.Errorf("HP completed no runs")
		}
		from, _ = hpRes.Span()
	}
	recs, err := timeline.Read(e.TimelinePath())
	if err != nil {
		return nil, err
	}
	mr := &ModeResult{Mode: m, Tenants: st.Tenants, Turns: st.Stats.FairTurns, Throttles: st.Stats.FairThrottles}
	for _, g := range st.GPUs {
		mr.SwitchNs = g.SwitchCostNs
	}
	mr.SpanNs = to - from
	pid := func(r *harness.Result, key string) int {
		for _, t := range st.Tasks {
			if t.Key == key {
				return int(t.PID)
			}
		}
		return r.PID
	}
	sp, lp := pid(lpRes[0], short.TaskKey), pid(lpRes[1], long.TaskKey)
	mr.ShortNs, mr.LongNs = timeline.BusyNs(recs, sp, from, to), timeline.BusyNs(recs, lp, from, to)
	mr.ShortLifeNs, mr.LongLifeNs = timeline.ArrivedBusyNs(recs, sp, stAt), timeline.ArrivedBusyNs(recs, lp, stAt)
	for _, t := range st.Tasks {
		switch t.Key {
		case short.TaskKey:
			mr.ShortAccountedNs = t.UsedNs
		case long.TaskKey:
			mr.LongAccountedNs = t.UsedNs
		}
	}
	mr.Switches, mr.LPSwitches = switches(recs, from, to, sp, lp)
	var stalls []Stall
	for i, x := range []struct {
		key string
		pid int
		ns  *int64
	}{{short.TaskKey, sp, &mr.ShortStallNs}, {long.TaskKey, lp, &mr.LongStallNs}} {
		gap, at := timeline.LongestGap(recs, x.pid, from, to)
		*x.ns = gap
		if gap >= int64(StallNoted) {
			stalls = append(stalls, Stall{Service: x.key, FromNs: at, DurationNs: gap, Stderr: tail(lpRes[i].Stderr, 2000)})
		}
	}
	if len(stalls) > 0 {
		_ = d.Record(nil) // flushed, to be read
		mr.Stalls = diagnose(stalls, st.Tasks, recPath, readings)
	}
	ws, wl := float64(max(m.WeightShort, 1)), float64(max(m.WeightLong, 1))
	if mr.ShortNs > 0 && mr.LongNs > 0 {
		// Each one's GPU time per unit of weight; 1 is as weighted.
		a, b := float64(mr.ShortNs)/ws, float64(mr.LongNs)/wl
		mr.Ratio = max(a, b) / min(a, b)
	}
	if hpRes != nil {
		mr.HPP50Ns, mr.HPP99Ns = stats.Quantile(hpRes.JCTs(), 0.5), stats.Quantile(hpRes.JCTs(), 0.99)
		mr.Interference = harness.InterferenceOf(hpRes, alone)
	}
	return mr, nil
}

// switches counts the timeline's changes of process within [from, to), and
// those between a and b directly.
func switches(recs []timeline.Record, from, to int64, a, b int) (all, ab int) {
	var in []timeline.Record
	for _, r := range recs {
		if r.StartNs >= from && r.StartNs < to {
			in = append(in, r)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].StartNs < in[j].StartNs })
	for i := 1; i < len(in); i++ {
		p, q := in[i-1].PID, in[i].PID
		if p == q {
			continue
		}
		all++
		if (p == a || p == b) && (q == a || q == b) {
			ab++
		}
	}
	return all, ab
}

// Write prints r as a table.
func (r *Result) Write(w io.Writer) error {
	fmt.Fprintf(w, "fair shares among equals on %s; HP alone p50 JCT %v\n\n", r.Device, time.Duration(r.HPAloneNs).Round(time.Microsecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tshort GPU\tlong GPU\tweighted ratio\ttotal\tvs first\tHP p50\tHP p99\tinterf. p50\tp99\taccounted/timeline\tswitches/s\tLP↔LP/s\t")
	// "vs first": against the first mode of the same kind (with an HP, or
	// holders).
	first := map[bool]int64{}
	for _, m := range r.Modes {
		total := m.ShortNs + m.LongNs
		if _, ok := first[m.Holders]; !ok {
			first[m.Holders] = total
		}
		ms := func(ns int64) string { return fmt.Sprintf("%.1f ms", float64(ns)/1e6) }
		vs, acc := "-", "-"
		if f := first[m.Holders]; f > 0 {
			vs = fmt.Sprintf("%.0f%%", 100*float64(total)/float64(f))
		}
		if life := m.ShortLifeNs + m.LongLifeNs; life > 0 {
			acc = fmt.Sprintf("%.3f", float64(m.ShortAccountedNs+m.LongAccountedNs)/float64(life))
		}
		hp := []string{ms(m.HPP50Ns), ms(m.HPP99Ns), fmt.Sprintf("%.1f%%", m.Interference.P50Pct), fmt.Sprintf("%.1f%%", m.Interference.P99Pct)}
		if m.Holders {
			hp = []string{"-", "-", "-", "-"}
		}
		per := func(n int) string {
			if m.SpanNs <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", float64(n)/(float64(m.SpanNs)/1e9))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Mode, ms(m.ShortNs), ms(m.LongNs), m.Ratio,
			ms(total), vs, hp[0], hp[1], hp[2], hp[3], acc, per(m.Switches), per(m.LPSwitches))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Modes {
		for _, s := range m.Stalls {
			fmt.Fprintf(w, "\n%s: %s got nothing on the device for %v: %s\n", m.Mode, s.Service, time.Duration(s.DurationNs).Round(time.Millisecond), s)
		}
	}
	return nil
}

// diagnose completes the stalls with the daemon's word on each service:
// its task's status, and the decisions recorded about it while it stalled
// (recPath "": none recorded).
func diagnose(stalls []Stall, tasks []daemon.TaskStatus, recPath string, readings []Reading) []Stall {
	var recs []decisions.Record
	if recPath != "" {
		recs, _ = decisions.Read(recPath)
	}
	out := make([]Stall, 0, len(stalls))
	for _, s := range stalls {
		for _, t := range tasks {
			if t.Key == s.Service {
				s.Task = &t
			}
		}
		if recs != nil && s.Task != nil {
			s.Decisions = map[string]int{}
			for _, r := range recs {
				if r.Task == s.Task.ID && r.T >= s.FromNs && r.T < s.FromNs+s.DurationNs {
					s.Decisions[r.Kind]++
				}
			}
		}
		var in []Reading
		for _, r := range readings {
			if r.AtNs >= s.FromNs && r.AtNs < s.FromNs+s.DurationNs {
				in = append(in, r)
			}
		}
		if len(in) > 3 {
			in = []Reading{in[0], in[len(in)/2], in[len(in)-1]}
		}
		s.During = in
		out = append(out, s)
	}
	return out
}

// watchStatus reads d's status every period until the function it
// returns is called, which returns the readings: the GPU's fill state and
// the low-priority tasks (for a stall's diagnosis).
func watchStatus(d *harness.Daemon, period time.Duration) func() []Reading {
	stop, done := make(chan struct{}), make(chan []Reading)
	go func() {
		var out []Reading
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				done <- out
				return
			case <-tk.C:
			}
			st := d.Status()
			r := Reading{AtNs: harness.MonotonicNs()}
			for _, g := range st.GPUs {
				r.GPU = &g
			}
			for _, t := range st.Tasks {
				if t.Priority == lpPrio {
					r.Tasks = append(r.Tasks, t)
				}
			}
			out = append(out, r)
		}
	}()
	return func() []Reading {
		close(stop)
		return <-done
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
