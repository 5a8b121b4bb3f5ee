package tests

// Helpers of the hook's end-to-end tests (hook_test.go): a recording fake
// scheduler that speaks wire protocol v1 (package udp) and the hook's
// launcher's output format.

import (
	"bufio"
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// schedPolicy is how the fake scheduler answers.
type schedPolicy struct {
	Role  udp.Role
	Phase udp.Phase
	// ProfileRuns: T in RegisterAck (0: the daemon's default, 100).
	ProfileRuns uint32
	HeartbeatMs uint32
	NoGrant     bool // a waiter's requests are never answered
	Credit      uint32
	// After this many launches heard: Forget — answer the task's next
	// message with Error(unknown task), as a restarted daemon does;
	// Demote — send State making the task a waiter.
	ForgetAt, DemoteAt int
	// IgnoreRegisters: the first this many Registers go unanswered, as
	// from a daemon waiting for a CPU.
	IgnoreRegisters int
	// Board, if set, is named in every RegisterAck (the GPU's section
	// taken at its first Register), and Gate is given with every Grant —
	// but with FreshReasks, a request for a seq asked before is granted
	// against now, as the daemon's is after it read the board.
	Board       *board.Board
	Gate        udp.Gate
	FreshReasks bool
	// NoteAt: after this many launches heard, priority 0 launches on the
	// board (a better task is back).
	NoteAt int
	// Registered: the priorities the board says are registered on the
	// task's GPU, set at its first Register (0: leave it).
	Registered uint64
	// KernelTimes, if set, follows every RegisterAck (for the task it
	// registered): the task's kernel durations and µs bound.
	KernelTimes *udp.KernelTimes
	// Hint, if set, is written on the board at the first Register; after
	// HintAt launches heard, its NextNs becomes HintNextIn from then.
	Hint       *board.Hint
	HintAt     int
	HintNextIn time.Duration
}

// recvd is one datagram the fake scheduler received.
type recvd struct {
	At   time.Time
	From netip.AddrPort
	Msg  udp.Message
}

// fakeSched is a recording scheduler on 127.0.0.1: it acknowledges each
// Register with a new task ID and the policy's role and phase, grants (or
// not) every LaunchRequest, answers every Flush, and keeps everything it
// received.
type fakeSched struct {
	t        testing.TB
	conn     *net.UDPConn
	policy   schedPolicy
	mu       sync.Mutex
	msgs     []recvd
	pids     map[uint32]uint32 // task ID → pid of its Register
	keys     map[uint32]string // task ID → task key
	prios    map[uint32]uint8
	nextID   uint32
	launches int
	known    map[uint32]bool    // task IDs the daemon remembers
	forgot   bool               // ForgetAt has happened
	regs     int                // Registers received
	bad      []string           // datagrams that did not decode
	section  int                // the board section of the last Register
	noted    bool               // NoteAt has happened
	asked    map[[2]uint32]bool // task, seq of every LaunchRequest
	extra    []udp.Message      // what follows the reply (KernelTimes)
	hinted   bool               // HintAt has happened …
	hintNext int64              // … and set this NextNs
	done     chan struct{}
}

// HintNext is the NextNs the HintAt hint set (0: not yet).
func (f *fakeSched) HintNext() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hintNext
}

func newFakeSched(t testing.TB, policy schedPolicy) *fakeSched {
	t.Helper()
	return newFakeSchedAt(t, policy, "127.0.0.1:0")
}

// newFakeSchedAt is newFakeSched on addr (a daemon back on its port).
func newFakeSchedAt(t testing.TB, policy schedPolicy, addr string) *fakeSched {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp4", ua)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadBuffer(8 << 20)
	if policy.HeartbeatMs == 0 {
		policy.HeartbeatMs = 50
	}
	f := &fakeSched{t: t, conn: conn, policy: policy, pids: map[uint32]uint32{}, keys: map[uint32]string{},
		prios: map[uint32]uint8{}, known: map[uint32]bool{}, nextID: 1, done: make(chan struct{})}
	go f.serve()
	t.Cleanup(f.Close)
	return f
}

// Addr is host:port for FIKIT_SCHEDULER.
func (f *fakeSched) Addr() string { return f.conn.LocalAddr().String() }

// Close stops the scheduler: its port is closed (a hook then gets
// ECONNREFUSED, as from a killed daemon).
func (f *fakeSched) Close() {
	select {
	case <-f.done:
	default:
		_ = f.conn.Close()
		<-f.done
	}
}

func (f *fakeSched) serve() {
	defer close(f.done)
	buf := make([]byte, 2048)
	for {
		n, from, err := f.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		m, err := udp.Decode(buf[:n])
		if err != nil {
			f.mu.Lock()
			f.bad = append(f.bad, fmt.Sprintf("%x: %v", buf[:n], err))
			f.mu.Unlock()
			continue
		}
		f.mu.Lock()
		f.msgs = append(f.msgs, recvd{At: time.Now(), From: from, Msg: m})
		var reply udp.Message
		var task uint32
		switch m := m.(type) {
		case *udp.Register:
			f.regs++
			if f.regs <= f.policy.IgnoreRegisters {
				break
			}
			id := f.nextID
			f.nextID++
			f.pids[id], f.keys[id], f.prios[id], f.known[id] = m.PID, m.TaskKey, m.Priority, true
			ack := &udp.RegisterAck{Seq: m.Seq, TaskID: id, Role: f.policy.Role, Phase: f.policy.Phase,
				ProfileRuns: cmp.Or(f.policy.ProfileRuns, 100), HeartbeatMS: f.policy.HeartbeatMs}
			if b := f.policy.Board; b != nil {
				if sec, err := b.GPU(m.DeviceUUID); err == nil {
					f.section = sec
					ack.Board, ack.BoardGen, ack.BoardGPU = b.Path(), b.Generation(), uint8(sec)
					if f.policy.Registered != 0 {
						b.SetRegistered(sec, f.policy.Registered)
					}
					if f.policy.Hint != nil {
						b.SetHint(sec, *f.policy.Hint)
					}
				}
			}
			reply = ack
			if kt := f.policy.KernelTimes; kt != nil {
				k := *kt
				k.TaskID = id
				f.extra = append(f.extra, &k)
			}
		case *udp.LaunchNotify:
			task = m.TaskID
			f.launches++
		case *udp.LaunchBatch:
			task = m.TaskID
			for range m.Launches {
				f.launches++
				if f.policy.ForgetAt > 0 && f.launches == f.policy.ForgetAt && !f.forgot {
					clear(f.known)
					f.forgot = true
				}
			}
		case *udp.LaunchRequest:
			task = m.TaskID
			if f.asked == nil {
				f.asked = map[[2]uint32]bool{}
			}
			k := [2]uint32{m.TaskID, m.Seq}
			again := f.asked[k]
			f.asked[k] = true
			if !again {
				f.launches++
			}
			if !f.policy.NoGrant {
				g := &udp.Grant{TaskID: m.TaskID, Seq: m.Seq, Credit: f.policy.Credit, Gate: f.policy.Gate}
				if again && f.policy.FreshReasks {
					g.Gate = udp.Gate{SeenNS: uint64(monoNow())}
				}
				reply = g
			}
		case *udp.Heartbeat:
			task = m.TaskID
		case *udp.Flush:
			// Nothing to make durable here: what was sent has arrived.
			task = m.TaskID
			reply = &udp.Flushed{TaskID: m.TaskID, Seq: m.Seq}
		}
		if task != 0 && f.policy.ForgetAt > 0 && f.launches == f.policy.ForgetAt && !f.forgot {
			// Once, as a restarted daemon forgets once: the count stays
			// at ForgetAt until the next launch, and a heartbeat or run
			// end of the re-registered task may come first.
			clear(f.known)
			f.forgot = true
		}
		if f.policy.NoteAt > 0 && f.launches >= f.policy.NoteAt && !f.noted && f.policy.Board != nil {
			f.policy.Board.Note(f.section, 0, monoNow())
			f.noted = true
		}
		if h := f.policy.Hint; h != nil && f.policy.HintAt > 0 && f.launches >= f.policy.HintAt && !f.hinted {
			hh := *h
			hh.NextNs = uint64(monoNow() + int64(f.policy.HintNextIn))
			f.policy.Board.SetHint(f.section, hh)
			f.hintNext = int64(hh.NextNs)
			f.hinted = true
		}
		if task != 0 && !f.known[task] {
			reply = &udp.Error{Code: udp.CodeUnknownTask, TaskID: task, Message: "unknown task"}
		} else if task != 0 && f.policy.DemoteAt > 0 && f.launches == f.policy.DemoteAt {
			reply = &udp.State{TaskID: task, Role: udp.RoleWaiter, Phase: f.policy.Phase}
		}
		extra := f.extra
		f.extra = nil
		f.mu.Unlock()
		for _, r := range append([]udp.Message{reply}, extra...) {
			if r == nil {
				continue
			}
			b, err := udp.Append(nil, r)
			if err == nil {
				_, _ = f.conn.WriteToUDPAddrPort(b, from)
			}
		}
	}
}

// Received is a copy of everything received so far.
func (f *fakeSched) Received() []recvd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recvd(nil), f.msgs...)
}

// Bad lists datagrams that did not decode.
func (f *fakeSched) Bad() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bad...)
}

// TaskPID is the pid that registered taskID.
func (f *fakeSched) TaskPID(id uint32) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pids[id]
}

// taskLaunch is one launch the scheduler heard of (notify or request).
type taskLaunch struct {
	Seq      uint32
	KernelID uint64
	Request  bool
	Asks     int // LaunchRequests for this seq (a stale grant's launch asks again)
}

// launchesByTask groups LaunchNotify, LaunchBatch and LaunchRequest per task
// ID, in seq order; a request for a seq asked before counts as one more ask
// of that launch.
func launchesByTask(msgs []recvd) map[uint32][]taskLaunch {
	out := map[uint32][]taskLaunch{}
	asked := map[[2]uint32]int{} // task, seq → index in out[task]
	for _, r := range msgs {
		switch m := r.Msg.(type) {
		case *udp.LaunchNotify:
			out[m.TaskID] = append(out[m.TaskID], taskLaunch{Seq: m.Seq, KernelID: m.KernelID})
		case *udp.LaunchBatch:
			for i, l := range m.Launches {
				out[m.TaskID] = append(out[m.TaskID], taskLaunch{Seq: m.Seq + uint32(i), KernelID: l.KernelID})
			}
		case *udp.LaunchRequest:
			k := [2]uint32{m.TaskID, m.Seq}
			if i, ok := asked[k]; ok {
				out[m.TaskID][i].Asks++
				continue
			}
			asked[k] = len(out[m.TaskID])
			out[m.TaskID] = append(out[m.TaskID], taskLaunch{Seq: m.Seq, KernelID: m.KernelID, Request: true, Asks: 1})
		}
	}
	for _, ls := range out {
		sort.Slice(ls, func(i, j int) bool { return ls[i].Seq < ls[j].Seq })
	}
	return out
}

// ofType returns the received messages of type T.
func ofType[T any](msgs []recvd) []T {
	var out []T
	for _, r := range msgs {
		if m, ok := r.Msg.(T); ok {
			out = append(out, m)
		}
	}
	return out
}

// launcherUnit is one schedulable unit hook-launcher reports: a kernel or a
// graph launch, with the pid that launched it.
type launcherUnit struct {
	Pid int
	ID  uint64
	Txt string
}

// parseLauncher reads hook-launcher's stdout and computes each unit's kernel
// ID with package kernelid (independently of the C code under test):
//
//	<pid> K <name> gx gy gz bx by bz
//	<pid> G <name> gx … bz;<name> gx … bz
func parseLauncher(t testing.TB, stdout string) []launcherUnit {
	t.Helper()
	var out []launcherUnit
	kernel := func(s string) uint64 {
		f := strings.Fields(s)
		if len(f) != 7 {
			t.Fatalf("launcher: bad kernel %q", s)
		}
		var d [6]uint32
		for i := range d {
			v, err := strconv.ParseUint(f[1+i], 10, 32)
			if err != nil {
				t.Fatalf("launcher: bad dims %q", s)
			}
			d[i] = uint32(v)
		}
		return kernelid.ID(f[0], [3]uint32{d[0], d[1], d[2]}, [3]uint32{d[3], d[4], d[5]})
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		pidS, rest, _ := strings.Cut(sc.Text(), " ")
		kind, body, _ := strings.Cut(rest, " ")
		pid, err := strconv.Atoi(pidS)
		if err != nil {
			t.Fatalf("launcher: bad line %q", sc.Text())
		}
		switch kind {
		case "K":
			out = append(out, launcherUnit{pid, kernel(body), body})
		case "G":
			var ids []uint64
			for _, k := range strings.Split(body, ";") {
				ids = append(ids, kernel(k))
			}
			out = append(out, launcherUnit{pid, kernelid.GraphID(ids), body})
		default:
			t.Fatalf("launcher: bad line %q", sc.Text())
		}
	}
	return out
}

// hookEnv is simgpuEnv plus the hook preloaded and pointed at sched.
func hookEnv(t testing.TB, shm, sched string, extra ...string) []string {
	t.Helper()
	lib := requireBins(t, "libfikit_hook.so")[0]
	// A sanitizer's runtime must be loaded before the instrumented hook
	// (make test-asan / test-tsan set it; docs/operations.md "Sanitizers").
	if rt := os.Getenv("FIKIT_TEST_PRELOAD"); rt != "" {
		lib = rt + " " + lib
	}
	env := simgpuEnv(t, shm, "LD_PRELOAD="+lib, "FIKIT_SCHEDULER="+sched)
	return append(env, extra...)
}

// kernelsPTX is the launcher's test module.
func kernelsPTX(t testing.TB) string {
	return filepath.Join(repoRoot(t), "hookclient", "test", "data", "kernels.ptx")
}

// waitFor polls cond every 5 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// profiledKernel accumulates, for one kernel ID, what the hook measured
// and what really happened (the trace; simgpu's timeline).
type profiledKernel struct {
	name             string
	first            bool // the run's first kernel
	n, gapN          int
	measDur, trDur   float64 // sums
	measGap, realGap float64
}

// profileReplay replays a trace under the hook in the profiling phase and
// returns each run's records (none for a run the hook could not measure
// whole), checking the protocol's order: KernelInfo before a kernel's first
// record, a run's records before its RunEnd. timeline: simgpu writes one.
func profileReplay(t *testing.T, name string, runs int, timeline string) [][]udp.Record {
	t.Helper()
	replay := requireBins(t, "fikit-replay")[0]
	tr := loadTrace(t, sharedTrace(t, name))
	// T is the runs profiled here: the hook keeps a run whose stalls may
	// move a gap's mean over T runs by up to 2 µs, so told the default
	// 100 it kept a run that moved this test's 11-run mean by 13 µs.
	sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseProfiling, ProfileRuns: uint32(runs)})
	extra := []string{fmt.Sprintf("FIKIT_SIMGPU_LAUNCH_US=%g", replayLatency/1000.0), "FIKIT_CONNECT_TIMEOUT_MS=3000",
		"FIKIT_LOG=debug"}
	if timeline != "" {
		extra = append(extra, "FIKIT_SIMGPU_TIMELINE="+timeline)
	}
	// --post-ns: host time after each run's sync, as a service answering
	// its request. The hook reads a run's events during the next run's
	// sync (or 1 ms after its last launch, or at exit): the replayer, a Go program,
	// exits without running atexit handlers, so its last run goes unheard
	// (and the one before if the last sync was too short to read it).
	r := runCmd(t, replayTimeout, hookEnv(t, uniqueShm(t), sched.Addr(), extra...), replay, "--trace",
		sharedTrace(t, name), "--runs", fmt.Sprint(runs), "--cpu-ns", fmt.Sprint(replayCPUNs), "--post-ns", "3000000",
		"--json", "-q")
	if r.ExitCode != 0 {
		t.Fatalf("replay: %v", r)
	}
	waitFor(2*time.Second, func() bool { return len(ofType[*udp.RunEnd](sched.Received())) >= runs-2 })
	info := map[uint64]bool{}
	var records [][]udp.Record // per run
	cur := []udp.Record{}
	for _, m := range sched.Received() {
		switch m := m.Msg.(type) {
		case *udp.KernelInfo:
			info[m.KernelID] = true
		case *udp.Measurements:
			if m.Run != uint32(len(records)+1) {
				t.Fatalf("Measurements of run %d during run %d", m.Run, len(records)+1)
			}
			for _, rec := range m.Records {
				if !info[rec.KernelID] {
					t.Fatalf("record of kernel %x before its KernelInfo", rec.KernelID)
				}
			}
			cur = append(cur, m.Records...)
		case *udp.RunEnd:
			// A run not measured whole comes without records (the daemon
			// discards it); any other has all its kernels.
			if m.Run != uint32(len(records)+1) || int(m.Kernels) != len(tr.Kernels) ||
				len(cur) != 0 && len(cur) != len(tr.Kernels) {
				t.Fatalf("RunEnd %+v after %d records, trace has %d kernels", m, len(cur), len(tr.Kernels))
			}
			records = append(records, cur)
			cur = []udp.Record{}
		}
	}
	whole := 0
	for run, recs := range records {
		if len(recs) > 0 {
			whole++
		} else if !withheldRun(r.Stderr, run+1) {
			t.Errorf("run %d came without records, and the hook did not say it withheld them", run+1)
		}
		for i, rec := range recs {
			k := tr.Kernels[i]
			if id := kernelid.ID(kernelid.ReplayEntryName(k.Name), k.Grid, k.Block); rec.KernelID != id {
				t.Fatalf("run %d kernel %d: id %x, want %x (%s)", run+1, i, rec.KernelID, id, k.Name)
			}
			if last := i == len(recs)-1; last != (rec.Flags&udp.FlagGapSpansRunEnd != 0) {
				t.Errorf("run %d kernel %d: flags %v", run+1, i, rec.Flags)
			}
		}
	}
	// On a loaded host the hook withholds runs whose launch calls stalled
	// (measure.c); a third of them whole is plenty for the statistics.
	if len(records) < runs-2 || whole < runs/3 {
		t.Fatalf("%d runs, %d measured whole; want %d runs (all but the last two at least), %d whole", len(records), whole, runs, runs/3)
	}
	return records
}

// withheldRun reports whether the hook's debug log says it withheld run's
// records as unreliable (a stalled launch call, a kernel not measured).
func withheldRun(hookLog string, run int) bool {
	return strings.Contains(hookLog, fmt.Sprintf("run %d withheld", run))
}

// newBoard is a board in the test's directory whose heartbeat is kept fresh.
func newBoard(t testing.TB) *board.Board {
	t.Helper()
	b, err := board.Create(filepath.Join(t.TempDir(), "board"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := make(chan struct{})
	b.Heartbeat(monoNow())
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				mu.Lock()
				b.Heartbeat(monoNow())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		mu.Lock()
		b.Close()
		mu.Unlock()
	})
	return b
}

// launchAll runs the launcher with args and returns what it launched and
// task 1's launches as the fake scheduler heard them, every one.
func launchAll(t *testing.T, sched *fakeSched, env []string, launcher string, args ...string) ([]launcherUnit, []taskLaunch) {
	t.Helper()
	r := runCmd(t, hookTimeout, env, launcher, args...)
	if r.ExitCode != 0 {
		t.Fatalf("launcher: %v", r)
	}
	units := parseLauncher(t, r.Stdout)
	waitFor(2*time.Second, func() bool { return len(launchesByTask(sched.Received())[1]) >= len(units) })
	ls := launchesByTask(sched.Received())[1]
	if len(ls) != len(units) {
		t.Fatalf("%d launches heard, %d made\n%s", len(ls), len(units), r.Stderr)
	}
	return units, ls
}

// sanitized says whether the hook under test is a sanitizer's build (make
// test-asan / test-tsan preload the runtime): host timing is coarser there.
func sanitized() bool { return os.Getenv("FIKIT_TEST_PRELOAD") != "" }
