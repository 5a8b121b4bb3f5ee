package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fikit/fikit/bench/chrometrace"
	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/simgpu/timeline"
)

// Traces kept per co-location pair. The JSON spans at most pairTraceMax
// around the middle of the pair's run: a trace viewer opens it at once, and
// the report folder stays small (several MB per 100 ms of two busy services).
// The PNG shows two high-priority runs from the middle of that span.
const (
	pairTraceMax = 200 * time.Millisecond
	pairPNGSpan  = 20 * time.Millisecond // without runs in the decision record
	pairPNGPad   = 500 * time.Microsecond
)

// writePairTrace writes the trace of one co-location pair: dir/name.trace.json
// (Chrome trace-event JSON of the simgpu timeline within [from, to], with the
// daemon's decisions when decisionsPath is not "") and dir/name.png (a short
// span of it). from and to are CLOCK_MONOTONIC ns, e.g. the high-priority
// service's span (harness.Result.Span).
func writePairTrace(dir, name, timelinePath, decisionsPath string, from, to int64) error {
	if to <= from {
		return fmt.Errorf("trace %s: empty span", name)
	}
	recs, err := timeline.Read(timelinePath)
	if err != nil {
		return fmt.Errorf("trace %s: %w", name, err)
	}
	var decs []decisions.Record
	if decisionsPath != "" {
		if decs, err = decisions.Read(decisionsPath); err != nil {
			return fmt.Errorf("trace %s: %w", name, err)
		}
	}
	if span := to - from; span > int64(pairTraceMax) {
		mid := from + span/2
		from, to = mid-int64(pairTraceMax)/2, mid+int64(pairTraceMax)/2
	}
	base := filepath.Join(dir, traceFileName(name))
	f, err := os.Create(base + ".trace.json")
	if err != nil {
		return fmt.Errorf("trace %s: %w", name, err)
	}
	opt := chrometrace.Options{From: from, To: to, Title: name + " under fikit"}
	if err := chrometrace.Write(f, recs, decs, opt); err != nil {
		f.Close()
		return fmt.Errorf("trace %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace %s: %w", name, err)
	}
	pf, pt := pairPNGSpanOf(decs, from, to)
	if err := chrometrace.PNG(base+".png", recs, decs, pf, pt, opt); err != nil {
		return fmt.Errorf("trace %s: %w", name, err)
	}
	return nil
}

// pairPNGSpanOf is two consecutive high-priority runs from the middle of
// [from, to] (padded), or the middle pairPNGSpan without recorded runs.
func pairPNGSpanOf(decs []decisions.Record, from, to int64) (int64, int64) {
	var runs []chrometrace.Run
	for _, r := range chrometrace.Runs(decs, "") {
		if r.Start >= from && r.End <= to {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		mid := from + (to-from)/2
		return max(from, mid-int64(pairPNGSpan)/2), min(to, mid+int64(pairPNGSpan)/2)
	}
	i := len(runs) / 2
	if i+1 >= len(runs) && i > 0 {
		i--
	}
	end := runs[min(i+1, len(runs)-1)].End
	return max(from, runs[i].Start-int64(pairPNGPad)), min(to, end+int64(pairPNGPad))
}

// shortKey is a task key without its "bench/…/" prefix.
func shortKey(key string) string { return key[strings.LastIndex(key, "/")+1:] }

// traceFileName turns a pair's name ("resnet50 (H) + bert (L)") into a file
// name.
func traceFileName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '+':
			return r
		}
		return '_'
	}, name)
}
