package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/bench/chrometrace"
	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/simgpu/timeline"
)

// pngDefaultSpan is what --png draws when nothing narrower was chosen and
// the selection is longer than pngMaxAuto: thousands of kernels in one
// figure are a smear.
const (
	pngDefaultSpan = 20 * time.Millisecond
	pngMaxAuto     = 100 * time.Millisecond
)

func traceCommand() *cli.Command {
	return &cli.Command{
		Name:  "trace",
		Usage: "turn a simgpu timeline and the daemon's decisions into a Chrome/Perfetto trace (and a PNG)",
		Description: "Reads simgpu's ground-truth timeline (FIKIT_SIMGPU_TIMELINE) and, optionally, the daemon's\n" +
			"decision record (fikit serve --record FILE) and writes Chrome trace-event JSON that Perfetto\n" +
			"(ui.perfetto.dev) and chrome://tracing open: a process per OS process named by its task key and\n" +
			"priority, a track per stream, kernels coloured by priority with their blocked time before them,\n" +
			"and the daemon's windows, grants, holds and early stops on a \"fikit daemon\" process.\n" +
			"--png draws a span as a figure. Times are CLOCK_MONOTONIC ns, as in both inputs.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "timeline", Usage: "simgpu timeline (JSON lines)", Required: true},
			&cli.StringFlag{Name: "decisions", Usage: "the daemon's decision record (fikit serve --record)"},
			&cli.StringFlag{Name: "out", Usage: "trace JSON to write (\"-\": standard output; default trace.json unless --png is given)"},
			&cli.Int64Flag{Name: "from", Usage: "span start, CLOCK_MONOTONIC ns (with --around-run: count runs from here)"},
			&cli.Int64Flag{Name: "to", Usage: "span end, CLOCK_MONOTONIC ns"},
			&cli.IntFlag{Name: "around-run", Usage: "span the Nth run (from 1) of --task recorded in --decisions"},
			&cli.StringFlag{Name: "task", Usage: "task key for --around-run (default: the best priority with runs)"},
			&cli.IntFlag{Name: "runs", Value: 1, Usage: "with --around-run: how many runs"},
			&cli.DurationFlag{Name: "margin", Value: 500 * time.Microsecond, Usage: "with --around-run: time before and after the runs"},
			&cli.StringFlag{Name: "png", Usage: "also draw the span as a PNG figure"},
			&cli.DurationFlag{Name: "span", Usage: "PNG only: draw this long from the span's start"},
			&cli.StringFlag{Name: "title", Usage: "PNG title"},
			&cli.BoolFlag{Name: "no-blocked", Usage: "leave out the blocked-time slices before kernels"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "trace takes no arguments, got %q", c.Args().First())
			}
			from, to := c.Int64("from"), c.Int64("to")
			if from < 0 || to < 0 || (to != 0 && to <= from) {
				return usageError(c, "--from %d --to %d is not a span", from, to)
			}
			if c.IsSet("around-run") && (c.String("decisions") == "" || c.Int("around-run") < 1 || c.Int("runs") < 1) {
				return usageError(c, "--around-run N needs --decisions, N >= 1 and --runs >= 1")
			}
			// Notes go beside the output, to stderr when the trace goes
			// to standard output.
			notes := c.App.Writer
			if c.String("out") == "-" {
				notes = os.Stderr
			}
			// Either file may be one a running simgpu or daemon is
			// still writing: its last line may be half written.
			recs, torn, err := timeline.ReadLive(c.String("timeline"))
			if err != nil {
				return err
			}
			noteTorn(notes, c.String("timeline"), torn)
			var decs []decisions.Record
			if p := c.String("decisions"); p != "" {
				if decs, torn, err = decisions.ReadLive(p); err != nil {
					return err
				}
				noteTorn(notes, p, torn)
			}
			explicit := from != 0 || to != 0
			if c.IsSet("around-run") {
				if from, to, err = chrometrace.AroundRuns(decs, c.String("task"), from, to, c.Int("around-run"), c.Int("runs"), c.Duration("margin")); err != nil {
					return err
				}
				explicit = true
			}
			opt := chrometrace.Options{From: from, To: to, NoBlocked: c.Bool("no-blocked"), Title: c.String("title")}
			out := c.String("out")
			if out == "" && c.String("png") == "" {
				out = "trace.json"
			}
			if out != "" {
				if err := writeTrace(out, c.App.Writer, recs, decs, opt); err != nil {
					return err
				}
			}
			if path := c.String("png"); path != "" {
				first, last := chrometrace.Bounds(recs, decs)
				pf, pt := max(from, first), last
				if to != 0 {
					pt = min(to, last)
				}
				if s := c.Duration("span"); s > 0 {
					pt = pf + int64(s)
				} else if !explicit && time.Duration(pt-pf) > pngMaxAuto {
					pt = pf + int64(pngDefaultSpan)
					fmt.Fprintf(os.Stderr, "fikit trace: the PNG shows the first %s; choose a span with --from/--to, --around-run or --span\n", pngDefaultSpan)
				}
				if err := chrometrace.PNG(path, recs, decs, pf, pt, opt); err != nil {
					return err
				}
				if out != "-" {
					fmt.Fprintf(c.App.Writer, "wrote %s: %.2f ms from %d ns\n", path, float64(pt-pf)/1e6, pf)
				}
			}
			return nil
		},
	}
}

// noteTorn says that path's last line was skipped, half written.
func noteTorn(w io.Writer, path string, torn *timeline.Torn) {
	if torn != nil {
		fmt.Fprintf(w, "fikit trace: %s:%d: skipped the last line (%d bytes), not finished: the file is still being written\n",
			path, torn.Line, torn.Bytes)
	}
}

// writeTrace writes the trace JSON to out ("-": stdout) and says so on
// stdout otherwise.
func writeTrace(out string, stdout io.Writer, recs []timeline.Record, decs []decisions.Record, opt chrometrace.Options) error {
	if out == "-" {
		return chrometrace.Write(stdout, recs, decs, opt)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := chrometrace.Write(f, recs, decs, opt); err != nil {
		f.Close()
		return fmt.Errorf("trace: writing %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%d kernel segments, %d decisions in the input); open it in ui.perfetto.dev or chrome://tracing\n",
		out, len(recs), len(decs))
	return nil
}
