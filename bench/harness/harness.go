// Package harness runs fikit end to end on the simulated GPU: an in-process
// daemon, and trace replays (hooked through `fikit run`, or not) that share
// one private simgpu device — or, with Options.GPU, the machine's real GPU.
// `fikit demo` and `fikit bench` are built on it.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure an Env.
type Options struct {
	// Bin holds fikit, fikit-replay, libfikit_hook.so and simgpu/libcuda.so.1.
	Bin string
	// Dir is a scratch directory the Env owns.
	Dir string
	// Device is the simulated GPU: a preset and single parameters
	// overriding it (the zero value: simgpu's default preset).
	Device Device
	// Timeline records every executed kernel segment (simgpu ground truth).
	Timeline bool
	// GPU replays on the CUDA driver the loader finds (a real GPU) instead
	// of simgpu: no device model, no timeline, so no ground truth.
	GPU bool
}

// Env is one private simulated GPU and the processes using it.
type Env struct {
	opt      Options
	shm      string
	timeline string
}

var envSeq atomic.Uint64

// New checks the binaries and prepares a private simgpu device.
func New(opt Options) (*Env, error) {
	need := []string{"fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1"}
	if opt.GPU {
		need, opt.Timeline = need[:3], false
	} else if _, err := opt.Device.Config(); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	for _, f := range need {
		if _, err := os.Stat(filepath.Join(opt.Bin, f)); err != nil {
			return nil, fmt.Errorf("harness: %w (run make first)", err)
		}
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	e := &Env{opt: opt, shm: fmt.Sprintf("/fikit-h%d-%d", os.Getpid(), envSeq.Add(1))}
	if opt.Timeline {
		e.timeline = filepath.Join(opt.Dir, "timeline.jsonl")
		os.Remove(e.timeline)
	}
	return e, nil
}

// Close removes the simulated device's shared memory.
func (e *Env) Close() error {
	if e.opt.GPU {
		return nil
	}
	err := os.Remove(filepath.Join("/dev/shm", strings.TrimPrefix(e.shm, "/")))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return err
}

// Device is the simulated GPU this Env's processes share.
func (e *Env) Device() Device { return e.opt.Device }

// TimelinePath is the simgpu timeline file ("" when not recorded).
func (e *Env) TimelinePath() string { return e.timeline }

// Bin is the directory of the binaries.
func (e *Env) Bin() string { return e.opt.Bin }

// environ is the environment of a process on this Env's device.
func (e *Env) environ() []string {
	env := os.Environ()
	drop := func(prefix string) {
		out := env[:0]
		for _, kv := range env {
			if !strings.HasPrefix(kv, prefix) {
				out = append(out, kv)
			}
		}
		env = out
	}
	drop("FIKIT_")
	if e.opt.GPU {
		return append(env, "FIKIT_LOG=warn")
	}
	drop("LD_LIBRARY_PATH=")
	env = append(env,
		"LD_LIBRARY_PATH="+filepath.Join(e.opt.Bin, "simgpu"),
		"FIKIT_SIMGPU_SHM="+e.shm,
		"FIKIT_LOG=warn",
	)
	env = append(env, e.opt.Device.environ()...)
	if e.timeline != "" {
		env = append(env, "FIKIT_SIMGPU_TIMELINE="+e.timeline)
	}
	return env
}

// Service is one replayed inference service.
type Service struct {
	Name    string // for messages
	Trace   string // file path or embedded trace name
	Runs    int
	Warmup  int
	CPUNs   int64         // host time before each launch; < 0: the trace's own
	PreNs   int64         // host pre-processing per run (part of the JCT)
	PostNs  int64         // host post-processing per run (not part of the JCT)
	Every   time.Duration // open-loop arrival interval (0: closed loop)
	Hooked  bool          // run under `fikit run` with the hook
	Prio    int           // with Hooked: 0 (highest) … 9
	TaskKey string        // with Hooked
	// Scheduler is the daemon's UDP address (with Hooked).
	Scheduler string
	// Extra environment (e.g. FIKIT_DISABLE=1).
	Env []string
	// Args are extra fikit-replay arguments (e.g. --poisson RATE, --burst N).
	Args []string
}

// Proc is a running replay.
type Proc struct {
	svc    Service
	cmd    *exec.Cmd
	mu     sync.Mutex
	runs   []Run
	pid    int // the replayer's, from its summary line
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// Start launches a replay of svc on this Env's device.
func (e *Env) Start(ctx context.Context, svc Service) (*Proc, error) {
	name, args := ReplayCommand(e.opt.Bin, svc)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(e.environ(), svc.Env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	p := &Proc{svc: svc, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", svc.Name, err)
	}
	go p.read(out)
	return p, nil
}

func (p *Proc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"summary"`)) {
			// Its figures are recomputed from the runs; its pid is the
			// replayer's own (under `fikit run`, not the wrapper's).
			var s struct{ PID int }
			if json.Unmarshal(line, &s) == nil {
				p.mu.Lock()
				p.pid = s.PID
				p.mu.Unlock()
			}
			continue
		}
		if r, ok, err := ParseRun(line); ok && err == nil {
			p.mu.Lock()
			p.runs = append(p.runs, r)
			p.mu.Unlock()
		}
	}
	p.err = p.cmd.Wait()
	close(p.done)
}

// Wait waits for the replay to end.
func (p *Proc) Wait() (*Result, error) {
	<-p.done
	res := p.result()
	if p.err != nil {
		return res, fmt.Errorf("%s: %w: %s", p.svc.Name, p.err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}

// Stop ends a replay that is still running (SIGTERM) and returns what it did.
func (p *Proc) Stop() *Result {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	return p.result()
}

// Runs returns the runs completed so far.
func (p *Proc) Runs() []Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Run(nil), p.runs...)
}

func (p *Proc) result() *Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &Result{Runs: append([]Run(nil), p.runs...), Stderr: p.stderr.String(), PID: p.pid}
}

// Result is what a replay did.
type Result struct {
	Runs   []Run
	Stderr string
	// PID is the replaying process's (the simgpu timeline's pid), 0 if it
	// printed no summary.
	PID int
}

// JCTs returns the runs' JCTs in ns.
func (r *Result) JCTs() []int64 { return JCTs(r.Runs) }

// Blocked returns the runs' blocked time in ns (runs without it are left out).
func (r *Result) Blocked() []int64 {
	var out []int64
	for _, x := range r.Runs {
		if x.BlockedNs != nil {
			out = append(out, *x.BlockedNs)
		}
	}
	return out
}

// Span is the time from the first run's start to the last run's end.
func (r *Result) Span() (start, end int64) {
	if len(r.Runs) == 0 {
		return 0, 0
	}
	start = r.Runs[0].StartNs
	for _, x := range r.Runs {
		end = max(end, x.StartNs+x.JCTNs)
	}
	return start, end
}

// RunsWithin counts runs that started and ended inside [from, to].
func (r *Result) RunsWithin(from, to int64) int {
	n := 0
	for _, x := range r.Runs {
		if x.StartNs >= from && x.StartNs+x.JCTNs <= to {
			n++
		}
	}
	return n
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
