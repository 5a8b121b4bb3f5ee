package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:   "profile",
		Usage:  "(not implemented yet)",
		Hidden: true,
		Action: func(c *cli.Context) error { return errors.New("profile: not implemented yet") },
	}
}
