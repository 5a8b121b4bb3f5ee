package board

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sentinel errors.
var (
	ErrFull   = errors.New("board: every GPU section is taken")
	ErrClosed = errors.New("board: closed")
)

// Board is a mapped board file the daemon owns.
type Board struct {
	path string
	mem  []byte
	gen  uint64
	gpus map[[16]byte]int
}

// Create makes a new board at path (mode 0600: hooks of the daemon's user
// share it), replacing any file there: it is written beside and renamed
// over, so a hook still mapping a previous daemon's board keeps that one
// (whose generation no longer matches any RegisterAck).
func Create(path string) (*Board, error) { return CreateShared(path, -1) }

// CreateShared is Create for hooks of the group gid as well (mode 0660,
// that group's): services of other users in the group keep the board
// (docs/security.md). A gid < 0 is Create.
func CreateShared(path string, gid int) (*Board, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	defer f.Close()
	if gid >= 0 {
		// Before the rename: no hook sees the file with other rights.
		if err := f.Chown(-1, gid); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("board: group %d: %w", gid, err)
		}
		if err := f.Chmod(0o660); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("board: %w", err)
		}
	}
	// Every page written now, not left sparse: a page first written
	// through the mapping on a full file system (a tmpfs data directory)
	// faults with SIGBUS, in the daemon or in a hook. Here the creation
	// fails instead, and hooks go by UDP alone.
	if _, err := f.WriteAt(make([]byte, FileSize), 0); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("board: size %s: %w", tmp, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, FileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("board: map %s: %w", tmp, err)
	}
	var g [8]byte
	_, _ = rand.Read(g[:])
	b := &Board{path: path, mem: mem, gen: binary.LittleEndian.Uint64(g[:]) | 1, gpus: map[[16]byte]int{}}
	binary.LittleEndian.PutUint32(mem[offVersion:], Version)
	binary.LittleEndian.PutUint32(mem[offGPUs:], GPUs)
	b.word(offGen).Store(b.gen)
	b.word(offMagic).Store(Magic) // last: a hook that sees the magic sees the rest
	if err := os.Rename(tmp, path); err != nil {
		unix.Munmap(mem)
		os.Remove(tmp)
		return nil, fmt.Errorf("board: %w", err)
	}
	return b, nil
}

// Path is the board's file.
func (b *Board) Path() string { return b.path }

// Generation tells this board from any earlier one at the same path.
func (b *Board) Generation() uint64 { return b.gen }

func (b *Board) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&b.mem[off]))
}

func (b *Board) word32(off int) *atomic.Uint32 { return u32At(b.mem, off) }

func u32At(mem []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// futex is op on a word of the mapping, not a private futex: on a shared
// file mapping the key is the file and offset, the same in every process
// that maps it. ts bounds a wait (nil: none).
func futex(w *atomic.Uint32, op int, val uint32, ts *unix.Timespec) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), uintptr(op), uintptr(val),
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// GPU returns the section of the GPU with this UUID, taking a free one the
// first time (ErrFull when none is left: its tasks then go without a board).
func (b *Board) GPU(uuid [16]byte) (int, error) {
	if b.mem == nil {
		return 0, ErrClosed
	}
	if i, ok := b.gpus[uuid]; ok {
		return i, nil
	}
	i := len(b.gpus)
	if i >= GPUs {
		return 0, ErrFull
	}
	copy(b.mem[headerSize+i*gpuStride+offUUID:], uuid[:])
	b.gpus[uuid] = i
	return i, nil
}

// Heartbeat tells the hooks the daemon is alive at now (CLOCK_MONOTONIC):
// a hook that finds it stale ignores the board.
func (b *Board) Heartbeat(now int64) {
	if b.mem != nil {
		b.word(offHeart).Store(uint64(now))
	}
}

// SetRegistered says which priorities have tasks registered on section
// gpu (bit p: priority p). A hook of a worse priority than one registered
// bounds its kernels in flight.
func (b *Board) SetRegistered(gpu int, mask uint64) {
	if b.mem != nil && gpu >= 0 && gpu < GPUs {
		b.word(headerSize + gpu*gpuStride + offRegd).Store(mask)
	}
}

// Hint is what the daemon tells a GPU's hooks to act on without asking
// (docs/scheduler.md "Switches, bounds and arrivals"): the better
// priorities' next predicted run (0 unknown, NoneExpected none) and the
// latest it is expected, the switch the policy assumes, and whether and
// which waiting task may resume.
type Hint struct {
	NextNs     uint64
	NextLateNs uint64
	SwitchNs   uint64
	Resume     bool
	ResumeTask uint32
	// Slack: the bound follows the slack; FillUntilNs is the end
	// lower-priority work may be queued to (0: none predicted), BoundNs
	// what a better priority's arrival may meet.
	Slack       bool
	FillUntilNs uint64
	BoundNs     uint64
}

// SetHint writes section gpu's hint.
func (b *Board) SetHint(gpu int, h Hint) {
	if b.mem == nil || gpu < 0 || gpu >= GPUs {
		return
	}
	o := headerSize + gpu*gpuStride
	b.word(o + offNext).Store(h.NextNs)
	b.word(o + offNextLate).Store(h.NextLateNs)
	b.word(o + offSwitch).Store(h.SwitchNs)
	b.word32(o + offResumeTask).Store(h.ResumeTask)
	b.word(o + offFillUntil).Store(h.FillUntilNs)
	b.word(o + offBound).Store(h.BoundNs)
	var f uint32
	if h.Resume {
		f |= FlagResume
	}
	if h.Slack {
		f |= FlagSlack
	}
	b.word32(o + offFlags).Store(f)
}

// RunEnd writes that priority prio ended a run at time at on section gpu,
// as a hook does (the word only moves forward), and wakes the threads
// sleeping on the section's wake word if any sleep there (tests).
func (b *Board) RunEnd(gpu, prio int, at int64) {
	if b.mem == nil || gpu < 0 || gpu >= GPUs || prio < 0 || prio >= Levels {
		return
	}
	forward(b.word(headerSize+gpu*gpuStride+offRunEnd+8*prio), at)
	if b.word32(headerSize+gpu*gpuStride+offSleepers).Load() != 0 {
		b.wake(gpu)
	}
}

// Cursor is section gpu's device-time cursor: the predicted end of the
// bounded tasks' work there, as their hooks keep it (0: none).
func (b *Board) Cursor(gpu int) int64 {
	if b.mem == nil || gpu < 0 || gpu >= GPUs {
		return 0
	}
	return int64(b.word(headerSize + gpu*gpuStride + offCursor).Load())
}

// RunEnds returns the latest run end the hooks wrote for each priority of
// section gpu (unchecked, as Levels).
func (b *Board) RunEnds(gpu int) (l [Levels]int64) {
	if b.mem == nil || gpu < 0 || gpu >= GPUs {
		return l
	}
	for p := range l {
		l[p] = int64(b.word(headerSize + gpu*gpuStride + offRunEnd + 8*p).Load())
	}
	return l
}

// forward moves w to at if at is later.
func forward(w *atomic.Uint64, at int64) {
	for {
		cur := w.Load()
		if int64(cur) >= at || w.CompareAndSwap(cur, uint64(at)) {
			return
		}
	}
}

// Note writes that priority prio launched at time at on section gpu, as a
// hook does (the word only moves forward).
func (b *Board) Note(gpu, prio int, at int64) {
	if b.mem == nil || gpu < 0 || gpu >= GPUs || prio < 0 || prio >= Levels {
		return
	}
	forward(b.word(headerSize+gpu*gpuStride+offLevels+8*prio), at)
}

// Levels returns the latest launch time the hooks wrote for each priority
// level of section gpu. Values are the hooks' and unchecked: a caller uses
// them only up to its own clock (Sane).
func (b *Board) Levels(gpu int) (l [Levels]int64) {
	if b.mem == nil || gpu < 0 || gpu >= GPUs {
		return l
	}
	for p := range l {
		l[p] = int64(b.word(headerSize + gpu*gpuStride + offLevels + 8*p).Load())
	}
	return l
}

// Sane drops what no hook can have written truthfully: a time after now,
// or one that does not fit the clock.
func Sane(l [Levels]int64, now int64) [Levels]int64 {
	for p, v := range l {
		if v < 0 || v > now {
			l[p] = 0
		}
	}
	return l
}

// Close unmaps the board and removes its file.
func (b *Board) Close() error {
	if b.mem == nil {
		return ErrClosed
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	// Only our own file: a daemon started since may have replaced it.
	if cur, rerr := os.ReadFile(b.path); rerr == nil && len(cur) >= offGen+8 &&
		binary.LittleEndian.Uint64(cur[offGen:]) == b.gen {
		if rerr := os.Remove(b.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Waiter slots (docs/design.md "Board"). A local task whose slot is free at
// registration owns it until it leaves. One thread of the task at a time
// waits on it: the hook writes the seq it asks for into the slot before
// sending the LaunchRequest; the daemon then answers that request in the
// slot — the grant's credit and gate, or the time it was told to keep
// waiting — and wakes the thread with a futex on the slot's generation
// word, instead of a datagram. Every other answer goes by UDP.

// SlotOf is the slot task would own.
func SlotOf(task uint32) int { return int(task % Slots) }

func slotOff(task uint32) int { return slotsOff + SlotOf(task)*slotStride }

// Claim makes task's slot its own if it is free, and reports whether it is.
func (b *Board) Claim(task uint32) bool {
	if b.mem == nil || task == 0 {
		return false
	}
	o := slotOff(task)
	if b.word32(o+offSlotTask).Load() != 0 {
		return false
	}
	for _, f := range []int{offSlotWait, offSlotGrant, offSlotCredit} {
		b.word32(o + f).Store(0)
	}
	for _, f := range []int{offSlotSeen, offSlotExpires, offSlotHold} {
		b.word(o + f).Store(0)
	}
	b.word32(o + offSlotTask).Store(task)
	b.bump(o)
	return true
}

// Release frees task's slot (the task left, or died), waking a thread that
// waits on it so that it goes back to UDP.
func (b *Board) Release(task uint32) {
	if b.mem == nil || task == 0 {
		return
	}
	o := slotOff(task)
	if b.word32(o+offSlotTask).CompareAndSwap(task, 0) {
		b.word32(o + offSlotWait).Store(0)
		b.bump(o)
	}
}

// SlotsInUse counts the waiter slots a task owns: a daemon's metric (a
// slot not released when its task leaves would be lost to every later task
// of its residue class).
func (b *Board) SlotsInUse() int {
	if b == nil || b.mem == nil {
		return 0
	}
	n := 0
	for i := 0; i < Slots; i++ {
		if b.word32(slotsOff+i*slotStride+offSlotTask).Load() != 0 {
			n++
		}
	}
	return n
}

// Waiting reports whether a thread of task waits in its slot for the
// answer to request seq.
func (b *Board) Waiting(task, seq uint32) bool {
	if b.mem == nil || task == 0 || seq == 0 {
		return false
	}
	o := slotOff(task)
	return b.word32(o+offSlotTask).Load() == task && b.word32(o+offSlotWait).Load() == seq
}

// Grant answers request seq of task (on GPU section gpu) in its slot —
// launch, then credit more without asking, within the gate (seen, expires:
// as the Grant message's) — if a thread waits there for it, and reports
// whether one did.
func (b *Board) Grant(gpu int, task, seq, credit uint32, seen, expires uint64) bool {
	if !b.Waiting(task, seq) {
		return false
	}
	o := slotOff(task)
	b.word32(o + offSlotCredit).Store(credit)
	b.word(o + offSlotSeen).Store(seen)
	b.word(o + offSlotExpires).Store(expires)
	b.word32(o + offSlotGrant).Store(seq) // last: the hook reads it first
	b.bump(o)
	b.wake(gpu)
	return true
}

// Hold tells the thread waiting in task's slot (on GPU section gpu) for
// request seq to keep waiting, if one does, and reports whether one did.
func (b *Board) Hold(gpu int, task, seq uint32, now int64) bool {
	if !b.Waiting(task, seq) {
		return false
	}
	o := slotOff(task)
	b.word(o + offSlotHold).Store(uint64(now))
	b.bump(o)
	b.wake(gpu)
	return true
}

// bump moves the slot's generation on and wakes whoever waits on it.
func (b *Board) bump(o int) {
	w := b.word32(o + offSlotGen)
	w.Add(1)
	futex(w, futexWake, math.MaxInt32, nil)
}

// wake moves section gpu's wake word on and wakes the threads sleeping on
// it: a slot's waiter sleeps there, where a better priority's run end can
// wake it too (board resume).
func (b *Board) wake(gpu int) {
	if gpu < 0 || gpu >= GPUs {
		return
	}
	w := b.word32(headerSize + gpu*gpuStride + offWake)
	w.Add(1)
	futex(w, futexWake, math.MaxInt32, nil)
}
