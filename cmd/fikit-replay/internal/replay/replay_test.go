package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/simgpu/trace"
)

// fakeDevice is a fifo device in the test process: a kernel starts at
// max(launch call + latency, previous end); Synchronize spins until the last
// one ends.
type fakeDevice struct {
	latencyNs   int64
	ptx         string
	entries     []string
	launches    []fakeLaunch
	busyUntil   int64
	syncs       int
	closed      bool
	failLaunch  int // fail the launch with this index (1-based), 0 never
	failLoad    bool
	cancelAfter int // call cancel after this many launches, 0 never
	cancel      context.CancelFunc
	// graph mode and footprint
	graph                   []GraphLaunch
	captures, graphLaunches int
	reserved                uint64
}

type fakeLaunch struct {
	fn          int
	grid, block [3]uint32
	durNs       uint64
	callNs      int64
}

func (f *fakeDevice) Load(ptx string, entries []string) error {
	if f.failLoad {
		return errors.New("CUDA_ERROR_INVALID_PTX")
	}
	f.ptx, f.entries = ptx, entries
	return nil
}

func (f *fakeDevice) Launch(fn int, grid, block [3]uint32, durNs uint64) error {
	now := MonoNs()
	f.launches = append(f.launches, fakeLaunch{fn, grid, block, durNs, now})
	if len(f.launches) == f.failLaunch {
		return errors.New("CUDA_ERROR_LAUNCH_FAILED")
	}
	if len(f.launches) == f.cancelAfter {
		f.cancel()
	}
	f.busyUntil = max(now+f.latencyNs, f.busyUntil) + int64(durNs)
	return nil
}

func (f *fakeDevice) Synchronize() error { spinUntil(f.busyUntil); f.syncs++; return nil }

// CaptureGraph and LaunchGraph: a launched graph's kernels arrive together.
func (f *fakeDevice) CaptureGraph(ls []GraphLaunch) error {
	f.captures++
	f.graph = append([]GraphLaunch(nil), ls...)
	return nil
}

func (f *fakeDevice) LaunchGraph() error {
	now := MonoNs()
	f.graphLaunches++
	for _, l := range f.graph {
		f.busyUntil = max(now+f.latencyNs, f.busyUntil) + int64(l.DurationNs)
	}
	return nil
}

func (f *fakeDevice) Reserve(bytes uint64) error { f.reserved += bytes; return nil }

// plainDevice is a Device that can neither capture graphs nor reserve memory.
type plainDevice struct{ Device }

func (f *fakeDevice) Close() error { f.closed = true; return nil }

func runFake(t *testing.T, dev *fakeDevice, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	err := Run(context.Background(), append([]string{"fikit-replay"}, args...), &out, &errw,
		func(int) (Device, error) { return dev, nil })
	return out.String(), err
}

type jsonOut struct {
	runs    []RunRecord
	summary Summary
}

func parseJSON(t *testing.T, out string) jsonOut {
	t.Helper()
	var j jsonOut
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"summary"`)) {
			var s struct{ Summary Summary }
			if err := json.Unmarshal(line, &s); err != nil {
				t.Fatal(err)
			}
			j.summary = s.Summary
			continue
		}
		var r RunRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		j.runs = append(j.runs, r)
	}
	return j
}

// TestReplayMatchesAnalytic replays a GPU-bound and a host-bound trace on the
// fake fifo device: every launch, in order, paced by the host time, and the
// JCT close to the analytic one.
func TestReplayMatchesAnalytic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cpuNs int64
	}{{"h100/resnet50_4_fwd", 5000}, {"h100/bert_2_fwd", 20000}} {
		// Timing (launch spacing, JCT) is judged on wall clock, against
		// this host paced the same way around the replay (hostPace); a
		// loaded machine may still delay one replay more than the probes
		// saw, so it is replayed again, at most twice; a replayer that paces
		// wrong is wrong every time.
		for attempt := 1; ; attempt++ {
			late := replayAgainstAnalytic(t, tc.name, tc.cpuNs)
			if late == "" {
				break
			}
			if attempt == 3 {
				t.Errorf("%s (3 attempts): %s", tc.name, late)
				break
			}
			t.Logf("%s: %s; replaying again", tc.name, late)
		}
	}
}

// replayAgainstAnalytic replays trace name on the fake fifo device and
// checks it: structure fatally, timing by returning what was late ("" if
// nothing).
func replayAgainstAnalytic(t *testing.T, name string, cpuNs int64) string {
	tr, _ := trace.Embedded(name)
	n := len(tr.Kernels)
	// This host, paced as the replayer paces its launches, just before and
	// after the replay: the bounds below stretch by how much slower than
	// the schedule it went (1 on a quiet host).
	gapBefore, slowBefore := hostPace(6*n, cpuNs)
	dev := &fakeDevice{latencyNs: 4000}
	out, err := runFake(t, dev, "--trace", name, "--runs", "5", "--warmup", "1",
		"--cpu-ns", fmt.Sprint(cpuNs), "--json", "-q")
	if err != nil {
		t.Fatal(err)
	}
	gapAfter, slowAfter := hostPace(6*n, cpuNs)
	hostGap, slow := max(gapBefore, gapAfter), max(slowBefore, slowAfter, 1)
	if len(dev.launches) != 6*n || dev.syncs != 6 || !dev.closed {
		t.Fatalf("%s: %d launches, %d syncs, closed %v", name, len(dev.launches), dev.syncs, dev.closed)
	}
	for i, l := range dev.launches {
		k := tr.Kernels[i%n]
		if dev.entries[l.fn] != kernelid.ReplayEntryName(k.Name) || l.durNs != uint64(k.DurationNs) ||
			l.grid != k.Grid || l.block != k.Block {
			t.Fatalf("%s: launch %d = %+v, kernel %+v", name, i, l, k)
		}
	}
	j := parseJSON(t, out)
	if len(j.runs) != 5 || j.summary.Runs != 5 {
		t.Fatalf("%s: %d run lines, summary %+v", name, len(j.runs), j.summary)
	}
	// Launch i of a run is due i+1 host times after the run's start, later
	// only when an earlier launch came late; on a quiet machine launches are
	// exactly the host time apart: check the median spacing.
	var gaps []int64
	for r, run := range j.runs {
		for i := 0; i < n; i++ {
			l := dev.launches[(r+1)*n+i]
			if d := l.callNs - run.StartNs; d < int64(i+1)*cpuNs {
				t.Fatalf("%s: run %d launch %d only %d ns after the run's start", name, r, i, d)
			}
			if i > 0 {
				gaps = append(gaps, l.callNs-dev.launches[(r+1)*n+i-1].callNs)
			}
		}
	}
	var late string
	if m := stats.Quantile(gaps, 0.5); m > max(cpuNs, hostGap)+2000 {
		late = fmt.Sprintf("median launch spacing %d ns for %d ns host time (this host paced %d ns); ", m, cpuNs, hostGap)
	}
	for i, r := range j.runs {
		if r.Run != i || r.Kernels != n || r.WaitNs != nil || i > 0 && r.StartNs <= j.runs[i-1].StartNs+j.runs[i-1].JCTNs {
			t.Errorf("%s: run line %+v", name, r)
		}
	}
	want := trace.AnalyticJCT(tr, cpuNs, 4000).JCTNs
	if p50 := j.summary.P50Ns; p50 < want {
		t.Errorf("%s: p50 %d ns, below the analytic %d ns", name, p50, want)
	} else if float64(p50) > 1.25*slow*float64(want) {
		late += fmt.Sprintf("p50 %d ns, analytic %d ns (this host paced %.2f× slower than its schedule)", p50, want, slow)
	}
	return late
}

// hostPace paces n launches of cpuNs host time each as the replayer does
// (pace), on a locked thread, and returns the median spacing it got and how
// much longer than n×cpuNs it took.
func hostPace(n int, cpuNs int64) (medianGap int64, slow float64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gaps := make([]int64, 0, n)
	start := MonoNs()
	due, prev := start, start
	for i := 0; i < n; i++ {
		due = pace(due + cpuNs)
		now := MonoNs()
		gaps = append(gaps, now-prev)
		prev = now
	}
	return stats.Quantile(gaps, 0.5), float64(MonoNs()-start) / float64(int64(n)*cpuNs)
}

// TestReplayGraph: --graph captures one run's kernels once, in order, and
// each run is one graph launch and one synchronisation; a run takes the
// kernels' device time, not their host times; --footprint-mb reserves the
// memory once; a device that can do neither refuses.
func TestReplayGraph(t *testing.T) {
	dev := &fakeDevice{latencyNs: 4000}
	name := "h100/resnet50_4_fwd"
	out, err := runFake(t, dev, "--trace", name, "--runs", "4", "--warmup", "1", "--graph", "--footprint-mb", "3",
		"--cpu-ns", "1000000", "--json", "-q")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := trace.Embedded(name)
	if dev.captures != 1 || len(dev.graph) != len(tr.Kernels) || dev.graphLaunches != 5 || dev.syncs != 5 ||
		len(dev.launches) != 0 || dev.reserved != 3<<20 {
		t.Fatalf("captures %d of %d kernels, %d graph launches, %d syncs, %d single launches, %d bytes reserved",
			dev.captures, len(dev.graph), dev.graphLaunches, dev.syncs, len(dev.launches), dev.reserved)
	}
	for i, l := range dev.graph {
		k := tr.Kernels[i]
		if dev.entries[l.Fn] != kernelid.ReplayEntryName(k.Name) || l.DurationNs != uint64(k.DurationNs) ||
			l.Grid != k.Grid || l.Block != k.Block {
			t.Fatalf("graph kernel %d = %+v, trace %+v", i, l, k)
		}
	}
	j := parseJSON(t, out)
	gpu := tr.GPUTimeNs()
	for _, r := range j.runs {
		// The kernels' host times (1 ms each) would add one per launch;
		// the margin is most of that, as wide as a loaded host may need
		// while a replayer that paid them still fails.
		if r.JCTNs < gpu || r.JCTNs > gpu+int64(len(tr.Kernels))*1_000_000*85/100 {
			t.Errorf("graph run %+v: JCT not its device time %d ns", r, gpu)
		}
	}
	for _, flag := range []string{"--graph", "--footprint-mb=1"} {
		var o, e bytes.Buffer
		err := Run(context.Background(), []string{"fikit-replay", "--trace", name, "--runs", "1", flag, "-q"}, &o, &e,
			func(int) (Device, error) { return plainDevice{&fakeDevice{}}, nil })
		if err == nil || !errors.Is(err, ErrUsage) {
			t.Errorf("%s on a device without it: %v", flag, err)
		}
	}
}

// TestReplayOwnHostTimes: a trace with host times is paced by them unless
// --cpu-ns is given; --pre-ns delays the first launch.
func TestReplayOwnHostTimes(t *testing.T) {
	tr := &trace.Trace{HasHostTime: true}
	for i, h := range []int64{30_000, 200_000, 50_000, 400_000} {
		tr.Kernels = append(tr.Kernels, trace.Kernel{Name: fmt.Sprint("k", i%2), DurationNs: 1000, HostNs: h,
			Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}})
	}
	p := filepath.Join(t.TempDir(), "own.csv")
	f, _ := os.Create(p)
	if err := trace.Write(f, tr); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Paced on wall clock: a loaded machine (the other packages of make
	// test) may preempt a launch past the margin, so the replay is judged
	// on up to three attempts; a replayer that paces wrong is wrong every
	// time.
	var dev *fakeDevice
	for attempt := 1; ; attempt++ {
		dev = &fakeDevice{}
		out, err := runFake(t, dev, "--trace", p, "--runs", "1", "--pre-ns", "300000", "--json", "-q")
		if err != nil {
			t.Fatal(err)
		}
		start := parseJSON(t, out).runs[0].StartNs
		want := []int64{330_000, 530_000, 580_000, 980_000}
		var late []string
		for i, l := range dev.launches {
			if d := l.callNs - start; d < want[i] {
				t.Errorf("launch %d at +%d ns, before +%d", i, d, want[i])
			} else if d > want[i]+150_000 {
				late = append(late, fmt.Sprintf("launch %d at +%d ns, want +%d", i, d, want[i]))
			}
		}
		if len(late) == 0 {
			break
		}
		if attempt == 3 {
			t.Errorf("3 attempts, the last: %s", strings.Join(late, "; "))
			break
		}
		t.Logf("attempt %d: %s; replaying again", attempt, strings.Join(late, "; "))
	}
	if len(dev.entries) != 2 {
		t.Errorf("entries %v", dev.entries)
	}
	for attempt := 1; ; attempt++ {
		dev = &fakeDevice{}
		if _, err := runFake(t, dev, "--trace", p, "--runs", "1", "--cpu-ns", "0", "-q"); err != nil {
			t.Fatal(err)
		}
		d := dev.launches[3].callNs - dev.launches[0].callNs
		if d <= 100_000 {
			break
		}
		if attempt == 3 {
			t.Errorf("--cpu-ns 0: launches spread over %d ns (3 attempts)", d)
			break
		}
	}
}

// TestReplayOpenLoop: arrivals follow a fixed schedule (base + i·interval),
// not the previous run's end, and each run reports how late after its
// arrival it started. Judged on any host: the arrivals the runs report
// (start − wait_ns) are exactly the schedule, whatever the host delayed;
// lateness beyond queueing against this host's lateness measured beside
// the replay, not against a fixed margin on the host's clock.
func TestReplayOpenLoop(t *testing.T) {
	// The interval is long beside a run (about 2.6 ms here), so that a
	// replayer that waits an interval too long is late by most of one.
	const runs, interval = 8, int64(20_000_000)
	// The host, measured while the replay runs: how late a thread that
	// waits as the replayer does (waitUntil) wakes for a deadline.
	var hostLate []int64
	stop, probed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(probed)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			select {
			case <-stop:
				return
			default:
			}
			due := MonoNs() + 1_000_000
			now, _ := waitUntil(due, nil)
			hostLate = append(hostLate, now-due)
		}
	}()
	dev := &fakeDevice{}
	out, err := runFake(t, dev, "--trace", "h100/mobilenet_4_fwd", "--runs", fmt.Sprint(runs), "--cpu-ns", "0",
		"--interval", "20ms", "--json", "-q")
	close(stop)
	<-probed
	if err != nil {
		t.Fatal(err)
	}
	j := parseJSON(t, out)
	if len(j.runs) != runs {
		t.Fatalf("%d runs, want %d", len(j.runs), runs)
	}
	for i, r := range j.runs {
		if r.WaitNs == nil {
			t.Fatalf("open-loop run %d without wait_ns", i)
		}
		if *r.WaitNs < 0 {
			t.Errorf("run %d: wait_ns %d < 0", i, *r.WaitNs)
		}
	}
	// The schedule, exactly: run i arrived i intervals after run 0 did.
	arrival := func(i int) int64 { return j.runs[i].StartNs - *j.runs[i].WaitNs }
	for i := 1; i < runs; i++ {
		if d, want := arrival(i)-arrival(0), int64(i)*interval; d != want {
			t.Errorf("run %d arrived %d ns after run 0, want %d (start %d, wait %d)", i, d, want, j.runs[i].StartNs, *j.runs[i].WaitNs)
		}
	}
	// Late only by queueing or the host: a run's wait beyond the time the
	// previous run still held the replayer is the host's doing. The bound
	// is this host's, measured beside the replay: the median run may be
	// late beyond its queueing by half an interval plus twice the p90 of
	// the probe's lateness; a replayer that waits an interval too long is
	// later than that on most runs.
	var excess []int64
	for i := 1; i < runs; i++ {
		prevEnd := j.runs[i-1].StartNs + j.runs[i-1].JCTNs
		queued := max(prevEnd-arrival(i), 0)
		excess = append(excess, *j.runs[i].WaitNs-queued)
	}
	if len(hostLate) == 0 {
		t.Fatal("the host probe woke no time during the replay")
	}
	p90 := stats.Quantile(hostLate, 0.9)
	if limit, med := interval/2+2*p90, stats.Quantile(excess, 0.5); med > limit {
		t.Errorf("runs started a median %d ns late beyond their queueing (%v), want ≤ %d (half an interval and twice this host's p90 lateness, %d ns over %d probes)",
			med, excess, limit, p90, len(hostLate))
	}
	// Runs longer than the interval queue up: they start back to back and wait.
	dev = &fakeDevice{}
	out, err = runFake(t, dev, "--trace", "h100/mobilenet_4_fwd", "--runs", "3", "--interval", "100us", "--json", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if j := parseJSON(t, out); *j.runs[2].WaitNs < 1_000_000 {
		t.Errorf("overloaded open loop: run 2 waited %d ns", *j.runs[2].WaitNs)
	}
}

// TestReplayBursts: --burst N runs N runs back to back, then idles
// --interval after the burst's last run before the next burst.
func TestReplayBursts(t *testing.T) {
	a := Arrivals{Interval: 200 * time.Millisecond, Burst: 5}
	if a.Closed() || a.Offsets(10) != nil {
		t.Error("bursts are neither the closed loop nor on a schedule")
	}
	var idle []time.Duration
	for j := 0; j < 11; j++ {
		idle = append(idle, a.IdleBefore(j))
	}
	want := []time.Duration{0, 0, 0, 0, 0, a.Interval, 0, 0, 0, 0, a.Interval}
	if !slices.Equal(idle, want) {
		t.Errorf("IdleBefore = %v, want %v", idle, want)
	}
	if (Arrivals{Interval: time.Second}).IdleBefore(5) != 0 || (Arrivals{Burst: 5}).IdleBefore(5) != 0 {
		t.Error("idle time without both --burst and --interval")
	}

	dev := &fakeDevice{}
	out, err := runFake(t, dev, "--trace", "h100/mobilenet_4_fwd", "--runs", "6", "--cpu-ns", "0",
		"--burst", "3", "--interval", "20ms", "--post-ns", "1000", "--json", "-q")
	if err != nil {
		t.Fatal(err)
	}
	j := parseJSON(t, out)
	if len(j.runs) != 6 {
		t.Fatalf("%d runs", len(j.runs))
	}
	for i := 1; i < len(j.runs); i++ {
		r, prev := j.runs[i], j.runs[i-1]
		if r.WaitNs != nil {
			t.Errorf("burst run %d has wait_ns (no arrival schedule)", i)
		}
		gap := r.StartNs - (prev.StartNs + prev.JCTNs)
		if i == 3 && gap < 20_000_000 {
			t.Errorf("burst 2 started %d ns after burst 1 ended, want ≥ 20 ms idle", gap)
		}
		if i != 3 && gap >= 20_000_000 {
			t.Errorf("run %d inside a burst started %d ns after the previous one", i, gap)
		}
	}
}

func TestPoissonOffsets(t *testing.T) {
	a := Arrivals{Rate: 1000, Seed: 7}
	o1, o2 := a.Offsets(20000), a.Offsets(20000)
	if !slices.Equal(o1, o2) || slices.Equal(o1, Arrivals{Rate: 1000, Seed: 8}.Offsets(20000)) {
		t.Error("Poisson offsets not determined by the seed")
	}
	if o1[0] != 0 || !slices.IsSorted(o1) {
		t.Error("offsets must start at 0 and increase")
	}
	if mean := float64(o1[len(o1)-1]) / float64(len(o1)-1); mean < 0.97e6 || mean > 1.03e6 {
		t.Errorf("mean inter-arrival %v ns, want 1e6", mean)
	}
	if (Arrivals{}).Offsets(5) != nil || !(Arrivals{}).Closed() {
		t.Error("zero Arrivals is not the closed loop")
	}
}

func TestSummarize(t *testing.T) {
	var v []int64
	for i := 100; i >= 1; i-- {
		v = append(v, int64(i))
	}
	s := Summarize(v)
	if s.Runs != 100 || s.P50Ns != 50 || s.P90Ns != 90 || s.P99Ns != 99 || s.MeanNs != 51 || s.MinNs != 1 || s.MaxNs != 100 {
		t.Errorf("%+v", s)
	}
	if s.CV < 0.5715 || s.CV > 0.5717 { // population sd of 1..100 is 28.866, mean 50.5
		t.Errorf("cv %v", s.CV)
	}
	if s := Summarize([]int64{7}); s.P50Ns != 7 || s.P99Ns != 7 || s.CV != 0 {
		t.Errorf("%+v", s)
	}
	if s := Summarize(nil); s.Runs != 0 {
		t.Errorf("%+v", s)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"--runs", "3"}, {"--trace", "h100/bert_2_fwd", "--runs", "0"},
		{"--trace", "h100/bert_2_fwd", "--runs", "abc"}, {"--trace", "h100/bert_2_fwd", "--bogus"},
		{"--trace", "h100/bert_2_fwd", "--interval", "1ms", "--poisson", "5"},
		{"--trace", "h100/bert_2_fwd", "--poisson", "-1"}, {"--trace", "h100/bert_2_fwd", "--interval", "0s"},
		{"--trace", "h100/bert_2_fwd", "--burst", "5"}, {"--trace", "h100/bert_2_fwd", "--burst", "0", "--interval", "1ms"},
		{"--trace", "h100/bert_2_fwd", "--burst", "2", "--poisson", "5"},
		{"--trace", "h100/bert_2_fwd", "--cpu-ns", "-5"}, {"--trace", "h100/bert_2_fwd", "extra"},
		{"gen", "--kernels", "-5"}, {"gen", "--seed", "x"}, {"ptx"}, {"ptx", "--trace", "a", "b"},
	} {
		dev := &fakeDevice{}
		_, err := runFake(t, dev, args...)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), "--help") {
			t.Errorf("%q: exit %d, err %v", args, ExitCode(err), err)
		}
		if len(dev.launches) != 0 {
			t.Errorf("%q: launched", args)
		}
	}
}

func TestErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,98,100\nBN,0,0,64,soon\n"), 0o644)
	_, err := runFake(t, &fakeDevice{}, "--trace", bad)
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), bad+":3:11: field Duration") {
		t.Errorf("malformed trace: exit %d, %v", ExitCode(err), err)
	}
	_, err = runFake(t, &fakeDevice{}, "--trace", "nope/none")
	if ExitCode(err) != 1 || !errors.Is(err, trace.ErrNotFound) {
		t.Errorf("missing trace: exit %d, %v", ExitCode(err), err)
	}
	dev := &fakeDevice{failLaunch: 3}
	_, err = runFake(t, dev, "--trace", "h100/bert_2_fwd", "-q")
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), "run 0: launch kernel 2: CUDA_ERROR_LAUNCH_FAILED") || !dev.closed {
		t.Errorf("launch failure: exit %d, %v, closed %v", ExitCode(err), err, dev.closed)
	}
	_, err = runFake(t, &fakeDevice{failLoad: true}, "--trace", "h100/bert_2_fwd", "-q")
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_PTX") {
		t.Errorf("load failure: %v", err)
	}
	var errw bytes.Buffer
	err = Run(context.Background(), []string{"x", "--trace", "h100/bert_2_fwd"}, &bytes.Buffer{}, &errw,
		func(int) (Device, error) { return nil, errors.New("CUDA_ERROR_NO_DEVICE") })
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), "open device 0: CUDA_ERROR_NO_DEVICE") {
		t.Errorf("open failure: %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := &fakeDevice{cancelAfter: 500, cancel: cancel}
	var out bytes.Buffer
	err := Run(ctx, []string{"x", "--trace", "h100/mobilenet_4_fwd", "--runs", "100", "--cpu-ns", "0", "--json", "-q"},
		&out, &bytes.Buffer{}, func(int) (Device, error) { return dev, nil })
	if !errors.Is(err, ErrInterrupted) || ExitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	j := parseJSON(t, out.String())
	if len(j.runs) != 3 || j.summary.Runs != 3 || len(dev.launches) > 501 || !dev.closed {
		t.Errorf("%d runs reported, summary %d, %d launches", len(j.runs), j.summary.Runs, len(dev.launches))
	}
}

func TestGenAndPTXCommands(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	for _, p := range []string{a, b} {
		if _, err := runFake(t, &fakeDevice{}, "gen", "--seed", "9", "--kernels", "120", "--out", p); err != nil {
			t.Fatal(err)
		}
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	tr, err := trace.ReadFile(a)
	if err != nil || !bytes.Equal(ba, bb) || len(tr.Kernels) != 120 || !tr.HasHostTime {
		t.Fatalf("gen: %v, same %v", err, bytes.Equal(ba, bb))
	}
	want, _ := trace.Gen(9, trace.GenOptions{Kernels: 120})
	if !slices.Equal(tr.Kernels, want.Kernels) {
		t.Error("gen output differs from trace.Gen")
	}
	out, err := runFake(t, &fakeDevice{}, "gen", "--seed", "9", "--kernels", "120")
	if err != nil || out != string(ba) {
		t.Errorf("gen to stdout: %v", err)
	}
	out, err = runFake(t, &fakeDevice{}, "ptx", "--trace", a)
	ptx, _ := trace.PTX(tr)
	if err != nil || out != ptx {
		t.Errorf("ptx: %v", err)
	}
	// The human summary names the trace and the analytic JCT.
	out, err = runFake(t, &fakeDevice{latencyNs: 4000}, "--trace", a, "--runs", "2", "-q")
	if err != nil || !strings.Contains(out, a+": 2 runs  JCT p50 ") || !strings.Contains(out, "analytic JCT") {
		t.Errorf("summary %q, %v", out, err)
	}
}

// totalsDevice is a fakeDevice whose context reports blocked time: each
// synchronisation adds the next of blocked (a simgpu device's totals grow
// as other contexts delay its kernels).
type totalsDevice struct {
	*fakeDevice
	blocked []int64
	total   DeviceTotals
	reads   int
}

func (d *totalsDevice) Synchronize() error {
	if d.reads < len(d.blocked) {
		d.total.BlockedNs += d.blocked[d.reads]
	}
	d.reads++
	return d.fakeDevice.Synchronize()
}

func (d *totalsDevice) Totals() (DeviceTotals, bool) { return d.total, true }

// A run's blocked_ns is what its context's total grew by during the run
// (warmup runs included in the baseline), and the summary carries the totals.
func TestReplayReportsBlockedPerRun(t *testing.T) {
	dev := &totalsDevice{fakeDevice: &fakeDevice{}, blocked: []int64{7, 0, 5, 300}, total: DeviceTotals{BlockedNs: 1000}}
	var out, errw bytes.Buffer
	err := Run(context.Background(), []string{"fikit-replay", "--trace", "h100/mobilenet_4_fwd", "--runs", "3", "--warmup", "1",
		"--cpu-ns", "0", "--json", "-q"}, &out, &errw, func(int) (Device, error) { return dev, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := parseJSON(t, out.String())
	want := []int64{0, 5, 300} // the warmup's 7 is in no measured run
	if len(j.runs) != 3 {
		t.Fatalf("%d runs", len(j.runs))
	}
	for i, r := range j.runs {
		if r.BlockedNs == nil || *r.BlockedNs != want[i] {
			t.Errorf("run %d blocked %v, want %d", i, r.BlockedNs, want[i])
		}
	}
	if !strings.Contains(out.String(), `"device":{"kernels":0,"busy_ns":0,"blocked_ns":1312}`) {
		t.Errorf("summary without the device totals: %s", out.String())
	}
	// A device without totals reports no blocked time at all.
	out2, err := runFake(t, &fakeDevice{}, "--trace", "h100/mobilenet_4_fwd", "--runs", "1", "--cpu-ns", "0", "--json", "-q")
	if err != nil || strings.Contains(out2, "blocked_ns") || strings.Contains(out2, `"device"`) {
		t.Errorf("fake device without totals: %v %s", err, out2)
	}
}

// TestConvertTorchProfile: the convert command writes one run of a
// torch.profiler trace as a trace the replayer reads; errors are clear.
func TestConvertTorchProfile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run.csv")
	src := "../../../../simgpu/trace/testdata/torch/eager.json"
	var o, e bytes.Buffer
	err := Run(context.Background(), []string{"fikit-replay", "convert", "--torch-profile", src, "--run", "0", "--out", out},
		&o, &e, nil)
	if err != nil {
		t.Fatalf("convert: %v (%s)", err, e.String())
	}
	tr, err := trace.ReadFile(out)
	if err != nil || len(tr.Kernels) != 2 || !tr.HasHostTime || tr.Kernels[0].HostNs != 20250 {
		t.Fatalf("converted trace %+v: %v", tr, err)
	}
	if !strings.Contains(e.String(), "1 copies or memsets") {
		t.Errorf("progress line %q does not say what was left out", e.String())
	}
	for name, args := range map[string][]string{
		"no input":   {"convert"},
		"no run 9":   {"convert", "--torch-profile", src, "--run", "9"},
		"not a file": {"convert", "--torch-profile", filepath.Join(dir, "nope.json")},
	} {
		err := Run(context.Background(), append([]string{"fikit-replay"}, args...), &o, &e, nil)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
