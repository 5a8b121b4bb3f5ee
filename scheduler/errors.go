package scheduler

import "errors"

// Errors returned by Step and Config.Validate.
var (
	ErrConfig      = errors.New("invalid scheduler config")
	ErrUnknownTask = errors.New("unknown task")
	ErrDuplicate   = errors.New("task id already registered")
	ErrInvalid     = errors.New("invalid event")
)
