package tests

// Faults: the profile store's directory removed, made read-only or filled
// while the daemon runs, or too small to open. Before: Badger retried its
// flush every second forever and SIGTERM never returned; a full disk was a
// SIGBUS that killed the daemon (and every later start). Now the write is
// refused and retried, the profile kept in memory, the hooked service runs
// on, and SIGTERM ends the daemon within 2 s.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/store/storetest"
)

// crashSigns are what a Go runtime crash leaves in the log.
var crashSigns = regexp.MustCompile(`SIGBUS|SIGSEGV|panic:|fatal error:|unexpected fault address`)

// storeShutdownMax is how long SIGTERM may take with a broken store.
const storeShutdownMax = 2 * time.Second

func TestFaultStore(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	var rows []string
	for _, tc := range []struct {
		name  string
		root  bool                                     // needs root (mounts)
		setup func(t *testing.T) string                // the data directory
		brk   func(t *testing.T, dataDir string) error // the fault, daemon running
	}{
		{"removed", false, dataDirIn, func(t *testing.T, dir string) error { return os.RemoveAll(dir) }},
		{"read-only", true, dataDirIn, func(t *testing.T, dir string) error {
			if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
				return fmt.Errorf("bind mount: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
			if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("remount read-only: %v: %s", err, out)
			}
			return nil
		}},
		{"full", true, func(t *testing.T) string { return filepath.Join(storetest.Tmpfs(t, 64<<20), "data") }, func(t *testing.T, dir string) error {
			_, err := storetest.Fill(filepath.Dir(dir), 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			dir := tc.setup(t)
			maddr := freeTCPAddr(t)
			d := startServe(t, dir, "", "--profile-runs", "10", "--metrics-listen", maddr)
			if err := tc.brk(t, dir); err != nil {
				t.Skip(err)
			}
			// The service profiles (its profile cannot be written) and runs
			// to the end; it serves again (at most 3 times) until its
			// profile is due to be written: on a loaded host the hook
			// withholds runs measured with a stalled launch call.
			s := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: "store-" + tc.name, sched: d.addr, hooked: true, runs: 40}
			cmd, args := s.command(t)
			env := simgpuEnv(t, uniqueShm(t))
			var r cmdResult
			var m map[string]float64
			for replay := 1; replay <= 3; replay++ {
				r = runCmd(t, 2*time.Minute, env, cmd, args...)
				if r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != s.runs {
					t.Errorf("the hooked service did not run to its end: %s", r)
				}
				if waitFor(3*time.Second, func() bool {
					m = metrics(t, maddr)
					return m["fikit_store_errors_total"] > 0
				}) {
					break
				}
			}
			if m["fikit_store_errors_total"] == 0 || m["fikit_profiles_unsaved"] == 0 {
				t.Errorf("no refused profile write counted: store errors %v, unsaved %v", m["fikit_store_errors_total"], m["fikit_profiles_unsaved"])
			}
			start := time.Now()
			d.signal(syscall.SIGTERM)
			res := d.Wait(30 * time.Second)
			took := time.Since(start)
			if took > storeShutdownMax || res.ExitCode != 0 {
				t.Errorf("SIGTERM: exit %d after %v (bound %v)", res.ExitCode, took.Round(time.Millisecond), storeShutdownMax)
			}
			if crashSigns.MatchString(res.Stderr) {
				t.Errorf("the daemon crashed:\n%s", tail(res.Stderr, 3000))
			}
			errLine := ""
			for _, l := range strings.Split(res.Stderr, "\n") {
				if strings.Contains(l, "saving profiles failed") {
					errLine = l
					break
				}
			}
			if errLine == "" {
				t.Errorf("the refused write was not logged:\n%s", tail(res.Stderr, 3000))
			}
			t.Logf("log: %s", errLine)
			rows = append(rows, fmt.Sprintf("%s: SIGTERM exit %d in %v, store errors %.0f, service ran %d/%d runs, crash %v",
				tc.name, res.ExitCode, took.Round(time.Millisecond), m["fikit_store_errors_total"], len(parseRuns(t, r.Stdout)), s.runs, crashSigns.MatchString(res.Stderr)))
		})
	}

	// A store whose file system filled up while the daemon was down: a
	// clear error, no crash, for the daemon and for the profile commands
	// (every later start died of SIGBUS).
	t.Run("full-at-start", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		dir := filepath.Join(storetest.Tmpfs(t, 64<<20), "data")
		startServe(t, dir, "").stop(t)
		if _, err := storetest.Fill(filepath.Dir(dir), 0); err != nil {
			t.Skip(err)
		}
		fikit := requireBins(t, "fikit")[0]
		for _, args := range [][]string{
			{"serve", "--data-dir", dir, "--listen", freeUDPAddr(t)},
			{"profile", "ls", "--data-dir", dir},
		} {
			r := runCmd(t, 30*time.Second, nil, fikit, args...)
			if r.ExitCode == 0 || crashSigns.MatchString(r.Stderr) || !strings.Contains(r.Stderr, "not enough free space") {
				t.Errorf("fikit %s on a full file system: %s", args[0], r)
			}
			name := args[0]
			if name == "profile" {
				name += " " + args[1]
			}
			rows = append(rows, fmt.Sprintf("full at start, fikit %s: exit %d, %q", name, r.ExitCode, strings.TrimSpace(tail(r.Stderr, 200))))
		}
	})
	faultReport(t, "store directory removed / read-only / full while running; full at start", "1 each", verdict(t), strings.Join(rows, "; "))
}

// dataDirIn is a data directory in a fresh temporary directory.
func dataDirIn(t *testing.T) string { return filepath.Join(t.TempDir(), "data") }
