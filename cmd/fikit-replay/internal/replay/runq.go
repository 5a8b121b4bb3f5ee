package replay

import (
	"bytes"
	"os"
	"strconv"
)

// runqClock reads how long the replay's thread has waited in the kernel's
// run queue for a CPU (Linux schedstat, its second field, in ns). A run's
// growth of it is time the host, not the device or the hook, took from its
// JCT: on a loaded host it is most of the noise of a JCT, and subtracting
// it judges a hook's cost by what is left (tests/overhead_test.go).
type runqClock struct {
	f   *os.File
	buf [128]byte
}

// openRunq opens the calling thread's schedstat (the replay runs pinned to
// one OS thread); nil where the kernel does not keep it.
func openRunq() *runqClock {
	f, err := os.Open("/proc/thread-self/schedstat")
	if err != nil {
		return nil
	}
	c := &runqClock{f: f}
	if _, ok := c.read(); !ok {
		f.Close()
		return nil
	}
	return c
}

// read returns the thread's run-queue time so far.
func (c *runqClock) read() (int64, bool) {
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	return parseRunq(c.buf[:n])
}

func (c *runqClock) close() { c.f.Close() }

// parseRunq reads the second of schedstat's three numbers.
func parseRunq(b []byte) (int64, bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
