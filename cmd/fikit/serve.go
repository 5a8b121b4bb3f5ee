package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:   "serve",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("serve: not implemented yet") },
	}
}
