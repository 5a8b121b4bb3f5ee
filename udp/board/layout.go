package board

import "github.com/fikit/fikit/udp"

// The board's layout (docs/design.md "Board"): the one place it is written.
// The hook's C structs (hookclient/board_gen.h) and testdata/layout.txt, which
// the C test reads, are generated from Layout by `go generate ./udp`.
const (
	Magic      = 0x31444254494b4946 // "FIKITBD1" little-endian
	Version    = 2
	GPUs       = udp.BoardGPUs
	Levels     = 10
	headerSize = 64
	gpuStride  = 256
	offMagic   = 0
	offVersion = 8
	offGPUs    = 12
	offGen     = 16
	offHeart   = 24
	offUUID    = 0
	offLevels  = 16
	offRegd    = 96
	// Version 2 (switch-aware gating, docs/scheduler.md): run ends, the
	// daemon's hints, and a futex word per GPU.
	offRunEnd     = 104 // u64 × Levels, hooks: the latest run end of each priority
	offNext       = 184 // u64, daemon: the better priorities' next predicted run (0 unknown, max none)
	offSwitch     = 192 // u64, daemon: the switch the policy assumes, ns
	offResumeTask = 200 // u32, daemon: the task that may resume on the board (0: none)
	offFlags      = 204 // u32, daemon: FlagResume
	offWake       = 208 // u32, futex word: bumped at a run end with sleepers, and at a slot answer
	offSleepers   = 212 // u32, hooks: threads sleeping on wake
	offNextLate   = 216 // u64, daemon: the latest the next run is expected (next_ns's window)
	offCursor     = 224 // u64, hooks: the predicted end of the bounded tasks' work on the GPU
	// The bound that follows the slack (FlagSlack; docs/scheduler.md):
	// what the core allows lower-priority work to reach, for the hooks to
	// compare their cursor against.
	offFillUntil = 232 // u64, daemon: lower-priority work may be queued to end by this (0: no prediction to go by)
	offBound     = 240 // u64, daemon: the most lower-priority GPU time a better priority's arrival may meet
	FileSize     = 8192
	layoutBytes  = headerSize + GPUs*gpuStride
	// Waiter slots fill the rest of the file: task t's is t mod Slots.
	slotsOff       = layoutBytes
	slotStride     = 64
	Slots          = (FileSize - slotsOff) / slotStride
	offSlotTask    = 0  // u32, daemon: the task the slot is (0: free)
	offSlotGen     = 4  // u32, daemon: bumped on every change; the futex word
	offSlotWait    = 8  // u32, hook: the seq its waiting thread asked for
	offSlotGrant   = 12 // u32, daemon: the seq granted through the slot
	offSlotCredit  = 16 // u32, daemon: the grant's credit
	offSlotSeen    = 24 // u64, daemon: the grant's gate
	offSlotExpires = 32 // u64
	offSlotHold    = 40 // u64, daemon: when the request was last told to wait
)

// FlagResume is gpu.flags' bit for board-resume: task gpu.resume_task may
// resume when the better priorities' runs end on the board.
const FlagResume = 1

// FlagSlack is gpu.flags' bit for the bound that follows the slack: the
// hooks bound their work by gpu.fill_until_ns and gpu.bound_ns (without
// it, by the fixed rule: their own bound and nothing into next_ns's window).
const FlagSlack = 2

// NoneExpected is gpu.next_ns when no better task is expected back.
const NoneExpected = 1<<64 - 1

// LayoutEntry is a field of the board, or one of its sizes and counts.
type LayoutEntry struct {
	// Name is the field's ("gpu.level_ns": in a GPU section; "slot.task": in
	// a waiter slot; else in the header) or the constant's.
	Name string
	// Offset is the field's within its part (header, GPU section or slot);
	// for a constant (Size 0) its value.
	Offset uint64
	// Size is the field's bytes (0: a constant).
	Size int
	// Elem is the bytes of one element: 8 or 4 for little-endian words, 1
	// for bytes.
	Elem int
	// Atomic: written while other processes read it, one atomic store per
	// word.
	Atomic bool
}

func word64(name string, off uint64) LayoutEntry {
	return LayoutEntry{Name: name, Offset: off, Size: 8, Elem: 8, Atomic: true}
}
func word32(name string, off uint64) LayoutEntry {
	return LayoutEntry{Name: name, Offset: off, Size: 4, Elem: 4, Atomic: true}
}
func constant(name string, v uint64) LayoutEntry { return LayoutEntry{Name: name, Offset: v} }

// Layout is the board's layout, in testdata/layout.txt's order.
var Layout = []LayoutEntry{
	word64("magic", offMagic),
	{Name: "version", Offset: offVersion, Size: 4, Elem: 4},
	{Name: "gpus", Offset: offGPUs, Size: 4, Elem: 4},
	word64("generation", offGen),
	word64("heartbeat_ns", offHeart),
	constant("header_size", headerSize),
	constant("gpu_stride", gpuStride),
	{Name: "gpu.uuid", Offset: offUUID, Size: 16, Elem: 1},
	{Name: "gpu.level_ns", Offset: offLevels, Size: 8 * Levels, Elem: 8, Atomic: true},
	word64("gpu.registered", offRegd),
	{Name: "gpu.run_end_ns", Offset: offRunEnd, Size: 8 * Levels, Elem: 8, Atomic: true},
	word64("gpu.next_ns", offNext),
	word64("gpu.switch_ns", offSwitch),
	word32("gpu.resume_task", offResumeTask),
	word32("gpu.flags", offFlags),
	word32("gpu.wake", offWake),
	word32("gpu.sleepers", offSleepers),
	word64("gpu.next_late_ns", offNextLate),
	word64("gpu.cursor_ns", offCursor),
	word64("gpu.fill_until_ns", offFillUntil),
	word64("gpu.bound_ns", offBound),
	constant("slots_offset", slotsOff),
	constant("slot_stride", slotStride),
	constant("slots", Slots),
	word32("slot.task", offSlotTask),
	word32("slot.gen", offSlotGen),
	word32("slot.wait_seq", offSlotWait),
	word32("slot.grant_seq", offSlotGrant),
	word32("slot.credit", offSlotCredit),
	word64("slot.seen_ns", offSlotSeen),
	word64("slot.expires_ns", offSlotExpires),
	word64("slot.hold_ns", offSlotHold),
	constant("file_size", FileSize),
}

// LayoutConstants are the board's other numbers the hook needs, by their C
// names' stem (FK_BOARD_<name>).
var LayoutConstants = []struct {
	Name  string
	Value uint64
}{
	{"MAGIC", Magic}, {"VERSION", Version}, {"GPUS", GPUs}, {"LEVELS", Levels}, {"SLOTS", Slots},
	{"FILE_SIZE", FileSize}, {"FLAG_RESUME", FlagResume}, {"FLAG_SLACK", FlagSlack}, {"NONE_EXPECTED", NoneExpected},
}
