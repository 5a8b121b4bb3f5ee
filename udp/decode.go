package udp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoder decodes datagrams into messages it owns: the message Decode returns
// (and a Measurements' Records) is valid until the next call of Decode on the
// same Decoder. Its zero value is ready to use; it is not safe for concurrent
// use. A receive loop keeps one Decoder and decodes without allocating except
// for the strings of Register, Error and KernelInfo.
type Decoder struct {
	br   bytes.Reader
	md   *msgpack.Decoder
	b    []byte // the datagram being decoded
	v    values
	recs []Record
	lns  []Launch
	kts  []KernelTime

	// slots holds one reusable message per type, made at its first use.
	slots [len(messages)]decodable
}

// Decode decodes one datagram. It returns a pointer to the decoded message
// (*Register, *LaunchNotify, …), valid until the next call, or an error that
// wraps ErrTooLarge, ErrMalformed, ErrVersion, ErrUnknownType,
// ErrMissingField, ErrRange or ErrTrailing. It never panics, and hostile
// lengths inside a datagram cannot make it allocate more than the datagram's
// size.
func (d *Decoder) Decode(b []byte) (Message, error) {
	t, err := d.decode(b)
	if err != nil {
		return nil, err
	}
	m := d.slot(t)
	m.get(&d.v)
	return m, nil
}

var decoders = sync.Pool{New: func() any { return new(Decoder) }}

// Decode decodes one datagram into a new message that shares nothing with b.
// See [Decoder.Decode] for errors; a receive loop should keep a Decoder
// instead, which does not allocate the message.
func Decode(b []byte) (Message, error) {
	d := decoders.Get().(*Decoder)
	defer decoders.Put(d)
	t, err := d.decode(b)
	if err != nil {
		return nil, err
	}
	m := newMessage(t)
	m.get(&d.v)
	if mm, ok := m.(*Measurements); ok && mm.Records != nil {
		mm.Records = slices.Clone(mm.Records)
	}
	if mb, ok := m.(*LaunchBatch); ok && mb.Launches != nil {
		mb.Launches = slices.Clone(mb.Launches)
	}
	d.v.s = [maxFields]string{}
	d.b = nil
	return m, nil
}

func (d *Decoder) slot(t Type) decodable {
	m := d.slots[t]
	if m == nil {
		m = newMessage(t)
		d.slots[t] = m
	}
	return m
}

// decode fills d.v from b and returns the message type.
func (d *Decoder) decode(b []byte) (Type, error) {
	if len(b) > MaxDatagram {
		return 0, fmt.Errorf("decode: %d bytes: %w", len(b), ErrTooLarge)
	}
	if t, ok := d.fast(b); ok {
		return t, nil
	}
	return d.full(b)
}

// intOnly marks the types whose fields are all integers, which fast decodes.
var intOnly = func() (ok [len(messages)]bool) {
	for t, m := range messages {
		sch := m.fields
		ok[t] = sch != nil
		for _, f := range sch {
			ok[t] = ok[t] && f.kind == kUint
		}
	}
	return ok
}()

// fast decodes the common form of the all-integer messages (LaunchNotify,
// LaunchRequest, Heartbeat, Grant, …) by hand: a fixarray of exactly the
// type's fields, unsigned integer encodings, values in range, no trailing
// bytes. It reports false for anything else, which full then decodes (and
// rejects, if it is invalid); fast never decides that a datagram is invalid.
func (d *Decoder) fast(b []byte) (Type, bool) {
	if len(b) < 4 || b[1] != ProtocolVersion || int(b[2]) >= len(intOnly) || !intOnly[b[2]] {
		return 0, false
	}
	t := Type(b[2])
	sch := messages[t].fields
	n := int(b[0]) - 0x90 - 2
	if b[0]&0xf0 != 0x90 || n < required(sch) || n > len(sch) {
		return 0, false
	}
	for i := n; i < len(sch); i++ {
		d.v.u[i] = 0 // optional, absent
	}
	sch = sch[:n]
	p := 3
	for i := range sch {
		if p >= len(b) {
			return 0, false
		}
		var v uint64
		switch c := b[p]; {
		case c <= 0x7f:
			v, p = uint64(c), p+1
		case c == 0xcc && p+2 <= len(b):
			v, p = uint64(b[p+1]), p+2
		case c == 0xcd && p+3 <= len(b):
			v, p = uint64(binary.BigEndian.Uint16(b[p+1:])), p+3
		case c == 0xce && p+5 <= len(b):
			v, p = uint64(binary.BigEndian.Uint32(b[p+1:])), p+5
		case c == 0xcf && p+9 <= len(b):
			v, p = binary.BigEndian.Uint64(b[p+1:]), p+9
		default:
			return 0, false
		}
		if v < sch[i].lo || v > sch[i].hi {
			return 0, false
		}
		d.v.u[i] = v
	}
	return t, p == len(b)
}

// full decodes any datagram with the msgpack decoder and validates it, in
// this order: the array header (whose length must not exceed the bytes
// left), the version, the type, the number of elements, each field in order,
// the extra elements, trailing bytes.
func (d *Decoder) full(b []byte) (Type, error) {
	d.b = b
	d.br.Reset(b)
	if d.md == nil {
		// The msgpack decoder reads straight from d.br and buffers nothing.
		d.md = msgpack.NewDecoder(&d.br)
	}

	n, err := d.arrayLen()
	if err != nil {
		return 0, fmt.Errorf("decode: %w", err)
	}
	if n < 1 {
		return 0, fmt.Errorf("decode: version: %w", ErrMissingField)
	}
	ver, neg, err := d.integer()
	if err != nil {
		return 0, fmt.Errorf("decode: version: %w", err)
	}
	if neg || ver != ProtocolVersion {
		return 0, fmt.Errorf("decode: version %s: %w", signed(ver, neg), ErrVersion)
	}
	if n < 2 {
		return 0, fmt.Errorf("decode: type: %w", ErrMissingField)
	}
	tv, neg, err := d.integer()
	if err != nil {
		return 0, fmt.Errorf("decode: type: %w", err)
	}
	if neg || tv > 0xff || !Type(tv).Valid() {
		return 0, fmt.Errorf("decode: type %s: %w", signed(tv, neg), ErrUnknownType)
	}
	t := Type(tv)
	sch := messages[t].fields
	if n < 2+required(sch) {
		return 0, fmt.Errorf("decode %v: %s: %w", t, sch[n-2].name, ErrMissingField)
	}
	for i, f := range sch {
		if i >= n-2 { // optional, absent
			d.v.u[i], d.v.s[i] = 0, ""
			continue
		}
		if err := d.field(i, f); err != nil {
			return 0, fmt.Errorf("decode %v: %s: %w", t, f.name, err)
		}
	}
	if err := d.skip(max(0, n-2-len(sch))); err != nil {
		return 0, fmt.Errorf("decode %v: extra element: %w", t, err)
	}
	if r := d.br.Len(); r > 0 {
		return 0, fmt.Errorf("decode %v: %d bytes: %w", t, r, ErrTrailing)
	}
	return t, nil
}

func signed(v uint64, neg bool) string {
	if neg {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprint(v)
}

var errTruncated = fmt.Errorf("truncated: %w", ErrMalformed)

func (d *Decoder) field(i int, f field) error {
	switch f.kind {
	case kUint:
		v, err := d.uint(f)
		d.v.u[i] = v
		return err
	case kStr:
		s, err := d.str()
		d.v.s[i] = s
		return err
	case kBin16:
		return d.bin16(&d.v.uuid)
	case kTriple:
		n, err := d.arrayLen()
		if err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("%d elements, want 3: %w", n, ErrMalformed)
		}
		for j := range 3 {
			v, err := d.uint(u32(f.name))
			if err != nil {
				return err
			}
			d.v.t[i][j] = uint32(v)
		}
		return nil
	case kRecords:
		return d.records()
	case kLaunches:
		return d.launches()
	case kKernelTimes:
		return d.kernelTimes()
	}
	panic("udp: unknown field kind")
}

func (d *Decoder) launches() error {
	ls, err := pairs(d, "launch", &launchFields, &d.lns, func(a, b uint64) Launch { return Launch{KernelID: a, OffsetNS: uint32(b)} })
	d.v.l = ls
	return err
}

var launchFields = [2]field{u64("kernel_id"), u32("offset_ns")}

func (d *Decoder) kernelTimes() error {
	ks, err := pairs(d, "kernel", &kernelTimeFields, &d.kts,
		func(a, b uint64) KernelTime { return KernelTime{KernelID: a, DurationNS: uint32(b)} })
	d.v.k = ks
	return err
}

// pairs decodes an array of two-field elements (what names one in errors),
// each made by mk, into *buf (reused: it grows to the datagram's size at
// most once per Decoder). An empty array is nil.
func pairs[T any](d *Decoder, what string, fields *[2]field, buf *[]T, mk func(a, b uint64) T) ([]T, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	// n ≤ remaining bytes (arrayLen): bounded by the datagram's size.
	if cap(*buf) < n {
		*buf = make([]T, 0, n)
	}
	out := (*buf)[:0]
	for j := range n {
		m, err := d.arrayLen()
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, j, err)
		}
		if m < 2 {
			return nil, fmt.Errorf("%s %d: %d elements: %w", what, j, m, ErrMissingField)
		}
		var v [2]uint64
		for k, f := range fields {
			if v[k], err = d.uint(f); err != nil {
				return nil, fmt.Errorf("%s %d: %s: %w", what, j, f.name, err)
			}
		}
		if err := d.skip(m - 2); err != nil {
			return nil, fmt.Errorf("%s %d: extra element: %w", what, j, err)
		}
		out = append(out, mk(v[0], v[1]))
	}
	*buf = out
	if n == 0 {
		return nil, nil
	}
	return out, nil
}

var kernelTimeFields = [2]field{u64("kernel_id"), u32("duration_ns")}

func (d *Decoder) records() error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	// n ≤ remaining bytes (arrayLen), so this allocates at most the
	// datagram's size in records once per Decoder.
	if cap(d.recs) < n {
		d.recs = make([]Record, 0, n)
	}
	recs := d.recs[:0]
	for j := range n {
		m, err := d.arrayLen()
		if err != nil {
			return fmt.Errorf("record %d: %w", j, err)
		}
		if m < 4 {
			return fmt.Errorf("record %d: %d elements: %w", j, m, ErrMissingField)
		}
		var r Record
		var v [4]uint64
		for k, f := range &recordFields {
			if v[k], err = d.uint(f); err != nil {
				return fmt.Errorf("record %d: %s: %w", j, f.name, err)
			}
		}
		r.KernelID, r.DurationNS, r.GapNS, r.Flags = v[0], v[1], v[2], RecordFlags(v[3])
		if err := d.skip(m - 4); err != nil {
			return fmt.Errorf("record %d: extra element: %w", j, err)
		}
		recs = append(recs, r)
	}
	d.recs = recs
	d.v.r = recs
	if n == 0 {
		d.v.r = nil
	}
	return nil
}

var recordFields = [4]field{u64("kernel_id"), u64("duration_ns"), u64("gap_ns"), flagsField}

// integer reads any msgpack integer: its magnitude and whether it is negative.
func (d *Decoder) integer() (v uint64, neg bool, err error) {
	c, err := d.md.PeekCode()
	if err != nil {
		return 0, false, errTruncated
	}
	switch {
	case c <= msgpcode.PosFixedNumHigh || c == msgpcode.Uint8 || c == msgpcode.Uint16 ||
		c == msgpcode.Uint32 || c == msgpcode.Uint64:
		v, err = d.md.DecodeUint64()
	case c >= msgpcode.NegFixedNumLow || c == msgpcode.Int8 || c == msgpcode.Int16 ||
		c == msgpcode.Int32 || c == msgpcode.Int64:
		var i int64
		i, err = d.md.DecodeInt64()
		v, neg = uint64(i), i < 0
	default:
		return 0, false, fmt.Errorf("%s, not an integer: %w", codeKind(c), ErrMalformed)
	}
	if err != nil {
		return 0, false, errTruncated
	}
	return v, neg, nil
}

// uint reads an integer within f's range.
func (d *Decoder) uint(f field) (uint64, error) {
	v, neg, err := d.integer()
	if err != nil {
		return 0, err
	}
	if neg || v < f.lo || v > f.hi {
		return 0, fmt.Errorf("%s not in [%d, %d]: %w", signed(v, neg), f.lo, f.hi, ErrRange)
	}
	return v, nil
}

// arrayLen reads an array header whose length is at most the bytes left,
// since every element takes at least one byte.
func (d *Decoder) arrayLen() (int, error) {
	c, err := d.md.PeekCode()
	if err != nil {
		return 0, errTruncated
	}
	if !msgpcode.IsFixedArray(c) && c != msgpcode.Array16 && c != msgpcode.Array32 {
		return 0, fmt.Errorf("%s, not an array: %w", codeKind(c), ErrMalformed)
	}
	n, err := d.md.DecodeArrayLen()
	if err != nil || n > d.br.Len() {
		return 0, errTruncated
	}
	return n, nil
}

// str reads a msgpack str (not bin) as a new string.
func (d *Decoder) str() (string, error) {
	c, err := d.md.PeekCode()
	if err != nil {
		return "", errTruncated
	}
	if !msgpcode.IsString(c) {
		return "", fmt.Errorf("%s, not a str: %w", codeKind(c), ErrMalformed)
	}
	p, err := d.payload()
	return string(p), err
}

// bin16 reads a msgpack bin of 16 bytes.
func (d *Decoder) bin16(dst *[16]byte) error {
	c, err := d.md.PeekCode()
	if err != nil {
		return errTruncated
	}
	if !msgpcode.IsBin(c) {
		return fmt.Errorf("%s, not a bin: %w", codeKind(c), ErrMalformed)
	}
	p, err := d.payload()
	if err != nil {
		return err
	}
	if len(p) != 16 {
		return fmt.Errorf("%d bytes, want 16: %w", len(p), ErrRange)
	}
	copy(dst[:], p)
	return nil
}

// payload reads a str or bin header and returns its bytes in the datagram,
// checking the length against what is left before touching anything.
func (d *Decoder) payload() ([]byte, error) {
	n, err := d.md.DecodeBytesLen()
	if err != nil || n < 0 || n > d.br.Len() {
		return nil, errTruncated
	}
	off := len(d.b) - d.br.Len()
	if _, err := d.br.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, errTruncated
	}
	return d.b[off : off+n], nil
}

// skip skips count msgpack values of any kind, checking them for
// well-formedness. It counts pending values instead of recursing, so
// nesting depth costs nothing, and every value it looks at takes at least one
// byte, so it ends within len(datagram) steps.
func (d *Decoder) skip(count int) error {
	for pending := count; pending > 0; pending-- {
		c, err := d.md.PeekCode()
		if err != nil {
			return errTruncated
		}
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err := d.arrayLen()
			if err != nil {
				return err
			}
			pending += n
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err := d.md.DecodeMapLen()
			if err != nil || 2*n > d.br.Len() {
				return errTruncated
			}
			pending += 2 * n
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			if _, err := d.payload(); err != nil {
				return err
			}
		case msgpcode.IsExt(c):
			_, n, err := d.md.DecodeExtHeader()
			if err != nil || n > d.br.Len() {
				return errTruncated
			}
			_, _ = d.br.Seek(int64(n), io.SeekCurrent)
		case c == 0xc1:
			return fmt.Errorf("code 0xc1: %w", ErrMalformed)
		default: // nil, bool, integers, floats: at most 9 bytes
			if err := d.md.Skip(); err != nil {
				return errTruncated
			}
		}
	}
	return nil
}

// codeKind names the msgpack kind a code starts, for error messages.
func codeKind(c byte) string {
	switch {
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		return "integer"
	case msgpcode.IsString(c):
		return "str"
	case msgpcode.IsBin(c):
		return "bin"
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return "array"
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return "map"
	case msgpcode.IsExt(c):
		return "ext"
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.False || c == msgpcode.True:
		return "bool"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "float"
	}
	return fmt.Sprintf("code %#x", c)
}
