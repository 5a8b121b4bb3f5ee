package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func simCommand() *cli.Command {
	return &cli.Command{
		Name:   "sim",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("sim: not implemented yet") },
	}
}
