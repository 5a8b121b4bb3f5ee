package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// replayBin is the trace replayer (cmd/fikit-replay) that fikit demo and
// fikit bench run, with the hook and simgpu's driver beside it.
const replayBin = "fikit-replay"

// binDir is the directory of the running fikit binary: a build tree's bin/,
// where the hook, the replayer and simgpu are built, or <prefix>/bin.
func binDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", err
	}
	return filepath.Dir(exe), nil
}

// companionDirs are where fikit's companion files (the hook, the replayer,
// simgpu/) are looked for, in order: beside the binary (a build tree), then
// <prefix>/lib/fikit for a binary in <prefix>/bin (make install;
// docs/deploy.md). The installed <prefix>/lib/fikit/fikit links to the
// binary, so that either directory holds all that fikit demo needs.
func companionDirs() ([]string, error) {
	dir, err := binDir()
	if err != nil {
		return nil, fmt.Errorf("cannot locate the fikit binary: %w", err)
	}
	return []string{dir, filepath.Join(filepath.Dir(dir), "lib", "fikit")}, nil
}

// companionDir is the first of companionDirs that holds name.
func companionDir(name string) (string, error) {
	dirs, err := companionDirs()
	if err != nil {
		return "", err
	}
	tried := make([]string, len(dirs))
	for i, d := range dirs {
		tried[i] = filepath.Join(d, name)
		if _, err := os.Stat(tried[i]); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, strings.Join(tried, " or "))
}

// socketName is the daemon's unix socket inside the data directory; it
// serves store.Handler (docs/design.md).
const socketName = "fikit.sock"

// defaultDataDir is where fikit keeps its state (the Badger profile store
// and the daemon's socket): /var/lib/fikit for root, otherwise
// $XDG_STATE_HOME/fikit, or ~/.local/state/fikit when XDG_STATE_HOME is
// unset or not absolute. It returns "" when no home directory is known.
func defaultDataDir() string {
	home, _ := os.UserHomeDir()
	return dataDirFor(os.Geteuid(), os.Getenv("XDG_STATE_HOME"), home)
}

func dataDirFor(euid int, xdgStateHome, home string) string {
	switch {
	case euid == 0:
		return "/var/lib/fikit"
	case filepath.IsAbs(xdgStateHome):
		return filepath.Join(xdgStateHome, "fikit")
	case home == "":
		return ""
	}
	return filepath.Join(home, ".local", "state", "fikit")
}

// socketPath is the daemon's socket in a data directory.
func socketPath(dataDir string) string { return filepath.Join(dataDir, socketName) }

// dataDirFlag is the --data-dir flag shared by every command that touches
// the data directory. FIKIT_DATA_DIR sets it too.
func dataDirFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "data-dir",
		Usage:   "state directory (profile store, daemon socket)",
		Value:   defaultDataDir(),
		EnvVars: []string{"FIKIT_DATA_DIR"},
	}
}

// errNoDataDir is wrapped by the error of a command given a data directory
// that does not exist: reading one would show an empty store, or no daemon,
// where the user most likely mistyped the path.
var errNoDataDir = errors.New("no such data directory")

// errNoAccess is wrapped by the error of a command that may not open the
// daemon's data directory or admin socket.
var errNoAccess = errors.New("permission denied")

// checkDataDir is nil when dir exists and is a directory, for commands that
// read a data directory (fikit serve creates one).
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s (fikit serve creates it; choose another with --data-dir or FIKIT_DATA_DIR)", errNoDataDir, dir)
	case err != nil:
		return accessError(dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", errNoDataDir, dir)
	}
	return nil
}

// accessError explains err, a failure to open path (the data directory or
// something in it), when it is a permission problem, and what to do.
func accessError(path string, err error) error {
	if !errors.Is(err, os.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w on %s: the daemon's data directory and admin socket are open to its user and, when "+
		"fikit serve runs with --group GROUP, to GROUP's members (read-only); ask for --group (or to join its "+
		"group, then log in again) or run as the daemon's user (docs/security.md)", errNoAccess, path)
}
