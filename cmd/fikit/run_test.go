package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeHook is a file to pass as --hook: the tests check what reaches the
// child's environment, not that the hook loads (ld.so warns and goes on).
func fakeHook(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), hookLib)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runFikit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"fikit"}, args...), &out)
	return out.String(), err
}

func TestHookEnv(t *testing.T) {
	env := []string{"PATH=/bin", "LD_PRELOAD=/a.so:/h/libfikit_hook.so /b.so", "FIKIT_PRIORITY=9", "FIKIT_SCHEDULER=x:1"}
	got := hookEnv(env, "/h/libfikit_hook.so", 0, 0, "svc", "", "")
	want := []string{"PATH=/bin", "FIKIT_SCHEDULER=x:1", "LD_PRELOAD=/h/libfikit_hook.so:/a.so:/b.so",
		"FIKIT_PRIORITY=0", "FIKIT_TASK_KEY=svc"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hookEnv =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = hookEnv([]string{"HOME=/root", "FIKIT_WEIGHT=7"}, "/h.so", 5, 3, "", "10.0.0.1:7070", "/k")
	want = []string{"HOME=/root", "LD_PRELOAD=/h.so", "FIKIT_PRIORITY=5", "FIKIT_WEIGHT=3", "FIKIT_SCHEDULER=10.0.0.1:7070", "FIKIT_AUTH_KEY_FILE=/k"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hookEnv = %q, want %q", got, want)
	}
}

// The child gets the hook first in LD_PRELOAD and the FIKIT_* variables.
func TestRunSetsEnvironment(t *testing.T) {
	hook, out := fakeHook(t), filepath.Join(t.TempDir(), "env")
	t.Setenv("LD_PRELOAD", "")
	_, err := runFikit(t, "run", "-p", "3", "--weight", "2", "--task-key", "svc a", "--scheduler", "127.0.0.1:9", "--hook", hook, "--",
		"sh", "-c", `printf '%s|%s|%s|%s|%s' "$LD_PRELOAD" "$FIKIT_PRIORITY" "$FIKIT_WEIGHT" "$FIKIT_TASK_KEY" "$FIKIT_SCHEDULER" >"$0"`, out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := hook + "|3|2|svc a|127.0.0.1:9"; string(b) != want {
		t.Errorf("child saw %q, want %q", b, want)
	}
}

func TestRunExitStatus(t *testing.T) {
	hook := fakeHook(t)
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		_, err := runFikit(t, "run", "--hook", hook, "--", "sh", "-c", tc.script)
		if got := exitCode(err); (err == nil) != (tc.code == 0) || err != nil && got != tc.code {
			t.Errorf("%q: exit %d (%v), want %d", tc.script, got, err, tc.code)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	hook := fakeHook(t)
	for _, args := range [][]string{
		{"run", "-p", "10", "--hook", hook, "--", "true"},
		{"run", "--priority", "-1", "--hook", hook, "--", "true"},
		{"run", "--weight", "0", "--hook", hook, "--", "true"},
		{"run", "-w", "101", "--hook", hook, "--", "true"},
		{"run", "--hook", hook},
		{"run", "--task-key", "", "--hook", hook, "--", "true"},
	} {
		_, err := runFikit(t, args...)
		if exitCode(err) != 2 {
			t.Errorf("%q: %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
	if _, err := runFikit(t, "run", "--hook", filepath.Join(t.TempDir(), "nope.so"), "--", "true"); err == nil ||
		!strings.Contains(err.Error(), "nope.so") {
		t.Errorf("missing --hook: %v", err)
	}
	if _, err := runFikit(t, "run", "--hook", hook, "--", "/no/such/command"); exitCode(err) != 127 {
		t.Errorf("missing command: %v (exit %d), want 127", err, exitCode(err))
	}
}

// Without --hook the library is looked up beside the binary, then in
// <prefix>/lib/fikit; the error names both places.
func TestFindHook(t *testing.T) {
	_, err := findHook("")
	dir, derr := binDir()
	if derr != nil {
		t.Fatal(derr)
	}
	if _, serr := os.Stat(filepath.Join(dir, hookLib)); serr == nil {
		t.Skip("a hook lies beside the test binary")
	}
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, hookLib)) ||
		!strings.Contains(err.Error(), filepath.Join(filepath.Dir(dir), "lib", "fikit", hookLib)) {
		t.Errorf("findHook: %v", err)
	}
}

// A signal sent to fikit reaches the child, which decides its fate.
func TestRunForwardsSignals(t *testing.T) {
	hook, ready := fakeHook(t), filepath.Join(t.TempDir(), "ready")
	done := make(chan error, 1)
	go func() {
		_, err := runFikit(t, "run", "--hook", hook, "--", "sh", "-c",
			`trap 'exit 42' USR1; : >"$0"; while :; do sleep 0.01; done`, ready)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 42 {
			t.Errorf("run ended with %v, want the child's exit 42", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("signal not forwarded")
	}
}
