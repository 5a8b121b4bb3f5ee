package devmodel

import "errors"

// Errors returned by Device methods.
var (
	// ErrFull means the context's op ring is full: advance, retire and retry.
	ErrFull = errors.New("devmodel: op ring full")
	// ErrInvalid means a bad argument: context, stream, op type or wait target.
	ErrInvalid = errors.New("devmodel: invalid argument")
	// ErrNoContext means all 64 context slots are in use.
	ErrNoContext = errors.New("devmodel: no free context")
	// ErrConfig means a Config field is out of range.
	ErrConfig = errors.New("devmodel: invalid config")
	// ErrPreset means no device preset has the name asked for.
	ErrPreset = errors.New("devmodel: unknown device preset")
)
