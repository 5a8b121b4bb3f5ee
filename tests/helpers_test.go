package tests

// Shared helpers of the end-to-end tests: where the built binaries are, a
// private simulated GPU per test, temporary files, and running commands with
// timeouts. Keep them generic; test files of every component use them.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/simgpu/timeline"
)

// repoRoot is the directory holding go.mod, found upwards from the working
// directory (go test runs in tests/).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// binDir is $FIKIT_BIN (set by make) or <repo>/bin.
func binDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("FIKIT_BIN"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return filepath.Join(repoRoot(t), "bin")
}

// requireBins returns the paths of the named build outputs (relative to the
// bin directory, e.g. "fikit-replay", "simgpu/libcuda.so.1"), in order. A
// missing one fails the test under make (FIKIT_BIN set) and skips it when the
// tests run on their own before a build.
func requireBins(t testing.TB, names ...string) []string {
	t.Helper()
	dir := binDir(t)
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
		if _, err := os.Stat(paths[i]); err != nil {
			if os.Getenv("FIKIT_BIN") != "" {
				t.Fatalf("missing build output %s (FIKIT_BIN=%s): %v", n, dir, err)
			}
			t.Skipf("missing build output %s in %s: run `make` first (or set FIKIT_BIN)", n, dir)
		}
	}
	return paths
}

var shmCounter atomic.Int64

// uniqueShm returns a simgpu shared-memory name (FIKIT_SIMGPU_SHM) that no
// other test or test process uses, and removes the segment when the test ends.
func uniqueShm(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("/fikit-test-%d-%d", os.Getpid(), shmCounter.Add(1))
	t.Cleanup(func() { _ = os.Remove("/dev/shm" + name) })
	return name
}

// simgpuEnv is the environment for a process on a private simulated GPU:
// the current environment without FIKIT_SIMGPU_* and LD_LIBRARY_PATH, then
// LD_LIBRARY_PATH=<bin>/simgpu, FIKIT_SIMGPU_SHM=shm, then extra ("K=V"),
// which may override any of them. Use the same shm for processes that must
// share one device.
func simgpuEnv(t testing.TB, shm string, extra ...string) []string {
	t.Helper()
	requireBins(t, "simgpu/libcuda.so.1")
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FIKIT_SIMGPU_") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LD_LIBRARY_PATH="+filepath.Join(binDir(t), "simgpu"), "FIKIT_SIMGPU_SHM="+shm)
	return append(env, extra...)
}

// writeTemp writes content to a new file name in the test's temporary
// directory and returns its path.
func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cmdResult is how a command ended.
type cmdResult struct {
	Stdout, Stderr string
	ExitCode       int  // -1 when killed by a signal or not started
	TimedOut       bool // killed by the helper's timeout
	Err            error
	Elapsed        time.Duration
}

func (r cmdResult) String() string {
	return fmt.Sprintf("exit %d (timed out %v, err %v) after %v\nstdout:\n%s\nstderr:\n%s",
		r.ExitCode, r.TimedOut, r.Err, r.Elapsed.Round(time.Millisecond), tail(r.Stdout, 2000), tail(r.Stderr, 2000))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// proc is a started command. Its process group is killed when the test ends
// if it is still running.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	stdout  syncBuffer
	stderr  syncBuffer
	start   time.Time
	done    chan struct{}
	waitErr error
}

// startCmd starts name (a path) with args and env (nil: the current
// environment) in its own process group.
func startCmd(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// Pid is the process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

// Kill sends SIGKILL to the process (only, not its group) and waits for it.
func (p *proc) Kill() cmdResult {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return p.result(false)
}

// Stdout is what the process has written to standard output so far.
func (p *proc) Stdout() string { return p.stdout.String() }

// waitOutput waits until the process's standard output contains substr at
// least n times; false if it exits or timeout passes first.
func (p *proc) waitOutput(substr string, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Count(p.stdout.String(), substr) >= n {
			return true
		}
		select {
		case <-p.done:
			return strings.Count(p.stdout.String(), substr) >= n
		case <-time.After(2 * time.Millisecond):
		}
	}
	return false
}

// Wait waits for the process to exit; after timeout it kills its process
// group and reports TimedOut.
func (p *proc) Wait(timeout time.Duration) cmdResult {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.result(false)
	case <-timer.C:
		p.signal(syscall.SIGKILL)
		<-p.done
		return p.result(true)
	}
}

func (p *proc) result(timedOut bool) cmdResult {
	r := cmdResult{Stdout: p.stdout.String(), Stderr: p.stderr.String(), ExitCode: -1,
		TimedOut: timedOut, Err: p.waitErr, Elapsed: time.Since(p.start)}
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
		r.ExitCode = 0
	case errors.As(p.waitErr, &ee):
		r.ExitCode = ee.ExitCode()
	}
	return r
}

// runCmd runs name with args and env (nil: the current environment) to
// completion, killing it after timeout.
func runCmd(t testing.TB, timeout time.Duration, env []string, name string, args ...string) cmdResult {
	t.Helper()
	return startCmd(t, env, name, args...).Wait(timeout)
}

// machineLoad reports the 1-minute load average and the CPU count, and
// whether the machine is overloaded (load ≥ CPUs), for timing tests that
// want to tell a real failure from one measured on a saturated machine.
func machineLoad() (load float64, cpus int, overloaded bool) {
	cpus = runtime.NumCPU()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, cpus, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, cpus, false
	}
	load, err = strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, cpus, false
	}
	return load, cpus, load >= float64(cpus)
}

// readTimeline reads a simgpu timeline file (simgpu/timeline, the one
// reader): the services' kernels, the hook's own probe left out (its
// calibrations are not a service's work; readTimelineAll keeps them).
func readTimeline(t testing.TB, path string) []timeline.Record {
	t.Helper()
	recs := readTimelineAll(t, path)
	out := recs[:0]
	for _, r := range recs {
		if !r.IsHookProbe() {
			out = append(out, r)
		}
	}
	return out
}

// readTimelineAll reads a simgpu timeline file, every segment.
func readTimelineAll(t testing.TB, path string) []timeline.Record {
	t.Helper()
	recs, err := timeline.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
