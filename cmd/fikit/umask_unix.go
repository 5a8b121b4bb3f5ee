//go:build unix

package main

import "golang.org/x/sys/unix"

// privateFiles makes every file the daemon creates from here on its owner's
// alone (the store's, the decision record): task keys are command lines,
// and profiles steer the scheduler. The admin socket sets its own mode.
func privateFiles() { unix.Umask(0o077) }
