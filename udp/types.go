package udp

import "strconv"

// ProtocolVersion is the first element of every datagram.
const ProtocolVersion = 1

// MaxDatagram is the largest datagram either side sends or accepts, in bytes.
const MaxDatagram = 1400

// Type is the second element of every datagram: which message follows. The
// numbers are in messages.go, beside the table's rows.
type Type uint8

// Valid reports whether t is a message type of this protocol version.
func (t Type) Valid() bool {
	return int(t) < len(messages) && messages[t].name != ""
}

func (t Type) String() string {
	if t.Valid() {
		return messages[t].name
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Direction says who sends a message type.
type Direction uint8

const (
	// ToDaemon: the hook sends it, the daemon receives it.
	ToDaemon Direction = 1
	// ToHook: the daemon sends it, the hook receives it.
	ToHook Direction = 2
)

// Direction is who sends messages of type t (0 if t is not valid).
func (t Type) Direction() Direction {
	if !t.Valid() {
		return 0
	}
	return messages[t].dir
}

// Role is what the daemon lets a task do (RegisterAck, State).
type Role uint8

const (
	// RoleHolder launches freely and notifies after the fact.
	RoleHolder Role = 1
	// RoleWaiter asks (LaunchRequest) before each launch unless it has credit.
	RoleWaiter Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleHolder:
		return "holder"
	case RoleWaiter:
		return "waiter"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Phase is where a task is in its life (RegisterAck, State).
type Phase uint8

const (
	// PhaseProfiling: the hook measures every launch.
	PhaseProfiling Phase = 1
	// PhaseSharing: the profile is complete and used for gap filling.
	PhaseSharing Phase = 2
)

func (p Phase) String() string {
	switch p {
	case PhaseProfiling:
		return "profiling"
	case PhaseSharing:
		return "sharing"
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// RunEndReason says what ended a run (RunEnd).
type RunEndReason uint8

const (
	ReasonStreamSync  RunEndReason = 1 // cuStreamSynchronize
	ReasonContextSync RunEndReason = 2 // cuCtxSynchronize
	ReasonEventSync   RunEndReason = 3 // cuEventSynchronize
	ReasonCopyToHost  RunEndReason = 4 // a synchronous device-to-host copy
	ReasonExplicit    RunEndReason = 5 // fikit_run_end()
)

func (r RunEndReason) String() string {
	switch r {
	case ReasonStreamSync:
		return "stream-sync"
	case ReasonContextSync:
		return "context-sync"
	case ReasonEventSync:
		return "event-sync"
	case ReasonCopyToHost:
		return "copy-to-host"
	case ReasonExplicit:
		return "explicit"
	}
	return "RunEndReason(" + strconv.Itoa(int(r)) + ")"
}

// Unmeasured says why a run the hook measured (a profiling run, or a
// sampled run of the sharing phase) carries no measurements (RunEnd's
// unmeasured field); 0 for a run that was not measured or whose records
// were sent.
type Unmeasured uint8

const (
	// UnmeasuredStalled: a launch call stalled (preemption, a driver stall)
	// while the device idled, before its kernel ID had a whole measurement
	// to stand in for it.
	UnmeasuredStalled Unmeasured = 1
	// UnmeasuredUncertain: a stalled launch left where a kernel started a
	// guess off by more than the hook's accuracy budget.
	UnmeasuredUncertain Unmeasured = 2
	// UnmeasuredNoEvents: a kernel had no event pair (the pool ran out, an
	// event call failed, memory ran out).
	UnmeasuredNoEvents Unmeasured = 3
	// UnmeasuredStopped: measurement stopped during the run (the phase or
	// sampling changed).
	UnmeasuredStopped Unmeasured = 4
)

func (u Unmeasured) String() string {
	switch u {
	case 0:
		return "none"
	case UnmeasuredStalled:
		return "stalled"
	case UnmeasuredUncertain:
		return "uncertain"
	case UnmeasuredNoEvents:
		return "no-events"
	case UnmeasuredStopped:
		return "stopped"
	}
	return "Unmeasured(" + strconv.Itoa(int(u)) + ")"
}

// ErrorCode is the code of an Error message.
type ErrorCode uint8

const (
	CodeUnknownTask        ErrorCode = 1 // the hook re-registers
	CodeUnsupportedVersion ErrorCode = 2
	CodeMalformed          ErrorCode = 3
	CodeInvalidValue       ErrorCode = 4
	CodeOverloaded         ErrorCode = 5
)

func (c ErrorCode) String() string {
	switch c {
	case CodeUnknownTask:
		return "unknown task"
	case CodeUnsupportedVersion:
		return "unsupported version"
	case CodeMalformed:
		return "malformed"
	case CodeInvalidValue:
		return "invalid value"
	case CodeOverloaded:
		return "overloaded"
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// RecordFlags qualify a measurement Record.
type RecordFlags uint8

const (
	// FlagGapSpansRunEnd: the gap after this kernel runs past a run end; it
	// is not an inter-kernel gap.
	FlagGapSpansRunEnd RecordFlags = 1 << 0
	// FlagOverlapped: the kernel overlapped another kernel of the same task
	// (multi-stream); its gap is clamped to 0.
	FlagOverlapped RecordFlags = 1 << 1

	// recordFlagsMask holds every defined flag.
	recordFlagsMask = FlagGapSpansRunEnd | FlagOverlapped
)

func (f RecordFlags) String() string {
	if f == 0 {
		return "0"
	}
	s := ""
	add := func(name string) {
		if s != "" {
			s += "|"
		}
		s += name
	}
	if f&FlagGapSpansRunEnd != 0 {
		add("gap-spans-run-end")
	}
	if f&FlagOverlapped != 0 {
		add("overlapped")
	}
	if rest := f &^ recordFlagsMask; rest != 0 {
		add("0x" + strconv.FormatUint(uint64(rest), 16))
	}
	return s
}
