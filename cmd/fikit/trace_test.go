package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	testTimeline  = "../../simgpu/timeline/testdata/records.jsonl"
	testDecisions = "../../daemon/decisions/testdata/records.jsonl"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad input is a clear error and a non-zero exit status, never a panic or
// a half-written trace presented as done.
func TestTraceBadInput(t *testing.T) {
	badTimeline := writeFile(t, "bad.jsonl", `{"pid":1,"start_ns":5,"end_ns":9}`+"\n"+`{"pid":1,"start_ns":`+"\n")
	backwards := writeFile(t, "back.jsonl", `{"pid":1,"start_ns":9,"end_ns":5}`+"\n")
	badDecisions := writeFile(t, "dec.jsonl", `{"t_ns":1,"kind":"grant"}`+"\n"+`{"kind":"grant"}`+"\n")
	out := filepath.Join(t.TempDir(), "t.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no timeline flag", []string{"trace"}, "timeline", 1},
		{"missing timeline", []string{"trace", "--timeline", "/nonexistent/tl.jsonl", "--out", out}, "/nonexistent/tl.jsonl", 1},
		{"malformed timeline", []string{"trace", "--timeline", badTimeline, "--out", out}, "bad.jsonl:2", 1},
		{"end before start", []string{"trace", "--timeline", backwards, "--out", out}, "back.jsonl:1", 1},
		{"missing decisions", []string{"trace", "--timeline", testTimeline, "--decisions", "/nonexistent/d.jsonl", "--out", out}, "/nonexistent/d.jsonl", 1},
		{"malformed decisions", []string{"trace", "--timeline", testTimeline, "--decisions", badDecisions, "--out", out}, "dec.jsonl:2", 1},
		{"bad span", []string{"trace", "--timeline", testTimeline, "--from", "10", "--to", "5"}, "not a span", 2},
		{"around-run without decisions", []string{"trace", "--timeline", testTimeline, "--around-run", "1"}, "needs --decisions", 2},
		{"around-run past the runs", []string{"trace", "--timeline", testTimeline, "--decisions", testDecisions, "--around-run", "2", "--out", out}, "has 1", 1},
		{"unwritable output", []string{"trace", "--timeline", testTimeline, "--out", "/nonexistent/dir/t.json"}, "/nonexistent/dir/t.json", 1},
		{"argument", []string{"trace", "--timeline", testTimeline, "extra"}, "no arguments", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runFikit(t, tc.args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if c := exitCode(err); c != tc.code {
				t.Errorf("exit status %d, want %d", c, tc.code)
			}
		})
	}
}

// fikit trace reads a decision record (and a timeline) that is still being
// written: the half-written last line is skipped with a note, not an error.
func TestTraceTornLastLine(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	decs := writeFile(t, "live-decisions.jsonl", read(testDecisions)+`{"t_ns":9999,"kind":"gra`)
	tl := writeFile(t, "live-timeline.jsonl", read(testTimeline)+`{"pid":1,"start_`)
	out := filepath.Join(t.TempDir(), "t.json")
	got, err := runFikit(t, "trace", "--timeline", tl, "--decisions", decs, "--out", out)
	if err != nil {
		t.Fatalf("trace of records being written: %v\n%s", err, got)
	}
	for _, want := range []string{decs + ":15: skipped the last line", tl + ":", "13 decisions in the input"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestTraceWritesJSONAndPNG(t *testing.T) {
	dir := t.TempDir()
	out, img := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.png")
	got, err := runFikit(t, "trace", "--timeline", testTimeline, "--decisions", testDecisions, "--out", out,
		"--png", img, "--around-run", "1", "--margin", "1us", "--title", "test")
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil || len(tr.TraceEvents) == 0 {
		t.Fatalf("trace JSON: %v (%d events)", err, len(tr.TraceEvents))
	}
	if fi, err := os.Stat(img); err != nil || fi.Size() == 0 {
		t.Fatalf("png: %v", err)
	}
	if !strings.Contains(got, "wrote "+out) || !strings.Contains(got, "wrote "+img) {
		t.Errorf("output:\n%s", got)
	}
	// "-" writes the JSON alone to standard output.
	got, err = runFikit(t, "trace", "--timeline", testTimeline, "--out", "-")
	if err != nil || !json.Valid([]byte(got)) {
		t.Fatalf("--out -: %v\n%s", err, got)
	}
}
