package tests

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A user who may not open the running daemon's admin socket (no --group)
// is told so and what to do, not that no daemon answers.
func TestAdminSocketPermissionExplained(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs fikit as another user: needs root")
	}
	bins := requireBins(t, "fikit", "hook-launcher")
	// The data directory's parents let everyone through, as /var/lib does.
	base, err := os.MkdirTemp("", "fikit-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bins, _ = copyForOthers(t, base, bins)
	dataDir, err := os.MkdirTemp(base, "data-")
	if err != nil {
		t.Fatal(err)
	}
	d := startServe(t, dataDir, "")
	defer d.stop(t)
	for _, args := range [][]string{{"status"}, {"profile", "ls"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bins[0], append(args, "--data-dir", dataDir)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
		out, err := cmd.CombinedOutput()
		cancel()
		msg := string(out)
		if err == nil || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "--group") ||
			strings.Contains(msg, "no daemon answering") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Errorf("fikit %s as uid %d: want one line saying permission denied and --group, got %v\n%s", args[0], otherUID, err, msg)
		}
	}
}
