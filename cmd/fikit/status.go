package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/cmd/internal/daemon"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the running daemon's tasks and counters",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), Usage: "the daemon's data directory (its admin socket is there)", EnvVars: []string{"FIKIT_DATA_DIR"}},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "status takes no arguments")
			}
			if err := checkDataDir(c.String("data-dir")); err != nil {
				return err
			}
			raw, err := fetchStatus(c.Context, daemon.SocketPath(c.String("data-dir")))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				// The daemon's document as it sent it (docs/status-api.md):
				// keys this binary does not know, a newer daemon's, stay.
				var out bytes.Buffer
				if err := json.Indent(&out, raw, "", "  "); err != nil {
					return fmt.Errorf("daemon status: %w", err)
				}
				out.WriteByte('\n')
				_, err := out.WriteTo(c.App.Writer)
				return err
			}
			var st daemon.Status
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("daemon status: %w", err)
			}
			return printStatus(c.App.Writer, &st)
		},
	}
}

// fetchStatus is the daemon's status document (GET /v1/status).
func fetchStatus(ctx context.Context, socket string) ([]byte, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://fikit/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if errors.Is(err, os.ErrPermission) {
		return nil, accessError(socket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("no daemon answering on %s (is fikit serve running with this --data-dir?): %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("daemon status: %s", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return nil, fmt.Errorf("daemon status: %w", err)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("daemon status: not a JSON document (%d bytes)", len(raw))
	}
	return raw, nil
}

// maxStatusBytes bounds the status document read: at a few hundred bytes a
// task, room for some 100,000 tasks.
const maxStatusBytes = 64 << 20

func printStatus(w io.Writer, st *daemon.Status) error {
	fmt.Fprintf(w, "fikit daemon on %s, up %s\n", st.Listen, time.Duration(st.UptimeNs).Round(time.Second))
	s := st.Stats
	fmt.Fprintf(w, "tasks %d, waiting launches %d, grants %d (%.1f ms predicted GPU time), early stops %d, dropped %d\n",
		s.Tasks, s.Waiting, s.Grants, float64(s.GrantedNs)/1e6, s.EarlyStops, s.Dropped)
	if s.PredictionSamples > 0 {
		fmt.Fprintf(w, "gap prediction: mean error %+.1f µs, mean |error| %.1f µs over %d launches\n",
			float64(s.PredictionErrNs)/float64(s.PredictionSamples)/1e3,
			float64(s.PredictionAbsErrNs)/float64(s.PredictionSamples)/1e3, s.PredictionSamples)
	}
	for _, g := range st.GPUs {
		how := "assumed"
		switch {
		case g.MPS:
			how = "MPS: none"
		case g.SwitchMeasured:
			how = fmt.Sprintf("measured, %d samples", g.SwitchSamples)
		}
		fmt.Fprintf(w, "GPU %s: context switch %s (%s)\n", g.GPU, time.Duration(g.SwitchCostNs).Round(time.Microsecond), how)
	}
	if len(st.Tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPRIO\tWEIGHT\tROLE\tPHASE\tRUNS\tWAITING\tCREDIT\tJCT\tARRIVALS\tGPU USED\tGRANTED\tTENANT\tPID\tGPU\tTASK KEY")
		for _, t := range st.Tasks {
			role := t.Role
			if t.Throttled {
				role += " (throttled)"
			}
			arr := t.Arrivals
			if t.ArrivalEveryNs > 0 {
				arr += " /" + time.Duration(t.ArrivalEveryNs).Round(10*time.Microsecond).String()
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.Priority, t.Weight, role,
				t.Phase, t.Runs, t.Waiting, t.Credit, time.Duration(t.JCTNs).Round(time.Microsecond), arr, gpuTime(t.UsedNs),
				gpuTime(t.GrantedNs), t.Tenant, t.PID, t.Model, t.Key)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.Tenants) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nGPU time by tenant (all tasks, across restarts; used: measured while profiling, predicted from profiles after):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tTASK KEY\tGPU USED\tMEASURED\tGRANTED")
	for _, ten := range st.Tenants {
		fmt.Fprintf(tw, "%s\t(all %d)\t%s\t%s\t%s\n", ten.Tenant, len(ten.TaskKeys), gpuTime(ten.UsedNs), gpuTime(ten.MeasuredNs), gpuTime(ten.GrantedNs))
		for _, k := range ten.TaskKeys {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", k.TaskKey, gpuTime(k.UsedNs), gpuTime(k.MeasuredNs), gpuTime(k.GrantedNs))
		}
	}
	return tw.Flush()
}

// gpuTime formats GPU time for the status table.
func gpuTime(ns int64) string {
	switch d := time.Duration(ns); {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
