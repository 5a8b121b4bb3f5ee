package trace

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Orion's column names, matched case-insensitively; other columns are ignored.
const (
	orionName      = "name"
	orionProfile   = "profile"
	orionMemory    = "memory_footprint"
	orionSMUsage   = "sm_usage"
	orionDuration  = "duration"
	orionBlock     = "block"
	orionGrid      = "grid"
	orionHeaderDoc = "Name,Profile,Memory_footprint,SM_usage,Duration[,Block,Grid]"
)

// ReadOrion reads Orion's kernel CSV. file names the input in errors.
//
// The header names the columns: Name and Duration (GPU time, ns) are
// required; Profile (-1, 0, 1), Memory_footprint and SM_usage default to
// unknown (-1, 0, 0) when absent; Block and Grid hold x dimensions, 0 or empty
// meaning not recorded. Columns may come in any order (Orion's scripts write
// both Block,Grid and Grid,Block), names match case-insensitively and unknown
// columns are ignored. Orion's scripts do not quote names, so a stray '"' inside
// a name is taken literally. A UTF-8 BOM, CRLF line ends and blank lines are
// accepted. Grid and block not recorded are derived: DerivedGrid(SM_usage),
// DerivedBlock().
func ReadOrion(r io.Reader, file string) (*Trace, error) {
	br := bufio.NewReader(r)
	return readOrion(br, file, stripBOM(br))
}

func readOrion(br *bufio.Reader, file string, bom bool) (*Trace, error) {
	rr := newRowReader(br, file, 0, bom, false, true)
	rec, err := rr.next()
	if err == io.EOF {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: empty file, want header %s", ErrEmpty, orionHeaderDoc)}
	}
	if err != nil {
		return nil, err
	}
	h, err := rr.parseHeader(rec, true)
	if err != nil {
		return nil, err
	}
	for _, req := range []string{orionName, orionDuration} {
		if h.col(req) < 0 {
			return nil, rr.lineErr(fmt.Errorf("%w: no %s column in %q, want %s",
				ErrHeader, req, strings.Join(h.names, ","), orionHeaderDoc))
		}
	}
	t := &Trace{Source: file, Format: FormatOrion}
	for {
		rec, err := rr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != len(h.names) {
			return nil, rr.lineErr(fmt.Errorf("%w: %d fields, header has %d (%s)",
				ErrFieldCount, len(rec), len(h.names), strings.Join(h.names, ",")))
		}
		if len(t.Kernels) == MaxKernels {
			return nil, rr.lineErr(fmt.Errorf("%w: more than %d kernels", ErrTooLarge, MaxKernels))
		}
		k, err := orionKernel(rr, h, rec)
		if err != nil {
			return nil, err
		}
		t.Kernels = append(t.Kernels, k)
	}
	if len(t.Kernels) == 0 {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: header only", ErrEmpty)}
	}
	return t, nil
}

func orionKernel(rr *rowReader, h *header, rec []string) (Kernel, error) {
	field := func(key string) (int, string, bool) {
		i := h.col(key)
		if i < 0 {
			return i, "", false
		}
		return i, rec[i], true
	}
	k := Kernel{Profile: ProfileUnknown}
	i, s, _ := field(orionName)
	k.Name = s
	if err := checkName(s); err != nil {
		return k, rr.fieldErr(i, h.names[i], fmt.Errorf("%w: %w", ErrValue, err))
	}
	i, s, _ = field(orionDuration)
	v, err := parseNs(s)
	if err != nil {
		return k, rr.fieldErr(i, h.names[i], err)
	}
	k.DurationNs = v
	if i, s, ok := field(orionProfile); ok {
		if k.Profile, err = parseProfile(s); err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
	}
	if i, s, ok := field(orionMemory); ok {
		m, err := parseCount(s, 1<<62)
		if err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
		k.MemoryFootprint = int64(m)
	}
	if i, s, ok := field(orionSMUsage); ok {
		sm, err := parseCount(s, MaxGridX)
		if err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
		k.SMUsage = uint32(sm)
	}
	k.Grid = DerivedGrid(k.SMUsage)
	k.Block = DerivedBlock()
	if i, s, ok := field(orionGrid); ok && strings.TrimSpace(s) != "" {
		g, err := parseCount(s, MaxGridX)
		if err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
		if g > 0 {
			k.Grid = [3]uint32{uint32(g), 1, 1}
		}
	}
	if i, s, ok := field(orionBlock); ok && strings.TrimSpace(s) != "" {
		b, err := parseCount(s, MaxBlockXY)
		if err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
		if b > 0 {
			k.Block = [3]uint32{uint32(b), 1, 1}
		}
	}
	return k, nil
}
