package profiler

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// FormatVersion is the version of both encodings of a Profile: the msgpack
// layout used for storage and the JSON export format.
const FormatVersion = 1

// Limits on decoded profiles.
const (
	MaxTaskKeyLen = 4096
	MaxGPULen     = 1024
	MaxNameLen    = 64 << 10
)

// MarshalBinary encodes p in the msgpack storage layout (see doc.go).
func (p *Profile) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	w := &binWriter{e: e}
	ks := p.SortedKernels()
	w.arrayLen(15)
	w.uint(FormatVersion)
	w.str(p.TaskKey)
	w.str(p.GPU)
	w.uint(uint64(p.Phase))
	w.uint(uint64(p.Runs))
	w.uint(uint64(p.TargetRuns))
	w.uint(uint64(p.DiscardedRuns))
	w.dist(&p.RunTime)
	w.dist(&p.Duration)
	w.dist(&p.Gap)
	w.arrayLen(len(ks))
	for _, k := range ks {
		w.arrayLen(6)
		w.uint(k.ID)
		w.str(k.Name)
		w.triple(k.Grid)
		w.triple(k.Block)
		w.dist(&k.Duration)
		w.dist(&k.Gap)
	}
	// Element 12 (added within version 1: older readers skip it): the
	// positional sequence, [seq_runs, [[id, duration_ns, gap_ns]…]].
	w.arrayLen(2)
	w.uint(uint64(p.SeqRuns))
	w.arrayLen(len(p.Sequence))
	for _, s := range p.Sequence {
		w.arrayLen(3)
		w.uint(s.ID)
		w.do(w.e.EncodeFloat64(s.DurationNs))
		w.do(w.e.EncodeFloat64(s.GapNs))
	}
	// Element 13 (added within version 1): the profile's version, why it
	// came and the versions before, [version, reason, [[version, unix_ns,
	// reason, runs, discarded, mean_run_ns]…]].
	w.arrayLen(3)
	w.uint(uint64(p.Version))
	w.str(p.Reason)
	w.arrayLen(len(p.History))
	for _, h := range p.History {
		w.arrayLen(6)
		w.uint(uint64(h.Version))
		w.do(w.e.EncodeInt(h.UnixNs))
		w.str(h.Reason)
		w.uint(uint64(h.Runs))
		w.uint(uint64(h.Discarded))
		w.do(w.e.EncodeFloat64(h.MeanRunNs))
	}
	// Element 14: the discarded runs by reason, [[name, count]…] (a
	// reason this version does not know is read as unclassified).
	dm := p.Discards.Map()
	w.arrayLen(len(dm))
	for _, r := range DiscardReasons() {
		if c := p.Discards[r]; c > 0 {
			w.arrayLen(2)
			w.str(r.String())
			w.uint(uint64(c))
		}
	}
	// Element 15: the runs measured beside a better priority (BesideRuns).
	w.uint(uint64(p.BesideRuns))
	if w.err != nil {
		return nil, fmt.Errorf("encode profile: %w", w.err)
	}
	return buf.Bytes(), nil
}

type binWriter struct {
	e   *msgpack.Encoder
	err error
}

func (w *binWriter) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *binWriter) arrayLen(n int) { w.do(w.e.EncodeArrayLen(n)) }
func (w *binWriter) uint(v uint64)  { w.do(w.e.EncodeUint(v)) }
func (w *binWriter) str(s string)   { w.do(w.e.EncodeString(s)) }

func (w *binWriter) triple(t [3]uint32) {
	w.arrayLen(3)
	for _, v := range t {
		w.uint(uint64(v))
	}
}

func (w *binWriter) dist(d *Dist) {
	bins := d.Sketch.Bins()
	w.arrayLen(7)
	w.uint(d.Count)
	w.do(w.e.EncodeFloat64(d.Mean))
	w.do(w.e.EncodeFloat64(d.M2))
	w.uint(d.Min)
	w.uint(d.Max)
	w.uint(d.Sketch.ZeroCount())
	w.arrayLen(2 * len(bins))
	prev := int32(0)
	for i, b := range bins {
		if i == 0 {
			w.do(w.e.EncodeInt(int64(b.Index)))
		} else {
			w.uint(uint64(b.Index - prev))
		}
		w.uint(b.Count)
		prev = b.Index
	}
}

// UnmarshalBinary decodes the msgpack storage layout into p, checking the
// result as ValidateProfile does.
func (p *Profile) UnmarshalBinary(data []byte) error {
	q, err := decodeBinary(data)
	if err != nil {
		return fmt.Errorf("decode profile: %w", err)
	}
	*p = *q
	return nil
}

// DecodeBinary decodes a profile from its msgpack storage layout.
func DecodeBinary(data []byte) (*Profile, error) {
	p, err := decodeBinary(data)
	if err != nil {
		return nil, fmt.Errorf("decode profile: %w", err)
	}
	return p, nil
}

func decodeBinary(data []byte) (*Profile, error) {
	rd := bytes.NewReader(data)
	r := &binReader{d: msgpack.NewDecoder(rd), rd: rd}
	n := r.arrayLen()
	if r.err == nil && n < 1 {
		r.fail("empty profile array")
	}
	if v := r.uint(math.MaxUint32); r.err == nil && v != FormatVersion {
		return nil, fmt.Errorf("version %d: %w", v, ErrVersion)
	}
	if r.err == nil && n < 11 {
		r.fail("profile array has %d elements, want 11", n)
	}
	p := &Profile{Kernels: make(map[uint64]*KernelStats)}
	p.TaskKey = r.str(MaxTaskKeyLen)
	p.GPU = r.str(MaxGPULen)
	p.Phase = Phase(r.uint(math.MaxUint8))
	p.Runs = uint32(r.uint(math.MaxUint32))
	p.TargetRuns = uint32(r.uint(math.MaxUint32))
	p.DiscardedRuns = uint32(r.uint(math.MaxUint32))
	p.RunTime = r.dist()
	p.Duration = r.dist()
	p.Gap = r.dist()
	nk := r.arrayLen()
	for i := 0; i < nk && r.err == nil; i++ {
		m := r.arrayLen()
		if r.err == nil && m < 6 {
			r.fail("kernel array has %d elements, want 6", m)
		}
		k := &KernelStats{}
		k.ID = r.uint(math.MaxUint64)
		k.Name = r.str(MaxNameLen)
		k.Grid = r.triple()
		k.Block = r.triple()
		k.Duration = r.dist()
		k.Gap = r.dist()
		r.skip(m - 6)
		if r.err != nil {
			break
		}
		if _, dup := p.Kernels[k.ID]; dup {
			return nil, fmt.Errorf("kernel %016x twice: %w", k.ID, ErrInvalid)
		}
		p.Kernels[k.ID] = k
	}
	if n >= 12 && r.err == nil {
		m := r.arrayLen()
		if r.err == nil && m < 2 {
			r.fail("sequence array has %d elements, want 2", m)
		}
		p.SeqRuns = uint32(r.uint(math.MaxUint32))
		ns := r.arrayLen()
		if r.err == nil && ns > MaxSequence {
			r.fail("sequence of %d kernels", ns)
		}
		if ns > 0 && r.err == nil {
			p.Sequence = make([]SeqKernel, 0, ns)
		}
		for i := 0; i < ns && r.err == nil; i++ {
			e := r.arrayLen()
			if r.err == nil && e < 3 {
				r.fail("sequence entry has %d elements, want 3", e)
			}
			s := SeqKernel{ID: r.uint(math.MaxUint64), DurationNs: r.float(), GapNs: r.float()}
			r.skip(e - 3)
			p.Sequence = append(p.Sequence, s)
		}
		r.skip(m - 2)
	}
	p.Version = 1
	if n >= 13 && r.err == nil {
		m := r.arrayLen()
		if r.err == nil && m < 3 {
			r.fail("version array has %d elements, want 3", m)
		}
		p.Version = uint32(r.uint(math.MaxUint32))
		p.Reason = r.str(MaxReasonLen)
		nh := r.arrayLen()
		if r.err == nil && nh > MaxHistory {
			r.fail("history of %d versions", nh)
		}
		for i := 0; i < nh && r.err == nil; i++ {
			e := r.arrayLen()
			if r.err == nil && e < 6 {
				r.fail("history entry has %d elements, want 6", e)
			}
			h := VersionInfo{Version: uint32(r.uint(math.MaxUint32)), UnixNs: r.int(), Reason: r.str(MaxReasonLen),
				Runs: uint32(r.uint(math.MaxUint32)), Discarded: uint32(r.uint(math.MaxUint32)), MeanRunNs: r.float()}
			r.skip(e - 6)
			p.History = append(p.History, h)
		}
		r.skip(m - 3)
	}
	if n >= 14 && r.err == nil {
		nd := r.arrayLen()
		for i := 0; i < nd && r.err == nil; i++ {
			e := r.arrayLen()
			if r.err == nil && e < 2 {
				r.fail("discard entry has %d elements, want 2", e)
			}
			name, c := r.str(64), r.uint(math.MaxUint32)
			r.skip(e - 2)
			if d, ok := ParseDiscardReason(name); ok && r.err == nil {
				p.Discards[d] = uint32(c)
			}
		}
	}
	if n >= 15 && r.err == nil {
		p.BesideRuns = uint32(r.uint(math.MaxUint32))
	}
	r.skip(n - min(n, 15)) // elements after the ones this version knows
	if r.err != nil {
		return nil, r.err
	}
	if rd.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes: %w", rd.Len(), ErrMalformed)
	}
	if err := ValidateProfile(p); err != nil {
		return nil, err
	}
	p.refresh()
	return p, nil
}

// binReader decodes with sticky errors; every length is bounded by the
// bytes left, so hostile input cannot make it allocate more than its size.
type binReader struct {
	d   *msgpack.Decoder
	rd  *bytes.Reader
	err error
}

func (r *binReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format+": %w", append(args, ErrMalformed)...)
	}
}

func (r *binReader) wrap(what string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", what, errors.Join(ErrMalformed, err))
	}
}

func (r *binReader) arrayLen() int {
	if r.err != nil {
		return 0
	}
	n, err := r.d.DecodeArrayLen()
	if err != nil {
		r.wrap("array", err)
		return 0
	}
	if n < 0 || n > r.rd.Len() {
		r.fail("array length %d with %d bytes left", n, r.rd.Len())
		return 0
	}
	return n
}

func (r *binReader) uint(max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	c, err := r.d.PeekCode()
	if err != nil {
		r.wrap("integer", err)
		return 0
	}
	// Accept any unsigned encoding, and signed encodings of non-negative
	// values (fixint, int8–64), but not floats or negative fixints.
	if c >= 0xe0 || c == 0xca || c == 0xcb {
		r.fail("code 0x%02x is not an unsigned integer", c)
		return 0
	}
	switch c {
	case 0xd0, 0xd1, 0xd2, 0xd3:
		v, err := r.d.DecodeInt64()
		if err != nil {
			r.wrap("integer", err)
			return 0
		}
		if v < 0 {
			r.fail("negative integer %d", v)
			return 0
		}
		return r.check(uint64(v), max)
	}
	v, err := r.d.DecodeUint64()
	if err != nil {
		r.wrap("integer", err)
		return 0
	}
	return r.check(v, max)
}

func (r *binReader) check(v, max uint64) uint64 {
	if v > max {
		r.fail("integer %d above %d", v, max)
		return 0
	}
	return v
}

func (r *binReader) int() int64 {
	if r.err != nil {
		return 0
	}
	c, err := r.d.PeekCode()
	if err != nil {
		r.wrap("integer", err)
		return 0
	}
	if c == 0xca || c == 0xcb {
		r.fail("code 0x%02x is not an integer", c)
		return 0
	}
	v, err := r.d.DecodeInt64()
	if err != nil {
		r.wrap("integer", err)
		return 0
	}
	return v
}

func (r *binReader) float() float64 {
	if r.err != nil {
		return 0
	}
	v, err := r.d.DecodeFloat64()
	if err != nil {
		r.wrap("float", err)
		return 0
	}
	return v
}

func (r *binReader) str(max int) string {
	if r.err != nil {
		return ""
	}
	c, err := r.d.PeekCode()
	if err != nil {
		r.wrap("string", err)
		return ""
	}
	// fixstr, str8, str16, str32 only.
	if !(c >= 0xa0 && c <= 0xbf) && c != 0xd9 && c != 0xda && c != 0xdb {
		r.fail("code 0x%02x is not a string", c)
		return ""
	}
	s, err := r.d.DecodeString()
	if err != nil {
		r.wrap("string", err)
		return ""
	}
	if len(s) > max {
		r.fail("string of %d bytes, limit %d", len(s), max)
		return ""
	}
	return s
}

func (r *binReader) triple() [3]uint32 {
	var t [3]uint32
	n := r.arrayLen()
	if r.err == nil && n != 3 {
		r.fail("triple has %d elements", n)
	}
	for i := range t {
		t[i] = uint32(r.uint(math.MaxUint32))
	}
	return t
}

func (r *binReader) skip(n int) {
	for i := 0; i < n && r.err == nil; i++ {
		if err := r.d.Skip(); err != nil {
			r.wrap("skip", err)
		}
	}
}

func (r *binReader) dist() Dist {
	n := r.arrayLen()
	if r.err == nil && n < 7 {
		r.fail("dist array has %d elements, want 7", n)
	}
	var d Dist
	d.Count = r.uint(math.MaxUint64)
	d.Mean = r.float()
	d.M2 = r.float()
	d.Min = r.uint(math.MaxUint64)
	d.Max = r.uint(math.MaxUint64)
	zero := r.uint(math.MaxUint64)
	nb := r.arrayLen()
	if r.err == nil && nb%2 != 0 {
		r.fail("odd sketch bin array length %d", nb)
	}
	bins := make([]SketchBin, 0, nb/2)
	idx := int64(0)
	for i := 0; i < nb/2 && r.err == nil; i++ {
		if i == 0 {
			idx = r.int()
		} else {
			idx += int64(r.uint(math.MaxInt32))
		}
		if r.err == nil && (idx < math.MinInt32 || idx > math.MaxInt32) {
			r.fail("sketch index %d", idx)
		}
		bins = append(bins, SketchBin{Index: int32(idx), Count: r.uint(math.MaxUint64)})
	}
	r.skip(n - 7)
	if r.err != nil {
		return Dist{}
	}
	s, err := sketchFromBins(zero, bins)
	if err != nil {
		r.err = err
		return Dist{}
	}
	d.Sketch = s
	return d
}
