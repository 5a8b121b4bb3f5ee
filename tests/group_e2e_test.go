package tests

// Services of other users and the daemon's --group (docs/security.md): a
// member's hook maps the board and reads the admin socket, and changes
// nothing there; without the group, another user's hook is gated by UDP.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/profiler"
)

func TestGroupSharesTheBoard(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs a hooked service as another user: needs root")
	}
	bins := requireBins(t, "fikit", "hook-launcher", "libfikit_hook.so")
	const gid = 4243 // the group; the service's user is otherUID, a member
	// The data directory's parents let everyone through, as /var/lib does.
	base, err := os.MkdirTemp("", "fikit-group-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the member runs is copied where it may read it: the clone
	// itself may live under a directory only root can enter.
	bins, env0 := copyForOthers(t, base, bins)
	asMember := func(timeout time.Duration, env []string, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID, Groups: []uint32{gid}}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	for _, shared := range []bool{true, false} {
		name := "with --group"
		args := []string{"--group", "4243"}
		if !shared {
			name, args = "without --group", nil
		}
		t.Run(name, func(t *testing.T) {
			dataDir, err := os.MkdirTemp(base, "data-")
			if err != nil {
				t.Fatal(err)
			}
			d := startServe(t, dataDir, "", args...)
			defer d.stop(t)
			env := append(env0(uniqueShm(t), d.addr), "FIKIT_PRIORITY=5", "FIKIT_LOG=info", "FIKIT_CONNECT_TIMEOUT_MS=3000")
			out, err := asMember(time.Minute, env, bins[1], filepath.Join(base, "kernels.ptx"), "direct", "50")
			if err != nil {
				t.Fatalf("hooked launcher as uid %d: %v\n%s", otherUID, err, tail(out, 20))
			}
			mapped := strings.Contains(out, "sharing the scheduler's board")
			if mapped != shared {
				t.Errorf("the other user's hook shared the board: %v, want %v\n%s", mapped, shared, tail(out, 20))
			}
			if !shared {
				if !strings.Contains(out, "gating by UDP only") {
					t.Errorf("the hook did not say why it goes by UDP\n%s", tail(out, 20))
				}
				return
			}
			st, err := asMember(30*time.Second, nil, bins[0], "status", "--data-dir", dataDir, "--json")
			var doc struct {
				Stats struct {
					Registered int `json:"registered"`
				} `json:"stats"`
			}
			if err != nil || json.Unmarshal([]byte(st), &doc) != nil || doc.Stats.Registered != 1 {
				t.Errorf("fikit status as a member of the group: %v\n%s", err, st)
			}
			// A profile root imports; the member reads it, and may not
			// replace or remove it.
			prof := dataDir + ".profile.json" // where the member may read it
			if err := os.WriteFile(prof, []byte(groupProfile(t, "group-svc")), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := runCmd(t, 30*time.Second, nil, bins[0], "profile", "import", prof, "--data-dir", dataDir); r.ExitCode != 0 {
				t.Fatalf("fikit profile import as root: %s", r)
			}
			if out, err := asMember(30*time.Second, nil, bins[0], "profile", "show", "group-svc", "--data-dir", dataDir); err != nil {
				t.Errorf("fikit profile show as a member of the group: %v\n%s", err, out)
			}
			for _, change := range [][]string{{"rm", "group-svc"}, {"import", "--force", prof}} {
				out, err := asMember(30*time.Second, nil, bins[0], append(append([]string{"profile"}, change...), "--data-dir", dataDir)...)
				if err == nil || !strings.Contains(out, "only the daemon's user") {
					t.Errorf("fikit profile %s as a member of the group: %v, want refused\n%s", change[0], err, out)
				}
			}
			if r := runCmd(t, 30*time.Second, nil, bins[0], "profile", "show", "group-svc", "--data-dir", dataDir); r.ExitCode != 0 {
				t.Errorf("the profile is gone: %s", r)
			}
		})
	}
}

// copyForOthers copies the fikit binary and the hooked launcher (bins), the
// hook, simgpu's driver and the launcher's PTX into dir, readable by every
// user, and returns the copies of bins and a hookEnv that uses the copies.
func copyForOthers(t *testing.T, dir string, bins []string) ([]string, func(shm, sched string) []string) {
	t.Helper()
	cp := func(src, dst string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	out := []string{cp(bins[0], filepath.Join(dir, "bin", "fikit")), cp(bins[1], filepath.Join(dir, "bin", "hook-launcher"))}
	hook := cp(requireBins(t, "libfikit_hook.so")[0], filepath.Join(dir, "bin", "libfikit_hook.so"))
	simgpu := filepath.Dir(cp(requireBins(t, "simgpu/libcuda.so.1")[0], filepath.Join(dir, "bin", "simgpu", "libcuda.so.1")))
	cp(kernelsPTX(t), filepath.Join(dir, "kernels.ptx"))
	return out, func(shm, sched string) []string {
		env := hookEnv(t, shm, sched)
		for i, kv := range env {
			switch {
			case strings.HasPrefix(kv, "LD_LIBRARY_PATH="):
				env[i] = "LD_LIBRARY_PATH=" + simgpu
			case strings.HasPrefix(kv, "LD_PRELOAD="):
				env[i] = strings.Replace(kv, requireBins(t, "libfikit_hook.so")[0], hook, 1)
			}
		}
		return env
	}
}

// groupProfile is a complete profile of one kernel, in the export format.
func groupProfile(t *testing.T, key string) string {
	t.Helper()
	b, err := profiler.NewBuilder(key, "fikit simgpu", 10)
	if err != nil {
		t.Fatal(err)
	}
	for run := uint32(1); run <= 10; run++ {
		b.AddRecords(run, []profiler.Record{{KernelID: 7, DurationNs: 50_000, Flags: profiler.FlagGapSpansRunEnd}})
		b.EndRun(run, 1, 60_000, true)
	}
	j, err := json.Marshal(b.Profile())
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}
