//go:build unix

package store

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// checkWritable returns an error wrapping ErrUnwritable when dir is gone,
// replaced (not the directory opened, same) or on a read-only file system,
// and one wrapping ErrNoSpace when fewer than need bytes are free there.
func checkWritable(dir string, same os.FileInfo, need int64) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", dir, ErrUnwritable, err)
	}
	if same != nil && !os.SameFile(fi, same) {
		return fmt.Errorf("%s: %w: the directory was replaced", dir, ErrUnwritable)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("%s: %w: %v", dir, ErrUnwritable, err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("%s: %w: read-only file system", dir, ErrUnwritable)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Errorf("%s: %w: %d KiB free, %d KiB needed", dir, ErrNoSpace, free>>10, need>>10)
	}
	return nil
}

// diskUsage is the space the regular files directly in dir take on disk
// (allocated blocks: Badger's preallocated files count what they use).
func diskUsage(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		var st unix.Stat_t
		if e.Type().IsRegular() && unix.Stat(dir+"/"+e.Name(), &st) == nil {
			n += st.Blocks * 512
		}
	}
	return n
}
