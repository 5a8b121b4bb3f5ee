package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// exitError carries a process exit status through run, for commands such as
// `fikit run` that return their child's status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// run is the whole program: main only supplies the process's context,
// arguments and standard output.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	app := &cli.App{
		Name:                 "fikit",
		Usage:                "kernel-level priority scheduling for a shared NVIDIA GPU (FIKIT)",
		Version:              version,
		Writer:               stdout,
		ErrWriter:            stdout,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// Flag values such as --service trace=…,prio=0 carry their own commas.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			serveCommand(),
			runCommand(),
			profileCommand(),
			statusCommand(),
			simCommand(),
			launchesCommand(),
			benchCommand(),
			demoCommand(),
			traceCommand(),
			versionCommand(),
		},
		// Unknown commands are errors, not silently ignored.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{code: 2, err: fmt.Errorf("unknown command %q; see 'fikit --help'", c.Args().First())}
			}
			return cli.ShowAppHelp(c)
		},
	}
	return app.RunContext(ctx, args)
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version",
		Action: func(c *cli.Context) error {
			_, err := io.WriteString(c.App.Writer, "fikit "+version+"\n")
			return err
		},
	}
}
