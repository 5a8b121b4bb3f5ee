package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/fikit/fikit/profiler"
)

// TestScenarios runs the event scripts in testdata/: each command feeds one
// event (or defines a profile) and prints the decisions Ready returns.
// A file runs DefaultConfig, what users run; a config line's keys apply
// on top (settings, and ablations in files about a variant, which say so
// in a comment), and its `gate=today` starts from the gate before
// switch-aware fills, the µs bound, arrival TTLs and board resume
// (bench/variant's "today") instead.
// Regenerate the expectations with `go test ./scheduler -run Scenarios -rewrite`
// and review the diff.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	t        *testing.T
	node     *Node
	cfg      Config
	profiles map[string]*profiler.Profile
	saved    map[TaskID]*profiler.Profile // the last profile persisted per task
	now      int64
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cfg: scenarioBase(t, ""), profiles: map[string]*profiler.Profile{}}
	h.reset()
	return h
}

func (h *harness) reset() {
	n, err := New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.node = n
	h.now = 0
	h.saved = map[TaskID]*profiler.Profile{}
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	args := map[string]string{}
	for _, a := range d.CmdArgs {
		args[a.Key] = strings.Join(a.Vals, ",")
	}
	if at, ok := args["at"]; ok {
		h.now = dur(t, at)
	}
	var err error
	switch d.Cmd {
	case "config":
		h.cfg = scenarioBase(t, args["gate"])
		delete(args, "gate")
		for k, v := range args {
			if err := h.setConfig(t, k, v); err != nil {
				return "error: " + err.Error()
			}
		}
		if err := h.cfg.Validate(); err != nil {
			return "error: " + err.Error()
		}
		h.reset()
		return "ok"
	case "profile":
		h.profiles[args["name"]] = buildProfile(t, args, d.Input)
		return "ok"
	case "register":
		var p *profiler.Profile
		if name, ok := args["profile"]; ok {
			if p = h.profiles[name]; p == nil {
				t.Fatalf("%s: no profile %q", d.Pos, name)
			}
		}
		gpu := args["gpu"]
		if gpu == "" {
			gpu = "G0"
		}
		err = h.node.Step(TaskRegistered{Now: h.now, Task: taskArg(t, args), Key: args["key"],
			PID: uint32(num(t, args, "pid", int64(taskArg(t, args)))), Priority: uint8(num(t, args, "prio", 5)),
			GPU: gpu, Model: "sim", Profile: p, Local: args["local"] == "true",
			Weight: uint32(num(t, args, "weight", 0)), Owner: args["owner"]})
	case "notify":
		err = h.node.Step(LaunchNotified{Now: h.now, Task: taskArg(t, args), Seq: uint32(num(t, args, "seq", 0)), Kernel: uint64(num(t, args, "kernel", 0))})
	case "batch":
		// A LaunchBatch: one line per launch, `kernel launched_at`.
		e := LaunchesNotified{Now: h.now, Task: taskArg(t, args), Seq: uint32(num(t, args, "seq", 0))}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("%s: batch lines are `kernel launched_at`", d.Pos)
			}
			k, _ := strconv.ParseUint(f[0], 10, 64)
			e.Kernels = append(e.Kernels, k)
			e.Times = append(e.Times, dur(t, f[1]))
		}
		err = h.node.Step(e)
	case "request":
		err = h.node.Step(LaunchRequested{Now: h.now, Task: taskArg(t, args), Seq: uint32(num(t, args, "seq", 0)), Kernel: uint64(num(t, args, "kernel", 0))})
	case "runend":
		err = h.node.Step(RunEnded{Now: h.now, Task: taskArg(t, args), Run: uint32(num(t, args, "run", 0)),
			Kernels: uint32(num(t, args, "kernels", 0)), RunNs: dur(t, args["run_ns"]), LastSeq: uint32(num(t, args, "last", 0)),
			Unmeasured: uint8(num(t, args, "unmeasured", 0))})
	case "measure":
		var recs []profiler.Record
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			if line == "" {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("%s: measure lines are `kernel dur gap flags`", d.Pos)
			}
			k, _ := strconv.ParseUint(f[0], 10, 64)
			fl, _ := strconv.ParseUint(f[3], 10, 8)
			recs = append(recs, profiler.Record{KernelID: k, DurationNs: uint64(dur(t, f[1])), GapNs: uint64(dur(t, f[2])), Flags: uint8(fl)})
		}
		err = h.node.Step(MeasurementsReceived{Now: h.now, Task: taskArg(t, args), Run: uint32(num(t, args, "run", 0)), Records: recs})
	case "board":
		// What the board shows: levels=p:at,p:at…
		e := BoardObserved{Now: h.now, Task: taskArg(t, args)}
		for _, pa := range strings.Split(args["levels"], ",") {
			p, at, ok := strings.Cut(pa, ":")
			lv, err := strconv.Atoi(p)
			if !ok || err != nil || lv < 0 || lv > 9 {
				t.Fatalf("%s: board levels are p:at,…", d.Pos)
			}
			e.Levels[lv] = dur(t, at)
		}
		err = h.node.Step(e)
	case "calibrated":
		// A hook's answer to a calibration: calibrated task= seq= host= device= [mps=true] [failed=true]
		err = h.node.Step(SwitchCalibrated{Now: h.now, Task: taskArg(t, args), Seq: uint32(num(t, args, "seq", 0)),
			HostNs: dur(t, args["host"]), DeviceNs: dur(t, args["device"]), MPS: args["mps"] == "true", Failed: args["failed"] == "true"})
	case "switches":
		var b strings.Builder
		for _, si := range h.node.Switches() {
			fmt.Fprintf(&b, "gpu=%s cost=%s measured=%v mps=%v samples=%d\n", si.GPU, fmtDur(si.CostNs), si.Measured, si.MPS, si.Samples)
		}
		return b.String()
	case "arrivals":
		var b strings.Builder
		for _, a := range h.node.Arrivals() {
			fmt.Fprintf(&b, "task=%d class=%s samples=%d interval=%s cv=%.2f ttl=%s\n", a.Task, a.Class, a.Samples, fmtDur(a.IntervalNs), a.CV, fmtDur(a.TTLNs))
		}
		return b.String()
	case "hints":
		var b strings.Builder
		for _, bh := range h.node.BoardHints(nil) {
			next := "none"
			switch {
			case bh.NextNs == NoneExpected:
			case bh.NextNs == 0:
				next = "unknown"
			default:
				next = fmtDur(bh.NextNs)
				if bh.NextLateNs > bh.NextNs {
					next += " late=" + fmtDur(bh.NextLateNs)
				}
			}
			fmt.Fprintf(&b, "gpu=%s next=%s switch=%s resume=%v resume_task=%d", bh.GPU, next, fmtDur(bh.SwitchNs), bh.Resume, bh.ResumeTask)
			if bh.Slack {
				until := "none"
				if bh.FillUntilNs > 0 {
					until = fmtDur(bh.FillUntilNs)
				}
				fmt.Fprintf(&b, " fill_until=%s bound=%s", until, fmtDur(bh.BoundNs))
			}
			b.WriteString("\n")
		}
		return b.String()
	case "preswitch":
		// Each task's pre-switch record and the GPU's counters.
		var b strings.Builder
		for _, pi := range h.node.PreSwitches() {
			fmt.Fprintf(&b, "task=%d off=%v hits=%d outcomes=%d\n", pi.Task, pi.Off, pi.Hits, pi.Outcomes)
		}
		s := h.node.Stats()
		fmt.Fprintf(&b, "warmups=%d hits=%d early=%d misses=%d off=%d\n", s.PreSwitches, s.PreSwitchHits,
			s.PreSwitchEarly, s.PreSwitchMisses, s.PreSwitchOff)
		return b.String()
	case "watched":
		err = h.node.Step(TaskWatched{Now: h.now, Task: taskArg(t, args), Watched: args["ok"] != "false"})
	case "heartbeat":
		err = h.node.Step(Heartbeat{Now: h.now, Task: taskArg(t, args)})
	case "left":
		err = h.node.Step(TaskLeft{Now: h.now, Task: taskArg(t, args)})
	case "places":
		// The roster of a restarted daemon: one line per task, `key pid
		// prio gpu`, held until `until`.
		e := PlacesHeld{Now: h.now, Until: dur(t, args["until"])}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("%s: places lines are `key pid prio gpu`", d.Pos)
			}
			pid, _ := strconv.ParseUint(f[1], 10, 32)
			prio, _ := strconv.ParseUint(f[2], 10, 8)
			e.Tasks = append(e.Tasks, KnownTask{Key: f[0], PID: uint32(pid), Priority: uint8(prio), GPU: f[3]})
		}
		err = h.node.Step(e)
	case "awaited":
		s := h.node.Stats()
		var b strings.Builder
		for _, k := range h.node.Awaited() {
			fmt.Fprintf(&b, "%s pid=%d prio=%d gpu=%s\n", k.Key, k.PID, k.Priority, k.GPU)
		}
		fmt.Fprintf(&b, "held=%d returned=%d expired=%d\n", s.PlacesHeld, s.PlacesReturned, s.PlacesExpired)
		return b.String()
	case "tick":
		var heard int64
		if v, ok := args["heard"]; ok {
			heard = dur(t, v)
		}
		err = h.node.Step(Tick{Now: h.now, Heard: heard})
	case "tasks":
		var b strings.Builder
		for _, ti := range h.node.Tasks() {
			fmt.Fprintf(&b, "task=%d key=%s prio=%d role=%s phase=%s credit=%d runs=%d waiting=%d\n",
				ti.ID, ti.Key, ti.Priority, ti.Role, ti.Phase, ti.Credit, ti.Runs, ti.Waiting)
		}
		return b.String()
	case "profiling":
		// Each profiling task's progress: runs kept of needed, how many
		// beside a better priority, discarded by reason.
		var b strings.Builder
		for _, ti := range h.node.Tasks() {
			if ti.RunsNeeded == 0 {
				continue
			}
			fmt.Fprintf(&b, "task=%d runs=%d/%d beside=%d discarded=%d", ti.ID, ti.Runs, ti.RunsNeeded, ti.RunsBeside, ti.RunsDiscarded)
			for _, r := range profiler.DiscardReasons() {
				if c := ti.DiscardedBy[r]; c > 0 {
					fmt.Fprintf(&b, " %s=%d", r, c)
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	case "kernels":
		// The last profile persisted for a task: each kernel's duration as
		// measured, or unknown.
		p := h.saved[taskArg(t, args)]
		if p == nil {
			return "no profile"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "runs=%d beside=%d run_times=%d seq_runs=%d\n", p.Runs, p.BesideRuns, p.RunTime.Count, p.SeqRuns)
		for _, k := range p.SortedKernels() {
			if !k.DurationKnown() {
				fmt.Fprintf(&b, "kernel=%d unknown\n", k.ID)
				continue
			}
			fmt.Fprintf(&b, "kernel=%d count=%d mean=%s gaps=%d\n", k.ID, k.Duration.Count, time.Duration(k.Duration.Mean), k.Gap.Count)
		}
		return b.String()
	case "accounts":
		// GPU time and fair-share state per task.
		var b strings.Builder
		for _, ti := range h.node.Tasks() {
			a := ti.Account
			fmt.Fprintf(&b, "task=%d owner=%s weight=%d role=%s throttled=%v vt=%s used=%s measured=%s granted=%s\n",
				ti.ID, a.Owner, ti.Weight, ti.Role, ti.Throttled, fmtDur(ti.VirtualNs), fmtDur(a.UsedNs), fmtDur(a.MeasuredNs), fmtDur(a.GrantedNs))
		}
		s := h.node.Stats()
		fmt.Fprintf(&b, "turns=%d throttles=%d\n", s.FairTurns, s.FairThrottles)
		return b.String()
	case "board_elections":
		return fmt.Sprintf("%d\n", h.node.Stats().BoardElections)
	case "drift":
		s := h.node.Stats()
		var b strings.Builder
		fmt.Fprintf(&b, "samples=%d unclean=%d mismatches=%d drifts=%d (kernels %d, timing %d) refreshed=%d short_gap_windows=%d short_gap_fills=%d\n",
			s.DriftSamples, s.DriftSamplesUnclean, s.DriftMismatches, s.DriftEvents, s.DriftKernelEvents, s.DriftTimingEvents,
			s.ProfilesRefreshed, s.ShortGapWindows, s.ShortGapFills)
		for _, ti := range h.node.Tasks() {
			fmt.Fprintf(&b, "task=%d version=%d refreshing=%v runs=%d\n", ti.ID, ti.ProfileVersion, ti.Refreshing, ti.Runs)
		}
		return b.String()
	case "notifications":
		s := h.node.Stats()
		return fmt.Sprintf("lost=%d reordered=%d\n", s.LostNotifies, s.ReorderedNotifies)
	case "stats":
		s := h.node.Stats()
		return fmt.Sprintf("grants=%d holds=%d credited=%d revoked=%d windows=%d idle=%d earlystops=%d committed=%d discarded=%d profiles=%d dropped=%d",
			s.Grants, s.Holds, s.Credited, s.Revoked, s.Windows, s.IdlePeriods, s.EarlyStops,
			s.RunsCommitted, s.RunsDiscarded, s.ProfilesCompleted, s.Dropped)
	case "resumes":
		return fmt.Sprintf("board_resumes=%d\n", h.node.Stats().BoardResumes)
	case "fill":
		// The fill state, times relative to now (the clock's last event).
		var b strings.Builder
		rel := func(at int64) string {
			if at == 0 {
				return "0"
			}
			return fmtSigned(at - h.node.Now())
		}
		for _, f := range h.node.FillStates(nil) {
			fmt.Fprintf(&b, "lp_busy_until=%s reserved=%s window=%v idle=%v waiting=%d shut=%q\n",
				rel(f.LPBusyUntilNs), fmtDur(f.ReservedNs), f.Window, f.Idle, f.Waiting, f.Shut)
		}
		return b.String()
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	r := h.node.Ready()
	for _, p := range r.Profiles {
		h.saved[p.Task] = p.Profile
	}
	out := r.Format(uint32(h.cfg.DriftSample))
	if err != nil {
		out = "error: " + err.Error() + "\n" + out
	}
	if r.Deadline > 0 {
		out += "deadline " + fmtDur(r.Deadline) + "\n"
	}
	if out == "" {
		return "(nothing)"
	}
	return out
}

// scenarioBase is the configuration a scenario starts from: the named
// variant's ("today" when none is named), or DefaultConfig for "default".
func scenarioBase(t *testing.T, gate string) Config {
	c := DefaultConfig()
	switch gate {
	case "", "default":
		return c
	case "today":
		for _, kv := range todaysGate {
			k, v, _ := strings.Cut(kv, "=")
			if err := setKey(&c, k, v); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	t.Fatalf("no gate %q (default or today)", gate)
	return c
}

// todaysGate is the gate before switch-aware fills, the µs bound, arrival
// TTLs and board resume: bench/variant's "today", which scenario files
// about that gate start from (they say so).
var todaysGate = []string{"switch-cost=25us", "switch-aware=false", "hook-bound=false", "holder-ttl-alpha=0",
	"board-resume=false", "pre-switch=false"}

// setConfig sets one setting or ablation by its name (Settings' and
// Ablations' rows).
func (h *harness) setConfig(t *testing.T, k, v string) error {
	if _, ok := LookupSetting(k); !ok {
		if _, ok := LookupAblation(k); !ok {
			t.Fatalf("unknown config key %q (keys are the settings' and ablations' names)", k)
		}
	}
	return setKey(&h.cfg, k, v)
}

func setKey(c *Config, k, v string) error {
	s, ok := LookupSetting(k)
	if !ok {
		s, ok = LookupAblation(k)
	}
	if !ok {
		return fmt.Errorf("%w: no setting %q", ErrConfig, k)
	}
	return s.Set(c, v)
}

// buildProfile makes a complete profile from a scenario's description:
// `profile name=A jct=4ms p90=20us typical_gap=10us` with one line per kernel
// `<id> mean=… p90=… gap=…` (gap omitted: every gap spanned a run end), and
// optionally the run's kernel order, one line per position
// `@ <id> dur=… gap=…`.
func buildProfile(t *testing.T, args map[string]string, input string) *profiler.Profile {
	p := profiler.NewProfile(args["name"], "sim", 100)
	p.Phase = profiler.PhaseSharing
	p.Runs = 100
	p.RunTime.Mean = float64(dur(t, args["jct"]))
	p.Duration.P90 = float64(dur(t, args["p90"]))
	p.Gap.P50 = float64(dur(t, args["typical_gap"]))
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if f[0] == "@" {
			id, _ := strconv.ParseUint(f[1], 10, 64)
			s := profiler.SeqKernel{ID: id}
			for _, kv := range f[2:] {
				key, val, _ := strings.Cut(kv, "=")
				switch key {
				case "dur":
					s.DurationNs = float64(dur(t, val))
				case "gap":
					s.GapNs = float64(dur(t, val))
				}
			}
			p.Sequence = append(p.Sequence, s)
			p.SeqRuns = p.Runs
			continue
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			t.Fatalf("kernel id %q: %v", f[0], err)
		}
		k := &profiler.KernelStats{ID: id, Name: fmt.Sprintf("k%d", id)}
		for _, kv := range f[1:] {
			key, val, _ := strings.Cut(kv, "=")
			switch key {
			case "mean":
				k.Duration.Mean = float64(dur(t, val))
				k.Duration.Count = 100
			case "p90":
				k.Duration.P90 = float64(dur(t, val))
			case "gap":
				k.Gap.Mean = float64(dur(t, val))
				k.Gap.Count = 100
			default:
				t.Fatalf("kernel field %q", key)
			}
		}
		if k.Duration.P90 == 0 {
			k.Duration.P90 = k.Duration.Mean
		}
		p.Kernels[id] = k
	}
	return p
}

func taskArg(t *testing.T, args map[string]string) TaskID {
	return TaskID(num(t, args, "task", 0))
}

func num(t *testing.T, args map[string]string, key string, def int64) int64 {
	v, ok := args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}

func dur(t *testing.T, s string) int64 {
	if s == "" {
		return 0
	}
	if d, err := time.ParseDuration(s); err == nil {
		return int64(d)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return n
}

func fmtDur(ns int64) string { return time.Duration(ns).String() }

// Scenario files run what users run (issue 33): DefaultConfig and
// settings, not ablations or today's gate — but for files about a variant,
// which say so in a comment.
func TestScenariosRunDefaults(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	defaults := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		variant := false
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "config") {
				continue
			}
			for _, kv := range strings.Fields(line)[1:] {
				k, _, _ := strings.Cut(kv, "=")
				if _, abl := LookupAblation(k); abl || kv == "gate=today" {
					variant = true
				}
			}
		}
		switch {
		case !variant:
			defaults++
		case !strings.Contains(string(b), "variant") && !strings.Contains(string(b), "today's gate"):
			t.Errorf("%s runs a variant and does not say so in a comment", f)
		}
	}
	if defaults < 40 {
		t.Errorf("%d of %d scenario files run the defaults, want at least 40", defaults, len(files))
	}
}

// fmtSigned is a duration that may be negative, as a scenario prints it.
func fmtSigned(d int64) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}
