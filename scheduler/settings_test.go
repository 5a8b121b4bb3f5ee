package scheduler

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
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
	for _, s := range Settings {
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
	// Each field of Config is some row's: a knob without a row would be
	// invisible to flags, scenarios and docs.
	if want := countFields(def); len(Settings) != want {
		t.Errorf("%d settings for %d Config fields", len(Settings), want)
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
