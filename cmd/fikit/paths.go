package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

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
