package daemon

import (
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// Accounting (docs/operations.md "Accounting"): GPU time per tenant (the
// user owning a task's registering socket, "remote" when the daemon cannot
// see it) and task key. The core keeps each live task's account; the
// accounts of tasks gone are kept here, and both are written to the store
// every usageSaveEvery and at shutdown, so they outlive the daemon.

// usageSaveEvery is how often the accounts are written (when they changed):
// what a crash can lose.
const usageSaveEvery = 10 * time.Second

// otherKeys collects the GPU time of a tenant's task keys beyond what the
// daemon keeps apart (maxAccountKeys): a flood of made-up task keys must
// not grow the daemon or its store without bound.
const otherKeys = "(other task keys)"

// maxAccountKeys bounds the accounts kept apart, live tasks' included.
const maxAccountKeys = store.MaxUsageEntries - 1

type accountKey struct{ tenant, key string }

// accounts is the GPU time of the tasks gone, and the account last written.
// Guarded by Server.mu.
type accounts struct {
	gone    map[accountKey]store.Usage
	saved   []store.Usage
	failing bool // the last write failed (logged once per failing spell)
}

func (a *accounts) add(m map[accountKey]store.Usage, tenant, key string, used, measured, granted int64) {
	k := accountKey{tenant, key}
	if _, ok := m[k]; !ok && len(m) >= maxAccountKeys {
		k.key = otherKeys
	}
	u := m[k]
	u.Tenant, u.TaskKey = k.tenant, k.key
	u.UsedNs += used
	u.MeasuredNs += measured
	u.GrantedNs += granted
	m[k] = u
}

// loadAccounts reads the accounts the store kept (a store that keeps none:
// nothing to read).
func (s *Server) loadAccounts() {
	s.acct.gone = map[accountKey]store.Usage{}
	us, ok := s.cfg.Store.(store.UsageStore)
	if !ok {
		return
	}
	saved, err := us.Usage()
	if err != nil {
		s.log.Error("reading GPU-time accounts: starting from zero", "err", err)
		return
	}
	for _, u := range saved {
		s.acct.add(s.acct.gone, u.Tenant, u.TaskKey, u.UsedNs, u.MeasuredNs, u.GrantedNs)
	}
	s.acct.saved = saved
}

// closeAccounts keeps the accounts of tasks the core removed. Called with
// mu held.
func (s *Server) closeAccounts(as []scheduler.Account) {
	for _, a := range as {
		s.acct.add(s.acct.gone, a.Owner, a.Key, a.UsedNs, a.MeasuredNs, a.GrantedNs)
	}
}

// usage is every account now: the tasks gone and the live ones, by tenant
// then task key. Called with mu held.
func (s *Server) usage() []store.Usage {
	m := make(map[accountKey]store.Usage, len(s.acct.gone)+8)
	for k, u := range s.acct.gone {
		m[k] = u
	}
	for _, t := range s.core.Tasks() {
		a := t.Account
		s.acct.add(m, a.Owner, a.Key, a.UsedNs, a.MeasuredNs, a.GrantedNs)
	}
	out := make([]store.Usage, 0, len(m))
	for _, u := range m {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].TaskKey < out[j].TaskKey
	})
	return out
}

// saveAccounts writes the accounts if they changed since the last write.
// The write (a synced Badger update) happens without mu.
func (s *Server) saveAccounts() {
	us, ok := s.cfg.Store.(store.UsageStore)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.usage()
	same := slices.Equal(now, s.acct.saved)
	s.mu.Unlock()
	if same {
		return
	}
	err := us.PutUsage(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil && !s.acct.failing:
		s.log.Error("saving GPU-time accounts failed: kept in memory, retried", "err", err)
	case err == nil && s.acct.failing:
		s.log.Info("GPU-time accounts saved again")
	}
	s.acct.failing = err != nil
	if err == nil {
		s.acct.saved = now
	}
}

// TenantStatus is one tenant's GPU time in Status, with its task keys'.
type TenantStatus struct {
	Tenant string `json:"tenant"`
	GPUTime
	TaskKeys []TaskKeyStatus `json:"task_keys"`
}

// TaskKeyStatus is one task key's GPU time in TenantStatus.
type TaskKeyStatus struct {
	TaskKey string `json:"task_key"`
	GPUTime
}

// GPUTime is GPU time as the daemon accounts it (docs/operations.md
// "Accounting"): used is measured while a task profiles and predicted from
// its profile after (the hook does not time kernels while sharing), the
// measured part of it, and granted is what waiters were let launch.
type GPUTime struct {
	UsedNs     int64 `json:"gpu_time_used_ns"`
	MeasuredNs int64 `json:"gpu_time_measured_ns"`
	GrantedNs  int64 `json:"gpu_time_granted_ns"`
}

func (g *GPUTime) add(u store.Usage) {
	g.UsedNs += u.UsedNs
	g.MeasuredNs += u.MeasuredNs
	g.GrantedNs += u.GrantedNs
}

// tenants groups accounts by tenant ([] when none).
func tenants(us []store.Usage) []TenantStatus {
	out := []TenantStatus{}
	for _, u := range us {
		if len(out) == 0 || out[len(out)-1].Tenant != u.Tenant {
			out = append(out, TenantStatus{Tenant: u.Tenant, TaskKeys: []TaskKeyStatus{}})
		}
		t := &out[len(out)-1]
		t.add(u)
		k := TaskKeyStatus{TaskKey: u.TaskKey}
		k.add(u)
		t.TaskKeys = append(t.TaskKeys, k)
	}
	return out
}

// usageCollector exports the accounts to Prometheus: per tenant, and per
// tenant and task key.
type usageCollector struct {
	s                                         *Server
	used, measured, granted                   *prometheus.Desc
	tenantUsed, tenantMeasured, tenantGranted *prometheus.Desc
}

func newUsageCollector(s *Server) *usageCollector {
	kl := []string{"tenant", "task_key"}
	tl := []string{"tenant"}
	return &usageCollector{s: s,
		used: prometheus.NewDesc("fikit_task_key_gpu_time_used_seconds_total",
			"GPU time used by a tenant's task key: measured while profiling, predicted from the profile after.", kl, nil),
		measured: prometheus.NewDesc("fikit_task_key_gpu_time_measured_seconds_total",
			"The part of fikit_task_key_gpu_time_used_seconds_total the hook measured.", kl, nil),
		granted: prometheus.NewDesc("fikit_task_key_gpu_time_granted_seconds_total",
			"GPU time a tenant's task key was let launch as a waiter (grants and credit, predicted).", kl, nil),
		tenantUsed: prometheus.NewDesc("fikit_tenant_gpu_time_used_seconds_total",
			"GPU time used by a tenant's tasks: measured while profiling, predicted from the profile after.", tl, nil),
		tenantMeasured: prometheus.NewDesc("fikit_tenant_gpu_time_measured_seconds_total",
			"The part of fikit_tenant_gpu_time_used_seconds_total the hook measured.", tl, nil),
		tenantGranted: prometheus.NewDesc("fikit_tenant_gpu_time_granted_seconds_total",
			"GPU time a tenant's tasks were let launch as waiters (grants and credit, predicted).", tl, nil),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.used, c.measured, c.granted, c.tenantUsed, c.tenantMeasured, c.tenantGranted} {
		ch <- d
	}
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	us := c.s.usage()
	c.s.mu.Unlock()
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	for _, u := range us {
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.CounterValue, sec(u.UsedNs), u.Tenant, u.TaskKey)
		ch <- prometheus.MustNewConstMetric(c.measured, prometheus.CounterValue, sec(u.MeasuredNs), u.Tenant, u.TaskKey)
		ch <- prometheus.MustNewConstMetric(c.granted, prometheus.CounterValue, sec(u.GrantedNs), u.Tenant, u.TaskKey)
	}
	for _, t := range tenants(us) {
		ch <- prometheus.MustNewConstMetric(c.tenantUsed, prometheus.CounterValue, sec(t.UsedNs), t.Tenant)
		ch <- prometheus.MustNewConstMetric(c.tenantMeasured, prometheus.CounterValue, sec(t.MeasuredNs), t.Tenant)
		ch <- prometheus.MustNewConstMetric(c.tenantGranted, prometheus.CounterValue, sec(t.GrantedNs), t.Tenant)
	}
}
