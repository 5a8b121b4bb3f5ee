package harness

import "golang.org/x/sys/unix"

// Pid is the process Start started: the replayer itself, or for a hooked
// service `fikit run`, whose child is the replayer (the hook registers the
// child's pid with the daemon, and simgpu's timeline records the child's).
func (p *Proc) Pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// MonotonicNs reads CLOCK_MONOTONIC: the clock of simgpu's timeline, of
// fikit-replay's start_ns and of the daemon's decisions.
func MonotonicNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
