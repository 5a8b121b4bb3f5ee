package tests

// Issue 28, drift: a high-priority service shares the GPU with a
// low-priority one under fikit (testdata/gappy.csv: 12 kernels of 80–135 µs
// a launch every 250 µs, so its in-run gaps are filled; mobilenet, whose
// short kernels fill them), and drifts from its profile mid-run — its
// kernels keep their IDs but run 30 % longer (a clock or driver change),
// or its batch doubles (new grids: new kernel IDs). The daemon must find
// the drift within a few runs (sampled runs for the first, every run's
// launches for the second), profile the service again while it keeps
// sharing, and then schedule it by the new version.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDriftEndToEnd(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	fikit := requireBins(t, "fikit")[0]
	for _, tc := range []struct {
		name, kind string
		change     []string
		within     int // changed runs by whose end the drift is found, at most
	}{
		{"durations+30%", "timing", []string{"--change-duration", "1.3"}, 2 * 16},
		{"batch doubled", "kernels", []string{"--change-grid", "2"}, 8},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			rec := filepath.Join(dir, "decisions.jsonl")
			d := startServe(t, dir, "", "--profile-runs", "20", "--record", rec)
			env := simgpuEnv(t, uniqueShm(t))
			hp := replaySpec{trace: filepath.Join(repoRoot(t), "tests", "testdata", "gappy.csv"), cpuNs: 250_000, prio: 0,
				key: "drift-hp", sched: d.addr, runs: 40}
			lp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 5, key: "drift-lp", sched: d.addr, runs: 40}
			profileFully(t, d, env, hp)
			profileFully(t, d, env, lp)

			lp.hooked, lp.runs = true, 1_000_000
			lcmd, largs := lp.command(t)
			lproc := startCmd(t, env, lcmd, largs...)
			defer lproc.Kill()
			if !lproc.waitOutput(`{"run"`, 2, 60*time.Second) {
				t.Fatalf("the low-priority service did not get going: %s", lproc.Kill())
			}
			const changeAt = 60
			hp.hooked, hp.runs, hp.interval = true, 400, 6*time.Millisecond
			hcmd, hargs := hp.command(t)
			hargs = append(hargs, append([]string{"--change-at", fmt.Sprint(changeAt)}, tc.change...)...)
			hproc := startCmd(t, env, hcmd, hargs...)
			// The version the service is scheduled by, while it runs, and
			// when the daemon first used version 2; fills into gaps shorter
			// than predicted as the daemon counted them then.
			version := 0
			var v2At int64
			type snap struct {
				at    int64
				short float64
			}
			var snaps []snap
			for done := false; !done; {
				select {
				case <-hproc.done:
					done = true
				case <-time.After(50 * time.Millisecond):
				}
				st := statusStats(t, fikit, dir)
				at := monoNs()
				for _, ta := range d.status(t).Tasks {
					if ta.Key == hp.key {
						if ta.ProfileVersion == 2 && version < 2 {
							v2At = at
						}
						version = max(version, ta.ProfileVersion)
					}
				}
				snaps = append(snaps, snap{at, st["short_gap_windows"]})
			}
			shortAt := func(at int64) float64 { // the daemon's count by then
				v := 0.0
				for _, s := range snaps {
					if s.at <= at {
						v = s.short
					}
				}
				return v
			}
			r := hproc.Wait(time.Minute)
			if r.ExitCode != 0 {
				t.Fatalf("high-priority service: %s", r)
			}
			lproc.Kill()
			for k, v := range statusStats(t, fikit, dir) {
				if strings.HasPrefix(k, "drift") || strings.HasPrefix(k, "short_gap") || k == "profiles_refreshed" {
					t.Logf("stats.%s = %v", k, v)
				}
			}
			d.stop(t)

			runs := parseRuns(t, r.Stdout)
			recs := readRecord(t, rec)
			var drift *recordLine
			for i := range recs {
				if recs[i].Kind == "drift" {
					drift = &recs[i]
					break
				}
			}
			if drift == nil {
				t.Fatalf("no drift found; daemon log:\n%s", tail(d.Stderr(), 3000))
			}
			// Changed runs that had ended when the drift was found.
			found := 0
			for _, run := range runs {
				if run.Run >= changeAt && run.StartNs+run.JCTNs <= drift.T {
					found++
				}
			}
			show := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", hp.key, "--data-dir", dir, "--json")
			var prof struct {
				Version  int `json:"profile_version"`
				Versions []struct {
					Version int    `json:"version"`
					Reason  string `json:"reason"`
					Time    string `json:"time"`
				} `json:"versions"`
			}
			if err := json.Unmarshal([]byte(show.Stdout), &prof); err != nil {
				t.Fatalf("profile show: %v\n%s", err, show)
			}
			t.Logf("%s: drift (%s: %s) found at the end of changed run %d; stored version %d (%+v), in use at the end: %d",
				tc.name, drift.Reason, drift.Why, found, prof.Version, prof.Versions, version)
			switch {
			case drift.Reason != tc.kind:
				t.Errorf("drift found by %s, want %s", drift.Reason, tc.kind)
			case found < 1 || found > tc.within:
				t.Errorf("found after %d changed runs, want 1–%d", found, tc.within)
			case prof.Version != 2 || len(prof.Versions) != 2 || !strings.HasPrefix(prof.Versions[1].Reason, "drift:") ||
				prof.Versions[1].Time == "":
				t.Errorf("stored profile: version %d, versions %+v", prof.Version, prof.Versions)
			case version != 2:
				t.Errorf("the service is scheduled by version %d at the end", version)
			}
			// The high-priority runs' GPU interference (simgpu's ground
			// truth) before the change, with the stale profile, and with
			// version 2; the short-gap windows the daemon counted up to
			// version 2's use and after.
			lpRuns := parseRuns(t, lproc.Stdout())
			phase := func(from, to int64) string {
				n, lp := 0, 0
				var blocked float64
				for _, run := range runs {
					if run.BlockedNs != nil && run.StartNs >= from && run.StartNs < to {
						n++
						blocked += float64(*run.BlockedNs)
					}
				}
				for _, run := range lpRuns {
					if run.StartNs >= from && run.StartNs < to {
						lp++
					}
				}
				short := shortAt(to) - shortAt(from)
				return fmt.Sprintf("%d runs: interference %.1f µs a run, %.1f short-gap windows per 100 runs, %d LP runs", n,
					blocked/max(float64(n), 1)/1e3, 100*short/max(float64(n), 1), lp)
			}
			changeNs, endNs := runs[changeAt].StartNs, runs[len(runs)-1].StartNs+1
			t.Logf("%s (HP GPU interference: simgpu's ground truth): before the change %s; stale profile %s; version 2 %s",
				tc.name, phase(runs[0].StartNs, changeNs), phase(changeNs, v2At), phase(v2At, endNs))
			// No drift before the change.
			for _, run := range runs {
				if run.Run < changeAt-1 && run.StartNs+run.JCTNs > drift.T {
					t.Errorf("drift found during run %d, before the change", run.Run)
					break
				}
			}
		})
	}
}

// recordLine is what these tests read of a decision record's line
// (docs/design.md "Decision record").
type recordLine struct {
	T      int64  `json:"t_ns"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	Why    string `json:"why"`
}

// readRecord reads a daemon's decision record, in time order.
func readRecord(t testing.TB, path string) []recordLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []recordLine
	for _, line := range strings.Split(string(b), "\n") {
		var r recordLine
		if line != "" && json.Unmarshal([]byte(line), &r) == nil {
			recs = append(recs, r)
		}
	}
	slices.SortStableFunc(recs, func(a, b recordLine) int { return int(a.T - b.T) })
	return recs
}

// statusStats is the daemon's status stats, numbers only.
func statusStats(t testing.TB, fikit, dir string) map[string]float64 {
	t.Helper()
	r := runCmd(t, 10*time.Second, nil, fikit, "status", "--data-dir", dir, "--json")
	var sd struct {
		Stats map[string]any `json:"stats"`
	}
	_ = json.Unmarshal([]byte(r.Stdout), &sd)
	out := map[string]float64{}
	for k, v := range sd.Stats {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// monoNs is CLOCK_MONOTONIC, the clock of the replayer's start_ns.
func monoNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
