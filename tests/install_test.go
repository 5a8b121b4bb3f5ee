package tests

// make install, make uninstall and the systemd unit (docs/deploy.md).

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// makeIn runs make in the repository with args, outside any make that runs
// the tests (its jobserver and flags are not passed on).
func makeIn(t *testing.T, args ...string) cmdResult {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "MAKEOVERRIDES" {
			env = append(env, kv)
		}
	}
	bin := binDir(t)
	return runCmd(t, 5*time.Minute, env, "make", append([]string{"--no-print-directory", "-C", repoRoot(t),
		"BIN=" + bin}, args...)...)
}

// The installed files, relative to DESTDIR and without directories.
var wantInstalled = []string{
	"usr/bin/fikit",
	"usr/lib/fikit/fikit",
	"usr/lib/fikit/fikit-replay",
	"usr/lib/fikit/libfikit_hook.so",
	"usr/lib/fikit/simgpu/libcuda.so.1",
	"usr/lib/systemd/system/fikit.service",
	"usr/lib/sysusers.d/fikit.conf",
	"usr/share/doc/fikit/README.md",
	"usr/share/doc/fikit/docs/deploy.md",
	"usr/share/doc/fikit/docs/status-api.md",
	"usr/share/doc/fikit/hookclient/README.md",
}

// make install into a DESTDIR puts fikit, the hook where `fikit run` finds
// it, the tools and the docs; the installed fikit serves a service that the
// installed `fikit run` started with the installed hook; make uninstall
// takes every file away again.
func TestMakeInstall(t *testing.T) {
	requireBins(t, "fikit", "libfikit_hook.so", "fikit-replay", "hook-launcher", "simgpu/libcuda.so.1")
	dest := t.TempDir()
	if r := makeIn(t, "install", "PREFIX=/usr", "DESTDIR="+dest); r.ExitCode != 0 {
		t.Fatalf("make install: %s", r)
	}
	files := installedFiles(t, dest)
	t.Logf("installed in DESTDIR:\n%s", strings.Join(files, "\n"))
	for _, f := range wantInstalled {
		if !slices.Contains(files, f) {
			t.Errorf("make install did not install %s", f)
		}
	}
	for _, f := range files {
		if !slices.Contains(wantInstalled, f) && !strings.HasPrefix(f, "usr/share/doc/fikit/") {
			t.Errorf("make install installed %s, which no one expects", f)
		}
	}
	if l, err := os.Readlink(filepath.Join(dest, "usr/lib/fikit/fikit")); err != nil || l != "../../bin/fikit" {
		t.Errorf("usr/lib/fikit/fikit: a link to %q (%v), want ../../bin/fikit", l, err)
	}
	unit, err := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system/fikit.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart=/usr/bin/fikit serve") || strings.Contains(string(unit), "DIR@") {
		t.Errorf("the unit's ExecStart is not the installed fikit, or a placeholder is left (%v):\n%s", err, unit)
	}

	// The installed fikit run preloads the installed hook, which registers
	// with the installed daemon.
	fikit := filepath.Join(dest, "usr/bin/fikit")
	r := runCmd(t, 30*time.Second, nil, fikit, "run", "--", "sh", "-c", `echo "$LD_PRELOAD"`)
	if hook := filepath.Join(dest, "usr/lib/fikit/libfikit_hook.so"); r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != hook {
		t.Fatalf("installed fikit run: LD_PRELOAD %q, want %s (%s)", strings.TrimSpace(r.Stdout), hook, r)
	}
	dataDir, addr := t.TempDir(), freeUDPAddr(t)
	serve := startCmd(t, nil, fikit, "serve", "--data-dir", dataDir, "--listen", addr, "--log-level", "warn")
	if !waitFor(10*time.Second, func() bool {
		return runCmd(t, 5*time.Second, nil, fikit, "status", "--data-dir", dataDir).ExitCode == 0
	}) {
		t.Fatalf("the installed fikit serve did not come up: %s", serve.Kill())
	}
	env := simgpuEnv(t, uniqueShm(t), "FIKIT_CONNECT_TIMEOUT_MS=3000")
	launcher := requireBins(t, "hook-launcher")[0]
	if r := runCmd(t, time.Minute, env, fikit, "run", "-p", "3", "--task-key", "installed", "--scheduler", addr, "--",
		launcher, kernelsPTX(t), "direct", "20"); r.ExitCode != 0 {
		t.Fatalf("a service under the installed fikit run: %s", r)
	}
	st := runCmd(t, 10*time.Second, nil, fikit, "status", "--data-dir", dataDir, "--json")
	var doc struct {
		Stats struct {
			Registered int `json:"registered"`
		} `json:"stats"`
	}
	if st.ExitCode != 0 || json.Unmarshal([]byte(st.Stdout), &doc) != nil || doc.Stats.Registered != 1 {
		t.Errorf("the installed daemon did not hear the installed hook: %s", st)
	}
	serve.signal(15)
	serve.Wait(10 * time.Second)

	if r := makeIn(t, "uninstall", "PREFIX=/usr", "DESTDIR="+dest); r.ExitCode != 0 {
		t.Fatalf("make uninstall: %s", r)
	}
	if left := installedFiles(t, dest); len(left) > 0 {
		t.Errorf("make uninstall left %v", left)
	}
}

// The systemd unit passes systemd-analyze verify (its syntax, its
// directives, its ExecStart) without a warning and keeps its hardening
// (systemd-analyze security: exposure at most 3.0 of 10); its user is one
// systemd-sysusers creates.
func TestSystemdUnit(t *testing.T) {
	requireBins(t, "fikit", "libfikit_hook.so")
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): the unit is not checked")
	}
	// A real prefix, not a DESTDIR: verify looks for ExecStart's binary and
	// resolves the unit's dependencies on this machine's systemd.
	prefix := t.TempDir()
	if r := makeIn(t, "install", "PREFIX="+prefix, "INSTALL_TOOLS=no"); r.ExitCode != 0 {
		t.Fatalf("make install: %s", r)
	}
	unit := filepath.Join(prefix, "lib/systemd/system/fikit.service")
	r := runCmd(t, time.Minute, nil, analyze, "verify", unit)
	t.Logf("systemd-analyze verify %s: exit %d %s%s", filepath.Base(unit), r.ExitCode, r.Stdout, r.Stderr)
	if r.ExitCode != 0 || strings.TrimSpace(r.Stdout+r.Stderr) != "" {
		t.Errorf("systemd-analyze verify: %s", r)
	}
	r = runCmd(t, time.Minute, nil, analyze, "security", "--offline=yes", "--threshold=30", unit)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	t.Logf("systemd-analyze security: %s", lines[len(lines)-1])
	if r.ExitCode != 0 {
		t.Errorf("systemd-analyze security --threshold=30 (3.0 of 10): %s", r)
	}
	if sysusers, err := exec.LookPath("systemd-sysusers"); err == nil {
		conf := filepath.Join(prefix, "lib/sysusers.d/fikit.conf")
		r := runCmd(t, time.Minute, nil, sysusers, "--dry-run", "--root", t.TempDir(), conf)
		if r.ExitCode != 0 || !strings.Contains(r.Stdout+r.Stderr, "Creating user 'fikit'") {
			t.Errorf("systemd-sysusers %s: %s", conf, r)
		}
	}
}

// installedFiles lists the files and links under root, relative to it.
func installedFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
