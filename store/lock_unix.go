//go:build unix

package store

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockedByOther reports whether another open file description holds the
// exclusive flock Badger takes on its directory: another process, or
// another Badger in this one.
func lockedByOther(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// checkAccess returns an error wrapping os.ErrPermission when this process
// may not read and write dir (or, if dir does not exist, its parent).
func checkAccess(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		err := unix.Access(d, unix.R_OK|unix.W_OK|unix.X_OK)
		if errors.Is(err, unix.ENOENT) && filepath.Dir(d) != d {
			continue
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
			return &os.PathError{Op: "access", Path: d, Err: err}
		}
		return nil
	}
}
