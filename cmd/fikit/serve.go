package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/fikit/fikit/daemon"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the scheduler daemon that hooked services talk to",
		Description: "Listens for hooked services (fikit run …) on UDP, profiles new services, and\n" +
			"schedules their kernels by priority, filling the high-priority service's idle gaps.\n" +
			"Status, profiles and Prometheus metrics are served on <data-dir>/fikit.sock.",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "listen", Value: cli.NewStringSlice("127.0.0.1:7070"), Usage: "UDP address hooks send to (an address other hosts can reach needs --insecure), or unix:PATH, a unix datagram socket for hooks in pods (docs/kubernetes.md); repeatable, one UDP address at most", EnvVars: []string{"FIKIT_LISTEN"}},
			&cli.StringFlag{Name: "reply-dir", Usage: "with unix: listens, a directory made mode 1733 where hooks bind their reply sockets (FIKIT_REPLY_DIR in the hook; default: c/ beside the socket's directory)"},
			&cli.StringFlag{Name: "k8s-node", Usage: "this node's name: pods on it are looked up with a pod informer (needs a fikit built with the k8s tag: make fikit-k8s)", EnvVars: []string{"FIKIT_K8S_NODE"}},
			&cli.StringFlag{Name: "kubeconfig", Usage: "with --k8s-node, the kubeconfig to reach the API server (default: in-cluster)", EnvVars: []string{"KUBECONFIG"}},
			&cli.StringFlag{Name: "auth-key-file", Usage: "file holding the key (at least 16 bytes) of the HMAC-SHA256 that datagrams from and to hooks on other hosts carry; hooks name the same file in FIKIT_AUTH_KEY_FILE (docs/security.md \"Remote hooks\")", EnvVars: []string{"FIKIT_AUTH_KEY_FILE"}},
			&cli.BoolFlag{Name: "insecure", Usage: "allow a --listen address other hosts can reach without --auth-key-file: their datagrams are then not authenticated, so anyone who reaches it can register"},
			&cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), Usage: "directory of the profile store and the admin socket", EnvVars: []string{"FIKIT_DATA_DIR"}},
			&cli.BoolFlag{Name: "ephemeral", Usage: "keep profiles in memory only (no data directory is written unless --data-dir is also given for the admin socket)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "metrics-listen", Usage: "also serve Prometheus metrics over TCP at this address (e.g. 127.0.0.1:9470)"},
			&cli.StringFlag{Name: "record", Usage: "append every scheduling decision to this file, one JSON line each (for fikit trace --decisions)"},
			&cli.StringFlag{Name: "board", Value: "auto", Usage: "the board file hooks on this host share with the daemon (docs/design.md \"Board\"): a path, auto (<data-dir>/board, or under /dev/shm with --ephemeral) or off (UDP only, as in the paper)", EnvVars: []string{"FIKIT_BOARD_FILE"}},
			&cli.StringFlag{Name: "priority-policy", Usage: "file of who may claim which priorities (docs/security.md); default: the daemon's user and root any, everyone else 5 at best", EnvVars: []string{"FIKIT_PRIORITY_POLICY"}},
			&cli.StringFlag{Name: "group", Usage: "a group (name or gid) whose members' services share the board and who may read the admin socket (status, metrics, profiles): both become that group's, mode 0660, and the data directory lets the group through (docs/security.md)", EnvVars: []string{"FIKIT_GROUP"}},
			&cli.IntFlag{Name: "nice", Value: -10, Usage: "nice value of the daemon (-20…19): hooked services wait on its answers, so it must not wait for a CPU behind them; needs CAP_SYS_NICE to lower, else a warning"},
		}, schedulerFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "serve takes no arguments, got %q", c.Args().First())
			}
			log, err := newLogger(c.String("log-level"), c.String("log-format"))
			if err != nil {
				return usageError(c, "%v", err)
			}
			cfg, err := schedulerConfig(c)
			if err != nil {
				return err
			}
			var key []byte
			if f := c.String("auth-key-file"); f != "" {
				kf, err := udp.ReadKeyFile(f)
				if err != nil {
					return usageError(c, "--auth-key-file: %v", err)
				}
				if kf.Mode&0o077 != 0 {
					log.Warn("the key file may be read by other users: chmod 600 it", "auth_key_file", f, "mode", kf.Mode.String())
				}
				key = kf.Key
			}
			listen, unixPaths, err := splitListen(c.StringSlice("listen"))
			if err != nil {
				return usageError(c, "%v", err)
			}
			remote, err := checkListen(listen, key != nil, c.Bool("insecure"))
			if err != nil {
				return usageError(c, "%v", err)
			}
			switch {
			case remote && key == nil:
				log.Warn("listening on an address other hosts can reach, without authentication (--insecure)", "listen", listen)
			case remote:
				log.Info("hooks on other hosts must sign their datagrams with the key of --auth-key-file", "listen", listen)
			}
			var pol *daemon.PriorityPolicy
			if f := c.String("priority-policy"); f != "" {
				if pol, err = daemon.LoadPolicy(f); err != nil {
					return usageError(c, "%v", err)
				}
			}
			gid, err := lookupGroup(c.String("group"))
			if err != nil {
				return usageError(c, "--group: %v", err)
			}
			return serve(c.Context, serveOptions{policy: pol, gid: gid,
				listen: listen, unix: unixPaths, replyDir: c.String("reply-dir"), k8sNode: c.String("k8s-node"), kubeconfig: c.String("kubeconfig"),
				dataDir: c.String("data-dir"), ephemeral: c.Bool("ephemeral"),
				dataDirSet: c.IsSet("data-dir"), metrics: c.String("metrics-listen"), sched: cfg, log: log,
				record: c.String("record"), nice: c.Int("nice"), niceSet: c.IsSet("nice"), board: c.String("board"),
				authKey: key,
			})
		},
	}
}

type serveOptions struct {
	listen, dataDir, metrics string
	unix                     []string // unix: --listen paths
	replyDir                 string
	k8sNode, kubeconfig      string
	record                   string // decision record file ("": none)
	board                    string // --board: path, auto or off
	policy                   *daemon.PriorityPolicy
	authKey                  []byte // --auth-key-file's key (nil: none)
	nice                     int
	niceSet                  bool
	gid                      int // --group (0: none)
	ephemeral, dataDirSet    bool
	sched                    scheduler.Config
	log                      *slog.Logger
}

func serve(ctx context.Context, o serveOptions) error {
	if o.nice < -20 || o.nice > 19 {
		return &exitError{code: 2, err: fmt.Errorf("serve: --nice %d: want -20…19", o.nice)}
	}
	if err := setNice(o.nice); err != nil {
		// Lowering the value needs privilege: without it the daemon still
		// works, but competes for the CPU with the services it schedules.
		level := slog.LevelInfo
		if o.niceSet {
			level = slog.LevelWarn
		}
		o.log.Log(ctx, level, "could not set the daemon's nice value; on a busy host its answers will be late", "nice", o.nice, "err", err)
	}
	privateFiles()
	var st store.Store
	socket := ""
	if o.ephemeral {
		st = store.NewMemory()
		if o.dataDirSet {
			if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			socket = daemon.SocketPath(o.dataDir)
		}
	} else {
		b, err := store.OpenBadger(o.dataDir, &store.BadgerOptions{Logger: o.log})
		if err != nil {
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w (is another fikit serve using %s?)", err, o.dataDir)
			}
			return err
		}
		st = b
		socket = daemon.SocketPath(o.dataDir)
	}
	if o.gid > 0 && socket != "" {
		if err := openToGroup(o.dataDir, o.gid); err != nil {
			st.Close()
			return err
		}
	}
	var rec io.Writer
	if o.record != "" {
		f, err := os.OpenFile(o.record, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			st.Close()
			return fmt.Errorf("decision record: %w", err)
		}
		rec = f // the daemon closes it
	}
	lookup, err := podLookup(ctx, o)
	if err != nil {
		st.Close()
		return err
	}
	if err := makeUnixDirs(o); err != nil {
		st.Close()
		return err
	}
	srv, err := daemon.New(daemon.Config{Listen: o.listen, ListenUnix: o.unix, Pods: lookup, Store: st, AdminSocket: socket, Scheduler: o.sched, Logger: o.log, Record: rec,
		Board: boardPath(o, socket != ""), Policy: o.policy, AuthKey: o.authKey, AccessGroup: o.gid})
	if err != nil {
		st.Close()
		if rec != nil {
			rec.(io.Closer).Close()
		}
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
	served := make(chan struct{})
	defer close(served)
	go hardStop(ctx, served, o.log)
	return srv.Run(ctx)
}

// shutdownMax bounds a shutdown: the daemon's own steps are bounded (the
// store's Close, the persister's retries), this is the backstop.
const shutdownMax = 5 * time.Second

// hardStop ends the process when a shutdown, once asked for, is asked for
// again (a second SIGINT or SIGTERM) or takes longer than shutdownMax:
// whatever the daemon was waiting for, an operator or a supervisor that
// wants it gone gets it gone.
func hardStop(ctx context.Context, served <-chan struct{}, log *slog.Logger) {
	select {
	case <-ctx.Done():
	case <-served:
		return
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	select {
	case <-served:
		return
	case s := <-again:
		log.Error("second signal: exiting without finishing the shutdown", "signal", s.String())
	case <-time.After(shutdownMax):
		log.Error("shutdown did not finish: exiting", "after", shutdownMax)
	}
	os.Exit(1)
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

// lookupGroup resolves --group, a name or a gid ("": none, 0).
func lookupGroup(name string) (int, error) {
	if name == "" {
		return 0, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr != nil {
			return 0, err
		}
		// A number names a gid whether or not this system names it (a
		// container's /etc/group need not list the host's groups).
		g = &user.Group{Gid: name}
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil || gid < 0 {
		return 0, fmt.Errorf("group %q: gid %q", name, g.Gid)
	}
	if gid == 0 {
		return 0, fmt.Errorf("group %q is root's: name a group of fikit's users", name)
	}
	return gid, nil
}

// openToGroup lets the members of gid through the data directory (g+x,
// not g+r: they open the board and the socket by name and list nothing),
// making it that group's if it is not.
func openToGroup(dir string, gid int) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) != gid {
		if err := os.Chown(dir, -1, gid); err != nil {
			return fmt.Errorf("data dir %s: group %d: %w", dir, gid, err)
		}
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o010); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}

// boardPath resolves --board: "" for off.
func boardPath(o serveOptions, dataDir bool) string {
	switch o.board {
	case "off", "":
		return ""
	case "auto":
		if dataDir {
			return filepath.Join(o.dataDir, "board")
		}
		_, port, _ := net.SplitHostPort(o.listen)
		return filepath.Join("/dev/shm", fmt.Sprintf("fikit-%d-%s.board", os.Getuid(), port))
	}
	return o.board
}
