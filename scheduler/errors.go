package scheduler

import "errors"

// Errors returned by Step and Config.Validate.
var (
	ErrConfig      = errors.New("invalid scheduler config")
	ErrUnknownTask = errors.New("unknown task")
	ErrDuplicate   = errors.New("task id already registered")
	ErrInvalid     = errors.New("invalid event")
	// ErrOverloaded: a task asked for more launches at once than any hook
	// has threads (MaxWaitingPerTask); the request is refused.
	ErrOverloaded = errors.New("too many waiting launches")
)
