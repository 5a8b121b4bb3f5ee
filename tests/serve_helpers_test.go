package tests

// Helpers for tests that run the real daemon (`fikit serve`) with hooked
// replays on a private simulated GPU.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/bench/harness"
)

// daemonProc is a running `fikit serve`.
type daemonProc struct {
	*proc
	addr, dataDir string
}

// freeUDPAddr returns a loopback UDP address nobody listens on right now.
func freeUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// startServe starts `fikit serve` on dataDir (and addr, "" for a free one)
// and waits until its admin socket answers.
func startServe(t testing.TB, dataDir, addr string, args ...string) *daemonProc {
	t.Helper()
	fikit := requireBins(t, "fikit")[0]
	if addr == "" {
		addr = freeUDPAddr(t)
	}
	args = append(args, mechanismOff(t)...)
	p := startCmd(t, nil, fikit, append([]string{"serve", "--data-dir", dataDir, "--listen", addr, "--log-level", "debug"}, args...)...)
	d := &daemonProc{proc: p, addr: addr, dataDir: dataDir}
	if !waitFor(10*time.Second, func() bool {
		r := runCmd(t, 5*time.Second, nil, fikit, "status", "--data-dir", dataDir, "--json")
		return r.ExitCode == 0
	}) {
		r := p.Kill()
		t.Fatalf("fikit serve did not come up: %s", r)
	}
	return d
}

// mechanismOff is FIKIT_TEST_SERVE_FLAGS split at spaces: flags appended
// to every `fikit serve` a test starts, last, so that they win. It is how a
// mechanism is turned off to show that its test fails without it
// (docs/operations.md "Mechanism-off runs"), e.g.
// FIKIT_TEST_SERVE_FLAGS=--variant=,hook-bound=false (a variant of the
// core's configuration, bench/variant: ablations are no user flags).
func mechanismOff(t testing.TB) []string {
	f := strings.Fields(os.Getenv("FIKIT_TEST_SERVE_FLAGS"))
	if len(f) > 0 {
		t.Logf("FIKIT_TEST_SERVE_FLAGS: fikit serve %s", strings.Join(f, " "))
	}
	return f
}

// stop ends the daemon with SIGTERM and checks it exits cleanly.
func (d *daemonProc) stop(t testing.TB) cmdResult {
	t.Helper()
	d.signal(syscall.SIGTERM)
	r := d.Wait(15 * time.Second)
	if r.TimedOut || r.ExitCode != 0 {
		t.Fatalf("fikit serve did not stop cleanly: %s", r)
	}
	return r
}

// statusJSON is the subset of `fikit status --json` the tests read.
type statusJSON struct {
	Tasks []struct {
		ID             uint32 `json:"id"`
		Verified       bool   `json:"pid_verified"`
		Key            string `json:"task_key"`
		Priority       int    `json:"priority"`
		GPU            string `json:"gpu"`
		Model          string `json:"model"`
		Role           string `json:"role"`
		Phase          string `json:"phase"`
		PID            int    `json:"pid"`
		Runs           int    `json:"profiled_runs"`
		ProfileVersion int    `json:"profile_version"`
	} `json:"tasks"`
}

func (d *daemonProc) status(t testing.TB) statusJSON {
	t.Helper()
	var st statusJSON
	d.statusInto(t, &st)
	return st
}

// statusInto reads `fikit status --json` into v (the subset a test needs).
func (d *daemonProc) statusInto(t testing.TB, v any) {
	t.Helper()
	r := runCmd(t, 10*time.Second, nil, requireBins(t, "fikit")[0], "status", "--data-dir", d.dataDir, "--json")
	if r.ExitCode != 0 {
		t.Fatalf("fikit status: %s", r)
	}
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		t.Fatalf("fikit status --json: %v\n%s", err, r.Stdout)
	}
}

// replaySpec is one replay to run.
type replaySpec struct {
	trace    string
	runs     int
	warmup   int
	cpuNs    int64 // host time before each launch; < 0: the trace's own
	interval time.Duration
	graph    bool // each run one CUDA graph launch (fikit-replay --graph)
	// poisson: open loop, Poisson arrivals at this rate (runs/s), seeded.
	poisson float64
	seed    int
	postNs  int64 // host time after each run (a service answering its request)
	// hooked: under `fikit run` with this priority and task key.
	hooked bool
	prio   int
	key    string
	sched  string
}

// command is the replay's command line: bench/harness's, which `fikit
// demo` and `fikit bench` run.
func (s replaySpec) command(t testing.TB) (string, []string) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so")
	svc := harness.Service{Trace: s.trace, Runs: s.runs, Warmup: s.warmup, CPUNs: s.cpuNs, PostNs: s.postNs,
		Every: s.interval, Hooked: s.hooked, Prio: s.prio, TaskKey: s.key, Scheduler: s.sched}
	if s.graph {
		svc.Args = append(svc.Args, "--graph")
	}
	if s.poisson > 0 {
		svc.Args = append(svc.Args, "--poisson", strconv.FormatFloat(s.poisson, 'g', -1, 64), "--seed", strconv.Itoa(s.seed))
	}
	return harness.ReplayCommand(binDir(t), svc)
}

// profileFully replays s (hooked, s.runs runs) until the daemon holds its
// complete profile, at most profileReplays times, and returns the profile.
// One replay of T runs is not always enough: a loaded machine makes the
// hook withhold runs measured with a stalled launch call, and a Go
// program's last runs go unreported (it exits without the hook's atexit
// handler). Profiling resumes where the last replay left it.
func profileFully(t testing.TB, d *daemonProc, env []string, s replaySpec) profileShowJSON {
	t.Helper()
	fikit := requireBins(t, "fikit")[0]
	s.hooked = true
	var show profileShowJSON
	for i := 1; i <= profileReplays; i++ {
		cmd, args := s.command(t)
		if r := runCmd(t, 3*time.Minute, env, cmd, args...); r.ExitCode != 0 {
			t.Fatalf("profiling %s: %s", s.key, r)
		}
		// The daemon writes a finished profile in the background.
		if waitFor(3*time.Second, func() bool {
			r := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", s.key, "--data-dir", d.dataDir, "--json")
			return r.ExitCode == 0 && json.Unmarshal([]byte(r.Stdout), &show) == nil && show.Phase == "sharing"
		}) {
			if i > 1 {
				t.Logf("%s: profile complete after %d replays of %d runs", s.key, i, s.runs)
			}
			return show
		}
	}
	t.Fatalf("%s: no complete profile after %d replays of %d runs (phase %q, %d runs, %d discarded)",
		s.key, profileReplays, s.runs, show.Phase, show.Runs, show.Discarded)
	return show
}

// profileReplays bounds profileFully.
const profileReplays = 5

// parseRuns reads fikit-replay's per-run JSON lines.
func parseRuns(t testing.TB, stdout string) []replayRun {
	t.Helper()
	runs, err := harness.ParseRuns(stdout)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

// timelineOf returns the timeline path a test's replays write to.
func timelineOf(t testing.TB) string { return filepath.Join(t.TempDir(), "timeline.jsonl") }

// Stderr is what the process has written to standard error so far.
func (p *proc) Stderr() string { return p.stderr.String() }

// KillGroup kills the process and its children (`fikit run` and the
// service it started) and waits for it.
func (p *proc) KillGroup() cmdResult {
	p.signal(syscall.SIGKILL)
	<-p.done
	return p.result(false)
}

// periodicPair profiles hp and lp fully on d, then runs lp back to back and
// hp hpRuns times every interval (after hp.warmup runs), both hooked;
// during is called once two thirds of hp's runs are done, while both run.
// It returns hp's result, its exit status checked.
func periodicPair(t *testing.T, d *daemonProc, env []string, hp, lp replaySpec, hpRuns int, interval time.Duration,
	during func()) cmdResult {
	t.Helper()
	for _, s := range []replaySpec{hp, lp} {
		s.runs, s.warmup = 23, 0
		profileFully(t, d, env, s)
	}
	l := lp
	l.hooked, l.runs = true, 1000000
	lcmd, largs := l.command(t)
	lproc := startCmd(t, env, lcmd, largs...)
	if !lproc.waitOutput(`{"run"`, 1, 60*time.Second) {
		t.Fatalf("the low-priority service did not get going: %s", lproc.KillGroup())
	}
	h := hp
	h.hooked, h.runs, h.interval = true, hpRuns, interval
	hcmd, hargs := h.command(t)
	hproc := startCmd(t, env, hcmd, hargs...)
	if !hproc.waitOutput(`{"run"`, hpRuns*2/3, 2*time.Minute) {
		t.Fatalf("the high-priority service did not get going: %s", hproc.KillGroup())
	}
	during()
	hr := hproc.Wait(2 * time.Minute)
	lproc.KillGroup()
	if hr.ExitCode != 0 {
		t.Fatalf("high-priority replay: %s", hr)
	}
	return hr
}
