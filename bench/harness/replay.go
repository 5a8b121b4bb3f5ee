package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// What a replay is on the command line and what it prints, shared by the
// harness and the end-to-end tests (tests/), which run the same replays.

// Run is one replayed run as fikit-replay reports it.
type Run struct {
	Run     int   `json:"run"`
	StartNs int64 `json:"start_ns"`
	JCTNs   int64 `json:"jct_ns"`
	Kernels int   `json:"kernels"`
	// WaitNs is how long an open-loop run waited after its arrival before
	// it started (nil for a closed loop).
	WaitNs *int64 `json:"wait_ns,omitempty"`
	// BlockedNs is the run's GPU interference, ground truth from simgpu:
	// the time its kernels were ready but waited for other contexts' kernels
	// or context switches (nil where the device cannot tell).
	BlockedNs *int64 `json:"blocked_ns,omitempty"`
}

// ReplayCommand is the command that replays svc with the binaries in bin:
// fikit-replay, under `fikit run` when svc.Hooked.
func ReplayCommand(bin string, svc Service) (name string, args []string) {
	args = []string{"--trace", svc.Trace, "--runs", strconv.Itoa(svc.Runs), "--json", "--quiet"}
	if svc.CPUNs >= 0 {
		args = append(args, "--cpu-ns", strconv.FormatInt(svc.CPUNs, 10))
	}
	if svc.Warmup > 0 {
		args = append(args, "--warmup", strconv.Itoa(svc.Warmup))
	}
	if svc.PreNs > 0 {
		args = append(args, "--pre-ns", strconv.FormatInt(svc.PreNs, 10))
	}
	if svc.PostNs > 0 {
		args = append(args, "--post-ns", strconv.FormatInt(svc.PostNs, 10))
	}
	if svc.Every > 0 {
		args = append(args, "--interval", svc.Every.String())
	}
	args = append(args, svc.Args...)
	replay := filepath.Join(bin, "fikit-replay")
	if !svc.Hooked {
		return replay, args
	}
	run := []string{"run", "--priority", strconv.Itoa(svc.Prio), "--scheduler", svc.Scheduler}
	if svc.TaskKey != "" {
		run = append(run, "--task-key", svc.TaskKey)
	}
	run = append(run, "--", replay)
	return filepath.Join(bin, "fikit"), append(run, args...)
}

// ParseRun reads one line of fikit-replay --json: ok when it is a run's.
func ParseRun(line []byte) (r Run, ok bool, err error) {
	if !bytes.HasPrefix(line, []byte(`{"run"`)) {
		return r, false, nil
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, true, fmt.Errorf("replay output %q: %w", line, err)
	}
	return r, true, nil
}

// ParseRuns reads the runs in fikit-replay --json's output.
func ParseRuns(out string) ([]Run, error) {
	var runs []Run
	for line := range strings.SplitSeq(out, "\n") {
		r, ok, err := ParseRun([]byte(line))
		if err != nil {
			return runs, err
		}
		if ok {
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// JCTs returns runs' JCTs in ns.
func JCTs(runs []Run) []int64 {
	out := make([]int64, len(runs))
	for i, r := range runs {
		out[i] = r.JCTNs
	}
	return out
}
