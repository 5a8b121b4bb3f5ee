package daemon

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// deadlineTimer wakes the receive loop at the core's deadline. Go's runtime
// timers (and so read deadlines) fire most of a millisecond late for short
// waits here, which would delay every time-driven decision — a waiting
// kernel granted when its holder goes idle, say — by about that much. This
// thread sleeps in ppoll on an eventfd with a 1 ns timer slack (tens of
// microseconds late at most) and then expires the socket's read deadline,
// which returns the loop's Read at once.
type deadlineTimer struct {
	efd      int
	deadline atomic.Int64 // CLOCK_MONOTONIC ns; 0: none
	closed   atomic.Bool
	fire     func()
	done     chan struct{}
}

func newDeadlineTimer(fire func()) (*deadlineTimer, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	t := &deadlineTimer{efd: efd, fire: fire, done: make(chan struct{})}
	go t.run()
	return t, nil
}

// set arms the timer for d (0 disarms it). Only an earlier deadline needs to
// wake the sleeping thread; a later one is seen when it wakes.
func (t *deadlineTimer) set(d int64) {
	old := t.deadline.Swap(d)
	if d != 0 && (old == 0 || d < old) {
		t.kick()
	}
}

func (t *deadlineTimer) kick() {
	var one = [8]byte{1}
	_, _ = unix.Write(t.efd, one[:])
}

func (t *deadlineTimer) close() {
	t.closed.Store(true)
	t.kick()
	<-t.done
	unix.Close(t.efd)
}

func (t *deadlineTimer) run() {
	defer close(t.done)
	runtime.LockOSThread()
	// The default 50 µs slack would dominate the precision.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	fds := []unix.PollFd{{Fd: int32(t.efd), Events: unix.POLLIN}}
	var buf [8]byte
	for !t.closed.Load() {
		var ts *unix.Timespec
		if d := t.deadline.Load(); d != 0 {
			rem := d - monotonic()
			if rem <= 0 {
				if t.deadline.CompareAndSwap(d, 0) {
					t.fire()
				}
				continue
			}
			// Re-check at least every 100 ms (a lost kick costs no more).
			v := unix.NsecToTimespec(min(rem, int64(100*time.Millisecond)))
			ts = &v
		}
		if _, err := unix.Ppoll(fds, ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			time.Sleep(time.Millisecond)
		}
		_, _ = unix.Read(t.efd, buf[:])
	}
}
