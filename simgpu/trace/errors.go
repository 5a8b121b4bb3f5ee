package trace

import (
	"errors"
	"fmt"
)

// Sentinel errors; a *ParseError wraps one of them.
var (
	// ErrSyntax: the input is not well-formed CSV.
	ErrSyntax = errors.New("malformed csv")
	// ErrHeader: the header line is missing, has an unknown or duplicate
	// column (fikit format), or lacks a required column.
	ErrHeader = errors.New("bad header")
	// ErrFieldCount: a row has a different number of fields than the header.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrValue: a field does not hold a valid value for its column.
	ErrValue = errors.New("invalid value")
	// ErrVersion: a fikit trace of a version this package does not read.
	ErrVersion = errors.New("unsupported trace version")
	// ErrEmpty: the trace has no kernels.
	ErrEmpty = errors.New("no kernels")
	// ErrTooLarge: the trace exceeds MaxKernels kernels.
	ErrTooLarge = errors.New("trace too large")
	// ErrNotFound: no file and no embedded trace of that name.
	ErrNotFound = errors.New("trace not found")
	// ErrInvalid: a Trace value (not read from a file) violates a limit.
	ErrInvalid = errors.New("invalid trace")
)

// ParseError locates an error in a trace file. Line and Column are 1-based;
// Column is a byte offset within the line and 0 when unknown, Line is 0 when the
// error concerns the whole file. Field names the column the value belongs to.
type ParseError struct {
	File   string
	Line   int
	Column int
	Field  string
	Err    error
}

func (e *ParseError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
		if e.Column > 0 {
			loc = fmt.Sprintf("%s:%d", loc, e.Column)
		}
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: field %s: %v", loc, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }
