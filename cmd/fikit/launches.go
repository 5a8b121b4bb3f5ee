package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/launchprobe"
)

func launchesCommand() *cli.Command {
	return &cli.Command{
		Name:      "launches",
		Usage:     "count kernel launches where they reach the CUDA driver (eBPF uprobes; root)",
		ArgsUsage: "[-- CMD [ARGS...]]",
		Description: "Attaches uprobes to the launch entry points of libcuda.so.1 (cuLaunchKernel, _ptsz, Ex,\n" +
			"Cooperative) and counts calls per process: an independent check that the hook sees every\n" +
			"launch (compare with 'fikit status'). With CMD, runs it, prints the counts when it exits\n" +
			"and exits with its status; without, counts every process until --duration or ^C.\n" +
			"Needs root (CAP_BPF, CAP_PERFMON).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lib", Usage: "the driver library to probe (default: libcuda.so.1 on LD_LIBRARY_PATH or the system directories)"},
			&cli.DurationFlag{Name: "duration", Usage: "without CMD: stop counting after this long (default: at ^C)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: launchesAction,
	}
}

func launchesAction(c *cli.Context) error {
	if c.Duration("duration") < 0 {
		return usageError(c, "--duration must not be negative")
	}
	if c.NArg() > 0 && c.IsSet("duration") {
		return usageError(c, "--duration applies only without a command")
	}
	probe, err := launchprobe.Open(c.String("lib"))
	if err != nil {
		return fmt.Errorf("launches: %w", err)
	}
	defer probe.Close()

	var childErr error
	if c.NArg() > 0 {
		args := c.Args().Slice()
		path, err := exec.LookPath(args[0])
		if err != nil {
			return &exitError{code: 127, err: fmt.Errorf("launches: %w", err)}
		}
		childErr = runChild(path, args, nil)
	} else {
		var timeout <-chan time.Time
		if d := c.Duration("duration"); d > 0 {
			timeout = time.After(d)
		}
		select {
		case <-c.Context.Done():
		case <-timeout:
		}
	}
	counts, err := probe.Counts()
	if err != nil {
		return fmt.Errorf("launches: %w", err)
	}
	if err := printLaunches(c.App.Writer, probe, counts, c.Bool("json")); err != nil {
		return err
	}
	return childErr
}

func printLaunches(w io.Writer, probe *launchprobe.Probe, counts []launchprobe.Count, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Library string              `json:"library"`
			Symbols []string            `json:"symbols"`
			Counts  []launchprobe.Count `json:"counts"`
		}{probe.Library(), probe.Symbols(), nonNil(counts)})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pid\tprocess\tentry point\tcalls\t\n")
	for _, n := range counts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t\n", n.PID, n.Comm, n.Symbol, n.Calls)
	}
	if len(counts) == 0 {
		fmt.Fprintf(tw, "-\t-\t(no launches)\t0\t\n")
	}
	return tw.Flush()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
