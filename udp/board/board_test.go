package board

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/store/storetest"
)

// TestLayout checks the layout's table (from which the hook's structs and
// testdata/layout.txt are generated, udp/internal/wiregen) against the
// numbers the code here writes by: every field inside its part and the
// parts inside the file.
func TestLayout(t *testing.T) {
	part := func(name string) (size uint64) {
		switch {
		case strings.HasPrefix(name, "gpu."):
			return gpuStride
		case strings.HasPrefix(name, "slot."):
			return slotStride
		}
		return headerSize
	}
	seen := map[string]bool{}
	for _, e := range Layout {
		if seen[e.Name] {
			t.Errorf("%s twice", e.Name)
		}
		seen[e.Name] = true
		if e.Size == 0 {
			continue
		}
		if e.Elem == 0 || e.Size%e.Elem != 0 || e.Offset%uint64(e.Elem) != 0 || e.Offset+uint64(e.Size) > part(e.Name) {
			t.Errorf("%s: offset %d, size %d, elements of %d: does not fit", e.Name, e.Offset, e.Size, e.Elem)
		}
	}
	if string(binary.LittleEndian.AppendUint64(nil, Magic)) != "FIKITBD1" || slotsOff+Slots*slotStride > FileSize || Slots < 16 ||
		offLevels+8*Levels > gpuStride {
		t.Error("layout does not fit")
	}
}

func TestBoard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "board")
	b, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != FileSize || st.Mode().Perm() != 0o600 {
		t.Fatalf("board file %v, %v", st, err)
	}
	var u1, u2 [16]byte
	u1[0], u2[0] = 1, 2
	if i, err := b.GPU(u1); i != 0 || err != nil {
		t.Fatalf("GPU(u1) = %d, %v", i, err)
	}
	if i, _ := b.GPU(u2); i != 1 {
		t.Fatalf("GPU(u2) = %d", i)
	}
	if i, _ := b.GPU(u1); i != 0 {
		t.Fatalf("GPU(u1) again = %d", i)
	}
	for k := 2; k < GPUs; k++ {
		var u [16]byte
		u[0] = byte(k + 1)
		if _, err := b.GPU(u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.GPU([16]byte{0xff}); !errors.Is(err, ErrFull) {
		t.Fatalf("17th GPU: %v", err)
	}
	b.Heartbeat(12345)
	b.SetRegistered(1, 1<<0|1<<5)
	// A hook writes level 3 of GPU 1 in the file, as the C code does.
	raw, _ := os.ReadFile(path)
	if binary.LittleEndian.Uint64(raw[offHeart:]) != 12345 || binary.LittleEndian.Uint64(raw[offGen:]) != b.Generation() ||
		string(raw[:8]) != "FIKITBD1" || raw[headerSize+gpuStride] != 2 ||
		binary.LittleEndian.Uint64(raw[headerSize+gpuStride+offRegd:]) != 0x21 {
		t.Fatalf("file header %x, gpu 1 %x", raw[:32], raw[headerSize+gpuStride:headerSize+gpuStride+16])
	}
	b.Note(1, 3, 777)
	b.Note(1, 3, 700) // never back
	b.word(headerSize + gpuStride + offLevels + 8*4).Store(1 << 62)
	l := b.Levels(1)
	if l[3] != 777 || l[0] != 0 {
		t.Fatalf("levels %v", l)
	}
	if s := Sane(l, 1000); s[3] != 777 || s[4] != 0 {
		t.Fatalf("Sane %v", s)
	}
	// A second daemon replaces the file; the first one's Close leaves it.
	b2, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Generation() == b.Generation() {
		t.Fatal("same generation twice")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the first daemon's Close removed the second's board: %v", err)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("board left after Close: %v", err)
	}
}

// A waiter slot: owned by one task at a time, answered only for the
// request its thread waits for, and the waiting thread woken by the
// answer (a futex on the slot's generation), by a hold it sees, and by
// the slot's release.
func TestWaiterSlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board")
	b, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := OpenWaiter(path, b.Generation())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := OpenWaiter(path, b.Generation()+1); err == nil {
		t.Error("another generation's board was opened")
	}
	const task = 7
	if w.Ask(task, 1) {
		t.Fatal("asked in a slot the task does not own")
	}
	if !b.Claim(task) || b.Claim(task+Slots) {
		t.Fatal("claims: the first must win, the second (same slot) lose")
	}
	if !w.Ask(task, 1) || w.Ask(task, 2) {
		t.Fatal("one request at a time waits in a slot")
	}
	if b.Waiting(task, 2) || !b.Waiting(task, 1) {
		t.Fatal("Waiting")
	}
	b.Grant(0, task, 2, 9, 0, 0) // not the request that waits: ignored
	done := make(chan [2]uint32)
	go func() {
		c, ok := w.Await(task, 1, 5*time.Second)
		done <- [2]uint32{c, map[bool]uint32{true: 1}[ok]}
	}()
	time.Sleep(20 * time.Millisecond)
	b.Hold(0, task, 1, 123)
	select {
	case r := <-done:
		t.Fatalf("a hold ended the wait: %v", r)
	case <-time.After(20 * time.Millisecond):
	}
	start := time.Now()
	b.Grant(0, task, 1, 3, 10, 20)
	select {
	case r := <-done:
		if r != [2]uint32{3, 1} {
			t.Fatalf("await = credit %d, granted %d; want 3, 1", r[0], r[1])
		}
		t.Logf("woken %v after the grant", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the grant did not wake the waiter")
	}
	if b.Waiting(task, 1) {
		t.Error("the slot still waits after the answer was taken")
	}
	// Released while a request waits: the waiter goes back (to UDP).
	if !w.Ask(task, 2) {
		t.Fatal("ask after the answer")
	}
	go func() {
		c, ok := w.Await(task, 2, 5*time.Second)
		done <- [2]uint32{c, map[bool]uint32{true: 1}[ok]}
	}()
	time.Sleep(20 * time.Millisecond)
	b.Release(task)
	select {
	case r := <-done:
		if r[1] != 0 {
			t.Fatalf("a released slot granted: %v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the release did not wake the waiter")
	}
	if !b.Claim(task + Slots) {
		t.Error("a released slot cannot be claimed again")
	}
}

// A board is made of written pages, not a sparse file: on a file system
// that fills up (a tmpfs data directory) a page first written through a
// mapping faulted with SIGBUS, in the daemon (its hints, a slot) or a hook.
// With too little room the board is not made at all (the daemon then runs
// by UDP alone); with room, every page is there before anyone maps it.
func TestCreateOnAFullFileSystem(t *testing.T) {
	dir := storetest.Tmpfs(t, 1<<20)
	if _, err := storetest.Fill(dir, FileSize/2); err != nil {
		t.Fatal(err)
	}
	if b, err := Create(filepath.Join(dir, "board")); err == nil {
		b.Close()
		t.Fatal("a board was made with half its size free")
	}
	dir = storetest.Tmpfs(t, 1<<20)
	b, err := Create(filepath.Join(dir, "board"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := storetest.Fill(dir, 0); err != nil {
		t.Fatal(err)
	}
	// The last GPU section and the last slot, written into a full file
	// system: no fault.
	b.SetHint(GPUs-1, Hint{NextNs: 1, NextLateNs: 4, SwitchNs: 2, Resume: true, ResumeTask: 3, Slack: true, FillUntilNs: 5, BoundNs: 6})
	o := headerSize + (GPUs-1)*gpuStride
	if n, l := b.word(o+offNext).Load(), b.word(o+offNextLate).Load(); n != 1 || l != 4 {
		t.Errorf("next_ns %d next_late_ns %d, want 1 4", n, l)
	}
	if u, bd, f := b.word(o+offFillUntil).Load(), b.word(o+offBound).Load(), b.word32(o+offFlags).Load(); u != 5 || bd != 6 || f != FlagResume|FlagSlack {
		t.Errorf("fill_until_ns %d bound_ns %d flags %d, want 5 6 %d", u, bd, f, FlagResume|FlagSlack)
	}
	if !b.Claim(Slots - 1) {
		t.Fatal("claim of the last slot")
	}
}
