package store

import "errors"

var (
	// ErrNotFound is returned for a (GPU model, task key) with no profile.
	ErrNotFound = errors.New("profile not found")

	// ErrLocked is returned by OpenBadger when another process (normally
	// `fikit serve`) holds the directory. The error also wraps Badger's.
	// Callers can then ask that process through Remote.
	ErrLocked = errors.New("profile store is locked by another process")

	// ErrInvalidKey is returned for an empty GPU model or task key, a GPU
	// model containing a NUL byte, or a key too long to store.
	ErrInvalidKey = errors.New("invalid profile key")

	// ErrClosed is returned by every method of a closed store.
	ErrClosed = errors.New("profile store closed")

	// ErrUnwritable is returned by a write to a Badger store whose
	// directory can no longer be written: removed, or on a file system
	// that became read-only. Nothing is written; reads still work.
	ErrUnwritable = errors.New("profile store cannot be written")

	// ErrNoSpace is returned by OpenBadger and by writes when the file
	// system has less free space than the store needs to write safely
	// (Badger writes through mmap: running out of space there is a SIGBUS,
	// not an error). Nothing is written; a later write may succeed.
	ErrNoSpace = errors.New("not enough free space for the profile store")

	// ErrInsecureDir is returned by OpenBadger for a directory that other
	// users may write to: any of them could replace the profiles the
	// scheduler trusts, or the daemon's socket.
	ErrInsecureDir = errors.New("profile store directory is writable by other users")

	// ErrUnavailable is returned by a RemoteStore that cannot reach the
	// daemon's socket.
	ErrUnavailable = errors.New("profile store daemon unavailable")
)
