package launchprobe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindLibcudaOnLibraryPath(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda.so.1")
	if err := os.WriteFile(lib, []byte("not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", "/nonexistent:"+dir)
	got, err := FindLibcuda()
	if err != nil || got != lib {
		t.Fatalf("FindLibcuda() = %q, %v; want %q", got, err, lib)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.so")); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
	if os.Geteuid() != 0 {
		t.Skip("attaching needs root")
	}
	// A library without launch entry points: the programs load and the
	// verifier accepts them, but there is nothing to attach to.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(self)
	if errors.Is(err, os.ErrPermission) { // root in a container that denies bpf()
		t.Skipf("no uprobes here: %v", err)
	}
	if !errors.Is(err, ErrNoLaunchSymbols) {
		t.Fatalf("Open(%s) = %v, %v; want ErrNoLaunchSymbols", self, p, err)
	}
}
