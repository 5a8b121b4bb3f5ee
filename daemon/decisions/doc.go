// Package decisions is the format of `fikit serve --record FILE`: one JSON
// object per line for every scheduling decision or observation the daemon
// makes (task registrations, fill windows with their predicted span, grants
// with the kernels they let go and the window they were meant for, holds,
// early stops, idle periods, runs, prediction errors), stamped with the
// daemon's CLOCK_MONOTONIC nanoseconds, the clock of simgpu's timeline.
// docs/design.md ("Decision record") describes every kind.
//
// Writer appends records from a goroutine of its own so that the daemon's
// loop never waits for a disk; Parse and Read read a record back (`fikit
// trace`, the bench).
package decisions
