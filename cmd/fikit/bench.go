package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:   "bench",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("bench: not implemented yet") },
	}
}
