package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/simgpu/timeline"
	"github.com/fikit/fikit/store"
)

// Logf prints progress.
type Logf func(format string, args ...any)

// SimGPUModel is the GPU model name simgpu reports by default; profiles are
// stored under it.
const SimGPUModel = "fikit simgpu"

// Profile replays svc under the hook until the daemon has a complete
// profile for its task key (a few extra runs cover discarded ones).
func (e *Env) Profile(ctx context.Context, d *Daemon, svc Service, profileRuns int, logf Logf) error {
	svc.Hooked, svc.Scheduler = true, d.Addr()
	svc.Every = 0
	for attempt := 1; attempt <= 3; attempt++ {
		svc.Runs = profileRuns + 5
		p, err := e.Start(ctx, svc)
		if err != nil {
			return err
		}
		if _, err := p.Wait(); err != nil {
			return fmt.Errorf("profiling %s: %w", svc.Name, err)
		}
		prof, err := d.ProfileOf(svc.TaskKey)
		if err == nil && prof.Phase == profiler.PhaseSharing {
			logf("  %s profiled: %d kernels, %d runs (%d discarded)", svc.Name, len(prof.Kernels), prof.Runs, prof.DiscardedRuns)
			return nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		logf("  %s: profile not complete after attempt %d, continuing", svc.Name, attempt)
	}
	return fmt.Errorf("profiling %s: no complete profile after 3 attempts", svc.Name)
}

// PairResult is one mode of a high-/low-priority pair run together.
type PairResult struct {
	HP, LP *Result
	// LPRuns counts low-priority runs completed inside the high-priority
	// service's span; LPRate is per second of that span.
	LPRuns int
	LPRate float64
	// SpanNs is the high-priority service's span.
	SpanNs int64
	// HPPid and LPPid are the replaying processes (for the timeline).
	HPPid, LPPid int
}

// RunPair starts lp (closed loop, effectively endless), then runs hp to
// completion, then stops lp.
func (e *Env) RunPair(ctx context.Context, hp, lp Service) (*PairResult, error) {
	lp.Runs = 1_000_000
	lpProc, err := e.Start(ctx, lp)
	if err != nil {
		return nil, err
	}
	// Let the low-priority service get going (and register) first.
	deadline := time.Now().Add(10 * time.Second)
	for len(lpProc.Runs()) < 2 && time.Now().Before(deadline) {
		select {
		case <-lpProc.done:
			res := lpProc.result()
			return nil, fmt.Errorf("%s exited early: %s", lp.Name, res.Stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	hpProc, err := e.Start(ctx, hp)
	if err != nil {
		lpProc.Stop()
		return nil, err
	}
	hpRes, hpErr := hpProc.Wait()
	lpRes := lpProc.Stop()
	if hpErr != nil {
		return nil, hpErr
	}
	// The replayers name themselves in their summaries (a hooked one runs
	// under `fikit run`, so its pid is not the started command's).
	hpPid, lpPid := hpRes.PID, lpRes.PID
	if hpPid == 0 || lpPid == 0 {
		return nil, fmt.Errorf("%s or %s printed no summary (pids %d, %d)", hp.Name, lp.Name, hpPid, lpPid)
	}
	from, to := hpRes.Span()
	n := lpRes.RunsWithin(from, to)
	r := &PairResult{HP: hpRes, LP: lpRes, LPRuns: n, SpanNs: to - from, HPPid: hpPid, LPPid: lpPid}
	if to > from {
		r.LPRate = float64(n) / (float64(to-from) / 1e9)
	}
	return r, nil
}

// FillShare is the share of the high-priority service's idle device time
// (within its span) during which the low-priority service's kernels ran.
func FillShare(recs []timeline.Record, hpPid, lpPid int, from, to int64) float64 {
	span := to - from
	idle := span - timeline.BusyNs(recs, hpPid, from, to)
	if idle <= 0 {
		return 0
	}
	return float64(timeline.BusyNs(recs, lpPid, from, to)) / float64(idle)
}

// Discard is a Logf that prints nothing.
func Discard(string, ...any) {}

// Printer returns a Logf writing lines to w.
func Printer(w io.Writer) Logf {
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}
