package udp

import "math"

// Message is one of the protocol's messages: Register, LaunchNotify,
// LaunchRequest, Measurements, RunEnd, Heartbeat, Goodbye, KernelInfo,
// LaunchBatch, Flush, Calibration (hook → daemon) and RegisterAck, Grant,
// Hold, State, Error, Flushed, KernelTimes, Calibrate, Warm (daemon → hook).
//
// Both a message value and a pointer to it are Messages; decoders return
// pointers (*LaunchNotify, …), so type switches over decoded messages use the
// pointer types.
type Message interface {
	Type() Type
	put(v *values)
}

// TaskMessage is a hook's message about a task it registered: every
// message to the daemon but Register. The daemon checks that its sender may
// speak for that task before it believes it: AuthToken is the token of the
// task's RegisterAck (0 from a hook that sends none).
type TaskMessage interface {
	Message
	Task() uint32
	AuthToken() uint64
}

func (m LaunchNotify) Task() uint32  { return m.TaskID }
func (m LaunchRequest) Task() uint32 { return m.TaskID }
func (m Measurements) Task() uint32  { return m.TaskID }
func (m RunEnd) Task() uint32        { return m.TaskID }
func (m Heartbeat) Task() uint32     { return m.TaskID }
func (m Goodbye) Task() uint32       { return m.TaskID }
func (m KernelInfo) Task() uint32    { return m.TaskID }
func (m LaunchBatch) Task() uint32   { return m.TaskID }
func (m Flush) Task() uint32         { return m.TaskID }
func (m Calibration) Task() uint32   { return m.TaskID }

func (m LaunchNotify) AuthToken() uint64  { return m.Token }
func (m LaunchRequest) AuthToken() uint64 { return m.Token }
func (m Measurements) AuthToken() uint64  { return m.Token }
func (m RunEnd) AuthToken() uint64        { return m.Token }
func (m Heartbeat) AuthToken() uint64     { return m.Token }
func (m Goodbye) AuthToken() uint64       { return m.Token }
func (m KernelInfo) AuthToken() uint64    { return m.Token }
func (m LaunchBatch) AuthToken() uint64   { return m.Token }
func (m Flush) AuthToken() uint64         { return m.Token }
func (m Calibration) AuthToken() uint64   { return m.Token }

// HookSendsToken is a Register's hook_flags bit: the hook sends the token
// of its RegisterAck on every message about the task, so the daemon may
// drop any message without it (docs/security.md).
const HookSendsToken = 1

// decodable is a pointer to a message, which a decoder fills.
type decodable interface {
	Message
	get(v *values)
}

// Register is the first message of a hook, once per device (type 1).
type Register struct {
	Seq        uint32   // registration attempt, echoed in RegisterAck
	TaskKey    string   // identifies the service across restarts
	PID        uint32   // process ID
	Priority   uint8    // 0 (highest) to 9
	DeviceUUID [16]byte // the GPU's UUID
	DeviceName string   // the GPU's model name; profiles are per model
	HookFlags  uint32   // hook capabilities: HookSendsToken
	// Weight is the task's share among tasks of its priority on its GPU
	// (FIKIT_WEIGHT; docs/scheduler.md "Equals"), 1–MaxWeight; 0 (the
	// field left out) means DefaultWeight.
	Weight uint32
}

// Weights a task may claim (Register.Weight).
const (
	DefaultWeight = 1
	MaxWeight     = 100
)

// LaunchNotify reports a launch after the fact: a holder's launch or a
// waiter's launch on credit (type 2).
type LaunchNotify struct {
	TaskID   uint32
	Seq      uint32 // per-task launch counter shared with LaunchRequest, from 1
	KernelID uint64
	Token    uint64 // the task's RegisterAck token (optional field)
}

// LaunchRequest asks to launch; the daemon answers Grant or Hold (type 3).
type LaunchRequest struct {
	TaskID   uint32
	Seq      uint32 // per-task launch counter shared with LaunchNotify, from 1
	KernelID uint64
	Token    uint64 // the task's RegisterAck token (optional field)
}

// Record is one measured kernel launch of a profiling run.
type Record struct {
	KernelID   uint64
	DurationNS uint64      // the kernel's execution time
	GapNS      uint64      // idle time from its end to the next kernel's start
	Flags      RecordFlags // FlagGapSpansRunEnd, FlagOverlapped
}

// Measurements carries records of one run (type 4). A run's records may be
// spread over several Measurements (see [PackMeasurements]); all are sent
// before the run's RunEnd.
type Measurements struct {
	TaskID  uint32
	Run     uint32
	Records []Record
	Token   uint64 // the task's RegisterAck token (optional field)
}

// RunEnd closes a run (type 5).
type RunEnd struct {
	TaskID  uint32
	Run     uint32
	Kernels uint32 // kernels launched in the run
	RunNS   uint64 // the run's duration
	Reason  RunEndReason
	// LastSeq is the seq of the run's last launch: its launches are
	// LastSeq−Kernels+1 … LastSeq, which places the run whatever the daemon
	// saw of it (a hook that re-registered mid-run, lost reports). 0: unknown.
	LastSeq uint32
	Token   uint64 // the task's RegisterAck token (optional field)
	// Unmeasured says why a run the hook measured carries no measurements
	// (optional field; 0: measured and sent, or not measured).
	Unmeasured Unmeasured
}

// Heartbeat tells the daemon the task is alive (type 6).
type Heartbeat struct {
	TaskID uint32
	Token  uint64 // the task's RegisterAck token (optional field)
}

// Goodbye tells the daemon the task is leaving (type 7).
type Goodbye struct {
	TaskID uint32
	Token  uint64 // the task's RegisterAck token (optional field)
}

// RegisterAck answers Register (type 8).
type RegisterAck struct {
	Seq         uint32 // Register.Seq echoed
	TaskID      uint32
	Role        Role
	Phase       Phase
	ProfileRuns uint32 // runs the profiling phase lasts
	HeartbeatMS uint32 // interval at which the hook sends Heartbeat
	// Board is the path of the daemon's board (docs/design.md "Board"),
	// "" when it has none for this task; BoardGen the generation its header
	// must show, BoardGPU the section of the task's GPU.
	Board    string
	BoardGen uint64
	BoardGPU uint8
	// Token is the task's secret for this registration (0: none): a
	// hook that said HookSendsToken puts it on every message about the task.
	Token uint64
	// Sample: in the sharing phase, the hook measures one run in Sample
	// (0: none, 1: every run) and sends its measurements, so the daemon
	// sees when the profile stops being true (optional field;
	// docs/scheduler.md "Drift").
	Sample uint32
}

// Grant lets a waiter launch (type 9).
type Grant struct {
	TaskID uint32
	Seq    uint32 // the LaunchRequest's seq
	Credit uint32 // further launches allowed without a LaunchRequest
	Gate
}

// Gate bounds a permission (a Grant, or a State's role or credit): it
// holds while no task of a better priority launched after SeenNS (the
// latest such launch the daemon knew of, on its CLOCK_MONOTONIC; a hook
// that shares the daemon's board checks this at each launch) and until
// ExpiresNS (0: no expiry; absolute CLOCK_MONOTONIC for a hook on the
// daemon's host, otherwise ns after the hook receives it).
type Gate struct {
	SeenNS    uint64
	ExpiresNS uint64
}

// Hold tells a waiter it is still queued: keep waiting and reset the grant
// timeout (type 10).
type Hold struct {
	TaskID uint32
	Seq    uint32
}

// State is an unsolicited change of role, phase or credit (type 11). Credit
// 0 revokes credit.
type State struct {
	TaskID uint32
	Role   Role
	Phase  Phase
	Credit uint32
	Gate
	Sample uint32 // as RegisterAck's (optional field)
}

// Error reports a problem with a message the daemon received (type 12).
type Error struct {
	Code    ErrorCode
	TaskID  uint32 // 0 if unknown
	Message string
}

// KernelInfo describes a kernel ID while profiling (type 13): sent once per
// kernel ID per registration, before the first Measurements that mention it.
// [Append] cuts a Name too long for one datagram.
type KernelInfo struct {
	TaskID   uint32
	KernelID uint64
	Name     string // mangled, as the driver reports it
	Grid     [3]uint32
	Block    [3]uint32
	Token    uint64 // the task's RegisterAck token (optional field)
}

// LaunchBatch reports consecutive launches of one task after the fact, each
// with its launch time (type 14): the batched form of LaunchNotify that a
// hook's sender uses, one datagram for everything its ring held. The
// launches have seqs Seq, Seq+1, …; launch i happened at BaseNS +
// Launches[i].OffsetNS on the hook's CLOCK_MONOTONIC, which lets a daemon on
// the same machine place each launch when it happened rather than when it
// arrived.
type LaunchBatch struct {
	TaskID   uint32
	Seq      uint32 // seq of the first launch
	BaseNS   uint64 // CLOCK_MONOTONIC of the first launch
	Launches []Launch
	Token    uint64 // the task's RegisterAck token (optional field)
}

// Flush asks the daemon to say when everything the hook sent about the task
// before it is durable (type 15): its runs decided, and a profile they
// changed written to the store. fikit_flush() sends it.
type Flush struct {
	TaskID uint32
	Seq    uint32 // the hook's flush counter, echoed in Flushed
	Token  uint64 // the task's RegisterAck token (optional field)
}

// Flushed answers Flush (type 16).
type Flushed struct {
	TaskID uint32
	Seq    uint32 // Flush.Seq echoed
}

// Launch is one launch of a LaunchBatch.
type Launch struct {
	KernelID uint64
	OffsetNS uint32 // since the batch's BaseNS
}

// KernelTimes gives a hook its task's predicted kernel durations and the
// bound on its predicted GPU time in flight (type 17; docs/design.md
// "Board", docs/scheduler.md "The µs bound"). A table longer than one
// datagram comes as several (see [PackKernelTimes]); each adds to what the
// hook holds for the task's registration.
type KernelTimes struct {
	TaskID uint32
	// BoundNS is the bound (0: none; the hook bounds a holder by count);
	// DefaultNS the duration of a kernel not in the table.
	BoundNS   uint32
	DefaultNS uint32
	Kernels   []KernelTime
}

// KernelTime is one kernel ID's predicted duration.
type KernelTime struct {
	KernelID   uint64
	DurationNS uint32
}

// Calibrate asks a hook to measure its GPU's context switch (type 18): a
// probe kernel of its own, ProbeNS long, launched right after another
// context ran and again right after its own (docs/scheduler.md "The switch,
// measured").
type Calibrate struct {
	TaskID  uint32
	Seq     uint32
	ProbeNS uint32
}

// Warm asks a holder's hook for a warm-up (type 20; docs/scheduler.md "The
// pre-switch"): one launch of the hook's own kernel, ProbeNS long, in the
// task's context, so that its next request finds the context resident.
// Seq names the pre-switch; nothing answers it.
type Warm struct {
	TaskID  uint32
	Seq     uint32
	ProbeNS uint32
}

// Calibration answers Calibrate Seq (type 19): the host time from the first
// probe's launch to the second's (HostNS) and the device time between the
// two probes' ends (DeviceNS): HostNS − DeviceNS is the switch the first one
// paid.
type Calibration struct {
	TaskID   uint32
	Seq      uint32
	HostNS   uint64
	DeviceNS uint64
	Flags    CalibrationFlags
	Token    uint64 // the task's RegisterAck token (optional field)
}

// CalibrationFlags qualify a Calibration.
type CalibrationFlags uint8

const (
	// CalibrationMPS: the device runs the task under MPS: no switch
	// between its clients.
	CalibrationMPS CalibrationFlags = 1 << 0
	// CalibrationFailed: the hook could not measure (no module, no
	// stream, an error): the times mean nothing.
	CalibrationFailed    CalibrationFlags = 1 << 1
	calibrationFlagsMask                  = CalibrationMPS | CalibrationFailed
)

// The wire schema: the fields of each type after [version, type, …].

type kind uint8

const (
	kUint        kind = iota // an unsigned integer in [lo, hi]
	kStr                     // msgpack str
	kBin16                   // msgpack bin of 16 bytes
	kTriple                  // array of 3 u32
	kRecords                 // array of [u64, u64, u64, u8 flags]
	kLaunches                // array of [u64 kernel_id, u32 offset_ns]
	kKernelTimes             // array of [u64 kernel_id, u32 duration_ns]
)

type field struct {
	name   string
	kind   kind
	lo, hi uint64 // kUint only
	// opt marks a field added after the type's first version: it is last
	// (only optional fields follow it), an encoder omits it while it and
	// every field after it are zero, and a decoder reads its absence as 0.
	opt bool
	// fit marks the one string of a type that an encoder cuts so that the
	// datagram fits (a KernelInfo's name: the ID keeps the full name).
	fit bool
}

// BoardGPUs is how many GPU sections a daemon's board has (docs/design.md
// "Board"): RegisterAck's board_gpu is below it.
const BoardGPUs = 16

// maxFields is the largest number of fields of any type.
const maxFields = 11

func u8(name string) field                  { return field{name: name, kind: kUint, hi: math.MaxUint8} }
func u32(name string) field                 { return field{name: name, kind: kUint, hi: math.MaxUint32} }
func u64(name string) field                 { return field{name: name, kind: kUint, hi: math.MaxUint64} }
func enum(name string, lo, hi uint64) field { return field{name: name, kind: kUint, lo: lo, hi: hi} }
func str(name string) field                 { return field{name: name, kind: kStr} }

// optional makes f an optional field (field.opt).
func optional(f field) field { f.opt = true; return f }

// cut makes f the string an encoder cuts to fit (field.fit).
func cut(f field) field { f.fit = true; return f }

// required returns how many of sch's fields every datagram carries.
func required(sch []field) int {
	n := len(sch)
	for n > 0 && sch[n-1].opt {
		n--
	}
	return n
}

// present trims sch to the fields an encoder writes for v: the trailing
// optional fields that are zero are left out, so a message that uses none
// of them is the same bytes as before they were added.
func present(sch []field, v *values) []field {
	n := len(sch)
	for n > 0 && sch[n-1].opt && v.zero(n-1, sch[n-1].kind) {
		n--
	}
	return sch[:n]
}

// zero reports whether field i, of kind k, is zero: only the part of v
// that a field of its kind uses counts.
func (v *values) zero(i int, k kind) bool {
	if k == kStr {
		return v.s[i] == ""
	}
	return v.u[i] == 0
}

// messageDef is one row of the protocol: everything about a message type
// but its number (types.go) and its Go struct's put/get (below). The name
// list, the schemas, the constructors and the Decoder's reusable messages
// all derive from this table.
type messageDef struct {
	name   string
	dir    Direction
	fields []field // after [version, type], in wire order
	new    func() decodable
	note   string // what the message is for, in docs/design.md's tables
}

func def[M any, P interface {
	*M
	decodable
}](name string, dir Direction, fields ...field) messageDef {
	return messageDef{name: name, dir: dir, fields: fields, new: func() decodable { return P(new(M)) }}
}

// about sets the row's note for docs/design.md's message tables.
func (d messageDef) about(note string) messageDef { d.note = note; return d }

var (
	// tokenField is the task's RegisterAck token, last on every message
	// about a task (and on RegisterAck itself).
	tokenField = optional(u64("token"))
	roleField  = enum("role", uint64(RoleHolder), uint64(RoleWaiter))
	phaseField = enum("phase", uint64(PhaseProfiling), uint64(PhaseSharing))
)

// Message types: the numbers. Everything else about a type (its name,
// direction, fields and Go struct) is its row in the table below, from which
// the C hook's message table and decoder (hookclient/wire_gen.h) and
// docs/design.md's message tables are generated: `go generate ./udp`
// (udp/internal/wiregen; its test fails while they are stale).
const (
	TypeRegister      Type = 1
	TypeLaunchNotify  Type = 2
	TypeLaunchRequest Type = 3
	TypeMeasurements  Type = 4
	TypeRunEnd        Type = 5
	TypeHeartbeat     Type = 6
	TypeGoodbye       Type = 7
	TypeRegisterAck   Type = 8
	TypeGrant         Type = 9
	TypeHold          Type = 10
	TypeState         Type = 11
	TypeError         Type = 12
	TypeKernelInfo    Type = 13
	TypeLaunchBatch   Type = 14
	TypeFlush         Type = 15
	TypeFlushed       Type = 16
	TypeKernelTimes   Type = 17
	TypeCalibrate     Type = 18
	TypeCalibration   Type = 19
	TypeWarm          Type = 20
)

//go:generate go run ./internal/wiregen

var messages = [...]messageDef{
	TypeRegister: def[Register]("Register", ToDaemon, u32("seq"), str("task_key"), u32("pid"),
		enum("priority", 0, 9), field{name: "device_uuid", kind: kBin16}, str("device_name"), u32("hook_flags"),
		optional(enum("weight", 0, MaxWeight))),
	TypeLaunchNotify: def[LaunchNotify]("LaunchNotify", ToDaemon, u32("task_id"), u32("seq"), u64("kernel_id"),
		tokenField).about("a holder's or credited launch, sent after the fact"),
	TypeLaunchRequest: def[LaunchRequest]("LaunchRequest", ToDaemon, u32("task_id"), u32("seq"), u64("kernel_id"),
		tokenField).about("a waiter asks to launch; reply Grant or Hold"),
	TypeMeasurements: def[Measurements]("Measurements", ToDaemon, u32("task_id"), u32("run"),
		field{name: "records", kind: kRecords}, tokenField),
	TypeRunEnd: def[RunEnd]("RunEnd", ToDaemon, u32("task_id"), u32("run"), u32("kernels"), u64("run_ns"),
		enum("reason", uint64(ReasonStreamSync), uint64(ReasonExplicit)), u32("last_seq"), tokenField,
		optional(enum("unmeasured", 0, uint64(UnmeasuredStopped)))).
		about("unmeasured: why a measured run carries no records"),
	TypeHeartbeat: def[Heartbeat]("Heartbeat", ToDaemon, u32("task_id"), tokenField),
	TypeGoodbye:   def[Goodbye]("Goodbye", ToDaemon, u32("task_id"), tokenField),
	TypeRegisterAck: def[RegisterAck]("RegisterAck", ToHook, u32("seq"), u32("task_id"), roleField, phaseField,
		u32("profile_runs"), u32("heartbeat_ms"), optional(str("board")), optional(u64("board_gen")),
		optional(enum("board_gpu", 0, BoardGPUs-1)), tokenField, optional(u32("sample"))).
		about("the board: see Board; sample: measure one sharing run in this many"),
	TypeGrant: def[Grant]("Grant", ToHook, u32("task_id"), u32("seq"), u32("credit"), optional(u64("seen_ns")),
		optional(u64("expires_ns"))).about("seen_ns and expires_ns: the gate"),
	TypeHold: def[Hold]("Hold", ToHook, u32("task_id"), u32("seq")).about("still queued: keep waiting, reset the timeout"),
	TypeState: def[State]("State", ToHook, u32("task_id"), roleField, phaseField, u32("credit"),
		optional(u64("seen_ns")), optional(u64("expires_ns")), optional(u32("sample"))).about("unsolicited change"),
	TypeError: def[Error]("Error", ToHook, enum("code", uint64(CodeUnknownTask), uint64(CodeOverloaded)),
		u32("task_id"), str("message")),
	TypeKernelInfo: def[KernelInfo]("KernelInfo", ToDaemon, u32("task_id"), u64("kernel_id"), cut(str("name")),
		field{name: "grid", kind: kTriple}, field{name: "block", kind: kTriple}, tokenField).
		about("once per kernel ID per registration while measuring; a name too long is cut"),
	TypeLaunchBatch: def[LaunchBatch]("LaunchBatch", ToDaemon, u32("task_id"), u32("seq"), u64("base_ns"),
		field{name: "launches", kind: kLaunches}, tokenField).
		about("consecutive launches (seq, seq+1, …) reported after the fact; launch i happened at `base_ns + offset_ns` on the hook's CLOCK_MONOTONIC"),
	TypeFlush: def[Flush]("Flush", ToDaemon, u32("task_id"), u32("seq"), tokenField).
		about("`fikit_flush()`: answer Flushed once what came before is durable"),
	TypeFlushed: def[Flushed]("Flushed", ToHook, u32("task_id"), u32("seq")).
		about("everything the hook sent before Flush seq is decided and stored"),
	TypeKernelTimes: def[KernelTimes]("KernelTimes", ToHook, u32("task_id"), u32("bound_ns"), u32("default_ns"),
		field{name: "kernels", kind: kKernelTimes}).
		about("the task's predicted kernel durations and in-flight bound (0: none); a long table comes in several, each adding to the last"),
	TypeCalibrate: def[Calibrate]("Calibrate", ToHook, u32("task_id"), u32("seq"), u32("probe_ns")).
		about("measure the GPU's switch with a probe kernel of probe_ns"),
	TypeCalibration: def[Calibration]("Calibration", ToDaemon, u32("task_id"), u32("seq"), u64("host_ns"), u64("device_ns"),
		enum("flags", 0, uint64(calibrationFlagsMask)), tokenField).
		about("answers Calibrate seq: host_ns − device_ns is one switch; flags bit 0 MPS (no switch), bit 1 failed"),
	TypeWarm: def[Warm]("Warm", ToHook, u32("task_id"), u32("seq"), u32("probe_ns")).
		about("a warm-up (pre-switch): launch the hook's own kernel of probe_ns in the task's context now; no answer"),
}

// Record flags: the only u8 inside records.
var flagsField = enum("flags", 0, uint64(recordFlagsMask))

// schemaOf returns the fields of t, or nil if t is not a valid type.
func schemaOf(t Type) []field {
	if !t.Valid() {
		return nil
	}
	return messages[t].fields
}

// values holds the fields of one message by schema position, as the generic
// encoder, decoder and text format see them.
type values struct {
	u    [maxFields]uint64
	s    [maxFields]string
	t    [maxFields][3]uint32
	uuid [16]byte
	r    []Record
	l    []Launch
	k    []KernelTime
}

func (m Register) Type() Type { return TypeRegister }
func (m Register) put(v *values) {
	v.u[0], v.s[1], v.u[2], v.u[3] = uint64(m.Seq), m.TaskKey, uint64(m.PID), uint64(m.Priority)
	v.uuid, v.s[5], v.u[6], v.u[7] = m.DeviceUUID, m.DeviceName, uint64(m.HookFlags), uint64(m.Weight)
}
func (m *Register) get(v *values) {
	*m = Register{Seq: uint32(v.u[0]), TaskKey: v.s[1], PID: uint32(v.u[2]), Priority: uint8(v.u[3]),
		DeviceUUID: v.uuid, DeviceName: v.s[5], HookFlags: uint32(v.u[6]), Weight: uint32(v.u[7])}
}

func (m LaunchNotify) Type() Type { return TypeLaunchNotify }
func (m LaunchNotify) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3] = uint64(m.TaskID), uint64(m.Seq), m.KernelID, m.Token
}
func (m *LaunchNotify) get(v *values) {
	*m = LaunchNotify{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), KernelID: v.u[2], Token: v.u[3]}
}

func (m LaunchRequest) Type() Type { return TypeLaunchRequest }
func (m LaunchRequest) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3] = uint64(m.TaskID), uint64(m.Seq), m.KernelID, m.Token
}
func (m *LaunchRequest) get(v *values) {
	*m = LaunchRequest{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), KernelID: v.u[2], Token: v.u[3]}
}

func (m Measurements) Type() Type { return TypeMeasurements }
func (m Measurements) put(v *values) {
	v.u[0], v.u[1], v.r, v.u[3] = uint64(m.TaskID), uint64(m.Run), m.Records, m.Token
}
func (m *Measurements) get(v *values) {
	*m = Measurements{TaskID: uint32(v.u[0]), Run: uint32(v.u[1]), Records: v.r, Token: v.u[3]}
}

func (m RunEnd) Type() Type { return TypeRunEnd }
func (m RunEnd) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3], v.u[4], v.u[5] = uint64(m.TaskID), uint64(m.Run), uint64(m.Kernels), m.RunNS,
		uint64(m.Reason), uint64(m.LastSeq)
	v.u[6], v.u[7] = m.Token, uint64(m.Unmeasured)
}
func (m *RunEnd) get(v *values) {
	*m = RunEnd{TaskID: uint32(v.u[0]), Run: uint32(v.u[1]), Kernels: uint32(v.u[2]), RunNS: v.u[3],
		Reason: RunEndReason(v.u[4]), LastSeq: uint32(v.u[5]), Token: v.u[6], Unmeasured: Unmeasured(v.u[7])}
}

func (m Heartbeat) Type() Type     { return TypeHeartbeat }
func (m Heartbeat) put(v *values)  { v.u[0], v.u[1] = uint64(m.TaskID), m.Token }
func (m *Heartbeat) get(v *values) { *m = Heartbeat{TaskID: uint32(v.u[0]), Token: v.u[1]} }
func (m Goodbye) Type() Type       { return TypeGoodbye }
func (m Goodbye) put(v *values)    { v.u[0], v.u[1] = uint64(m.TaskID), m.Token }
func (m *Goodbye) get(v *values)   { *m = Goodbye{TaskID: uint32(v.u[0]), Token: v.u[1]} }
func (m RegisterAck) Type() Type   { return TypeRegisterAck }
func (m Grant) Type() Type         { return TypeGrant }
func (m Hold) Type() Type          { return TypeHold }
func (m State) Type() Type         { return TypeState }
func (m Error) Type() Type         { return TypeError }
func (m KernelInfo) Type() Type    { return TypeKernelInfo }

func (m RegisterAck) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3], v.u[4], v.u[5] = uint64(m.Seq), uint64(m.TaskID), uint64(m.Role),
		uint64(m.Phase), uint64(m.ProfileRuns), uint64(m.HeartbeatMS)
	v.s[6], v.u[7], v.u[8], v.u[9], v.u[10] = m.Board, m.BoardGen, uint64(m.BoardGPU), m.Token, uint64(m.Sample)
}
func (m *RegisterAck) get(v *values) {
	*m = RegisterAck{Seq: uint32(v.u[0]), TaskID: uint32(v.u[1]), Role: Role(v.u[2]), Phase: Phase(v.u[3]),
		ProfileRuns: uint32(v.u[4]), HeartbeatMS: uint32(v.u[5]), Board: v.s[6], BoardGen: v.u[7],
		BoardGPU: uint8(v.u[8]), Token: v.u[9], Sample: uint32(v.u[10])}
}

func (m Grant) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3], v.u[4] = uint64(m.TaskID), uint64(m.Seq), uint64(m.Credit), m.SeenNS, m.ExpiresNS
}
func (m *Grant) get(v *values) {
	*m = Grant{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), Credit: uint32(v.u[2]),
		Gate: Gate{SeenNS: v.u[3], ExpiresNS: v.u[4]}}
}

func (m Hold) put(v *values)  { v.u[0], v.u[1] = uint64(m.TaskID), uint64(m.Seq) }
func (m *Hold) get(v *values) { *m = Hold{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1])} }

func (m State) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3] = uint64(m.TaskID), uint64(m.Role), uint64(m.Phase), uint64(m.Credit)
	v.u[4], v.u[5], v.u[6] = m.SeenNS, m.ExpiresNS, uint64(m.Sample)
}
func (m *State) get(v *values) {
	*m = State{TaskID: uint32(v.u[0]), Role: Role(v.u[1]), Phase: Phase(v.u[2]), Credit: uint32(v.u[3]),
		Gate: Gate{SeenNS: v.u[4], ExpiresNS: v.u[5]}, Sample: uint32(v.u[6])}
}

func (m Error) put(v *values) { v.u[0], v.u[1], v.s[2] = uint64(m.Code), uint64(m.TaskID), m.Message }
func (m *Error) get(v *values) {
	*m = Error{Code: ErrorCode(v.u[0]), TaskID: uint32(v.u[1]), Message: v.s[2]}
}

func (m KernelInfo) put(v *values) {
	v.u[0], v.u[1], v.s[2], v.t[3], v.t[4], v.u[5] = uint64(m.TaskID), m.KernelID, m.Name, m.Grid, m.Block, m.Token
}
func (m *KernelInfo) get(v *values) {
	*m = KernelInfo{TaskID: uint32(v.u[0]), KernelID: v.u[1], Name: v.s[2], Grid: v.t[3], Block: v.t[4], Token: v.u[5]}
}

func (m LaunchBatch) Type() Type { return TypeLaunchBatch }
func (m LaunchBatch) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.l, v.u[4] = uint64(m.TaskID), uint64(m.Seq), m.BaseNS, m.Launches, m.Token
}
func (m *LaunchBatch) get(v *values) {
	*m = LaunchBatch{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), BaseNS: v.u[2], Launches: v.l, Token: v.u[4]}
}

func (m Flush) Type() Type    { return TypeFlush }
func (m Flush) put(v *values) { v.u[0], v.u[1], v.u[2] = uint64(m.TaskID), uint64(m.Seq), m.Token }
func (m *Flush) get(v *values) {
	*m = Flush{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), Token: v.u[2]}
}
func (m Flushed) Type() Type     { return TypeFlushed }
func (m Flushed) put(v *values)  { v.u[0], v.u[1] = uint64(m.TaskID), uint64(m.Seq) }
func (m *Flushed) get(v *values) { *m = Flushed{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1])} }
func (m KernelTimes) Type() Type { return TypeKernelTimes }
func (m KernelTimes) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.k = uint64(m.TaskID), uint64(m.BoundNS), uint64(m.DefaultNS), m.Kernels
}
func (m *KernelTimes) get(v *values) {
	*m = KernelTimes{TaskID: uint32(v.u[0]), BoundNS: uint32(v.u[1]), DefaultNS: uint32(v.u[2]), Kernels: v.k}
}

func (m Calibrate) Type() Type { return TypeCalibrate }
func (m Calibrate) put(v *values) {
	v.u[0], v.u[1], v.u[2] = uint64(m.TaskID), uint64(m.Seq), uint64(m.ProbeNS)
}
func (m *Calibrate) get(v *values) {
	*m = Calibrate{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), ProbeNS: uint32(v.u[2])}
}

func (m Warm) Type() Type { return TypeWarm }
func (m Warm) put(v *values) {
	v.u[0], v.u[1], v.u[2] = uint64(m.TaskID), uint64(m.Seq), uint64(m.ProbeNS)
}
func (m *Warm) get(v *values) {
	*m = Warm{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), ProbeNS: uint32(v.u[2])}
}

func (m Calibration) Type() Type { return TypeCalibration }
func (m Calibration) put(v *values) {
	v.u[0], v.u[1], v.u[2], v.u[3], v.u[4], v.u[5] = uint64(m.TaskID), uint64(m.Seq), m.HostNS, m.DeviceNS,
		uint64(m.Flags), m.Token
}
func (m *Calibration) get(v *values) {
	*m = Calibration{TaskID: uint32(v.u[0]), Seq: uint32(v.u[1]), HostNS: v.u[2], DeviceNS: v.u[3],
		Flags: CalibrationFlags(v.u[4]), Token: v.u[5]}
}

// newMessage returns a pointer to a new zero message of type t, which must be
// valid.
func newMessage(t Type) decodable {
	if !t.Valid() {
		panic("udp: newMessage of invalid type " + t.String())
	}
	return messages[t].new()
}
