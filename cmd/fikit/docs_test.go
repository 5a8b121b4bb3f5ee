package main

// The README's demo output is generated from a committed run: docs/demo.json
// is `fikit demo --json` of a real run, and the block between the README's
// demo markers is what `fikit demo` prints for it. `make demo-doc` runs the
// demo again and rewrites both (the scheduler changes what a run shows).

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fikit/fikit/bench"
	"github.com/fikit/fikit/scheduler"
)

var rewriteReadme = flag.Bool("rewrite-readme", false, "regenerate README.md's demo block from docs/demo.json")

const (
	demoJSON             = "../../docs/demo.json"
	readmePath           = "../../README.md"
	demoBegin, demoEnd   = "<!-- demo:begin (generated from docs/demo.json: make demo-doc) -->\n```\n", "```\n<!-- demo:end -->"
	demoRegenerateAdvice = "make demo-doc (or go test ./cmd/fikit -run TestReadmeDemo -rewrite-readme to keep docs/demo.json)"
)

// demoBlock is what `fikit demo` prints for the committed run.
func demoBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(demoJSON)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.DemoResult
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v (not fikit demo --json of this version: %s)", demoJSON, err, demoRegenerateAdvice)
	}
	if r.Alone.HPRuns == 0 || r.Fikit.HPRuns == 0 || r.Sharing.HPRuns == 0 {
		t.Fatalf("%s has a mode without runs: not a complete fikit demo --json", demoJSON)
	}
	var out bytes.Buffer
	printDemo(&out, &r)
	return strings.TrimLeft(out.String(), "\n")
}

// TestReadmeDemo: the README shows what the committed run printed.
func TestReadmeDemo(t *testing.T) {
	want := demoBlock(t)
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, demoBegin), strings.Index(doc, demoEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no demo markers (%q … %q)", demoBegin, demoEnd)
	}
	next := doc[:i+len(demoBegin)] + want + doc[j:]
	if *rewriteReadme {
		if err := os.WriteFile(readmePath, []byte(next), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if next != doc {
		t.Errorf("README.md's demo block differs from docs/demo.json's run:\n%s\nwant:\n%s\nregenerate: %s",
			doc[i+len(demoBegin):j], want, demoRegenerateAdvice)
	}
}

// defaultMarker is a default a doc names: <!-- default:NAME -->VALUE<!-- /default -->,
// NAME a scheduler setting (the settings table's flag), VALUE its default
// as the table writes it (in backquotes or not).
var defaultMarker = regexp.MustCompile("<!-- default:([a-z0-9-]+) -->`?([^`<]*)`?<!-- /default -->")

// TestDocDefaults: every default README.md and docs/*.md name between
// default markers is the settings table's (scheduler.Settings, whose
// table docs/scheduler.md carries: TestSettingsDoc).
func TestDocDefaults(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, readmePath, "../../hookclient/README.md")
	seen := 0
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range defaultMarker.FindAllStringSubmatch(string(b), -1) {
			seen++
			s, ok := scheduler.LookupSetting(m[1])
			if !ok {
				t.Errorf("%s: default marker for %q, which is no scheduler setting", path, m[1])
				continue
			}
			if got := strings.TrimSpace(m[2]); got != s.Default() {
				t.Errorf("%s says --%s defaults to %q; the settings table says %q", filepath.Base(path), m[1], got, s.Default())
			}
		}
	}
	if seen == 0 {
		t.Error("no default markers in README.md or docs/: the check checks nothing")
	}
}
