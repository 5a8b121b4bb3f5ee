package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBin makes a bin directory with the files New checks for.
func fakeBin(t *testing.T, simgpu bool) string {
	dir := t.TempDir()
	files := []string{"fikit", "fikit-replay", "libfikit_hook.so"}
	if simgpu {
		files = append(files, "simgpu/libcuda.so.1")
	}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// On simgpu the services load bin/simgpu's libcuda and share a private
// device; with GPU they load the driver the loader finds (the caller's
// LD_LIBRARY_PATH stays) and nothing of simgpu's is set. Either way no
// FIKIT_ setting of the caller leaks in.
func TestEnviron(t *testing.T) {
	t.Setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
	t.Setenv("FIKIT_SCHEDULER", "10.0.0.1:7070")
	if _, err := New(Options{Bin: fakeBin(t, false), Dir: t.TempDir()}); err == nil {
		t.Error("simgpu without bin/simgpu/libcuda.so.1: no error")
	}
	bin := fakeBin(t, false)
	gpu, err := New(Options{Bin: bin, Dir: t.TempDir(), GPU: true, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	env := gpu.environ()
	if !slices.Contains(env, "LD_LIBRARY_PATH=/usr/local/nvidia/lib64") || gpu.TimelinePath() != "" {
		t.Errorf("GPU: LD_LIBRARY_PATH lost or a timeline asked for: %q, %q", env, gpu.TimelinePath())
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "FIKIT_") && kv != "FIKIT_LOG=warn" {
			t.Errorf("GPU environment has %q", kv)
		}
	}

	bin = fakeBin(t, true)
	sim, err := New(Options{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	env = sim.environ()
	if !slices.Contains(env, "LD_LIBRARY_PATH="+filepath.Join(bin, "simgpu")) ||
		!slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "FIKIT_SIMGPU_SHM=") }) ||
		slices.Contains(env, "FIKIT_SCHEDULER=10.0.0.1:7070") {
		t.Errorf("simgpu environment: %q", env)
	}
}
