package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:   "demo",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("demo: not implemented yet") },
	}
}
