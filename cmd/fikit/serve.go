package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/cmd/internal/daemon"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

func serveCommand() *cli.Command {
	def := scheduler.DefaultConfig()
	return &cli.Command{
		Name:  "serve",
		Usage: "run the scheduler daemon that hooked services talk to",
		Description: "Listens for hooked services (fikit run …) on UDP, profiles new services, and\n" +
			"schedules their kernels by priority, filling the high-priority service's idle gaps.\n" +
			"Status, profiles and Prometheus metrics are served on <data-dir>/fikit.sock.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:7070", Usage: "UDP address hooks send to", EnvVars: []string{"FIKIT_LISTEN"}},
			&cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), Usage: "directory of the profile store and the admin socket", EnvVars: []string{"FIKIT_DATA_DIR"}},
			&cli.BoolFlag{Name: "ephemeral", Usage: "keep profiles in memory only (no data directory is written unless --data-dir is also given for the admin socket)"},
			&cli.IntFlag{Name: "profile-runs", Value: def.ProfileRuns, Usage: "clean runs a new service is profiled for (T, 10–1000)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "metrics-listen", Usage: "also serve Prometheus metrics over TCP at this address (e.g. 127.0.0.1:9470)"},
			&cli.DurationFlag{Name: "min-gap", Value: time.Duration(def.MinGap), Usage: "shortest predicted gap worth filling"},
			&cli.DurationFlag{Name: "switch-cost", Value: time.Duration(def.SwitchCost), Usage: "GPU context-switch cost assumed by the policy"},
			&cli.DurationFlag{Name: "grant-lead", Value: time.Duration(def.GrantLead), Usage: "how long before the holders' launched work is predicted to end a window's first kernels are granted"},
			&cli.DurationFlag{Name: "inflight-budget", Value: time.Duration(def.InflightBudget), Usage: "most predicted low-priority GPU time outstanding"},
			&cli.Float64Flag{Name: "delay-budget", Value: def.DelayBudget, Usage: "share of a holder run's JCT that filling may delay it"},
			&cli.Float64Flag{Name: "idle-alpha", Value: def.IdleAlpha, Usage: "holder idle after this many typical gaps without a launch"},
			&cli.DurationFlag{Name: "holder-ttl", Value: time.Duration(def.HolderTTL), Usage: "a task holds the GPU this long after its last launch"},
			&cli.DurationFlag{Name: "default-kernel", Value: time.Duration(def.DefaultKernel), Usage: "duration assumed for kernels of unprofiled tasks"},
			&cli.IntFlag{Name: "skip-limit", Value: def.SkipLimit, Usage: "passes over a waiting kernel before it goes first"},
			&cli.IntFlag{Name: "max-credit", Value: def.MaxCredit, Usage: "most launches granted without a round trip (0 disables credit)"},
			&cli.BoolFlag{Name: "run-end-by-position", Usage: "a run's last kernel (by its profile's sequence) opens the window to the next run, before the run end is reported"},
			&cli.Float64Flag{Name: "gap-ewma", Value: def.GapEWMA, Usage: "weight of online gap correction (0 = off)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "serve takes no arguments, got %q", c.Args().First())
			}
			log, err := newLogger(c.String("log-level"), c.String("log-format"))
			if err != nil {
				return usageError(c, "%v", err)
			}
			cfg := scheduler.DefaultConfig()
			cfg.ProfileRuns = c.Int("profile-runs")
			cfg.MinGap = int64(c.Duration("min-gap"))
			cfg.SwitchCost = int64(c.Duration("switch-cost"))
			cfg.InflightBudget = int64(c.Duration("inflight-budget"))
			cfg.GrantLead = int64(c.Duration("grant-lead"))
			cfg.DelayBudget = c.Float64("delay-budget")
			cfg.IdleAlpha = c.Float64("idle-alpha")
			cfg.HolderTTL = int64(c.Duration("holder-ttl"))
			cfg.DefaultKernel = int64(c.Duration("default-kernel"))
			cfg.SkipLimit = c.Int("skip-limit")
			cfg.MaxCredit = c.Int("max-credit")
			cfg.GapEWMA = c.Float64("gap-ewma")
			cfg.RunEndByPosition = c.Bool("run-end-by-position")
			if err := cfg.Validate(); err != nil {
				return usageError(c, "%v", err)
			}
			return serve(c.Context, serveOptions{
				listen: c.String("listen"), dataDir: c.String("data-dir"), ephemeral: c.Bool("ephemeral"),
				dataDirSet: c.IsSet("data-dir"), metrics: c.String("metrics-listen"), sched: cfg, log: log,
			})
		},
	}
}

type serveOptions struct {
	listen, dataDir, metrics string
	ephemeral, dataDirSet    bool
	sched                    scheduler.Config
	log                      *slog.Logger
}

func serve(ctx context.Context, o serveOptions) error {
	var st store.Store
	socket := ""
	if o.ephemeral {
		st = store.NewMemory()
		if o.dataDirSet {
			if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			socket = daemon.SocketPath(o.dataDir)
		}
	} else {
		if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		b, err := store.OpenBadger(o.dataDir, nil)
		if err != nil {
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w (is another fikit serve using %s?)", err, o.dataDir)
			}
			return err
		}
		st = b
		socket = daemon.SocketPath(o.dataDir)
	}
	srv, err := daemon.New(daemon.Config{Listen: o.listen, Store: st, AdminSocket: socket, Scheduler: o.sched, Logger: o.log})
	if err != nil {
		st.Close()
		return err
	}
	if o.metrics != "" {
		ln, err := net.Listen("tcp", o.metrics)
		if err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		hs := &http.Server{Handler: promhttp.HandlerFor(srv.Metrics(), promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
	}
	return srv.Run(ctx)
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// usageError is a bad-invocation error: exit status 2.
func usageError(c *cli.Context, format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(c.Command.Name+": "+format, args...)}
}
