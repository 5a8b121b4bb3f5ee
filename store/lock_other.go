//go:build !unix

package store

import "os"

// lockedByOther cannot probe the lock here; Badger's own error is returned.
func lockedByOther(string) bool { return false }

// checkAccess cannot check here.
func checkAccess(string) error { return nil }

// checkWritable cannot check here: Badger's own errors are returned.
func checkWritable(string, os.FileInfo, int64) error { return nil }
