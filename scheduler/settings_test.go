package scheduler

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var rewriteDoc = flag.Bool("rewrite-doc", false, "regenerate docs/scheduler.md's settings table")

// Every row is complete, its default is valid and round-trips, and values
// just outside its bounds are refused with ErrConfig.
func TestSettingsRows(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range append(Settings[:len(Settings):len(Settings)], Ablations...) {
		if s.Name == "" || s.Help == "" || s.field == nil || seen[s.Name] {
			t.Errorf("row %+v: incomplete or duplicate", s)
		}
		seen[s.Name] = true
		c := DefaultConfig()
		if err := s.Set(&c, s.Default()); err != nil || c != def {
			t.Errorf("%s: default %q does not round-trip: %v", s.Name, s.Default(), err)
		}
		var outside []string
		switch s.Kind {
		case KindDuration:
			outside = []string{"-1ns", fmt.Sprint(int64(s.Max) + 1), "soon"}
			if s.MinOpen {
				outside = append(outside, "0")
			}
		case KindInt:
			outside = []string{fmt.Sprint(int64(s.Min) - 1), fmt.Sprint(int64(s.Max) + 1), "1.5"}
		case KindFloat:
			outside = []string{fmt.Sprint(s.Min - 0.5), fmt.Sprint(s.Max + 0.5), "NaN"}
			if s.MinOpen {
				outside = append(outside, fmt.Sprint(s.Min))
			}
		case KindBool:
			outside = []string{"maybe"}
		case KindChoice:
			outside = []string{"", "none-such"}
		default:
			t.Errorf("%s: kind %d", s.Name, s.Kind)
		}
		for _, v := range outside {
			c := DefaultConfig()
			if err := s.Set(&c, v); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), s.Name) {
				t.Errorf("%s=%q: error %v, want ErrConfig naming the setting", s.Name, v, err)
			}
			if c != def {
				t.Errorf("%s=%q changed the config", s.Name, v)
			}
		}
	}
	// Each field of Config is some row's, a setting's or an ablation's: a
	// knob without a row would be invisible to flags, variants, scenarios
	// and docs. And the settings stay few (issue 33: at most 30).
	if want := countFields(def); len(Settings)+len(Ablations) != want {
		t.Errorf("%d settings and %d ablations for %d Config fields", len(Settings), len(Ablations), want)
	}
	if len(Settings) > 30 {
		t.Errorf("%d settings: a new knob replaces one, or is an ablation", len(Settings))
	}
	// Validate refuses what the rows refuse, and contradictions.
	bad := DefaultConfig()
	bad.MaxCredit = 99999999999
	if err := bad.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("max credit beyond u32 accepted: %v", err)
	}
	bad = DefaultConfig()
	bad.DeadAfter = bad.HeartbeatInterval
	if err := bad.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("dead-after = heartbeat accepted: %v", err)
	}
}

func countFields(c Config) int {
	n := 0
	for _, s := range strings.Split(fmt.Sprintf("%+v", c), " ") {
		if strings.Contains(s, ":") {
			n++
		}
	}
	return n
}

// settingsTable renders the rows as docs/scheduler.md shows them.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| flag / scenario key | default | allowed | what it does |\n|---|---|---|---|\n")
	for _, s := range Settings {
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", s.Name, s.Default(), s.Bounds(), s.Help)
	}
	return b.String()
}

func TestSettingsDoc(t *testing.T) {
	const path = "../docs/scheduler.md"
	const begin, end = "<!-- settings:begin (generated) -->\n", "<!-- settings:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no settings markers", path)
	}
	want := doc[:i+len(begin)] + settingsTable() + doc[j:]
	if *rewriteDoc {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s's settings table differs from scheduler.Settings: go test ./scheduler -run TestSettingsDoc -rewrite-doc", path)
	}
}

// Config's JSON has one key per setting (its JSONKey), times in ns, and
// reads back what it wrote; unknown keys are ignored and a missing one
// leaves the value.
func TestConfigJSON(t *testing.T) {
	c := DefaultConfig()
	c.SwitchCost = int64(140 * time.Microsecond)
	c.Policy = "fifo"
	c.DriftThreshold = 0.25
	c.MaxCredit = 4
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(m) != len(Settings) {
		t.Errorf("%d keys for %d settings: %s", len(m), len(Settings), b)
	}
	if m["switch_cost_ns"] != float64(140_000) || m["policy"] != "fifo" || m["profile_runs"] != float64(100) ||
		m["max_credit"] != float64(4) || m["drift_threshold"] != 0.25 {
		t.Errorf("values: %s", b)
	}
	for _, s := range Settings {
		if _, ok := m[s.JSONKey()]; !ok {
			t.Errorf("no key %s", s.JSONKey())
		}
	}
	// Ablations are no settings: not in the JSON (a status shows the
	// settings), so they read back as they were.
	back := DefaultConfig()
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	back = DefaultConfig()
	if err := json.Unmarshal([]byte(`{"min_gap_ns": 5000, "newer_setting_ns": 7}`), &back); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.MinGap = 5000
	if back != want {
		t.Errorf("partial document: %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"min_gap_ns": "100us"}`), &back); err == nil || !strings.Contains(err.Error(), "min_gap_ns") {
		t.Errorf("a time that is not ns: %v", err)
	}
}

// Every setting earns its place (issue 33): a scenario file sets it on a
// config line and shows what it changes, or, for the few shown at their
// default, the file named here exercises it and names it.
func TestSettingsShown(t *testing.T) {
	shownAtDefault := map[string]string{
		"idle-starve":        "idle_oversize.txt",
		"profile-turn":       "profiling_squatter.txt",
		"rejoin-grace":       "rejoin_grace_expires.txt",
		"dead-after-watched": "dead_after_watched.txt",
	}
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	text := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text[filepath.Base(f)] = string(b)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "config") {
				continue
			}
			for _, kv := range strings.Fields(line)[1:] {
				k, _, _ := strings.Cut(kv, "=")
				set[k] = true
			}
		}
	}
	for _, s := range Settings {
		if set[s.Name] {
			continue
		}
		f, ok := shownAtDefault[s.Name]
		switch {
		case !ok:
			t.Errorf("setting %s: no scenario file sets it (a scenario or a bench row must show what it changes, or it goes)", s.Name)
		case !strings.Contains(text[f], s.Name):
			t.Errorf("setting %s: %s does not exist or does not name it", s.Name, f)
		}
	}
}
