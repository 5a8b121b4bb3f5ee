package udp

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// appendWriter lets a msgpack.Encoder append to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

// encoder is the reusable state of Append.
type encoder struct {
	w   appendWriter
	enc *msgpack.Encoder
	v   values
}

var encoders = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

// Append appends the encoding of m to dst: the msgpack array
// [ProtocolVersion, type, fields…] with every integer, string and array
// header in its smallest form. It fails (wrapping ErrRange) for a value its
// field does not allow, such as Priority 10 or Role 0, and (wrapping
// ErrTooLarge) if the datagram would be longer than MaxDatagram; a
// KernelInfo's Name is cut to fit instead. On error dst is returned
// unchanged.
func Append(dst []byte, m Message) ([]byte, error) {
	if m == nil {
		return dst, errors.New("append: nil message")
	}
	t := m.Type()
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	m.put(&e.v)
	defer e.clear()
	return e.append(dst, t, messages[t].fields)
}

// clear forgets the message: a put writes only its own fields, so what a
// previous message left in the others would be read as set.
func (e *encoder) clear() {
	e.v = values{}
	e.w.b = nil
}

func (e *encoder) append(dst []byte, t Type, sch []field) ([]byte, error) {
	if err := validate(t, sch, &e.v); err != nil {
		return dst, err
	}
	sch = present(sch, &e.v)
	size := encodedSize(sch, &e.v)
	if size > MaxDatagram {
		i := slices.IndexFunc(sch, func(f field) bool { return f.fit })
		if i < 0 {
			return dst, fmt.Errorf("encode %v: %d bytes: %w", t, size, ErrTooLarge)
		}
		// The string to cut is the type's only field of unbounded length.
		rest := size - strSize(len(e.v.s[i]))
		e.v.s[i] = e.v.s[i][:fitStr(MaxDatagram-rest)]
	}
	e.w.b = dst
	e.enc.Reset(&e.w)
	e.encode(t, sch)
	return e.w.b, nil
}

// validate checks every value against its field's range.
func validate(t Type, sch []field, v *values) error {
	for i, f := range sch {
		switch f.kind {
		case kUint:
			if v.u[i] < f.lo || v.u[i] > f.hi {
				return fmt.Errorf("encode %v: %s %d not in [%d, %d]: %w", t, f.name, v.u[i], f.lo, f.hi, ErrRange)
			}
		case kRecords:
			for j, r := range v.r {
				if r.Flags&^recordFlagsMask != 0 {
					return fmt.Errorf("encode %v: record %d: flags %#x: %w", t, j, uint8(r.Flags), ErrRange)
				}
			}
		}
	}
	return nil
}

// encode writes a validated message that fits. The appendWriter cannot fail,
// so neither can the encoder.
func (e *encoder) encode(t Type, sch []field) {
	enc := e.enc
	_ = enc.EncodeArrayLen(2 + len(sch))
	_ = enc.EncodeUint(ProtocolVersion)
	_ = enc.EncodeUint(uint64(t))
	for i, f := range sch {
		switch f.kind {
		case kUint:
			_ = enc.EncodeUint(e.v.u[i])
		case kStr:
			_ = enc.EncodeString(e.v.s[i])
		case kBin16:
			_ = enc.EncodeBytes(e.v.uuid[:])
		case kTriple:
			_ = enc.EncodeArrayLen(3)
			for _, x := range e.v.t[i] {
				_ = enc.EncodeUint(uint64(x))
			}
		case kRecords:
			_ = enc.EncodeArrayLen(len(e.v.r))
			for _, r := range e.v.r {
				_ = enc.EncodeArrayLen(4)
				_ = enc.EncodeUint(r.KernelID)
				_ = enc.EncodeUint(r.DurationNS)
				_ = enc.EncodeUint(r.GapNS)
				_ = enc.EncodeUint(uint64(r.Flags))
			}
		case kLaunches:
			_ = enc.EncodeArrayLen(len(e.v.l))
			for _, l := range e.v.l {
				_ = enc.EncodeArrayLen(2)
				_ = enc.EncodeUint(l.KernelID)
				_ = enc.EncodeUint(uint64(l.OffsetNS))
			}
		case kKernelTimes:
			_ = enc.EncodeArrayLen(len(e.v.k))
			for _, k := range e.v.k {
				_ = enc.EncodeArrayLen(2)
				_ = enc.EncodeUint(k.KernelID)
				_ = enc.EncodeUint(uint64(k.DurationNS))
			}
		}
	}
}

// Sizes of the smallest msgpack encodings.

func uintSize(v uint64) int {
	switch {
	case v <= 0x7f:
		return 1
	case v <= 0xff:
		return 2
	case v <= 0xffff:
		return 3
	case v <= 0xffffffff:
		return 5
	}
	return 9
}

func strSize(n int) int {
	switch {
	case n < 32:
		return 1 + n
	case n <= 0xff:
		return 2 + n
	case n <= 0xffff:
		return 3 + n
	}
	return 5 + n
}

func arrayHeaderSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= 0xffff:
		return 3
	}
	return 5
}

func recordSize(r Record) int {
	return 1 + uintSize(r.KernelID) + uintSize(r.DurationNS) + uintSize(r.GapNS) + uintSize(uint64(r.Flags))
}

// fitStr returns the longest string length whose encoding takes at most
// avail bytes.
func fitStr(avail int) int {
	best := 0
	for _, c := range [...]struct{ hdr, lo, hi int }{{1, 0, 31}, {2, 32, 0xff}, {3, 0x100, 0xffff}, {5, 0x10000, 1<<31 - 1}} {
		if n := min(c.hi, avail-c.hdr); n >= c.lo && n > best {
			best = n
		}
	}
	return best
}

// encodedSize returns the length of the encoding of v.
func encodedSize(sch []field, v *values) int {
	n := arrayHeaderSize(2+len(sch)) + 1 + 1 // version and type are fixints
	for i, f := range sch {
		switch f.kind {
		case kUint:
			n += uintSize(v.u[i])
		case kStr:
			n += strSize(len(v.s[i]))
		case kBin16:
			n += 2 + 16
		case kTriple:
			n++
			for _, x := range v.t[i] {
				n += uintSize(uint64(x))
			}
		case kRecords:
			n += arrayHeaderSize(len(v.r))
			for _, r := range v.r {
				n += recordSize(r)
			}
		case kLaunches:
			n += arrayHeaderSize(len(v.l))
			for _, l := range v.l {
				n += 1 + uintSize(l.KernelID) + uintSize(uint64(l.OffsetNS))
			}
		case kKernelTimes:
			n += arrayHeaderSize(len(v.k))
			for _, k := range v.k {
				n += kernelTimeSize(k)
			}
		}
	}
	return n
}

// fitting is how many of a message's last array's n elements (element i
// encoded in size(i) bytes) fit in a datagram after base bytes of the rest:
// the array's header grows from one byte to three at 16 elements.
func fitting(base, n int, size func(i int) int) int {
	total := base + arrayHeaderSize(0)
	for i := 0; i < n; i++ {
		next := total + size(i)
		if i+1 == 16 {
			next += arrayHeaderSize(16) - arrayHeaderSize(15)
		}
		if next > MaxDatagram {
			return i
		}
		total = next
	}
	return n
}

func kernelTimeSize(k KernelTime) int {
	return 1 + uintSize(k.KernelID) + uintSize(uint64(k.DurationNS))
}

// PackKernelTimes appends to dst one KernelTimes datagram of task (bound and
// default as the message's) holding the longest prefix of ks that fits in
// MaxDatagram bytes, and returns the datagram and how many it holds (at
// least one if ks is not empty). Send a table as PackMeasurements' records
// are sent: until ks is empty, each datagram adding to the last.
func PackKernelTimes(dst []byte, taskID, boundNS, defaultNS uint32, ks []KernelTime) (datagram []byte, n int, err error) {
	base := 1 + 1 + 1 + uintSize(uint64(taskID)) + uintSize(uint64(boundNS)) + uintSize(uint64(defaultNS))
	n = fitting(base, len(ks), func(i int) int { return kernelTimeSize(ks[i]) })
	dst, err = Append(dst, KernelTimes{TaskID: taskID, BoundNS: boundNS, DefaultNS: defaultNS, Kernels: ks[:n]})
	if err != nil {
		return dst, 0, err
	}
	return dst, n, nil
}

// PackMeasurements appends to dst one Measurements datagram of task and run
// holding the longest prefix of recs that fits in MaxDatagram bytes, and
// returns the datagram and how many records it holds. It holds at least one
// record if recs is not empty (any single record fits); for empty recs it is
// an empty Measurements. Send the records of a run with
//
//	for len(recs) > 0 {
//		b, n, err := udp.PackMeasurements(buf[:0], task, run, recs)
//		…send b…
//		recs = recs[n:]
//	}
func PackMeasurements(dst []byte, taskID, run uint32, recs []Record) (datagram []byte, n int, err error) {
	// [1, 4, task, run, records]
	base := 1 + 1 + 1 + uintSize(uint64(taskID)) + uintSize(uint64(run))
	n = fitting(base, len(recs), func(i int) int { return recordSize(recs[i]) })
	dst, err = Append(dst, Measurements{TaskID: taskID, Run: run, Records: recs[:n]})
	if err != nil {
		return dst, 0, err
	}
	return dst, n, nil
}
