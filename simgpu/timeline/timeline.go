package timeline

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/fikit/fikit/internal/stats"
)

// ErrFormat is wrapped by every error about a malformed timeline line.
var ErrFormat = errors.New("timeline: malformed record")

// Record is one executed kernel segment.
type Record struct {
	PID    int       `json:"pid"`
	Dev    int       `json:"dev"`
	Ctx    int       `json:"ctx"`
	Stream uint32    `json:"stream"`
	Seq    uint64    `json:"seq"`
	Name   string    `json:"name"`
	Grid   [3]uint32 `json:"grid"`
	Block  [3]uint32 `json:"block"`
	// StartNs and EndNs bound the segment (CLOCK_MONOTONIC ns).
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// ArriveNs is when the kernel arrived on the device (enqueue + launch latency).
	ArriveNs int64 `json:"arrive_ns"`
	// BlockedNs is the time since the kernel's previous segment (or its
	// arrival) that it was ready while the device ran another context's
	// kernel or switched contexts. Σ over a kernel's segments: its interference.
	BlockedNs int64  `json:"blocked_ns"`
	Seg       uint32 `json:"seg"`     // 0 for a kernel's first segment
	Last      bool   `json:"last"`    // the kernel completed with this segment
	Dropped   bool   `json:"dropped"` // its context went away while it ran
}

// UnmarshalJSON accepts "last" as a JSON boolean or as 0/1.
func (r *Record) UnmarshalJSON(b []byte) error {
	type plain Record
	var aux struct {
		plain
		Last json.RawMessage `json:"last"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*r = Record(aux.plain)
	switch string(aux.Last) {
	case "true", "1":
		r.Last = true
	case "false", "0", "":
	default:
		return fmt.Errorf("%w: last is %s", ErrFormat, aux.Last)
	}
	if r.EndNs < r.StartNs || r.BlockedNs < 0 {
		return fmt.Errorf("%w: end %d before start %d, or blocked %d < 0", ErrFormat, r.EndNs, r.StartNs, r.BlockedNs)
	}
	return nil
}

// ParseLines reads JSON lines from rd, skipping blank ones, and parses each
// with parse. An error names the line (name:N); parse's errors should wrap
// the format's sentinel, and a failed read (a line over maxLine bytes
// included) is wrapped with formatErr. The timeline and the daemon's
// decision record (daemon/decisions) are both read with it.
func ParseLines[T any](rd io.Reader, name string, maxLine int, formatErr error, parse func(line []byte) (T, error)) ([]T, error) {
	out, _, err := parseLines(rd, name, maxLine, formatErr, parse, false)
	return out, err
}

// Torn is the unterminated last line of a file that is still being
// written (the writer had not finished it when it was read): Line is its
// number, Bytes its length.
type Torn struct{ Line, Bytes int }

// ParseLinesLive is ParseLines for a file that may still be being written:
// an unterminated last line that does not parse is skipped and described
// by torn (nil when there was none). Any other bad line is an error.
func ParseLinesLive[T any](rd io.Reader, name string, maxLine int, formatErr error, parse func(line []byte) (T, error)) (out []T, torn *Torn, err error) {
	return parseLines(rd, name, maxLine, formatErr, parse, true)
}

func parseLines[T any](rd io.Reader, name string, maxLine int, formatErr error, parse func(line []byte) (T, error), live bool) ([]T, *Torn, error) {
	var out []T
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	unterminated := false // the token just scanned ended at EOF without a newline
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if tok != nil {
			unterminated = atEOF && bytes.IndexByte(data[:adv], '\n') < 0
		}
		return adv, tok, err
	})
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		v, err := parse(line)
		if err != nil {
			if live && unterminated {
				return out, &Torn{Line: n, Bytes: len(raw)}, nil
			}
			return nil, nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", formatErr, name, err)
	}
	return out, nil, nil
}

// Parse reads timeline lines from rd (blank lines are skipped) and returns
// the records sorted by start time; name labels errors.
func Parse(rd io.Reader, name string) ([]Record, error) {
	recs, _, err := parse(rd, name, false)
	return recs, err
}

// ParseLive is Parse for a timeline simgpu may still be writing: a torn
// last line is skipped and described (ParseLinesLive).
func ParseLive(rd io.Reader, name string) ([]Record, *Torn, error) {
	return parse(rd, name, true)
}

func parse(rd io.Reader, name string, live bool) ([]Record, *Torn, error) {
	recs, torn, err := parseLines(rd, name, 16<<20, ErrFormat, parseRecord, live)
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].StartNs < recs[j].StartNs })
	return recs, torn, nil
}

func parseRecord(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		if !errors.Is(err, ErrFormat) {
			err = fmt.Errorf("%w: %w", ErrFormat, err)
		}
		return r, err
	}
	return r, nil
}

// Read reads a timeline file (Parse).
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// ReadLive reads a timeline file that simgpu may still be writing
// (ParseLive).
func ReadLive(path string) ([]Record, *Torn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("timeline: %w", err)
	}
	defer f.Close()
	return ParseLive(f, path)
}

// HookProbe is the name of the hook's own kernel (hookclient/probe.c: its
// switch calibration, the pre-switch's warm-up): not a service's work. The
// figures below leave it out of a process's busy time and runs.
const HookProbe = "fikit_hook_probe"

// IsHookProbe reports whether r is a segment of the hook's own kernel.
func (r *Record) IsHookProbe() bool { return r.Name == HookProbe }

// BusyNs sums the device time of pid's segments within [from, to]
// (pid < 0: every process's), the hook's probe left out.
func BusyNs(recs []Record, pid int, from, to int64) int64 {
	var busy int64
	for _, r := range recs {
		if pid >= 0 && r.PID != pid || r.IsHookProbe() {
			continue
		}
		if a, b := max(r.StartNs, from), min(r.EndNs, to); b > a {
			busy += b - a
		}
	}
	return busy
}

// ArrivedBusyNs is the GPU time of pid's kernels that arrived (were
// launched) before to, wherever they ran: what a scheduler that accounts
// a launch when it is made has accounted by then.
func ArrivedBusyNs(recs []Record, pid int, to int64) int64 {
	var busy int64
	for _, r := range recs {
		if r.PID != pid || r.IsHookProbe() || r.ArriveNs >= to {
			continue
		}
		busy += r.EndNs - r.StartNs
	}
	return busy
}

// LongestGap is the longest stretch of [from, to] in which no segment of
// pid ran on the device, and where it began: how long a service was kept
// off the GPU (the hook's probe left out).
func LongestGap(recs []Record, pid int, from, to int64) (gap, at int64) {
	var segs []Span
	for _, r := range recs {
		if r.PID == pid && !r.IsHookProbe() && r.EndNs > from && r.StartNs < to {
			segs = append(segs, Span{max(r.StartNs, from), min(r.EndNs, to)})
		}
	}
	slices.SortFunc(segs, func(a, b Span) int { return cmp.Compare(a.From, b.From) })
	cur := from // the end of what ran so far
	for _, s := range append(segs, Span{to, to}) {
		if s.From-cur > gap {
			gap, at = s.From-cur, cur
		}
		cur = max(cur, s.To)
	}
	return gap, at
}

// Span is a half-open interval of CLOCK_MONOTONIC time, e.g. one run.
type Span struct{ From, To int64 }

// BlockedPerSpan returns, for each span, the blocked time of pid's kernels
// that arrived within it: the GPU interference of a run, when the spans are
// a process's runs (a run's kernels arrive between its start and its end).
func BlockedPerSpan(recs []Record, pid int, spans []Span) []int64 {
	out := make([]int64, len(spans))
	sorted := sort.SliceIsSorted(spans, func(i, j int) bool { return spans[i].From < spans[j].From })
	for _, r := range recs {
		if r.PID != pid || r.BlockedNs == 0 || r.IsHookProbe() {
			continue
		}
		if sorted {
			i := sort.Search(len(spans), func(i int) bool { return spans[i].From > r.ArriveNs }) - 1
			if i >= 0 && r.ArriveNs < spans[i].To {
				out[i] += r.BlockedNs
			}
			continue
		}
		for i, s := range spans {
			if r.ArriveNs >= s.From && r.ArriveNs < s.To {
				out[i] += r.BlockedNs
			}
		}
	}
	return out
}

// Pids lists the processes in the timeline with their segment counts.
func Pids(recs []Record) map[int]int {
	out := map[int]int{}
	for _, r := range recs {
		out[r.PID]++
	}
	return out
}

// InterferencePct turns the blocked time of each run into the figure users
// read, HP GPU interference: blocked / the service's JCT alone, in percent,
// at the 50th and 99th percentiles (nearest rank) over runs.
func InterferencePct(blocked []int64, aloneNs int64) (p50, p99 float64) {
	if len(blocked) == 0 || aloneNs <= 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(blocked))
	pct := func(v int64) float64 { return 100 * float64(v) / float64(aloneNs) }
	return pct(stats.QuantileSorted(s, 0.5)), pct(stats.QuantileSorted(s, 0.99))
}
