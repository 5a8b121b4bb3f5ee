package storetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes at a new directory and returns it; it
// is unmounted when the test ends. It skips the test where it cannot mount
// (not root).
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes a file into dir until at most leave bytes are free on its
// file system, and returns the file's path.
func Fill(dir string, leave int64) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for left := int64(st.Bavail)*int64(st.Bsize) - leave; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			break // full: as intended
		}
	}
	return path, nil
}
