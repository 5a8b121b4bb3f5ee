package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// Weights are bounded by the same rule as priorities: max-weight=N, 1
// without it; the daemon's own user may claim any by default.
func TestParsePolicyWeights(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader("uid:1000 3 max-weight=4\nkey:big 5 max-weight=100\n* 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uid  uint32
		key  string
		want uint32
	}{{1000, "svc", 4}, {1001, "big", 100}, {1001, "svc", 1}} {
		if _, r := p.Allowed(c.uid, true, c.key); r.maxWeight() != c.want {
			t.Errorf("uid %d key %q: max weight %d, want %d", c.uid, c.key, r.maxWeight(), c.want)
		}
	}
	var none *PolicyRule
	if none.maxWeight() != udp.MaxWeight {
		t.Error("no rule matched: weights limited")
	}
	d := DefaultPolicy(1000)
	for uid, want := range map[uint32]uint32{1000: udp.MaxWeight, 0: udp.MaxWeight, 1001: 1} {
		if _, r := d.Allowed(uid, true, "x"); r.maxWeight() != want {
			t.Errorf("default policy, uid %d: max weight %d, want %d", uid, r.maxWeight(), want)
		}
	}
	for _, bad := range []string{"* 5 max-weight=0", "* 5 max-weight=101", "* 5 weight=2", "* 5 max-weight=x", "* 5 max-weight=2 x"} {
		if _, err := ParsePolicy(strings.NewReader(bad)); !errors.Is(err, ErrPolicy) {
			t.Errorf("%q: %v, want ErrPolicy", bad, err)
		}
	}
}

// A weight above what the policy allows is registered at the allowed one
// and the hook told so; a weight-only demotion keeps the board (the hook
// notes the priority it has).
func TestWeightPolicy(t *testing.T) {
	me := fmt.Sprint(os.Getuid())
	for _, c := range []struct {
		policy string
		claim  uint32
		want   uint32
	}{{"* 5", 4, 1}, {"* 5", 0, 1}, {"uid:" + me + " 5 max-weight=8", 4, 4}, {"uid:" + me + " 5 max-weight=8", 20, 8}} {
		p, err := ParsePolicy(strings.NewReader(c.policy))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "board")
		s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(),
			Policy: p, Board: path})
		demoted := c.want != max(c.claim, 1)
		ack, e := newFakeHook(t, s).registerAnswered(&udp.Register{Seq: 1, TaskKey: "svc", PID: 1, Priority: 5,
			DeviceUUID: [16]byte{1}, DeviceName: "g", Weight: c.claim}, demoted)
		if ack == nil {
			t.Fatalf("%q: no ack", c.policy)
		}
		if ts := s.Status().Tasks; len(ts) != 1 || ts[0].Weight != c.want {
			t.Fatalf("%q, weight %d: tasks %+v, want one of weight %d", c.policy, c.claim, ts, c.want)
		}
		if demoted != (e != nil) || e != nil && !strings.Contains(e.Message, "weight") {
			t.Errorf("%q, weight %d: hook told %+v", c.policy, c.claim, e)
		}
		if ack.Board != path {
			t.Errorf("%q, weight %d: board %q, want %q", c.policy, c.claim, ack.Board, path)
		}
	}
}

// keptStore is a Memory store whose Close keeps its contents, as a Badger
// directory does between two daemons.
type keptStore struct{ *store.Memory }

func (keptStore) Close() error { return nil }

// metricValue is the value of the metric name with labels (k, v, …) in reg.
func metricValue(t *testing.T, s *Server, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := s.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// GPU time is accounted per task and per tenant, in the status and the
// metrics, and outlives the task and the daemon.
func TestAccountsSurviveRestart(t *testing.T) {
	st := keptStore{store.NewMemory()}
	if err := st.Put(sharingProfile(t, "svc")); err != nil {
		t.Fatal(err)
	}
	tenant := "uid:" + fmt.Sprint(os.Getuid())
	const kernelNs = 50_000 // kernel 7 in sharingProfile
	// daemon runs one daemon: a task of key svc launches kernel 7 n times
	// and leaves; it returns the tenant's GPU time before and after.
	daemon := func(n int) (before, after int64) {
		s, err := New(Config{Listen: "127.0.0.1:0", Store: st, Scheduler: scheduler.DefaultConfig()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		used := func() int64 {
			for _, ts := range s.Status().Tenants {
				if ts.Tenant == tenant {
					if len(ts.TaskKeys) != 1 || ts.TaskKeys[0].TaskKey != "svc" || ts.TaskKeys[0].UsedNs != ts.UsedNs {
						t.Errorf("tenant %+v: want task key svc alone", ts)
					}
					return ts.UsedNs
				}
			}
			return 0
		}
		before = used()
		h := newFakeHook(t, s)
		a := h.register("svc", 5)
		for i := 1; i <= n; i++ {
			h.send(&udp.LaunchNotify{TaskID: a.TaskID, Seq: uint32(i), KernelID: 7})
		}
		want := int64(n) * kernelNs
		var task TaskStatus
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && task.UsedNs != want; time.Sleep(5 * time.Millisecond) {
			if ts := s.Status().Tasks; len(ts) == 1 {
				task = ts[0]
			}
		}
		if task.UsedNs != want || task.Tenant != tenant || task.MeasuredNs != 0 || task.Weight != 1 {
			t.Fatalf("task %+v: want tenant %s, %d ns used (predicted), weight 1", task, tenant, want)
		}
		if got := used(); got != before+want {
			t.Errorf("tenant used %d ns while its task runs, want %d", got, before+want)
		}
		if v, ok := metricValue(t, s, "fikit_tenant_gpu_time_used_seconds_total", "tenant", tenant); !ok || v != float64(before+want)/1e9 {
			t.Errorf("fikit_tenant_gpu_time_used_seconds_total = %v (%v), want %v", v, ok, float64(before+want)/1e9)
		}
		if v, ok := metricValue(t, s, "fikit_task_key_gpu_time_used_seconds_total", "tenant", tenant, "task_key", "svc"); !ok || v != float64(before+want)/1e9 {
			t.Errorf("fikit_task_key_gpu_time_used_seconds_total = %v (%v)", v, ok)
		}
		h.send(&udp.Goodbye{TaskID: a.TaskID, Token: a.Token})
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(s.Status().Tasks) > 0; time.Sleep(5 * time.Millisecond) {
		}
		if ts := s.Status().Tasks; len(ts) != 0 {
			t.Fatalf("tasks %+v after goodbye", ts)
		}
		return before, used()
	}
	b1, a1 := daemon(3)
	if b1 != 0 || a1 != 3*kernelNs {
		t.Errorf("first daemon: tenant used %d, then %d; want 0, then %d (kept after its task left)", b1, a1, 3*kernelNs)
	}
	b2, a2 := daemon(2)
	if b2 != a1 || a2 != 5*kernelNs {
		t.Errorf("second daemon: tenant used %d, then %d; want %d (kept across the restart), then %d", b2, a2, a1, 5*kernelNs)
	}
	us, _ := st.Usage()
	if len(us) != 1 || us[0].UsedNs != 5*kernelNs {
		t.Errorf("stored accounts %+v", us)
	}
}
