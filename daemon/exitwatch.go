package daemon

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/scheduler"
)

// exitWatcher notices at once when a hooked process on this machine ends.
// Without it a task that exits without its Goodbye — a Go program (os.Exit
// skips the hook's atexit handler), a crash, kill -9 — stays registered until
// it misses its heartbeats (DeadAfter, 80 ms by default): a dead holder keeps
// the GPU from everyone else that long. Conversely, a watched task's silence
// is not taken for death so soon (scheduler.TaskWatched): on a CPU-starved
// host heartbeats come late, and dropping a live task makes it re-register.
//
// A Register carries the hook's pid, but that pid is only meaningful in the
// daemon's pid namespace. So a task is watched only when the process with
// that pid here owns the very UDP socket the Register came from (its inode,
// from /proc/net/udp, among the process's open files); then a pidfd, polled
// by the runtime's netpoller (no thread per task), reports its exit. Tasks
// in other namespaces, or on other machines, fall back to heartbeats.
type exitWatcher struct {
	wake func() // makes the receive loop pick up exits

	mu      sync.Mutex
	watched map[scheduler.TaskID]*os.File // its pidfd
	exited  []exitedTask
	started []watchResult // watches established or failed since takeStarted
	closed  bool
}

// watchResult says whether task id's watch could be established (err nil)
// or why not.
type watchResult struct {
	id  scheduler.TaskID
	err error
}

type exitedTask struct {
	id  scheduler.TaskID
	pid uint32
}

func newExitWatcher(wake func()) *exitWatcher {
	return &exitWatcher{wake: wake, watched: map[scheduler.TaskID]*os.File{}}
}

// watch starts watching task id, registered by pid from src, if that
// process provably owns src; it returns at once (the checks run in the
// background).
func (w *exitWatcher) watch(id scheduler.TaskID, pid uint32, src netip.AddrPort) {
	if !watchable(pid, src) {
		return
	}
	go func() {
		failed := func(err error) {
			w.mu.Lock()
			w.started = append(w.started, watchResult{id, err})
			w.mu.Unlock()
			w.wake()
		}
		if err := ownsSocket(int(pid), src); err != nil {
			failed(err)
			return
		}
		fd, err := unix.PidfdOpen(int(pid), unix.PIDFD_NONBLOCK)
		if err != nil {
			failed(fmt.Errorf("pidfd_open: %w", err))
			return
		}
		// Checked again with the pidfd held: the pid cannot be reused now.
		if err := ownsSocket(int(pid), src); err != nil {
			unix.Close(fd)
			failed(err)
			return
		}
		w.hold(id, pid, fd)
	}()
}

// wait blocks (in the netpoller) until the process ends or the watch is
// cancelled (the pidfd closed).
func (w *exitWatcher) wait(id scheduler.TaskID, pid uint32, f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(p, 0)
		exited = n > 0
		return exited // false: wait for the pidfd to become readable
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[id] != f {
		return // cancelled
	}
	delete(w.watched, id)
	f.Close()
	if err == nil && exited && !w.closed {
		w.exited = append(w.exited, exitedTask{id, pid})
		w.wake()
	}
}

// forget stops watching a task that left or was dropped. It reports whether
// the task's process had ended (its exit not yet picked up): a silent task
// dropped as it exits is an exit, not a lost heartbeat.
func (w *exitWatcher) forget(id scheduler.TaskID) (exited bool) {
	w.mu.Lock()
	f := w.watched[id]
	delete(w.watched, id)
	w.mu.Unlock()
	if f == nil {
		return false
	}
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(p, 0)
			exited = n > 0
		})
	}
	f.Close() // ends its wait
	return exited
}

// size is how many processes are watched.
func (w *exitWatcher) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watched)
}

// pending reports whether processes ended that takeExited has not taken.
func (w *exitWatcher) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.exited) > 0
}

// takeExited returns the tasks whose processes ended since the last call.
func (w *exitWatcher) takeExited() []exitedTask {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.exited
	w.exited = nil
	return e
}

// watchPinned watches a unix-socket task's process: pidfd, from the
// datagram it registered with (SCM_PIDFD), is that process, whatever its
// pid names since; the watcher owns it. Without one (a kernel before 6.5)
// the pid, which the kernel gave, is opened now: the process could have
// exited and its pid been reused since it sent (docs/kubernetes.md).
func (w *exitWatcher) watchPinned(id scheduler.TaskID, pid uint32, pidfd int) {
	go func() {
		fd := pidfd
		if fd < 0 {
			var err error
			if fd, err = unix.PidfdOpen(int(pid), unix.PIDFD_NONBLOCK); err != nil {
				w.mu.Lock()
				w.started = append(w.started, watchResult{id, fmt.Errorf("pidfd_open: %w", err)})
				w.mu.Unlock()
				w.wake()
				return
			}
		} else {
			// The datagram's pidfd is blocking; the wait polls it.
			_ = unix.SetNonblock(fd, true)
		}
		w.hold(id, pid, fd)
	}()
}

// hold keeps the pidfd fd of task id's process (pid) and waits for its exit
// (on the calling goroutine), unless the watcher closed or already holds
// one for id.
func (w *exitWatcher) hold(id scheduler.TaskID, pid uint32, fd int) {
	f := os.NewFile(uintptr(fd), "pidfd")
	w.mu.Lock()
	if w.closed || w.watched[id] != nil {
		w.mu.Unlock()
		f.Close()
		return
	}
	w.watched[id] = f
	w.started = append(w.started, watchResult{id, nil})
	w.mu.Unlock()
	w.wake()
	w.wait(id, pid, f)
}

// watchable reports whether watch tries to watch a task registered by pid
// from src: a process on this machine.
func watchable(pid uint32, src netip.AddrPort) bool {
	return pid != 0 && src.Addr().IsLoopback()
}

// takeStarted returns the watches established or failed since the last
// call.
func (w *exitWatcher) takeStarted() []watchResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.started
	w.started = nil
	return s
}

func (w *exitWatcher) close() {
	w.mu.Lock()
	w.closed = true
	files := w.watched
	w.watched = map[scheduler.TaskID]*os.File{}
	w.mu.Unlock()
	for _, f := range files {
		f.Close()
	}
}

// Errors of ownsSocket.
var (
	errNoSocket    = errors.New("no such socket")
	errNotOwner    = errors.New("socket not owned by the process")
	errUnwatchable = errors.New("address family not watched")
)

// ownsSocket checks that process pid (in this pid namespace) has the UDP
// socket bound to src open.
func ownsSocket(pid int, src netip.AddrPort) error {
	table := "/proc/net/udp"
	switch {
	case src.Addr().Is4():
	case src.Addr().Is4In6():
		return errUnwatchable // a dual-stack listener: rare for a loopback daemon
	default:
		table = "/proc/net/udp6"
	}
	inode, err := socketInode(table, src)
	if err != nil {
		return err
	}
	want := "socket:[" + inode + "]"
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
			return nil
		}
	}
	return errNotOwner
}

// socketInode finds the inode of the socket bound to src in a
// /proc/net/udp{,6} table.
func socketInode(table string, src netip.AddrPort) (string, error) {
	f, err := os.Open(table)
	if err != nil {
		return "", err
	}
	defer f.Close()
	local := procNetAddr(src)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
		fields := strings.Fields(sc.Text())
		if len(fields) >= 10 && strings.EqualFold(fields[1], local) {
			return fields[9], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errNoSocket
}

// procNetAddr formats src as /proc/net/udp{,6} does: the address as the
// kernel stores it (32-bit words in host order: little-endian on the
// machines fikit builds for), the port in big-endian hex.
func procNetAddr(src netip.AddrPort) string {
	b := src.Addr().AsSlice()
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return fmt.Sprintf("%s:%04X", strings.ToUpper(hex.EncodeToString(b)), src.Port())
}
