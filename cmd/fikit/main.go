// Command fikit is the fikit daemon and command-line tool.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fikit: %v\n", err)
		os.Exit(exitCode(err))
	}
}
