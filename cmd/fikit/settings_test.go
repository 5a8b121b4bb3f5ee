package main

import (
	"strings"
	"testing"

	"github.com/fikit/fikit/scheduler"
)

// `fikit serve` and `fikit sim` take every scheduler setting as a flag, and
// refuse a value outside its bounds before starting anything.
func TestSchedulerFlagsRefuseBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--max-credit", "99999999999"},
		{"serve", "--policy", "lottery"},
		{"serve", "--min-gap", "-1ms"},
		{"serve", "--profile-runs", "5"},
		{"serve", "--dead-after", "10ms", "--heartbeat-interval", "20ms"},
		{"sim", "--policy", "lottery"},
		{"sim", "--holder-ttl", "0"},
	} {
		_, err := runFikit(t, args...)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("fikit %s: error %v (exit %d), want a usage error", strings.Join(args, " "), err, exitCode(err))
			continue
		}
		if name := strings.TrimLeft(args[1], "-"); !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), "dead-after") {
			t.Errorf("fikit %s: %v does not name the setting", strings.Join(args, " "), err)
		}
	}
}

func TestSchedulerFlagsCoverSettings(t *testing.T) {
	names := map[string]bool{}
	for _, f := range schedulerFlags() {
		names[f.Names()[0]] = true
	}
	for _, s := range scheduler.Settings {
		if !names[s.Name] {
			t.Errorf("setting %s has no flag", s.Name)
		}
	}
	if !names[variantFlag] {
		t.Error("no --variant flag")
	}
	if len(schedulerFlags("profile-runs")) != len(scheduler.Settings) { // the settings but one, and --variant

		t.Error("except does not leave the named setting out")
	}
}
