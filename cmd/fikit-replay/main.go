package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fikit/fikit/cmd/fikit-replay/internal/replay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout)
	stop()
	code := 0
	if err != nil {
		fmt.Fprintf(os.Stderr, "fikit-replay: %v\n", err)
		code = replay.ExitCode(err)
	}
	exitProcess(code)
}

// run is the whole program: main only supplies the process's context,
// arguments and standard output.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	return replay.Run(ctx, args, stdout, os.Stderr, openCUDA)
}
