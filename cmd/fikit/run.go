package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:   "run",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("run: not implemented yet") },
	}
}
