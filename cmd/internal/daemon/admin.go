package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// Status is the daemon's state as `fikit status` shows it.
type Status struct {
	Listen    string           `json:"listen"`
	UptimeNs  int64            `json:"uptime_ns"`
	Tasks     []TaskStatus     `json:"tasks"`
	Stats     scheduler.Stats  `json:"stats"`
	Scheduler scheduler.Config `json:"scheduler"`
	// Tenants is the GPU time accounted to each tenant (the user owning a
	// task's socket, "remote" when the daemon cannot see it) and its task
	// keys, over the daemon's lifetimes: the tasks gone and the live ones
	// (docs/operations.md "Accounting").
	Tenants []TenantStatus `json:"tenants"`
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
	Waiting  int    `json:"waiting"`
	JCTNs    int64  `json:"mean_jct_ns"`
	// Verified: the registering pid was shown to own the task's socket, so
	// only that process's sockets speak for the task (docs/security.md).
	Verified bool `json:"pid_verified"`
	// Tenant is whom its GPU time is accounted to; Weight its share among
	// its equals, Throttled whether it waits for them to catch up, and
	// VirtualTimeNs its GPU time used / weight as they are compared
	// (docs/scheduler.md "Equals").
	Tenant        string `json:"tenant"`
	Weight        uint32 `json:"weight"`
	Throttled     bool   `json:"throttled"`
	VirtualTimeNs int64  `json:"virtual_time_ns"`
	GPUTime
}

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
	return &adminServer{path: path, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

func (a *adminServer) serve() { _ = a.srv.Serve(a.ln) }

func (a *adminServer) close() {
	_ = a.srv.Close()
	_ = os.Remove(a.path)
}

// Status reports the daemon's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Listen: s.Addr().String(), UptimeNs: s.now() - s.start, Stats: s.core.Stats(), Scheduler: s.core.Config()}
	for _, t := range s.core.Tasks() {
		a := t.Account
		st.Tasks = append(st.Tasks, TaskStatus{ID: uint32(t.ID), Key: t.Key, PID: t.PID, Priority: t.Priority,
			GPU: t.GPU, Model: t.Model, Role: t.Role.String(), Phase: t.Phase.String(), Credit: t.Credit,
			Runs: t.Runs, Waiting: t.Waiting, JCTNs: t.JCTNs, Verified: s.tasks[t.ID] != nil && s.tasks[t.ID].proven,
			Tenant: a.Owner, Weight: t.Weight, Throttled: t.Throttled, VirtualTimeNs: t.VirtualNs,
			GPUTime: GPUTime{UsedNs: a.UsedNs, MeasuredNs: a.MeasuredNs, GrantedNs: a.GrantedNs}})
	}
	st.Tenants = tenants(s.usage())
	return st
}
