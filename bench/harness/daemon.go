package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fikit/fikit/daemon"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// Daemon is an in-process `fikit serve` with an in-memory profile store.
type Daemon struct {
	srv    *daemon.Server
	st     store.Store
	cancel context.CancelFunc
	done   chan error
	dir    string // the board's directory
}

// StartDaemon starts a daemon on a free loopback port, with a board in a
// directory of its own (hooks started with FIKIT_BOARD=off ignore it).
// Logs go to logw (nil: discarded).
func StartDaemon(ctx context.Context, cfg scheduler.Config, logw io.Writer) (*Daemon, error) {
	return startDaemon(ctx, cfg, logw, newKeepStore())
}

// Sibling starts another daemon with other settings that shares d's
// profiles (the same store): a scheduler variant measured beside d on
// services d profiled.
func (d *Daemon) Sibling(ctx context.Context, cfg scheduler.Config, logw io.Writer) (*Daemon, error) {
	k, ok := d.st.(*keepStore)
	if !ok {
		return nil, fmt.Errorf("harness: daemon's store cannot be shared")
	}
	return startDaemon(ctx, cfg, logw, k)
}

func startDaemon(ctx context.Context, cfg scheduler.Config, logw io.Writer, st *keepStore) (*Daemon, error) {
	var log *slog.Logger
	if logw != nil {
		log = slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	dir, err := os.MkdirTemp("", "fikit-board-")
	if err != nil {
		return nil, err
	}
	srv, err := daemon.New(daemon.Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg, Logger: log,
		Board: filepath.Join(dir, "board")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &Daemon{srv: srv, st: st, cancel: cancel, done: make(chan error, 1), dir: dir}
	go func() { d.done <- srv.Run(ctx) }()
	return d, nil
}

// Addr is the daemon's UDP address for FIKIT_SCHEDULER / --scheduler.
func (d *Daemon) Addr() string { return d.srv.Addr().String() }

// Record records the daemon's decisions to w (nil: ends the recording,
// flushing it; daemon.Server.Record).
func (d *Daemon) Record(w io.Writer) error { return d.srv.Record(w) }

// Status is the daemon's status.
func (d *Daemon) Status() daemon.Status { return d.srv.Status() }

// Profile returns a stored profile.
func (d *Daemon) Profile(model, key string) (*profiler.Profile, error) { return d.st.Get(model, key) }

// ProfileOf returns a task's stored profile on whichever GPU model it was
// profiled (the first, if several).
func (d *Daemon) ProfileOf(taskKey string) (*profiler.Profile, error) {
	sums, err := d.st.List()
	if err != nil {
		return nil, err
	}
	for _, s := range sums {
		if s.TaskKey == taskKey {
			return d.st.Get(s.GPU, taskKey)
		}
	}
	return nil, store.ErrNotFound
}

// Stop shuts the daemon down.
func (d *Daemon) Stop() error {
	d.cancel()
	defer os.RemoveAll(d.dir)
	select {
	case err := <-d.done:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("daemon did not stop")
	}
}

// keepStore is an in-memory store whose Close keeps the data, so profiles
// outlive one daemon within a harness (a daemon restart keeps its profiles,
// as with Badger).
type keepStore struct{ *store.Memory }

func newKeepStore() *keepStore    { return &keepStore{store.NewMemory()} }
func (k *keepStore) Close() error { return nil }
