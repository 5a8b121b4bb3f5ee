package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FikitMagic starts the first line of a fikit trace; FikitVersionLine is the
// whole first line of the version this package reads and writes.
const (
	FikitMagic       = "# fikit-trace"
	FikitVersionLine = "# fikit-trace v1"
)

// Column names of the fikit format, lowercase and matched exactly.
const (
	colName     = "name"
	colDuration = "duration_ns"
	colHost     = "host_ns"
	colGrid     = "grid"
	colBlock    = "block"
	colSMUsage  = "sm_usage"
	colProfile  = "profile"
	colMemory   = "memory_footprint"
)

var fikitColumns = []string{colName, colDuration, colHost, colGrid, colBlock, colSMUsage, colProfile, colMemory}

// ReadFikit reads fikit's own trace format (docs/trace-format.md): a first
// line "# fikit-trace v1", then CSV with a header line. Lines starting with '#'
// are comments. Columns: name and duration_ns are required; host_ns (host time
// before the launch, ns; when present every row has one), grid and block
// ("X", "XxY" or "XxYxZ", missing dimensions 1, empty derived as for Orion),
// sm_usage, profile and memory_footprint are optional. Unknown columns are
// errors.
func ReadFikit(r io.Reader, file string) (*Trace, error) {
	br := bufio.NewReader(r)
	return readFikit(br, file, stripBOM(br))
}

func readFikit(br *bufio.Reader, file string, bom bool) (*Trace, error) {
	first, err := br.ReadString('\n')
	if err != nil && err != io.EOF {
		return nil, &ParseError{File: file, Line: 1, Err: fmt.Errorf("read: %w", err)}
	}
	first = strings.TrimRight(first, " \t\r\n")
	if first != FikitVersionLine {
		if strings.HasPrefix(first, FikitMagic) {
			return nil, &ParseError{File: file, Line: 1, Err: fmt.Errorf("%w: %q, this reader knows %q",
				ErrVersion, first, FikitVersionLine)}
		}
		return nil, &ParseError{File: file, Line: 1, Err: fmt.Errorf("%w: first line %q is not %q",
			ErrHeader, truncate(first, 64), FikitVersionLine)}
	}
	rr := newRowReader(br, file, 1, false, true, false)
	_ = bom // the BOM sat before the version line, which the CSV reader never sees
	rec, err := rr.next()
	if err == io.EOF {
		return nil, &ParseError{File: file, Err: fmt.Errorf("%w: no header line", ErrEmpty)}
	}
	if err != nil {
		return nil, err
	}
	h, err := rr.parseHeader(rec, false)
	if err != nil {
		return nil, err
	}
	for i, name := range h.names {
		if !known(name) {
			return nil, rr.fieldErr(i, name, fmt.Errorf("%w: unknown column %q, want some of %s",
				ErrHeader, name, strings.Join(fikitColumns, ",")))
		}
	}
	for _, req := range []string{colName, colDuration} {
		if h.col(req) < 0 {
			return nil, rr.lineErr(fmt.Errorf("%w: no %s column", ErrHeader, req))
		}
	}
	t := &Trace{Source: file, Format: FormatFikit, HasHostTime: h.col(colHost) >= 0}
	for {
		rec, err := rr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) != len(h.names) {
			return nil, rr.lineErr(fmt.Errorf("%w: %d fields, header has %d", ErrFieldCount, len(rec), len(h.names)))
		}
		if len(t.Kernels) == MaxKernels {
			return nil, rr.lineErr(fmt.Errorf("%w: more than %d kernels", ErrTooLarge, MaxKernels))
		}
		k, err := fikitKernel(rr, h, rec)
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

func known(name string) bool {
	for _, c := range fikitColumns {
		if name == c {
			return true
		}
	}
	return false
}

func fikitKernel(rr *rowReader, h *header, rec []string) (Kernel, error) {
	k := Kernel{Profile: ProfileUnknown}
	var grid, block string
	gridCol, blockCol := -1, -1
	for i, s := range rec {
		var err error
		switch h.names[i] {
		case colName:
			k.Name = s
			if e := checkName(s); e != nil {
				err = fmt.Errorf("%w: %w", ErrValue, e)
			}
		case colDuration:
			k.DurationNs, err = parseNs(s)
		case colHost:
			k.HostNs, err = parseNs(s)
		case colGrid:
			grid, gridCol = strings.TrimSpace(s), i
		case colBlock:
			block, blockCol = strings.TrimSpace(s), i
		case colSMUsage:
			var v uint64
			v, err = parseCount(s, MaxGridX)
			k.SMUsage = uint32(v)
		case colProfile:
			k.Profile, err = parseProfile(s)
		case colMemory:
			var v uint64
			v, err = parseCount(s, 1<<62)
			k.MemoryFootprint = int64(v)
		}
		if err != nil {
			return k, rr.fieldErr(i, h.names[i], err)
		}
	}
	k.Grid, k.Block = DerivedGrid(k.SMUsage), DerivedBlock()
	if grid != "" {
		g, err := parseDim(grid)
		if err == nil {
			err = checkGrid(g)
		}
		if err != nil {
			return k, rr.fieldErr(gridCol, colGrid, fmt.Errorf("%w: %w", ErrValue, err))
		}
		k.Grid = g
	}
	if block != "" {
		b, err := parseDim(block)
		if err == nil {
			err = checkBlock(b)
		}
		if err != nil {
			return k, rr.fieldErr(blockCol, colBlock, fmt.Errorf("%w: %w", ErrValue, err))
		}
		k.Block = b
	}
	return k, nil
}

// parseDim reads "X", "XxY" or "XxYxZ"; missing dimensions are 1.
func parseDim(s string) ([3]uint32, error) {
	d := [3]uint32{1, 1, 1}
	parts := strings.Split(s, "x")
	if len(parts) > 3 {
		return d, fmt.Errorf("%q has more than three dimensions", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return d, fmt.Errorf("%q is not X, XxY or XxYxZ", s)
		}
		d[i] = uint32(v)
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Write writes t in the fikit format; reading the output back gives t again
// (with Format FormatFikit and the Source given to the reader). The host_ns
// column is written only when t.HasHostTime.
func Write(w io.Writer, t *Trace) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	bw := bufio.NewWriter(w)
	cols := []string{colName, colDuration}
	if t.HasHostTime {
		cols = append(cols, colHost)
	}
	cols = append(cols, colGrid, colBlock, colSMUsage, colProfile, colMemory)
	bw.WriteString(FikitVersionLine + "\n")
	bw.WriteString(strings.Join(cols, ",") + "\n")
	buf := make([]byte, 0, 256)
	for _, k := range t.Kernels {
		buf = appendCSVField(buf[:0], k.Name)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, k.DurationNs, 10)
		if t.HasHostTime {
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, k.HostNs, 10)
		}
		buf = append(buf, ',')
		buf = append(buf, dimString(k.Grid)...)
		buf = append(buf, ',')
		buf = append(buf, dimString(k.Block)...)
		buf = append(buf, ',')
		buf = strconv.AppendUint(buf, uint64(k.SMUsage), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(k.Profile), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, k.MemoryFootprint, 10)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// appendCSVField quotes s when a CSV reader would otherwise change it: it
// holds a comma or quote, starts with the comment character '#', or starts
// or ends with white space.
func appendCSVField(buf []byte, s string) []byte {
	need := strings.ContainsAny(s, ",\"") || strings.HasPrefix(s, "#") ||
		strings.TrimSpace(s) != s
	if !need {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	buf = append(buf, strings.ReplaceAll(s, `"`, `""`)...)
	return append(buf, '"')
}
