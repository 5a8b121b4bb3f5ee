// Package udp is fikit's wire protocol between the hook (hookclient/, in
// every service) and the daemon (fikit serve): message types, their msgpack
// codec, and the daemon's socket. It is the Go side of the protocol whose
// one truth is testdata/vectors.txt, shared with the C encoder and decoder
// of the hook; docs/design.md ("Wire protocol v1") gives the overview.
//
// # Datagrams
//
// UDP, one message per datagram, at most [MaxDatagram] (1400) bytes, so a
// datagram never fragments on an Ethernet path. A datagram is one msgpack
// array
//
//	[version, type, field…]
//
// with version [ProtocolVersion] (1) and type one of the Type constants.
// The fields of each type follow in a fixed order (docs/design.md has the
// table; the Go structs list them in the same order).
//
// Encoders write every integer, str, bin and array header in its smallest
// msgpack form: positive fixint up to 127, then uint8, uint16, uint32,
// uint64; fixstr up to 31 bytes, then str8, str16; bin8 for the UUID;
// fixarray up to 15 elements, then array16. [Append] does this and
// testdata/vectors.txt pins it byte for byte.
//
// Decoders are liberal in form and strict in content:
//
//   - any msgpack integer encoding is accepted whose value fits the field,
//     signed encodings of non-negative values included; a negative value or
//     one above the field's maximum is [ErrRange]; nil, bool, float or any
//     other kind where an integer belongs is [ErrMalformed];
//   - any str header width is accepted for strings, any bin header width for
//     the UUID (which must hold 16 bytes, else [ErrRange]); a bin where a str
//     belongs, or the reverse, is [ErrMalformed]. Strings are byte strings:
//     task keys and kernel names need not be UTF-8;
//   - any array header width is accepted; an array shorter than its type's
//     fields is [ErrMissingField]; extra elements after the known fields are
//     skipped (checked for well-formedness only), so a later minor revision
//     can append fields. The same holds inside a measurement record. Grid and
//     block are vectors, not records: they have exactly 3 elements, else
//     [ErrMalformed];
//   - enums are closed: role 1–2, phase 1–2, run end reason 1–5, error code
//     1–5, priority 0–9, weight 0–100, record flags only the defined bits;
//     anything else is [ErrRange]. A new enum value needs a new protocol
//     version;
//   - a datagram over MaxDatagram bytes is [ErrTooLarge]; bytes after the
//     array are [ErrTrailing]; a wrong version is [ErrVersion]; an unknown
//     type is [ErrUnknownType];
//   - optional fields (Grant's and State's gate, RegisterAck's board,
//     Register's weight, every message's token) come last: an encoder
//     leaves them out while they and every field after them are zero, and a
//     decoder reads an absent one as zero.
//
// Between a hook and a daemon on different hosts, with a key, a datagram is
// the message and then its MAC, a bin8 of [MACSize] bytes ([Authenticator]:
// Seal, Open; testdata/auth.txt); the receiver checks and removes it before
// decoding. Loopback peers send none.
//
// Decoders check in this order, so that a datagram with several defects
// gets the same error everywhere: size; the array header (its length may
// not exceed the bytes left, since every element takes at least one); the
// version (so a version-2 datagram is ErrVersion whatever follows); the
// type; the element count; each field in order; the extra elements;
// trailing bytes.
// testdata/invalid.txt lists datagrams every decoder must reject, with the
// error, and testdata/decode_only.txt datagrams in forms no encoder produces
// that every decoder must accept.
//
// # Example: Register
//
// Register{Seq: 1, TaskKey: "python3 serve.py --port 8000", PID: 4242,
// Priority: 0, DeviceUUID: 5a1b6e3c-9427-4f1d-8e0b-c27a6133d805, DeviceName:
// "NVIDIA H100 80GB HBM3", HookFlags: 0} (vector register_basic):
//
//	99                      fixarray, 9 elements: version, type, 7 fields
//	01                      version 1
//	01                      type 1, Register
//	01                      seq 1
//	bc                      fixstr, 28 bytes: task_key
//	   70 79 74 68 6f 6e 33 20 73 65 72 76 65 2e 70 79
//	   20 2d 2d 70 6f 72 74 20 38 30 30 30
//	                        "python3 serve.py --port 8000"
//	cd 10 92                uint16 4242: pid
//	00                      priority 0
//	c4 10                   bin8, 16 bytes: device_uuid
//	   5a 1b 6e 3c 94 27 4f 1d 8e 0b c2 7a 61 33 d8 05
//	b5                      fixstr, 21 bytes: device_name
//	   4e 56 49 44 49 41 20 48 31 30 30 20 38 30 47 42
//	   20 48 42 4d 33       "NVIDIA H100 80GB HBM3"
//	00                      hook_flags 0
//
// # Example: Grant
//
// Grant{TaskID: 7, Seq: 300, Credit: 0} (vector grant_basic):
//
//	95                      fixarray, 5 elements
//	01                      version 1
//	09                      type 9, Grant
//	07                      task_id 7
//	cd 01 2c                uint16 300: seq
//	00                      credit 0
//
// # Conversation
//
// The hook sends Register (seq: its registration attempt, from 1) at the
// first launch on a device; the daemon answers RegisterAck with the same seq,
// the task ID every later message carries, the task's role and phase, the
// number of profiling runs and the heartbeat interval. Each later
// State changes role, phase or credit unsolicited.
//
// LaunchNotify, LaunchBatch and LaunchRequest share one per-task counter,
// seq, starting at 1, so the daemon sees lost notifications as gaps. A
// holder ([RoleHolder]) launches freely and reports launches after the fact:
// a hook's sender packs whatever its ring holds into one LaunchBatch per
// task (consecutive seqs, each launch with its time on the hook's
// CLOCK_MONOTONIC, so a daemon on the same machine places launches when they
// happened, not when the batch arrived); LaunchNotify is the single form. A
// waiter ([RoleWaiter]) sends LaunchRequest and waits for Grant (launch) or
// Hold (still queued: keep waiting, reset the timeout).
//
// Credit is a limit on seq: Grant{seq, credit} lets launch seq go and the
// launches seq+1 … seq+credit go without asking (they are reported like a
// holder's). A Grant for no waiting launch renews credit that way, naming
// the latest seq the daemon has seen, so launches in flight are never
// counted twice. A State with credit 0 revokes credit; a State with credit
// c > 0 allows c launches after the hook's latest.
//
// While profiling ([PhaseProfiling]) the hook measures every launch: it sends
// KernelInfo once per kernel ID per registration, before the first
// Measurements that mention it (a name too long for one datagram is cut:
// the ID is still the hash of the full name); then a run's records in one or
// more Measurements ([PackMeasurements] splits them), then the run's RunEnd.
// Record flags: [FlagGapSpansRunEnd] marks a gap that runs past a run end
// (not an inter-kernel gap), [FlagOverlapped] a kernel that overlapped
// another of the same task (gap clamped to 0). UDP may lose or reorder any
// of them; a run with missing records is discarded by the daemon.
//
// The hook sends Heartbeat every heartbeat interval and Goodbye on exit. The
// daemon answers a datagram it cannot use with Error: code
// [CodeUnknownTask] (the hook re-registers), [CodeUnsupportedVersion],
// [CodeMalformed], [CodeInvalidValue] ([ErrorCodeOf] maps decode errors to
// these) or [CodeOverloaded].
//
// # Go API
//
// [Append] encodes, [Decode] decodes into a new message and a reusable
// [Decoder] decodes without allocating (about 30 ns for a LaunchNotify: a
// hand-written path reads the all-integer messages in their canonical form,
// and the vmihailenco/msgpack decoder everything else, with the same
// result). [Format] and [ParseText] convert to and from the text form used
// by the vector files. [Listen] opens the daemon's socket ([Conn]), [Dial] a
// small client for tests and tools.
package udp
