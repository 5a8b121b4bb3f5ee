package bench

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// hogScript spins one CPU in a shell builtin loop: no forks, no system
// calls, nothing but user time.
const hogScript = "while :; do :; done"

// hog is a CPU hog: one spinning child process per thread, at the bench's
// own niceness (0 unless the bench was started niced), standing in for other
// work on a busy host. The children die with the bench however it ends:
// Stop kills them, so does cancelling the context Start was given, and the
// kernel kills them (PR_SET_PDEATHSIG) if the bench dies first.
type hog struct {
	cmds []*exec.Cmd
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startHog starts n spinning children; they run until Stop or until ctx is
// done.
func startHog(ctx context.Context, n int) (*hog, error) {
	h := &hog{stop: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the
		// child exits: this goroutine keeps that thread (locked) until the
		// children are gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(h.done)
		for i := 0; i < n; i++ {
			cmd := exec.Command("sh", "-c", hogScript)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				h.kill()
				started <- fmt.Errorf("CPU hog: %w", err)
				return
			}
			h.cmds = append(h.cmds, cmd)
		}
		started <- nil
		select {
		case <-h.stop:
		case <-ctx.Done():
		}
		h.kill()
	}()
	if err := <-started; err != nil {
		<-h.done
		return nil, err
	}
	return h, nil
}

// kill ends and reaps the children started so far.
func (h *hog) kill() {
	for _, c := range h.cmds {
		_ = c.Process.Kill()
	}
	for _, c := range h.cmds {
		_ = c.Wait()
	}
}

// Stop ends the hog and waits until its children have exited.
func (h *hog) Stop() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
}

// pids are the children's process IDs.
func (h *hog) pids() []int {
	var out []int
	for _, c := range h.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}
