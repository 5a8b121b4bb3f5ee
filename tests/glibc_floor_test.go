package tests

// The hook's glibc floor (README "Using it on a GPU machine";
// hookclient/glibc_floor.h): libfikit_hook.so is preloaded into services
// built on other distributions, so it must need no glibc newer than theirs,
// or the service does not start.

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// glibcFloor is the newest glibc the hook may need: RHEL 8's (Ubuntu 20.04
// has 2.31, Debian 11 2.31).
var glibcFloor = [2]int{2, 28}

func TestHookGlibcFloor(t *testing.T) {
	hook := requireBins(t, "libfikit_hook.so")[0]
	f, err := elf.Open(hook)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	newest, by := [2]int{}, ""
	for _, s := range syms {
		v, ok := glibcVersion(s.Version)
		if !ok {
			continue
		}
		if v[0] > newest[0] || v[0] == newest[0] && v[1] > newest[1] {
			newest, by = v, s.Name+"@"+s.Version
		}
		if v[0] > glibcFloor[0] || v[0] == glibcFloor[0] && v[1] > glibcFloor[1] {
			t.Errorf("%s@%s: newer than the floor, glibc %d.%d (bind the oldest version: hookclient/glibc_floor.h)",
				s.Name, s.Version, glibcFloor[0], glibcFloor[1])
		}
	}
	t.Logf("the newest glibc symbol version the hook needs: %d.%d (%s)", newest[0], newest[1], by)
	// Before 2.34 the pthread and dl functions are in these libraries.
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range []string{"libpthread.so.0", "libdl.so.2"} {
		if !slices.Contains(needed, lib) {
			t.Errorf("DT_NEEDED %v lacks %s: a glibc before 2.34 would not find its functions", needed, lib)
		}
	}
}

// The hook loads under glibc 2.31 (a loader from before libpthread and libdl
// were merged into libc): it is linked with -z now, so every symbol it
// imports is bound at load or the program does not start.
func TestHookLoadsUnderOlderGlibc(t *testing.T) {
	hook := requireBins(t, "libfikit_hook.so")[0]
	out, err := exec.Command(filepath.Join(repoRoot(t), "tests", "old-glibc.sh")).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Skipf("no older glibc to load the hook with (tests/old-glibc.sh fetches Debian 11's): %v\n%s", err, stderr)
	}
	dir := strings.TrimSpace(string(out))
	lib := filepath.Join(dir, "lib", "x86_64-linux-gnu")
	ld, getconf := filepath.Join(lib, "ld-2.31.so"), filepath.Join(dir, "usr", "bin", "getconf")
	args := []string{"--library-path", lib, getconf, "GNU_LIBC_VERSION"}
	if r := runCmd(t, 30*time.Second, nil, ld, args...); r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != "glibc 2.31" {
		t.Fatalf("glibc 2.31's getconf without the hook: %s", r)
	}
	r := runCmd(t, 30*time.Second, nil, ld, append([]string{"--preload", hook}, args...)...)
	if r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != "glibc 2.31" {
		t.Errorf("a program of glibc 2.31 with the hook preloaded: %s", r)
	}
}

// glibcVersion parses "GLIBC_2.17".
func glibcVersion(v string) ([2]int, bool) {
	s, ok := strings.CutPrefix(v, "GLIBC_")
	if !ok {
		return [2]int{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return [2]int{major, minor}, err1 == nil && err2 == nil
}
