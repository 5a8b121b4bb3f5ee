package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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
			webhookCommand(),
			installHookCommand(),
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
	app.OnUsageError = usageErrorHandler(app.Name)
	for _, cmd := range app.Commands {
		setUsageErrorHandlers(cmd, app.Name)
	}
	return app.RunContext(ctx, args)
}

// setUsageErrorHandlers gives cmd and its subcommands (their path below
// parent, e.g. "fikit profile") usageErrorHandler: urfave/cli's default
// prints the error, the whole help, and main prints the error again.
func setUsageErrorHandlers(cmd *cli.Command, parent string) {
	path := parent + " " + cmd.Name
	if cmd.OnUsageError == nil {
		cmd.OnUsageError = usageErrorHandler(path)
	}
	for _, sub := range cmd.Subcommands {
		setUsageErrorHandlers(sub, path)
	}
}

// usageErrorHandler turns a flag parsing error of the command at path into
// one line with a pointer to its help, exit status 2.
func usageErrorHandler(path string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		name := strings.TrimPrefix(strings.TrimPrefix(path, "fikit"), " ")
		if name != "" {
			name += ": "
		}
		return &exitError{code: 2, err: fmt.Errorf("%s%w (see '%s --help')", name, readableFlagError(err), path)}
	}
}

// readableFlagError names an unknown flag as it is written (the flag
// package says "-data-dirr" of --data-dirr).
func readableFlagError(err error) error {
	const unknown = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, unknown) {
		return err
	}
	flag := strings.TrimLeft(strings.TrimPrefix(msg, unknown), "-")
	if len(flag) > 1 {
		flag = "-" + flag
	}
	return fmt.Errorf("unknown flag -%s", flag)
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
