package replay

import "errors"

// Sentinel errors.
var (
	// ErrUsage marks a command-line mistake; the command exits with status 2.
	ErrUsage = errors.New("usage")
	// ErrInterrupted: the context was cancelled during a replay.
	ErrInterrupted = errors.New("interrupted")
)

// ExitCode is the process exit status for an error returned by Run: 0 for
// nil, 2 for usage errors, 1 otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	return 1
}
