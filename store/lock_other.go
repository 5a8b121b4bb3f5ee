//go:build !unix

package store

// lockedByOther cannot probe the lock here; Badger's own error is returned.
func lockedByOther(string) bool { return false }

// checkAccess cannot check here.
func checkAccess(string) error { return nil }
