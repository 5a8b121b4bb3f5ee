package trace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// stripBOM drops a UTF-8 byte order mark at the start of br and reports
// whether there was one.
func stripBOM(br *bufio.Reader) bool {
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		_, _ = br.Discard(len(utf8BOM))
		return true
	}
	return false
}

// rowReader reads CSV records and turns every problem into a *ParseError
// that names the file, line and column.
type rowReader struct {
	file      string
	cr        *csv.Reader
	lineShift int  // lines consumed before the CSV reader started
	bom       bool // a BOM was dropped from the first line
}

func newRowReader(r io.Reader, file string, lineShift int, bom, comments, lazyQuotes bool) *rowReader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.LazyQuotes = lazyQuotes
	if comments {
		cr.Comment = '#'
	}
	return &rowReader{file: file, cr: cr, lineShift: lineShift, bom: bom}
}

// next returns the next record that is not blank, or io.EOF.
func (rr *rowReader) next() ([]string, error) {
	for {
		rec, err := rr.cr.Read()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &ParseError{File: rr.file, Line: pe.Line + rr.lineShift,
					Column: rr.column(pe.Line, pe.Column), Err: fmt.Errorf("%w: %w", ErrSyntax, pe.Err)}
			}
			return nil, &ParseError{File: rr.file, Err: fmt.Errorf("read: %w", err)}
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank or whitespace-only line
		}
		return rec, nil
	}
}

func (rr *rowReader) column(line, col int) int {
	if rr.bom && line == 1 && rr.lineShift == 0 && col > 0 {
		col += len(utf8BOM)
	}
	return col
}

// line is the line of the record most recently returned by next.
func (rr *rowReader) line() int {
	l, _ := rr.cr.FieldPos(0)
	return l + rr.lineShift
}

// fieldErr locates err at field i (named name) of the last record.
func (rr *rowReader) fieldErr(i int, name string, err error) *ParseError {
	l, c := rr.cr.FieldPos(i)
	return &ParseError{File: rr.file, Line: l + rr.lineShift, Column: rr.column(l, c), Field: name, Err: err}
}

// lineErr locates err at the last record as a whole.
func (rr *rowReader) lineErr(err error) *ParseError {
	return &ParseError{File: rr.file, Line: rr.line(), Err: err}
}

// header maps column names (as spelled in the header) to their indexes.
type header struct {
	names []string
	index map[string]int
}

// parseHeader reads a header record; fold compares names case-insensitively.
func (rr *rowReader) parseHeader(rec []string, fold bool) (*header, error) {
	h := &header{index: make(map[string]int, len(rec))}
	for i, name := range rec {
		name = strings.TrimSpace(name)
		key := name
		if fold {
			key = strings.ToLower(name)
		}
		if name == "" {
			return nil, rr.fieldErr(i, "", fmt.Errorf("%w: empty column name in column %d", ErrHeader, i+1))
		}
		if _, dup := h.index[key]; dup {
			return nil, rr.fieldErr(i, name, fmt.Errorf("%w: duplicate column %q", ErrHeader, name))
		}
		h.index[key] = i
		h.names = append(h.names, name)
	}
	return h, nil
}

// col returns the index of column key, or -1.
func (h *header) col(key string) int {
	if i, ok := h.index[key]; ok {
		return i
	}
	return -1
}

// parseNs reads a non-negative nanosecond count: an integer, or a decimal
// number rounded to the nearest nanosecond.
func parseNs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		if v < 0 || v > MaxDurationNs {
			return 0, fmt.Errorf("%w: %d ns out of range [0, %d]", ErrValue, v, int64(MaxDurationNs))
		}
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %q is not a number of nanoseconds", ErrValue, s)
	}
	if f < 0 || f > MaxDurationNs {
		return 0, fmt.Errorf("%w: %s ns out of range [0, %d]", ErrValue, s, int64(MaxDurationNs))
	}
	return int64(math.Round(f)), nil
}

// parseCount reads a non-negative integer no larger than limit; an integral
// decimal such as "128.0" (as pandas writes) is accepted too.
func parseCount(s string, limit uint64) (uint64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || f < 0 || f > float64(limit) {
			return 0, fmt.Errorf("%w: %q is not an integer in [0, %d]", ErrValue, s, limit)
		}
		v = uint64(f)
	}
	if v > limit {
		return 0, fmt.Errorf("%w: %d out of range [0, %d]", ErrValue, v, limit)
	}
	return v, nil
}

// parseProfile reads Orion's profile class: -1, 0 or 1.
func parseProfile(s string) (Profile, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(s, 10, 8)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f == math.Trunc(f) && f >= -1 && f <= 1 {
			v, err = int64(f), nil
		}
	}
	if err != nil || v < -1 || v > 1 {
		return 0, fmt.Errorf("%w: %q is not a profile class (-1, 0 or 1)", ErrValue, s)
	}
	return Profile(v), nil
}
