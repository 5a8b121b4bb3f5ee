package profiler

import "errors"

var (
	// ErrInvalidProfileRuns is returned for a number of profiling runs T
	// outside MinProfileRuns–MaxProfileRuns.
	ErrInvalidProfileRuns = errors.New("profile runs out of range")

	// ErrVersion is returned when an encoded profile has a format version
	// this package does not know.
	ErrVersion = errors.New("unsupported profile format version")

	// ErrMalformed is returned when encoded profile bytes or JSON cannot be
	// parsed: wrong types, truncated input, trailing bytes.
	ErrMalformed = errors.New("malformed profile")

	// ErrInvalid is returned when a decoded profile parses but its contents
	// are inconsistent: an unknown phase, a sketch whose counts disagree with
	// its statistics, a duplicate kernel ID, a non-finite mean.
	ErrInvalid = errors.New("invalid profile")
)
