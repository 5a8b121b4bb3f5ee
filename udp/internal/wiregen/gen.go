package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// File is one generated file, by its path from the repository root.
type File struct {
	Path string
	Data []byte
}

// Paths of the generated files.
const (
	wireHeaderPath  = "hookclient/wire_gen.h"
	boardHeaderPath = "hookclient/board_gen.h"
	layoutPath      = "udp/board/testdata/layout.txt"
	designPath      = "docs/design.md"
)

// The message tables' place in docs/design.md.
const (
	designBegin = "<!-- The message tables below are generated from udp/messages.go by `go generate ./udp`: edit the Go table, not them. -->\n"
	designEnd   = "<!-- end of the generated message tables -->\n"
)

// Generate returns every generated file; root is the repository root (the
// design document's hand-written parts are read from it).
func Generate(root string) ([]File, error) {
	wire, err := wireHeader(udp.Schema())
	if err != nil {
		return nil, err
	}
	design, err := os.ReadFile(filepath.Join(root, designPath))
	if err != nil {
		return nil, err
	}
	doc, err := designDoc(design, udp.Schema())
	if err != nil {
		return nil, err
	}
	bh, err := boardHeader()
	if err != nil {
		return nil, err
	}
	return []File{
		{wireHeaderPath, wire},
		{boardHeaderPath, bh},
		{layoutPath, layoutText()},
		{designPath, doc},
	}, nil
}

// upperSnake turns "LaunchNotify" into "LAUNCH_NOTIFY".
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// Values inside messages, by their C names (the names the hook has always
// used); a new enum value needs a new protocol version, so this list
// changes with the protocol, not with a message.
var valueEnums = []struct {
	what   string
	values []cValue
}{
	{"roles (RegisterAck, State)", []cValue{{"FK_ROLE_HOLDER", uint64(udp.RoleHolder)}, {"FK_ROLE_WAITER", uint64(udp.RoleWaiter)}}},
	{"phases (RegisterAck, State)", []cValue{{"FK_PHASE_PROFILING", uint64(udp.PhaseProfiling)}, {"FK_PHASE_SHARING", uint64(udp.PhaseSharing)}}},
	{"measurement record flags", []cValue{{"FK_MEAS_GAP_SPANS_RUN_END", uint64(udp.FlagGapSpansRunEnd)}, {"FK_MEAS_OVERLAPPED", uint64(udp.FlagOverlapped)}}},
	{"RunEnd reasons", []cValue{{"FK_RUN_END_STREAM_SYNC", uint64(udp.ReasonStreamSync)}, {"FK_RUN_END_CTX_SYNC", uint64(udp.ReasonContextSync)},
		{"FK_RUN_END_EVENT_SYNC", uint64(udp.ReasonEventSync)}, {"FK_RUN_END_DTOH_COPY", uint64(udp.ReasonCopyToHost)},
		{"FK_RUN_END_EXPLICIT", uint64(udp.ReasonExplicit)}}},
	{"RunEnd unmeasured", []cValue{{"FK_UNMEASURED_STALLED", uint64(udp.UnmeasuredStalled)},
		{"FK_UNMEASURED_UNCERTAIN", uint64(udp.UnmeasuredUncertain)}, {"FK_UNMEASURED_NO_EVENTS", uint64(udp.UnmeasuredNoEvents)},
		{"FK_UNMEASURED_STOPPED", uint64(udp.UnmeasuredStopped)}}},
	{"Calibration flags", []cValue{{"FK_CALIB_MPS", uint64(udp.CalibrationMPS)}, {"FK_CALIB_FAILED", uint64(udp.CalibrationFailed)}}},
	{"Error codes", []cValue{{"FK_ERR_UNKNOWN_TASK", uint64(udp.CodeUnknownTask)}, {"FK_ERR_VERSION", uint64(udp.CodeUnsupportedVersion)},
		{"FK_ERR_MALFORMED", uint64(udp.CodeMalformed)}, {"FK_ERR_INVALID", uint64(udp.CodeInvalidValue)},
		{"FK_ERR_OVERLOADED", uint64(udp.CodeOverloaded)}}},
}

type cValue struct {
	name  string
	value uint64
}

// The C types of the element structs of array fields.
var elemType = map[udp.FieldKind]string{udp.KindRecords: "fk_meas_rec", udp.KindLaunches: "fk_launch",
	udp.KindKernelTimes: "fk_kernel_time"}

// isArray: the kind is an array of elements (elemType).
func isArray(k udp.FieldKind) bool { _, ok := elemType[k]; return ok }

var kindName = map[udp.FieldKind]string{udp.KindUint: "FK_K_UINT", udp.KindStr: "FK_K_STR", udp.KindBin16: "FK_K_BIN16",
	udp.KindTriple: "FK_K_TRIPLE", udp.KindRecords: "FK_K_RECORDS", udp.KindLaunches: "FK_K_LAUNCHES",
	udp.KindKernelTimes: "FK_K_KERNEL_TIMES"}

// uintBytes is the size of the C member that holds a value up to hi.
func uintBytes(hi uint64) int {
	switch {
	case hi <= math.MaxUint8:
		return 1
	case hi <= math.MaxUint32:
		return 4
	}
	return 8
}

// member is a field of fk_msg_out or fk_msg_in: a field name means the same
// in every message of a direction.
type member struct {
	name  string
	kind  udp.FieldKind
	bytes int             // KindUint: the widest of the messages'
	elems []udp.FieldSpec // array kinds
}

func members(schema []udp.MessageSpec, dir udp.Direction) ([]*member, error) {
	var out []*member
	byName := map[string]*member{}
	for _, m := range schema {
		if m.Dir != dir {
			continue
		}
		for _, f := range m.Fields {
			mb := byName[f.Name]
			if mb == nil {
				mb = &member{name: f.Name, kind: f.Kind, elems: f.Elems}
				byName[f.Name] = mb
				out = append(out, mb)
			}
			if mb.kind != f.Kind {
				return nil, fmt.Errorf("field %s of %s is of another kind than in an earlier message: C keeps one member per name", f.Name, m.Name)
			}
			if f.Kind == udp.KindUint {
				mb.bytes = max(mb.bytes, uintBytes(f.Hi))
			}
		}
	}
	return out, nil
}

func cUint(bytes int) string { return fmt.Sprintf("uint%d_t", 8*bytes) }

// writeMembers writes the members of a direction's struct. An array the hook
// sends is its elements' structs; one it receives is the datagram's bytes
// of its elements, checked by the decoder and read with fk_decode_elems.
func writeMembers(b *bytes.Buffer, ms []*member, in bool) {
	for _, m := range ms {
		if in && isArray(m.kind) {
			fmt.Fprintf(b, "\tconst uint8_t *%s; /* its elements in the datagram: fk_decode_elems */\n\tsize_t %s_n;\n", m.name, m.name)
			continue
		}
		switch m.kind {
		case udp.KindUint:
			fmt.Fprintf(b, "\t%s %s;\n", cUint(m.bytes), m.name)
		case udp.KindStr:
			fmt.Fprintf(b, "\tconst char *%s; /* not NUL-terminated */\n\tsize_t %s_len;\n", m.name, m.name)
		case udp.KindBin16:
			fmt.Fprintf(b, "\tuint8_t %s[16];\n", m.name)
		case udp.KindTriple:
			fmt.Fprintf(b, "\tuint32_t %s[3];\n", m.name)
		case udp.KindRecords, udp.KindLaunches, udp.KindKernelTimes:
			fmt.Fprintf(b, "\tconst %s *%s;\n\tsize_t %s_n;\n", elemType[m.kind], m.name, m.name)
		}
	}
}

func hexU64(v uint64) string { return fmt.Sprintf("UINT64_C(%#x)", v) }

// fieldInit is a table entry: f as a member of the C struct st.
func fieldInit(f udp.FieldSpec, st string, ms map[string]*member) string {
	var p []string
	p = append(p, fmt.Sprintf(".name = %q", f.Name), ".kind = "+kindName[f.Kind])
	if f.Optional {
		p = append(p, ".opt = 1")
	}
	if f.Fit {
		p = append(p, ".fit = 1")
	}
	p = append(p, fmt.Sprintf(".off = offsetof(%s, %s)", st, f.Name))
	switch f.Kind {
	case udp.KindUint:
		bytes := uintBytes(f.Hi)
		if m := ms[f.Name]; m != nil {
			bytes = m.bytes
		}
		p = append(p, fmt.Sprintf(".size = %d", bytes), ".lo = "+hexU64(f.Lo), ".hi = "+hexU64(f.Hi))
	case udp.KindStr:
		p = append(p, fmt.Sprintf(".len_off = offsetof(%s, %s_len)", st, f.Name))
	case udp.KindRecords, udp.KindLaunches, udp.KindKernelTimes:
		et := elemType[f.Kind]
		p = append(p, fmt.Sprintf(".len_off = offsetof(%s, %s_n)", st, f.Name),
			fmt.Sprintf(".elems = fk_wire_%s_fields", strings.TrimPrefix(et, "fk_")),
			fmt.Sprintf(".nelems = %d", len(f.Elems)), fmt.Sprintf(".elem_size = sizeof(%s)", et))
	}
	return "{" + strings.Join(p, ", ") + "}"
}

func wireHeader(schema []udp.MessageSpec) ([]byte, error) {
	out, err := members(schema, udp.ToDaemon)
	if err != nil {
		return nil, err
	}
	in, err := members(schema, udp.ToHook)
	if err != nil {
		return nil, err
	}
	for _, m := range schema {
		n := 0
		for _, f := range m.Fields {
			if isArray(f.Kind) {
				n++
			}
		}
		if m.Dir == udp.ToHook && n > 1 {
			return nil, fmt.Errorf("daemon → hook message %s has %d arrays: fk_decode_elems reads a message's one array", m.Name, n)
		}
	}
	outBy, inBy := map[string]*member{}, map[string]*member{}
	for _, m := range out {
		outBy[m.name] = m
	}
	for _, m := range in {
		inBy[m.name] = m
	}
	maxType := 0
	for _, m := range schema {
		maxType = max(maxType, int(m.Type))
	}

	var b bytes.Buffer
	b.WriteString(`/* wire_gen.h — wire protocol v1 for the hook: message types, values, the
 * message structs and the table hookclient/wire.c encodes and decodes by.
 * Generated by ` + "`go generate ./udp`" + ` (udp/internal/wiregen) from udp's message
 * table (udp/messages.go). DO NOT EDIT: change the Go table and regenerate;
 * udp/internal/wiregen's test fails while this file is stale. */
#ifndef FIKIT_WIRE_GEN_H
#define FIKIT_WIRE_GEN_H

#include <stddef.h>
#include <stdint.h>

`)
	fmt.Fprintf(&b, "#define FK_WIRE_VERSION %d\n#define FK_MAX_DATAGRAM %d\n", udp.ProtocolVersion, udp.MaxDatagram)
	fmt.Fprintf(&b, "/* Register's hook_flags: the hook sends its RegisterAck's token on every\n * message about the task. */\n#define FK_HOOK_SENDS_TOKEN %du\n\n", udp.HookSendsToken)
	b.WriteString("enum fk_msg_type {\n")
	for _, m := range schema {
		fmt.Fprintf(&b, "\tFK_MSG_%s = %d,\n", upperSnake(m.Name), m.Type)
	}
	b.WriteString("};\n")
	fmt.Fprintf(&b, "#define FK_MSG_TYPES %d /* one past the largest type */\n\n", maxType+1)
	for _, e := range valueEnums {
		fmt.Fprintf(&b, "/* %s */\nenum {", e.what)
		for i, v := range e.values {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s = %d", v.name, v.value)
		}
		b.WriteString(" };\n")
	}

	// The element structs of array fields.
	done := map[udp.FieldKind]bool{}
	for _, ms := range [][]*member{out, in} {
		for _, m := range ms {
			if m.elems == nil || done[m.kind] {
				continue
			}
			done[m.kind] = true
			fmt.Fprintf(&b, "\n/* One element of %s. */\ntypedef struct %s {\n", m.name, elemType[m.kind])
			for _, f := range m.elems {
				fmt.Fprintf(&b, "\t%s %s;\n", cUint(uintBytes(f.Hi)), f.Name)
			}
			fmt.Fprintf(&b, "} %s;\n", elemType[m.kind])
		}
	}

	b.WriteString("\n/* A message the hook sends (hook → daemon): its type and the fields of\n * every such type, by name. An encoder reads the fields of its type. */\ntypedef struct fk_msg_out {\n\tint type;\n")
	writeMembers(&b, out, false)
	b.WriteString("} fk_msg_out;\n\n/* A message the hook receives (daemon → hook), decoded: its type and the\n * fields of every such type; strings point into the datagram. An optional\n * field that is absent reads as zero. */\ntypedef struct fk_msg_in {\n\tint type;\n")
	writeMembers(&b, in, true)
	b.WriteString(`} fk_msg_in;

/* The table: each type's fields in wire order, as members of fk_msg_out
 * (hook → daemon) or fk_msg_in (daemon → hook). */
enum fk_wire_kind { FK_K_UINT, FK_K_STR, FK_K_BIN16, FK_K_TRIPLE, FK_K_RECORDS, FK_K_LAUNCHES, FK_K_KERNEL_TIMES };
enum { FK_DIR_TO_DAEMON = 1, FK_DIR_TO_HOOK = 2 };

typedef struct fk_wire_field {
	const char *name;
	uint8_t kind;      /* enum fk_wire_kind */
	uint8_t opt;       /* optional: last, left out while zero, absent reads as zero */
	uint8_t fit;       /* the string an encoder cuts so that the datagram fits */
	uint8_t size;      /* FK_K_UINT: bytes of the member (1, 4 or 8) */
	uint64_t lo, hi;   /* FK_K_UINT: the values allowed */
	size_t off;        /* the member */
	size_t len_off;    /* FK_K_STR: its length; arrays: their element count */
	const struct fk_wire_field *elems; /* arrays: one element's fields */
	uint8_t nelems;
	size_t elem_size;
} fk_wire_field;

typedef struct fk_wire_msg {
	const char *name; /* NULL: no such type */
	uint8_t dir;      /* FK_DIR_* */
	uint8_t nfields;
	uint8_t required; /* fields every datagram carries */
	const fk_wire_field *fields;
} fk_wire_msg;

extern const fk_wire_msg fk_wire_msgs[FK_MSG_TYPES];

/* wire.c instantiates the table. */
#ifdef FK_WIRE_GEN_TABLE
`)
	done = map[udp.FieldKind]bool{}
	for _, ms := range [][]*member{out, in} {
		for _, m := range ms {
			if m.elems == nil || done[m.kind] {
				continue
			}
			done[m.kind] = true
			et := elemType[m.kind]
			fmt.Fprintf(&b, "static const fk_wire_field fk_wire_%s_fields[] = {\n", strings.TrimPrefix(et, "fk_"))
			for _, f := range m.elems {
				fmt.Fprintf(&b, "\t%s,\n", fieldInit(f, et, nil))
			}
			b.WriteString("};\n")
		}
	}
	b.WriteString("const fk_wire_msg fk_wire_msgs[FK_MSG_TYPES] = {\n")
	for _, m := range schema {
		st, dir, by := "fk_msg_out", "FK_DIR_TO_DAEMON", outBy
		if m.Dir == udp.ToHook {
			st, dir, by = "fk_msg_in", "FK_DIR_TO_HOOK", inBy
		}
		req := len(m.Fields)
		for req > 0 && m.Fields[req-1].Optional {
			req--
		}
		fmt.Fprintf(&b, "\t[FK_MSG_%s] = {%q, %s, %d, %d, (const fk_wire_field[]){\n", upperSnake(m.Name), m.Name, dir, len(m.Fields), req)
		for _, f := range m.Fields {
			fmt.Fprintf(&b, "\t\t%s,\n", fieldInit(f, st, by))
		}
		b.WriteString("\t}},\n")
	}
	b.WriteString("};\n#endif\n\n#endif\n")
	return b.Bytes(), nil
}

// ---- docs/design.md ----

func uintDoc(f udp.FieldSpec) string {
	n := uintBytes(f.Hi)
	s := fmt.Sprintf("%s u%d", f.Name, 8*n)
	full := uint64(math.MaxUint64)
	if n < 8 {
		full = 1<<(8*n) - 1
	}
	if f.Lo != 0 || f.Hi != full {
		s += fmt.Sprintf(" (%d–%d)", f.Lo, f.Hi)
	}
	return s
}

func fieldDoc(f udp.FieldSpec) string {
	switch f.Kind {
	case udp.KindUint:
		return uintDoc(f)
	case udp.KindStr:
		return f.Name + " str"
	case udp.KindBin16:
		return f.Name + " bin16"
	case udp.KindTriple:
		return f.Name + " [u32 ×3]"
	}
	var es []string
	for _, e := range f.Elems {
		es = append(es, uintDoc(e))
	}
	return fmt.Sprintf("%s [[%s]…]", f.Name, strings.Join(es, ", "))
}

func messageTable(b *strings.Builder, schema []udp.MessageSpec, dir udp.Direction) {
	b.WriteString("| type | name | fields after `[1, type,` |\n|---|---|---|\n")
	for _, m := range schema {
		if m.Dir != dir {
			continue
		}
		var req, opt []string
		for _, f := range m.Fields {
			if f.Optional {
				opt = append(opt, fieldDoc(f))
			} else {
				req = append(req, fieldDoc(f))
			}
		}
		fields := "`" + strings.Join(req, ", ") + "`"
		if len(opt) > 0 {
			fields += ", optional `" + strings.Join(opt, ", ") + "`"
		}
		if m.Note != "" {
			fields += " — " + m.Note
		}
		fmt.Fprintf(b, "| %d | %s | %s |\n", m.Type, m.Name, fields)
	}
}

func designDoc(design []byte, schema []udp.MessageSpec) ([]byte, error) {
	s := string(design)
	i, j := strings.Index(s, designBegin), strings.Index(s, designEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: the generated message tables' markers are missing:\n%s%s", designPath, designBegin, designEnd)
	}
	var b strings.Builder
	b.WriteString(s[:i+len(designBegin)])
	b.WriteString("\nHook → daemon:\n\n")
	messageTable(&b, schema, udp.ToDaemon)
	b.WriteString("\nDaemon → hook:\n\n")
	messageTable(&b, schema, udp.ToHook)
	b.WriteString("\n")
	b.WriteString(s[j:])
	return []byte(b.String()), nil
}

// ---- the board ----

func layoutText() []byte {
	var b bytes.Buffer
	b.WriteString(`# The board's layout (docs/design.md "Board"): <field> <offset> <size>, little-endian words.
# Generated by ` + "`go generate ./udp`" + ` from udp/board/layout.go; read by hookclient/test/test_board.c.
`)
	for _, e := range board.Layout {
		fmt.Fprintf(&b, "%s %d %d\n", e.Name, e.Offset, e.Size)
	}
	b.WriteString(`# magic is the bytes "FIKITBD1"; version 2; gpus 16; level p of GPU section i at 64 + 256 i + 16 + 8 p;
# registered: bit p set while a task of priority p is registered on the GPU (written by the daemon);
# run_end_ns p: the latest run end of priority p (hooks); next_ns, next_late_ns, switch_ns, resume_task,
# flags: the daemon's hints (udp/board/board.go Hint); wake: futex word of the GPU's sleeping waiters;
# cursor_ns: the predicted end of the bounded tasks' work on the GPU (hooks, docs/scheduler.md);
# task t's waiter slot is slot t mod slots, at slots_offset + slot_stride (t mod slots): task, gen,
# grant_seq, credit, seen_ns, expires_ns, hold_ns written by the daemon, wait_seq by the hook; gen is
# the futex word (udp/board/board.go)
`)
	fmt.Fprintf(&b, "magic_value %d 0\n", uint64(board.Magic))
	return b.Bytes()
}

// part is one struct of the board: the header (no prefix), a GPU section
// or a waiter slot.
type part struct {
	prefix, ctype string
	size          uint64
	fields        []board.LayoutEntry
}

func layoutConst(name string) (uint64, error) {
	for _, e := range board.Layout {
		if e.Name == name && e.Size == 0 {
			return e.Offset, nil
		}
	}
	return 0, fmt.Errorf("board layout: no %s", name)
}

func boardHeader() ([]byte, error) {
	var consts = map[string]uint64{}
	for _, n := range []string{"header_size", "gpu_stride", "slots_offset", "slot_stride", "slots", "file_size"} {
		v, err := layoutConst(n)
		if err != nil {
			return nil, err
		}
		consts[n] = v
	}
	parts := []*part{{"gpu.", "fk_board_gpu", consts["gpu_stride"], nil}, {"slot.", "fk_board_slot", consts["slot_stride"], nil},
		{"", "fk_board", consts["header_size"], nil}}
	for _, e := range board.Layout {
		if e.Size == 0 {
			continue
		}
		p := parts[2]
		for _, q := range parts[:2] {
			if strings.HasPrefix(e.Name, q.prefix) {
				p = q
			}
		}
		if n := len(p.fields); n > 0 && p.fields[n-1].Offset+uint64(p.fields[n-1].Size) > e.Offset {
			return nil, fmt.Errorf("board layout: %s overlaps the field before it (fields in offset order)", e.Name)
		}
		if e.Offset+uint64(e.Size) > p.size {
			return nil, fmt.Errorf("board layout: %s does not fit its part (%d bytes)", e.Name, p.size)
		}
		p.fields = append(p.fields, e)
	}
	var b bytes.Buffer
	b.WriteString(`/* board_gen.h — the layout of the board a daemon shares with the hooks on
 * its host (docs/design.md "Board"). Generated by ` + "`go generate ./udp`" + `
 * (udp/internal/wiregen) from udp/board/layout.go. DO NOT EDIT. */
#ifndef FIKIT_BOARD_GEN_H
#define FIKIT_BOARD_GEN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

`)
	for _, c := range board.LayoutConstants {
		if c.Value > math.MaxInt32 {
			fmt.Fprintf(&b, "#define FK_BOARD_%s %#xull\n", c.Name, c.Value)
		} else {
			fmt.Fprintf(&b, "#define FK_BOARD_%s %d\n", c.Name, c.Value)
		}
	}
	for _, p := range parts {
		fmt.Fprintf(&b, "\ntypedef struct %s {\n", p.ctype)
		var at uint64
		pad := func(to uint64) {
			if to > at {
				fmt.Fprintf(&b, "\tuint8_t pad_%d[%d];\n", at, to-at)
			}
			at = to
		}
		for _, e := range p.fields {
			pad(e.Offset)
			ct := cUint(e.Elem)
			if e.Atomic {
				ct = "_Atomic " + ct
			}
			name := strings.TrimPrefix(e.Name, p.prefix)
			if n := e.Size / e.Elem; n > 1 {
				fmt.Fprintf(&b, "\t%s %s[%d];\n", ct, name, n)
			} else {
				fmt.Fprintf(&b, "\t%s %s;\n", ct, name)
			}
			at += uint64(e.Size)
		}
		pad(p.size)
		if p.prefix == "" {
			fmt.Fprintf(&b, "\tfk_board_gpu gpu[FK_BOARD_GPUS];\n")
			at = consts["header_size"] + uint64(board.GPUs)*consts["gpu_stride"]
			pad(consts["slots_offset"])
			fmt.Fprintf(&b, "\tfk_board_slot slot[FK_BOARD_SLOTS];\n")
		}
		fmt.Fprintf(&b, "} %s;\n", p.ctype)
	}
	b.WriteString("\n")
	for _, p := range parts {
		for _, e := range p.fields {
			fmt.Fprintf(&b, "_Static_assert(offsetof(%s, %s) == %d, \"%s\");\n", p.ctype, strings.TrimPrefix(e.Name, p.prefix), e.Offset, e.Name)
		}
	}
	fmt.Fprintf(&b, "_Static_assert(sizeof(fk_board_gpu) == %d, \"gpu_stride\");\n", consts["gpu_stride"])
	fmt.Fprintf(&b, "_Static_assert(sizeof(fk_board_slot) == %d, \"slot_stride\");\n", consts["slot_stride"])
	fmt.Fprintf(&b, "_Static_assert(offsetof(fk_board, gpu) == %d, \"header_size\");\n", consts["header_size"])
	fmt.Fprintf(&b, "_Static_assert(offsetof(fk_board, slot) == %d, \"slots_offset\");\n", consts["slots_offset"])
	fmt.Fprintf(&b, "_Static_assert(FK_BOARD_SLOTS == %d && sizeof(fk_board) <= %d, \"file_size\");\n", consts["slots"], consts["file_size"])
	b.WriteString("\n#endif\n")
	return b.Bytes(), nil
}
