//go:build unix

package store_test

import "golang.org/x/sys/unix"

type statfsT = unix.Statfs_t

func statfs(path string, st *statfsT) error { return unix.Statfs(path, st) }
