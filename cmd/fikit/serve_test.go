package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const hardStopChildEnv = "FIKIT_HARDSTOP_CHILD"

// TestHardStopChild is the child of TestHardStopOnSecondSignal: a shutdown
// that never finishes (served is never closed), then a second SIGTERM.
func TestHardStopChild(t *testing.T) {
	if os.Getenv(hardStopChildEnv) == "" {
		t.Skip("child of TestHardStopOnSecondSignal")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the first signal: shutting down
	go hardStop(ctx, make(chan struct{}), slog.New(slog.NewTextHandler(os.Stderr, nil)))
	time.Sleep(200 * time.Millisecond) // hardStop listens by now
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(10 * time.Second) // a shutdown that hangs
	os.Exit(0)                   // not reached when the second signal ends it
}

// A second SIGTERM during a shutdown that hangs ends the daemon at once,
// with status 1 and a line saying why (a supervisor that wants it gone gets
// it gone).
func TestHardStopOnSecondSignal(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardStopChild$", "-test.v")
	cmd.Env = append(os.Environ(), hardStopChildEnv+"=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || took > 5*time.Second || !strings.Contains(string(out), "second signal") {
		t.Fatalf("exit %v after %v, want status 1 at once with a line about the second signal:\n%s", err, took, out)
	}
}
