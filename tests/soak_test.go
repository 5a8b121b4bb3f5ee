package tests

// The soak (issue 24): one daemon, services of mixed priorities under a
// fixed set of task keys starting, running and ending — cleanly, killed,
// SIGSTOPped and resumed, SIGSTOPped and killed — wave after wave. After
// each wave, once every service is gone, the daemon is sampled: RSS, Go
// heap, goroutines, open descriptors, board slots in use, registered tasks
// (and the daemon's own per-task records and pidfd watches), store size.
//
// It fails if
//   - a service that was not killed fails or hangs (the hook must never
//     harm its service);
//   - a quiescent sample still holds a task, a record, a watch or a board
//     slot (after up to 5 s: the daemon must reclaim everything of a
//     service that is gone);
//   - a resource's trend over the second half still rises (trend_test.go:
//     Theil–Sen slope × the half's length against a tolerance per
//     resource). Runs shorter than 5 minutes are still warming up
//     (docs/operations.md "Soak"): there RSS and heap are judged with a
//     wider margin that only a gross leak exceeds, and the store not.
//
// FIKIT_SOAK=<duration> sets how long it runs (`make soak`, SOAK=30m);
// unset it runs briefly (`make test`). FIKIT_SOAK_REPORT names a file for
// the sample table; FIKIT_SOAK_SEED fixes the random choices.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const soakBrief = 40 * time.Second

// soakService is one of the fixed task keys and the program behind it (a
// key always runs the same kernels, as a real service does).
type soakService struct {
	key  string
	prio int
	path string // hook-launcher path, or "replay" (fikit run -- fikit-replay)
}

var soakServices = []soakService{
	{"soak-p0", 0, "direct"},
	{"soak-p2", 2, "graph-build"},
	{"soak-p5-threads", 5, "threads"},
	{"soak-p5-replay", 5, "replay"},
	{"soak-p8-direct", 8, "direct"},
	{"soak-p8-gpa2", 8, "gpa2"},
}

// soakFate is how a service ends.
type soakFate int

const (
	fateClean      soakFate = iota // runs to its end
	fateKill                       // SIGKILL mid-run
	fateStopResume                 // SIGSTOP, later SIGCONT; runs to its end
	fateStopKill                   // SIGSTOP, later SIGKILL while stopped
	nFates
)

func (f soakFate) String() string {
	return [...]string{"clean", "kill", "stop-resume", "stop-kill"}[f]
}

// soakSample is the daemon at one quiescent moment.
type soakSample struct {
	at                          time.Duration
	wave, services              int
	rss, heap, goroutines, fds  float64
	slots, tasks, records       float64
	watches, storeDisk, storeDB float64
}

var soakColumns = []string{"elapsed", "wave", "services", "rss_MiB", "heap_MiB", "goroutines", "fds", "board_slots",
	"tasks", "task_records", "exit_watches", "store_disk_KiB", "store_badger_KiB"}

func (s soakSample) row() []string {
	return []string{s.at.Round(time.Second).String(), strconv.Itoa(s.wave), strconv.Itoa(s.services),
		fmt.Sprintf("%.1f", s.rss/(1<<20)), fmt.Sprintf("%.1f", s.heap/(1<<20)), fmt.Sprint(s.goroutines),
		fmt.Sprint(s.fds), fmt.Sprint(s.slots), fmt.Sprint(s.tasks), fmt.Sprint(s.records), fmt.Sprint(s.watches),
		fmt.Sprintf("%.0f", s.storeDisk/1024), fmt.Sprintf("%.0f", s.storeDB/1024)}
}

func TestSoak(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "hook-launcher", "libfikit_hook.so", "simgpu/libcuda.so.1")
	dur := soakBrief
	if v := os.Getenv("FIKIT_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FIKIT_SOAK=%q: want a duration such as 30m", v)
		}
		dur = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FIKIT_SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FIKIT_SOAK_SEED=%q: want an unsigned integer", v)
		}
		seed = s
	}
	t.Logf("soak for %v, seed %d (FIKIT_SOAK_SEED)", dur, seed)
	rng := rand.New(rand.NewPCG(seed, 24))

	dataDir := t.TempDir()
	d := startServe(t, dataDir, "", "--profile-runs", "10", "--log-level", "info")
	shm := uniqueShm(t)
	launcher := requireBins(t, "hook-launcher")[0]

	var samples []soakSample
	fates := map[soakFate]int{}
	services := 0
	start := time.Now()
	sample := func(wave int) {
		// Quiescent: every service of the wave has exited. The daemon learns
		// of each exit through a pidfd (or a Goodbye) at once; give it 5 s.
		var m map[string]float64
		clean := waitFor(5*time.Second, func() bool {
			m = adminMetrics(t, dataDir)
			return m["fikit_tasks"] == 0 && m["fikit_task_records"] == 0 && m["fikit_exit_watches"] == 0 &&
				m["fikit_board_slots_in_use"] == 0
		})
		s := soakSample{at: time.Since(start), wave: wave, services: services,
			rss: m["process_resident_memory_bytes"], heap: m["go_memstats_heap_inuse_bytes"],
			goroutines: m["go_goroutines"], fds: m["process_open_fds"], slots: m["fikit_board_slots_in_use"],
			tasks: m["fikit_tasks"], records: m["fikit_task_records"], watches: m["fikit_exit_watches"],
			storeDisk: float64(diskUsage(t, dataDir)), storeDB: m["fikit_store_bytes"]}
		if !clean {
			t.Errorf("wave %d: 5 s after its services ended the daemon still holds %v tasks, %v records, %v pidfd watches, %v board slots",
				wave, s.tasks, s.records, s.watches, s.slots)
		}
		samples = append(samples, s)
	}
	sample(0)
	for wave := 1; time.Since(start) < dur && !t.Failed(); wave++ {
		n := 3 + rng.IntN(4)
		var wg sync.WaitGroup
		for range n {
			svc := soakServices[rng.IntN(len(soakServices))]
			fate := soakFate(rng.IntN(int(nFates)))
			fates[fate]++
			services++
			var cmd string
			var args []string
			var env []string
			runs := 100 + rng.IntN(700)
			if svc.path == "replay" {
				s := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, runs: runs / 10, hooked: true,
					prio: svc.prio, key: svc.key, sched: d.addr}
				cmd, args = s.command(t)
				env = simgpuEnv(t, shm, "FIKIT_CONNECT_TIMEOUT_MS=3000")
			} else {
				cmd, args = launcher, []string{kernelsPTX(t), svc.path, strconv.Itoa(runs), "200000"}
				env = hookEnv(t, shm, d.addr, "FIKIT_CONNECT_TIMEOUT_MS=3000", "FIKIT_PRIORITY="+strconv.Itoa(svc.prio),
					"FIKIT_TASK_KEY="+svc.key)
			}
			p := startCmd(t, env, cmd, args...)
			at := time.Duration(50+rng.IntN(600)) * time.Millisecond
			stopFor := time.Duration(100+rng.IntN(1200)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := soakDrive(p, fate, at, stopFor); err != "" {
					t.Errorf("wave %d: %s (%s, %s): %s", wave, svc.key, svc.path, fate, err)
				}
			}()
		}
		wg.Wait()
		sample(wave)
	}
	if len(samples) < 4 {
		t.Fatalf("only %d samples", len(samples))
	}
	soakReport(t, samples, fates, services, dur)
	if t.Failed() {
		return
	}
	// The trend of each resource over the second half. Descriptors and
	// goroutines at quiescence do not depend on the load: any rise is a
	// leak (a little slack for Badger's and the runtime's own).
	long := dur >= 5*time.Minute
	xs := make([]float64, len(samples))
	col := func(f func(soakSample) float64) []float64 {
		ys := make([]float64, len(samples))
		for i, s := range samples {
			ys[i] = f(s)
		}
		return ys
	}
	for i, s := range samples {
		xs[i] = s.at.Seconds()
	}
	checks := []struct {
		name     string
		ys       []float64
		abs, rel float64
		judged   bool
	}{
		{"open descriptors", col(func(s soakSample) float64 { return s.fds }), 2, 0, true},
		{"goroutines", col(func(s soakSample) float64 { return s.goroutines }), 3, 0.05, true},
		{"RSS", col(func(s soakSample) float64 { return s.rss }), pick(long, 8<<20, 32<<20), pick(long, 0.10, 0.50), true},
		{"Go heap in use", col(func(s soakSample) float64 { return s.heap }), pick(long, 4<<20, 16<<20), pick(long, 0.10, 0.50), true},
		{"store on disk", col(func(s soakSample) float64 { return s.storeDisk }), 1 << 20, 0.10, long},
	}
	for _, c := range checks {
		rising, rise := stillRising(xs, c.ys, c.abs, c.rel)
		t.Logf("%-16s second-half trend %+.4g over %.0f s (tolerance max(%.4g, %.0f%% of level)); judged %v",
			c.name, rise, xs[len(xs)-1]-xs[len(xs)/2], c.abs, 100*c.rel, c.judged)
		if rising && c.judged {
			t.Errorf("%s still rising in the second half: %+.4g over %.0f s", c.name, rise, xs[len(xs)-1]-xs[len(xs)/2])
			if c.name == "open descriptors" {
				t.Logf("the daemon's descriptors now:\n%s", openFDs(d.Pid()))
			}
		}
	}
}

// pick is long's value in a long soak, else short's.
func pick(long bool, longV, shortV float64) float64 {
	if long {
		return longV
	}
	return shortV
}

// soakDrive applies a fate to a started service and checks how it ended;
// it returns what went wrong ("" if nothing).
func soakDrive(p *proc, fate soakFate, at, stopFor time.Duration) string {
	const hang = 90 * time.Second
	wait := func(d time.Duration) bool { // false: the process ended first
		select {
		case <-p.done:
			return false
		case <-time.After(d):
			return true
		}
	}
	switch fate {
	case fateKill:
		if wait(at) {
			p.KillGroup()
			return ""
		}
	case fateStopResume, fateStopKill:
		if wait(at) {
			p.signal(syscall.SIGSTOP)
			wait(stopFor)
			if fate == fateStopKill {
				p.KillGroup()
				return ""
			}
			p.signal(syscall.SIGCONT)
		}
	}
	r := p.Wait(hang)
	switch {
	case r.TimedOut:
		return "hung: " + r.String()
	case r.ExitCode != 0:
		return "failed: " + r.String()
	}
	return ""
}

// openFDs lists what process pid's descriptors point at, one per line.
func openFDs(pid int) string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		fmt.Fprintf(&b, "%s -> %s\n", e.Name(), l)
	}
	return b.String()
}

// diskUsage is the bytes the files under dir occupy (allocated blocks).
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// soakReport logs the first, middle and last samples (all of them into
// FIKIT_SOAK_REPORT, as a markdown table, if set).
func soakReport(t *testing.T, samples []soakSample, fates map[soakFate]int, services int, dur time.Duration) {
	t.Helper()
	line := func(cells []string) string { return "| " + strings.Join(cells, " | ") + " |" }
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %v, %d waves, %d services (", dur, samples[len(samples)-1].wave, services)
	for f := range nFates {
		fmt.Fprintf(&b, "%s %d ", f, fates[f])
	}
	b.WriteString(")\n")
	b.WriteString(line(soakColumns) + "\n")
	b.WriteString(line(strings.Split(strings.Repeat("---,", len(soakColumns)-1)+"---", ",")) + "\n")
	picked := []int{0, 1, len(samples) / 4, len(samples) / 2, 3 * len(samples) / 4, len(samples) - 1}
	last := -1
	for _, i := range picked {
		if i > last {
			b.WriteString(line(samples[i].row()) + "\n")
			last = i
		}
	}
	t.Log(b.String())
	if path := os.Getenv("FIKIT_SOAK_REPORT"); path != "" {
		var all strings.Builder
		all.WriteString(b.String())
		all.WriteString("\nall samples:\n" + line(soakColumns) + "\n")
		for _, s := range samples {
			all.WriteString(line(s.row()) + "\n")
		}
		if err := os.WriteFile(path, []byte(all.String()), 0o644); err != nil {
			t.Errorf("soak report: %v", err)
		}
	}
}
