package chrometrace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/simgpu/timeline"
)

// reservedColors are the colour names catapult's trace viewer knows
// (tracing/base/color_scheme.html).
var reservedColors = map[string]bool{
	"thread_state_uninterruptible": true, "thread_state_iowait": true, "thread_state_running": true,
	"thread_state_runnable": true, "thread_state_sleeping": true, "thread_state_unknown": true,
	"background_memory_dump": true, "light_memory_dump": true, "detailed_memory_dump": true,
	"vsync_highlight_color": true, "generic_work": true, "good": true, "bad": true, "terrible": true,
	"black": true, "grey": true, "white": true, "yellow": true, "olive": true, "rail_response": true,
	"rail_animation": true, "rail_idle": true, "rail_load": true, "startup": true,
	"heap_dump_stack_frame": true, "heap_dump_object_type": true, "heap_dump_child_node_arrow": true,
	"cq_build_running": true, "cq_build_passed": true, "cq_build_failed": true,
	"cq_build_abandoned": true, "cq_build_attempt_runnig": true, "cq_build_attempt_passed": true,
	"cq_build_attempt_failed": true,
}

// validateTrace checks data against the Trace Event Format's JSON Object
// Format as Perfetto and chrome://tracing read it, strictly: known keys
// only, the keys each phase requires, numbers where numbers go, and a name
// for every process and track that has slices. It returns the events.
func validateTrace(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("not a JSON object: %v", err)
	}
	for k := range top {
		switch k {
		case "traceEvents", "displayTimeUnit", "otherData", "systemTraceEvents", "stackFrames", "samples":
		default:
			t.Errorf("unknown top-level key %q", k)
		}
	}
	if u, ok := top["displayTimeUnit"]; ok && string(u) != `"ns"` && string(u) != `"ms"` {
		t.Errorf("displayTimeUnit = %s", u)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(top["traceEvents"], &raw); err != nil {
		t.Fatalf("traceEvents: %v", err)
	}
	num := func(i int, e map[string]json.RawMessage, k string) (float64, bool) {
		v, ok := e[k]
		if !ok {
			return 0, false
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			t.Errorf("event %d: %s = %s is not a number", i, k, v)
		}
		return f, true
	}
	integer := func(i int, e map[string]json.RawMessage, k string) int64 {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(e[k]))
		d.UseNumber()
		if err := d.Decode(&n); err != nil {
			t.Errorf("event %d: %s = %s is not a number", i, k, e[k])
			return 0
		}
		v, err := n.Int64()
		if err != nil {
			t.Errorf("event %d: %s = %s is not an integer", i, k, e[k])
		}
		return v
	}
	str := func(i int, e map[string]json.RawMessage, k string) string {
		var s string
		if v, ok := e[k]; ok {
			if err := json.Unmarshal(v, &s); err != nil {
				t.Errorf("event %d: %s = %s is not a string", i, k, v)
			}
		}
		return s
	}
	type track struct{ pid, tid int64 }
	procNamed, threadNamed := map[int64]bool{}, map[track]bool{}
	used := map[track]bool{}
	var out []map[string]any
	for i, e := range raw {
		for k := range e {
			switch k {
			case "name", "cat", "ph", "ts", "dur", "pid", "tid", "s", "cname", "args", "id", "tts", "bp":
			default:
				t.Errorf("event %d: unknown key %q", i, k)
			}
		}
		for _, k := range []string{"ph", "name", "pid", "tid"} {
			if _, ok := e[k]; !ok {
				t.Errorf("event %d lacks %q: %v", i, k, e)
			}
		}
		ph, name := str(i, e, "ph"), str(i, e, "name")
		pid, tid := integer(i, e, "pid"), integer(i, e, "tid")
		if c, ok := e["cname"]; ok && !reservedColors[str(i, e, "cname")] {
			t.Errorf("event %d: cname %s is not a reserved colour", i, c)
		}
		var args map[string]any
		if a, ok := e["args"]; ok {
			if err := json.Unmarshal(a, &args); err != nil {
				t.Errorf("event %d: args %s is not an object", i, a)
			}
		}
		if ph != "M" {
			ts, ok := num(i, e, "ts")
			if !ok || ts < 0 {
				t.Errorf("event %d (%s): ts %v missing or negative", i, ph, ts)
			}
		}
		switch ph {
		case "X":
			d, ok := num(i, e, "dur")
			if !ok || d < 0 {
				t.Errorf("event %d: complete event without a non-negative dur", i)
			}
			used[track{pid, tid}] = true
		case "i", "I":
			if s, ok := e["s"]; ok && s != nil {
				if v := str(i, e, "s"); v != "g" && v != "p" && v != "t" {
					t.Errorf("event %d: instant scope %q", i, v)
				}
			}
			if _, ok := e["dur"]; ok {
				t.Errorf("event %d: instant with dur", i)
			}
		case "C":
			if len(args) == 0 {
				t.Errorf("event %d: counter without values", i)
			}
			for k, v := range args {
				if _, ok := v.(float64); !ok {
					t.Errorf("event %d: counter %s = %v is not a number", i, k, v)
				}
			}
		case "M":
			switch name {
			case "process_name", "thread_name":
				if s, ok := args["name"].(string); !ok || s == "" {
					t.Errorf("event %d: %s without a name: %v", i, name, args)
				}
				if name == "process_name" {
					procNamed[pid] = true
				} else {
					threadNamed[track{pid, tid}] = true
				}
			case "process_sort_index", "thread_sort_index":
				if _, ok := args["sort_index"].(float64); !ok {
					t.Errorf("event %d: %s without a sort_index", i, name)
				}
			default:
				t.Errorf("event %d: unknown metadata %q", i, name)
			}
		default:
			t.Errorf("event %d: phase %q not produced by fikit trace", i, ph)
		}
		m := map[string]any{}
		for k, v := range e {
			var x any
			_ = json.Unmarshal(v, &x)
			m[k] = x
		}
		out = append(out, m)
	}
	for tr := range used {
		if !procNamed[tr.pid] {
			t.Errorf("process %d has slices but no process_name", tr.pid)
		}
		if !threadNamed[tr] {
			t.Errorf("track %d/%d has slices but no thread_name", tr.pid, tr.tid)
		}
	}
	return out
}

func readTimeline(t *testing.T) []timeline.Record {
	t.Helper()
	recs, err := timeline.Read("../../simgpu/timeline/testdata/records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// testDecisions names the timeline test vector's processes 7 and 8 and adds
// one of each kind of decision around them.
func testDecisions() []decisions.Record {
	return []decisions.Record{
		{T: 500, Kind: decisions.KindRegister, Task: 1, PID: 7, Key: "hp svc", Priority: 0, Role: "holder", Phase: "sharing", GPU: "aa"},
		{T: 600, Kind: decisions.KindRegister, Task: 2, PID: 8, Key: "lp \"batch\"", Priority: 5, Role: "waiter", Phase: "sharing", GPU: "aa"},
		{T: 2000, Kind: decisions.KindWindow, GPU: "aa", Start: 7000, End: 30000},
		{T: 2500, Kind: decisions.KindGrant, Task: 2, Seq: 4, Kernel: 0xfedcba9876543210, Credit: 2, Reason: "window", Deadline: 30000},
		{T: 3000, Kind: decisions.KindHold, Task: 2, Seq: 5},
		{T: 3100, Kind: decisions.KindState, Task: 2, Role: "waiter", Phase: "sharing"},
		{T: 19000, Kind: decisions.KindWindowEnd, GPU: "aa", Start: 7000, End: 30000, Reason: "early_stop"},
		{T: 19100, Kind: decisions.KindPrediction, Task: 1, Samples: 2, ErrNs: -3000, AbsErrNs: 5000},
		{T: 19200, Kind: decisions.KindIdle, GPU: "aa", CapNs: 200000},
		{T: 19300, Kind: decisions.KindIdleEnd, GPU: "aa"},
		{T: 19400, Kind: decisions.KindIdle, GPU: "aa", CapNs: 1000},
		{T: 21500, Kind: decisions.KindRun, Task: 1, Run: 0, Kernels: 2, RunNs: 20000, Start: 1000, End: 21000},
		{T: 21600, Kind: decisions.KindProfilingRun, Task: 2, Run: 3, Reason: "discarded", Runs: 1},
		{T: 21700, Kind: decisions.KindLost, Count: 3},
		{T: 21800, Kind: decisions.KindLeave, Task: 2},
		{T: 21900, Kind: "from_a_newer_daemon"},
	}
}

func TestWriteValidTrace(t *testing.T) {
	recs := readTimeline(t)
	for _, tc := range []struct {
		name string
		decs []decisions.Record
		opt  Options
	}{
		{"timeline only", nil, Options{}},
		{"with decisions", testDecisions(), Options{}},
		{"span", testDecisions(), Options{From: 4000, To: 6500}},
		{"no blocked", testDecisions(), Options{NoBlocked: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, recs, tc.decs, tc.opt); err != nil {
				t.Fatal(err)
			}
			evs := validateTrace(t, buf.Bytes())
			count := map[string]int{}
			names := map[string]bool{}
			for _, e := range evs {
				count[fmt.Sprint(e["ph"], " ", e["cat"])]++
				if e["ph"] == "M" && e["name"] == "process_name" {
					names[e["args"].(map[string]any)["name"].(string)] = true
				}
			}
			switch tc.name {
			case "timeline only":
				if count["X kernel"] != 4 || count["X interference"] != 3 || !names["pid 7"] || !names["pid 8"] {
					t.Errorf("counts %v names %v", count, names)
				}
			case "with decisions":
				if count["X kernel"] != 4 || !names["hp svc (priority 0)"] || !names[`lp "batch" (priority 5)`] || !names["fikit daemon"] {
					t.Errorf("counts %v names %v", count, names)
				}
				if count["X decision"] != 3 || count["X run"] != 1 || count["i decision"] < 4 || count["C <nil>"] != 1 {
					t.Errorf("decision events: %v", count)
				}
			case "span":
				// Segments [3000,5000], [5000,6000] and [6000,7000] meet
				// [4000,6500]; the one at 20000 does not.
				if count["X kernel"] != 3 {
					t.Errorf("counts %v", count)
				}
				for _, e := range evs {
					if e["ph"] == "X" && e["ts"].(float64)+e["dur"].(float64) > 2.5+1e-9 {
						t.Errorf("slice past the span: %v", e)
					}
				}
			case "no blocked":
				if count["X interference"] != 0 {
					t.Errorf("counts %v", count)
				}
			}
		})
	}
}

// A kernel's colour follows its process's priority; the blocked slice ends
// where its kernel starts.
func TestWriteColoursAndBlocked(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, readTimeline(t), testDecisions(), Options{}); err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []Event `json:"traceEvents"`
		OtherData   struct {
			Origin int64 `json:"origin_ns"`
		} `json:"otherData"`
	}
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.OtherData.Origin != 500 {
		t.Errorf("origin %d, want the first decision's time", tr.OtherData.Origin)
	}
	var blockedEnd float64
	for _, e := range tr.TraceEvents {
		switch {
		case e.Cat == "kernel" && e.PID == 7 && e.CName != "good", e.Cat == "kernel" && e.PID == 8 && e.CName != "bad":
			t.Errorf("kernel of pid %d coloured %q", e.PID, e.CName)
		case e.Cat == "interference" && e.Args["blocked_ns"].(float64) == 500:
			blockedEnd = e.Ts + *e.Dur
		case e.Cat == "kernel" && e.Args["start_ns"].(float64) == 20000:
			if blockedEnd != e.Ts {
				t.Errorf("blocked slice ends at %v, kernel starts at %v", blockedEnd, e.Ts)
			}
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestWriteError(t *testing.T) {
	if err := Write(failWriter{}, readTimeline(t), testDecisions(), Options{}); err == nil {
		t.Fatal("no error from a failing writer")
	}
}

func TestRuns(t *testing.T) {
	decs := append(testDecisions(),
		decisions.Record{T: 40000, Kind: decisions.KindRun, Task: 2, Run: 1, Start: 100, End: 200},
		decisions.Record{T: 40001, Kind: decisions.KindRun, Task: 1, Run: 1, Start: 0, End: 5}, // start unknown
	)
	if rs := Runs(decs, ""); len(rs) != 1 || rs[0].Key != "hp svc" || rs[0].PID != 7 || rs[0].Start != 1000 {
		t.Errorf("best-priority runs = %+v", rs)
	}
	if rs := Runs(decs, `lp "batch"`); len(rs) != 1 || rs[0].Priority != 5 {
		t.Errorf("lp runs = %+v", rs)
	}
}

func TestPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.png")
	if err := PNG(path, readTimeline(t), testDecisions(), 0, 25000, Options{Title: "test"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 100 {
		t.Errorf("image %v", b)
	}
	if err := PNG(path, readTimeline(t), nil, 100, 100, Options{}); err == nil || !strings.Contains(err.Error(), "empty span") {
		t.Errorf("empty span: %v", err)
	}
	if err := PNG(path, readTimeline(t), nil, 1e12, 2e12, Options{}); err == nil {
		t.Error("no error for a span with nothing in it")
	}
}

func TestAroundRuns(t *testing.T) {
	decs := testDecisions() // one best-priority run, from 1000
	rs := Runs(decs, "")
	if len(rs) != 1 {
		t.Fatalf("runs = %+v", rs)
	}
	from, to, err := AroundRuns(decs, "", 0, 0, 1, 1, 500*time.Nanosecond)
	if err != nil || from != rs[0].Start-500 || to != rs[0].End+500 {
		t.Errorf("AroundRuns = %d, %d, %v; want the run %d–%d with 500 ns each side", from, to, err, rs[0].Start, rs[0].End)
	}
	if from, _, _ := AroundRuns(decs, "", 0, 0, 1, 1, time.Hour); from != 1 {
		t.Errorf("a margin past the clock's start: from %d, want 1 (0 is unbounded)", from)
	}
	if _, _, err := AroundRuns(decs, "", 0, 0, 2, 1, 0); err == nil || !strings.Contains(err.Error(), "run 2 of the best-priority task") {
		t.Errorf("a run past the record: %v", err)
	}
	if _, _, err := AroundRuns(decs, "", rs[0].Start+1, 0, 1, 1, 0); err == nil {
		t.Error("a run before from was taken")
	}
}
