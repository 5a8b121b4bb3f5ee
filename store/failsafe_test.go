//go:build linux

package store_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/store/storetest"
)

// closeWithin closes b and fails the test if that takes longer than d:
// a daemon's shutdown must not hang on a store it can no longer write.
func closeWithin(t *testing.T, b *store.Badger, d time.Duration) error {
	t.Helper()
	start := time.Now()
	err := b.Close()
	if took := time.Since(start); took > d {
		t.Errorf("Close took %v (bound %v)", took.Round(time.Millisecond), d)
	}
	return err
}

// TestBadgerDirRemoved: the data directory deleted under a running store.
// Writes fail at once with ErrUnwritable (Badger would retry flushing its
// memtable into the missing directory every second, forever), Close is
// bounded, and Get still answers from what is open.
func TestBadgerDirRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	b := openBadger(t, dir)
	if err := b.Put(storetest.Profile("a", "GPU", 1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err := b.Put(storetest.Profile("b", "GPU", 2, 3))
	if !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("Put into a removed directory: %v, want ErrUnwritable", err)
	}
	t.Logf("Put: %v", err)
	if _, err := b.Get("GPU", "a"); err != nil {
		t.Errorf("Get after the directory went: %v", err)
	}
	err = closeWithin(t, b, 3*time.Second)
	t.Logf("Close: %v", err)
}

// TestBadgerDiskFull: a data directory that fills up while the store runs.
// Badger writes through mmap, so a full tmpfs used to kill the process with
// SIGBUS; now Put refuses with ErrNoSpace before touching Badger, and
// succeeds again once there is room.
func TestBadgerDiskFull(t *testing.T) {
	dir := storetest.Tmpfs(t, 96<<20)
	db := filepath.Join(dir, "db")
	b := openBadger(t, db)
	if err := b.Put(storetest.Profile("a", "GPU", 1, 3)); err != nil {
		t.Fatal(err)
	}
	filler, err := storetest.Fill(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ { // enough to touch fresh pages of the mapped WAL
		err := b.Put(storetest.Profile(fmt.Sprintf("k%d", i), "GPU", uint64(i), 200))
		if !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("Put %d on a full disk: %v, want ErrNoSpace", i, err)
		}
	}
	os.Remove(filler)
	if err := b.Put(storetest.Profile("b", "GPU", 2, 3)); err != nil {
		t.Fatalf("Put after room was made: %v", err)
	}
	closeWithin(t, b, 3*time.Second)
	b = openBadger(t, db)
	defer b.Close()
	for _, k := range []string{"a", "b"} {
		if _, err := b.Get("GPU", k); err != nil {
			t.Errorf("after reopening: %v", err)
		}
	}
}

// TestBadgerOpenTooSmall: a data directory without room for Badger's files
// is refused with ErrNoSpace (it used to SIGBUS every later open).
func TestBadgerOpenTooSmall(t *testing.T) {
	dir := storetest.Tmpfs(t, 2<<20)
	_, err := store.OpenBadger(filepath.Join(dir, "db"), &store.BadgerOptions{Logger: quietLogger()})
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("open on a 2 MiB file system: %v, want ErrNoSpace", err)
	}
	t.Logf("open: %v", err)
}

// TestBadgerReadOnly: the data directory made read-only under a running
// store (a read-only bind mount over it: files Badger has open stay
// writable, new ones cannot be created, as after an administrator's
// remount). Put fails with ErrUnwritable, Close is bounded.
func TestBadgerReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount")
	}
	dir := filepath.Join(t.TempDir(), "db")
	b := openBadger(t, dir)
	if err := b.Put(storetest.Profile("a", "GPU", 1, 3)); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("bind mount: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("remount read-only: %v: %s", err, out)
	}
	err := b.Put(storetest.Profile("b", "GPU", 2, 3))
	if !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("Put on a read-only file system: %v, want ErrUnwritable", err)
	}
	t.Logf("Put: %v", err)
	err = closeWithin(t, b, 3*time.Second)
	t.Logf("Close: %v", err)
}
