package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// adminServer serves HTTP on a unix socket: the daemon's status, the
// profile store (so `fikit profile` works while the daemon holds Badger's
// lock), Prometheus metrics and the decision record (record.go).
type adminServer struct {
	path string
	ln   net.Listener
	srv  *http.Server
}

// Status is the daemon's state as `fikit status` shows it: the status API
// (GET /v1/status on the admin socket). Its JSON is one style, checked by
// TestStatusAPIStyle: snake_case keys, durations in ns with the suffix _ns,
// lists as [] when empty, never null; every key is documented in
// docs/status-api.md. Within /v1/ keys are added, never renamed or removed.
type Status struct {
	Listen   string `json:"listen"`
	UptimeNs int64  `json:"uptime_ns"`
	// StartedNs is the daemon's start on CLOCK_MONOTONIC: the clock of the
	// hooks' launch times on this host (and simgpu's timeline).
	StartedNs int64            `json:"started_ns"`
	Tasks     []TaskStatus     `json:"tasks"`
	GPUs      []GPUStatus      `json:"gpus"`
	Stats     scheduler.Stats  `json:"stats"`
	Scheduler scheduler.Config `json:"scheduler"`
	// Tenants is the GPU time accounted to each tenant (the user owning a
	// task's socket, "remote" when the daemon cannot see it) and its task
	// keys, over the daemon's lifetimes: the tasks gone and the live ones
	// (docs/operations.md "Accounting").
	Tenants []TenantStatus `json:"tenants"`
	// Awaited are the tasks known before a restart whose places are held
	// until they register again or --rejoin-grace passes
	// (docs/operations.md "After an outage").
	Awaited []store.Known `json:"awaited"`
}

// TaskStatus is one task in Status.
type TaskStatus struct {
	ID       uint32 `json:"id"`
	Key      string `json:"task_key"`
	PID      uint32 `json:"pid"`
	Priority uint8  `json:"priority"`
	GPU      string `json:"gpu"`
	Model    string `json:"model"`
	Role     string `json:"role"`
	Phase    string `json:"phase"`
	Credit   uint32 `json:"credit"`
	Runs     int    `json:"profiled_runs"`
	// While it profiles: the runs its profile needs, how many of those
	// kept were measured beside a better priority's work, and the runs
	// left out, in all and by reason (0 and all zeros otherwise).
	RunsNeeded           int                     `json:"profile_runs_needed"`
	RunsBeside           int                     `json:"profile_runs_beside"`
	ProfileRunsDiscarded int                     `json:"profile_runs_discarded"`
	ProfileDiscardedBy   scheduler.DiscardCounts `json:"profile_discards_by_reason"`
	Waiting              int                     `json:"waiting"`
	JCTNs                int64                   `json:"mean_jct_ns"`
	// Verified: the registering pid was shown to own the task's socket, so
	// only that process's sockets speak for the task (docs/security.md).
	Verified bool `json:"pid_verified"`
	// A pod's task (a unix-socket hook whose cgroup names a pod): the
	// pod's UID, and its namespace and name once the informer knows it.
	PodUID    string `json:"pod_uid,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	// ProfileVersion is the version of the profile the task is scheduled
	// by (0 while it profiles); Refreshing: it drifted from it and the next
	// version is being measured.
	ProfileVersion uint32 `json:"profile_version"`
	Refreshing     bool   `json:"refreshing"`
	// Tenant is whom its GPU time is accounted to; Weight its share among
	// its equals, Throttled whether it waits for them to catch up, and
	// VirtualTimeNs its GPU time used / weight as they are compared
	// (docs/scheduler.md "Equals").
	Tenant        string `json:"tenant"`
	Weight        uint32 `json:"weight"`
	Throttled     bool   `json:"throttled"`
	VirtualTimeNs int64  `json:"virtual_time_ns"`
	GPUTime
	// How its runs arrive (docs/scheduler.md "Arrivals"): the class, the
	// mean interval between run starts and its CV, and the holder TTL
	// they give.
	Arrivals       string  `json:"arrivals"`
	ArrivalEveryNs int64   `json:"arrival_interval_ns"`
	ArrivalCV      float64 `json:"arrival_cv"`
	HolderTTLNs    int64   `json:"holder_ttl_ns"`
	// PreSwitchOff: its pre-switches were turned off for a low hit rate.
	PreSwitchOff bool `json:"pre_switch_off"`
	// RegisteredAfterStartNs is when it registered, after the daemon's
	// start (how soon a hook rejoined a restarted daemon).
	RegisteredAfterStartNs int64 `json:"registered_after_start_ns"`
	// RunsDone counts the runs its hook reported since it registered,
	// profiling or sharing; RunsDiscarded and RunsDiscardedBy its
	// profiling runs left out, and why (activity.go).
	RunsDone        uint64                  `json:"runs_done"`
	RunsDiscarded   uint64                  `json:"runs_discarded"`
	RunsDiscardedBy scheduler.DiscardCounts `json:"runs_discarded_by_reason"`
	// What it did over the last window_ns: runs, their rate and median
	// length, the share of that time spent in runs and of the GPU's time
	// its kernels used; BackToBack: its runs follow each other without
	// idle time between them (a closed loop), whatever Arrivals says.
	WindowStats
}

// GPUStatus is one GPU in Status: its context switch as the policy prices
// it (docs/scheduler.md "The switch, measured").
type GPUStatus struct {
	GPU            string `json:"gpu"`
	SwitchCostNs   int64  `json:"switch_cost_ns"`
	SwitchMeasured bool   `json:"switch_measured"`
	MPS            bool   `json:"mps"`
	SwitchSamples  int    `json:"switch_samples"`
	SwitchLastNs   int64  `json:"switch_last_ns"`
	// Fill is the core's fill state on the GPU (scheduler.FillState): why
	// a waiting kernel does or does not go.
	Fill *scheduler.FillState `json:"fill,omitempty"`
	// BoardCursorNs is the board's device-time cursor for the GPU: where
	// the hooks' µs bound predicts the bounded tasks' work on it to end
	// (0: no board section for it).
	BoardCursorNs int64 `json:"board_cursor_ns"`
}

// adminIdleTimeout closes an admin connection idle between requests: a
// client that keeps connections alive and never reuses them would hold a
// descriptor and a goroutine of the daemon each, for its lifetime.
var adminIdleTimeout = 30 * time.Second

func newAdminServer(s *Server, path string) (*adminServer, error) {
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("admin socket %s: another daemon is serving it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale admin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if g := s.cfg.AccessGroup; g > 0 {
		if err := os.Chown(path, -1, g); err != nil {
			ln.Close()
			return nil, fmt.Errorf("admin socket: group %d: %w", g, err)
		}
	}
	_ = os.Chmod(path, 0o660)
	mux := http.NewServeMux()
	mux.Handle("/v1/profiles", store.Handler(s.cfg.Store))
	mux.Handle("/v1/profiles/", store.Handler(s.cfg.Store))
	mux.Handle("/metrics", promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/v1/record", s.serveRecord)
	mux.HandleFunc("/v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	srv := &http.Server{Handler: ownerChanges(mux, os.Geteuid()), ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout: adminIdleTimeout, ConnContext: withPeer}
	return &adminServer{path: path, ln: ln, srv: srv}, nil
}

func (a *adminServer) serve() { _ = a.srv.Serve(a.ln) }

// peerKey is the context key of a connection's peer uid.
type peerKey struct{}

// withPeer notes who is at the other end of an admin connection (the
// kernel's SO_PEERCRED, as of its connect).
func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, cred.Uid)
}

// ownerChanges lets only the daemon's user (uid owner) and root change
// anything (PUT, DELETE; starting a decision record): a member of
// --group reads status, metrics and profiles (docs/security.md).
func ownerChanges(next http.Handler, owner int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, known := r.Context().Value(peerKey{}).(uint32)
		reads := (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path != "/v1/record"
		if !reads && (!known || (uid != 0 && int(uid) != owner)) {
			http.Error(w, fmt.Sprintf("%s %s: only the daemon's user (uid %d) or root may; others of its group may read",
				r.Method, r.URL.Path, owner), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *adminServer) close() {
	_ = a.srv.Close()
	_ = os.Remove(a.path)
}

// Status reports the daemon's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	st := Status{Listen: s.Addr().String(), UptimeNs: now - s.start, StartedNs: s.start, Tasks: []TaskStatus{}, GPUs: []GPUStatus{},
		Stats: s.core.Stats(), Scheduler: s.core.Config()}
	arr := map[scheduler.TaskID]scheduler.ArrivalInfo{}
	for _, a := range s.core.Arrivals() {
		arr[a.Task] = a
	}
	preOff := map[scheduler.TaskID]bool{}
	for _, p := range s.core.PreSwitches() {
		preOff[p.Task] = p.Off
	}
	for _, t := range s.core.Tasks() {
		a, acc := arr[t.ID], t.Account
		st.Tasks = append(st.Tasks, TaskStatus{ID: uint32(t.ID), Key: t.Key, PID: t.PID, Priority: t.Priority,
			GPU: t.GPU, Model: t.Model, Role: t.Role.String(), Phase: t.Phase.String(), Credit: t.Credit,
			Runs: t.Runs, RunsNeeded: t.RunsNeeded, RunsBeside: t.RunsBeside, ProfileRunsDiscarded: t.RunsDiscarded,
			ProfileDiscardedBy: t.DiscardedBy, Waiting: t.Waiting, JCTNs: t.JCTNs, Verified: s.tasks[t.ID] != nil && s.tasks[t.ID].proven,
			ProfileVersion: t.ProfileVersion, Refreshing: t.Refreshing,
			Tenant: acc.Owner, Weight: t.Weight, Throttled: t.Throttled, VirtualTimeNs: t.VirtualNs,
			GPUTime:  GPUTime{UsedNs: acc.UsedNs, MeasuredNs: acc.MeasuredNs, GrantedNs: acc.GrantedNs},
			Arrivals: string(a.Class), ArrivalEveryNs: a.IntervalNs, ArrivalCV: a.CV, HolderTTLNs: a.TTLNs, PreSwitchOff: preOff[t.ID],
			RegisteredAfterStartNs: t.RegisteredAt - s.start})
		if ta := s.tasks[t.ID]; ta != nil {
			ts := &st.Tasks[len(st.Tasks)-1]
			ts.RunsDone, ts.RunsDiscardedBy = ta.act.runsDone, ta.act.discards
			ts.PodUID, ts.Namespace, ts.Pod = ta.podUID, ta.namespace, ta.podName
			for _, n := range ta.act.discards {
				ts.RunsDiscarded += n
			}
			ts.WindowStats = ta.act.window(now, acc.UsedNs)
		}
	}
	st.Awaited = []store.Known{}
	for _, k := range s.core.Awaited() {
		st.Awaited = append(st.Awaited, store.Known{TaskKey: k.Key, PID: k.PID, Priority: k.Priority, GPU: k.GPU})
	}
	fills := map[string]*scheduler.FillState{}
	for _, f := range s.core.FillStates(nil) {
		fills[f.GPU] = &f
	}
	section := map[string]int{} // GPU → its board section, from its tasks
	for _, t := range s.core.Tasks() {
		if ta := s.tasks[t.ID]; ta != nil && ta.boardGPU >= 0 {
			section[t.GPU] = ta.boardGPU
		}
	}
	for _, g := range s.core.Switches() {
		gs := GPUStatus{GPU: g.GPU, SwitchCostNs: g.CostNs, SwitchMeasured: g.Measured, MPS: g.MPS,
			SwitchSamples: g.Samples, SwitchLastNs: g.LastNs, Fill: fills[g.GPU]}
		if i, ok := section[g.GPU]; ok && s.board != nil {
			gs.BoardCursorNs = s.board.Cursor(i)
		}
		st.GPUs = append(st.GPUs, gs)
	}
	st.Tenants = tenants(s.usage())
	return st
}
