package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fikit/fikit/daemon"
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

// TestPrintStatusPods: with pods among the tasks, the table has a
// NAMESPACE/POD column: a known pod's, an unknown pod's UID, "-" for a
// host service; without pods there is no such column.
func TestPrintStatusPods(t *testing.T) {
	st := &daemon.Status{Listen: "127.0.0.1:7070", Tasks: []daemon.TaskStatus{
		{ID: 1, Key: "ns:infer/resnet", Priority: 0, Role: "holder", Phase: "sharing", Tenant: "namespace:infer",
			PodUID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", Namespace: "infer", Pod: "resnet-7d9"},
		{ID: 2, Key: "pod:11111111-2222-3333-4444-555555555555/bert", Priority: 9, Role: "waiter", Phase: "profiling",
			PodUID: "11111111-2222-3333-4444-555555555555"},
		{ID: 3, Key: "host", Priority: 5, Role: "waiter", Phase: "sharing", Tenant: "uid:0"},
	}}
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"NAMESPACE/POD", "infer/resnet-7d9", "pod 11111111-2222-3333-4444-555555555555 (not known yet)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	st.Tasks = st.Tasks[2:]
	b.Reset()
	if err := printStatus(&b, st); err != nil || strings.Contains(b.String(), "NAMESPACE/POD") {
		t.Errorf("a pod column without pods: %v\n%s", err, b.String())
	}
}

func TestSplitListen(t *testing.T) {
	udpAddr, paths, err := splitListen([]string{"unix:/run/fikit/sock/hooks.sock", "127.0.0.1:7070", "unix:/x//y.sock"})
	if err != nil || udpAddr != "127.0.0.1:7070" || strings.Join(paths, " ") != "/run/fikit/sock/hooks.sock /x/y.sock" {
		t.Errorf("%q %q %v", udpAddr, paths, err)
	}
	if a, _, _ := splitListen([]string{"unix:/s"}); a != "127.0.0.1:0" {
		t.Errorf("unix only: UDP %q, want an unused loopback port", a)
	}
	for _, bad := range [][]string{{"unix:rel.sock"}, {"127.0.0.1:1", "127.0.0.1:2"}} {
		if _, _, err := splitListen(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
