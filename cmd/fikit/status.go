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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/daemon"
	"github.com/fikit/fikit/profiler"
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
		pods := false
		for _, t := range st.Tasks {
			pods = pods || t.PodUID != ""
		}
		podHead := ""
		if pods {
			podHead = "\tNAMESPACE/POD"
		}
		fmt.Fprintln(tw, "ID\tPRIO\tWEIGHT\tROLE\tPHASE\tRUNS\tRUNS/S\tP50 RUN\tGPU SHARE\tARRIVALS\tWAITING\tCREDIT\tGPU USED\tGRANTED\tTENANT\tPID\tGPU\tTASK KEY"+podHead)
		for _, t := range st.Tasks {
			role := t.Role
			if t.Throttled {
				role += " (throttled)"
			}
			pod := ""
			switch {
			case !pods:
			case t.Namespace != "":
				pod = "\t" + t.Namespace + "/" + t.Pod
			case t.PodUID != "":
				pod = "\tpod " + t.PodUID + " (not known yet)"
			default:
				pod = "\t-"
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s%s\n", t.ID, t.Priority, t.Weight, role,
				phaseText(&t, st.Scheduler.ProfileRuns), t.RunsDone, runRate(&t), runTime(t.P50RunNs), gpuShare(&t), arrivalsText(&t),
				t.Waiting, t.Credit, gpuTime(t.UsedNs), gpuTime(t.GrantedNs), t.Tenant, t.PID, t.Model, t.Key, pod)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, t := range st.Tasks {
			if line := profilingLine(&t, st.Scheduler.ProfileRuns); line != "" {
				fmt.Fprintln(w, line)
			}
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

// phaseText is the PHASE column: how far a profiling task is.
func phaseText(t *daemon.TaskStatus, profileRuns int) string {
	switch {
	case t.Phase == "profiling":
		return fmt.Sprintf("profiling %d/%d", t.Runs, profileRuns)
	case t.Refreshing:
		return fmt.Sprintf("%s, re-profiling %d/%d", t.Phase, t.Runs, profileRuns)
	}
	return t.Phase
}

// profilingLine says how far a profiling task is and why its runs were
// left out ("" for a task that is not profiling).
func profilingLine(t *daemon.TaskStatus, profileRuns int) string {
	if t.Phase != "profiling" && !t.Refreshing {
		return ""
	}
	if t.RunsNeeded > 0 {
		profileRuns = t.RunsNeeded
	}
	line := fmt.Sprintf("task %d profiling: %d/%d runs kept", t.ID, t.Runs, profileRuns)
	if t.RunsBeside > 0 {
		line += fmt.Sprintf(" (%d beside a better priority)", t.RunsBeside)
	}
	line += fmt.Sprintf(", %d discarded", t.RunsDiscarded)
	var why []string
	for _, r := range profiler.DiscardReasons() {
		if n := t.RunsDiscardedBy[r]; n > 0 {
			why = append(why, fmt.Sprintf("%s %d", r, n))
		}
	}
	if len(why) > 0 {
		line += ": " + strings.Join(why, ", ")
	}
	return line
}

// runRate is the RUNS/S column: runs over the status window.
func runRate(t *daemon.TaskStatus) string {
	if t.WindowNs <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(t.WindowRuns)/(float64(t.WindowNs)/1e9))
}

// runTime is the P50 RUN column.
func runTime(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return time.Duration(ns).Round(time.Microsecond).String()
}

// gpuShare is the GPU SHARE column, a percentage of the GPU's time.
func gpuShare(t *daemon.TaskStatus) string {
	if t.WindowNs <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*t.GPUShare)
}

// arrivalsText is the ARRIVALS column: back-to-back for a closed loop,
// else the class of its intervals and their mean.
func arrivalsText(t *daemon.TaskStatus) string {
	if t.BackToBack {
		return "back-to-back"
	}
	arr := t.Arrivals
	if t.ArrivalEveryNs > 0 {
		arr += " /" + time.Duration(t.ArrivalEveryNs).Round(10*time.Microsecond).String()
	}
	return arr
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
