package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// preloadSource is a library that says it was loaded.
const preloadSource = `#include <unistd.h>
__attribute__((constructor)) static void loaded(void) { write(2, "PRELOADED\n", 10); }
`

func buildPreload(t *testing.T, cc string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte(preloadSource), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libp.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Skipf("%s: %v\n%s", cc, err, out)
	}
	return lib
}

// TestInstallHookAndLIB: install-hook puts the library under each $LIB
// name, and glibc's loader, given the webhook's LD_PRELOAD
// (DIR/$LIB/libfikit_hook.so), finds it on this machine.
func TestInstallHookAndLIB(t *testing.T) {
	lib := buildPreload(t, "cc")
	dir := t.TempDir()
	var out bytes.Buffer
	if err := installHook(lib, dir, &out); err != nil {
		t.Fatal(err)
	}
	for _, sub := range hookLibDirs {
		fi, err := os.Stat(filepath.Join(dir, sub, hookLib))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", sub, fi, err)
		}
	}
	// Again over the first: idempotent, no temporary files left.
	if err := installHook(lib, dir, &out); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*", ".libfikit*")); len(m) != 0 {
		t.Errorf("left behind: %v", m)
	}
	cmd := exec.Command("/bin/true")
	cmd.Env = []string{"LD_PRELOAD=" + dir + "/$LIB/" + hookLib}
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "PRELOADED") {
		t.Errorf("glibc did not preload through $LIB: %v %s", err, b)
	}
}

// TestMuslImageStartsUnhooked (issue 35, bad input): an image whose libc is
// musl cannot load the hook (built against glibc). Named directly in
// LD_PRELOAD it stops the program from starting; named through $LIB, as the
// webhook names it, musl's loader finds no such file and starts the program
// un-hooked.
// Needs musl-gcc (Debian's musl-tools; .ci/run installs it).
func TestMuslImageStartsUnhooked(t *testing.T) {
	if _, err := exec.LookPath("musl-gcc"); err != nil {
		t.Skip("no musl-gcc (apt-get install musl-tools)")
	}
	// The hook itself (make builds it before make test-go): it needs
	// glibc's loader and versioned symbols, which musl lacks.
	lib, err := filepath.Abs("../../bin/" + hookLib)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("no hook built: %v", err)
	}
	dir := t.TempDir()
	if err := installHook(lib, dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "m.c")
	if err := os.WriteFile(src, []byte("int main(void){return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "m")
	if out, err := exec.Command("musl-gcc", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("musl-gcc: %v\n%s", err, out)
	}
	run := func(preload string) error {
		cmd := exec.Command(prog)
		cmd.Env = []string{"LD_PRELOAD=" + preload}
		return cmd.Run()
	}
	if err := run(dir + "/lib/" + hookLib); err == nil {
		t.Error("a musl program preloading the hook by its plain path started: this test no longer shows why $LIB")
	}
	if err := run(dir + "/$LIB/" + hookLib); err != nil {
		t.Errorf("musl program with the webhook's LD_PRELOAD did not start: %v", err)
	}
}
