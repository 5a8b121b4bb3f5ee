package board

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Waiter is a hook's side of a board's waiter slots, for Go clients (the
// bench's round trip, tests): the hook in C does the same (hookclient/
// waiter.c).
type Waiter struct {
	mem []byte
}

// OpenWaiter maps the board at path if it is the one of generation gen.
func OpenWaiter(path string, gen uint64) (*Waiter, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, FileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("board: map %s: %w", path, err)
	}
	if binary.LittleEndian.Uint64(mem[offMagic:]) != Magic || binary.LittleEndian.Uint64(mem[offGen:]) != gen {
		unix.Munmap(mem)
		return nil, fmt.Errorf("board: %s is not the board of generation %d", path, gen)
	}
	return &Waiter{mem: mem}, nil
}

func (w *Waiter) u32(task uint32, off int) *atomic.Uint32 { return u32At(w.mem, slotOff(task)+off) }

// Ask takes task's slot for request seq, before the request is sent; false
// if the task does not own the slot or another request waits in it.
func (w *Waiter) Ask(task, seq uint32) bool {
	return w.u32(task, offSlotTask).Load() == task && w.u32(task, offSlotWait).CompareAndSwap(0, seq)
}

// Await waits up to timeout for the slot's answer to seq, and gives the
// slot back: the grant's credit and whether it came.
func (w *Waiter) Await(task, seq uint32, timeout time.Duration) (credit uint32, granted bool) {
	defer w.u32(task, offSlotWait).CompareAndSwap(seq, 0)
	gen := w.u32(task, offSlotGen)
	deadline := time.Now().Add(timeout)
	for {
		g := gen.Load()
		if w.u32(task, offSlotGrant).Load() == seq {
			return w.u32(task, offSlotCredit).Load(), true
		}
		left := time.Until(deadline)
		if left <= 0 || w.u32(task, offSlotTask).Load() != task {
			return 0, false
		}
		ts := unix.NsecToTimespec(int64(left))
		futex(gen, futexWait, g, &ts)
	}
}

// Close unmaps the board.
func (w *Waiter) Close() error { return unix.Munmap(w.mem) }
