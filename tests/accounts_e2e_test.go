package tests

// Who used the GPU: `fikit serve` accounts GPU time per tenant (the user
// owning a task's socket) and task key, shows it in `fikit status` (text
// and --json) and its metrics, and keeps it across a restart. Two tenants
// here: this process's user and uid 65534 (a socket made as that user, as
// in users_e2e_test.go), both profiling, so what they used is what their
// measurements say.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/udp"
)

// tenantJSON is a tenant of `fikit status --json`.
type tenantJSON struct {
	Tenant     string `json:"tenant"`
	UsedNs     int64  `json:"gpu_time_used_ns"`
	MeasuredNs int64  `json:"gpu_time_measured_ns"`
	GrantedNs  int64  `json:"gpu_time_granted_ns"`
	TaskKeys   []struct {
		TaskKey string `json:"task_key"`
		UsedNs  int64  `json:"gpu_time_used_ns"`
	} `json:"task_keys"`
}

func tenantsOf(t *testing.T, d *daemonProc) map[string]tenantJSON {
	t.Helper()
	r := runCmd(t, 10*time.Second, nil, requireBins(t, "fikit")[0], "status", "--data-dir", d.dataDir, "--json")
	if r.ExitCode != 0 {
		t.Fatalf("fikit status: %s", r)
	}
	var st struct {
		Tenants []tenantJSON `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Tenants == nil {
		t.Fatalf("fikit status --json: tenants %v (%v)\n%s", st.Tenants, err, r.Stdout)
	}
	out := map[string]tenantJSON{}
	for _, x := range st.Tenants {
		out[x.Tenant] = x
	}
	return out
}

func TestAccountsPerTenant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	dir := t.TempDir()
	d := startServe(t, dir, "", "--profile-runs", "10")
	me := fmt.Sprintf("uid:%d", os.Getuid())
	other := fmt.Sprintf("uid:%d", otherUID)

	// A profiling task reports its runs' kernels, measured: 3 runs of
	// kernels × dur.
	report := func(send func(udp.Message), recv func() *udp.RegisterAck, key string, kernels int, dur uint64) {
		send(&udp.Register{Seq: 1, TaskKey: key, PID: 1, Priority: 5, DeviceUUID: [16]byte{9}, DeviceName: "fikit simgpu"})
		ack := recv()
		seq := uint32(0)
		for run := uint32(1); run <= 3; run++ {
			var recs []udp.Record
			for k := 0; k < kernels; k++ {
				seq++
				send(&udp.LaunchNotify{TaskID: ack.TaskID, Seq: seq, KernelID: 11})
				recs = append(recs, udp.Record{KernelID: 11, DurationNS: dur, GapNS: 1000})
			}
			send(&udp.Measurements{TaskID: ack.TaskID, Run: run, Records: recs})
			send(&udp.RunEnd{TaskID: ack.TaskID, Run: run, Kernels: uint32(kernels), RunNS: uint64(kernels) * (dur + 1000),
				Reason: udp.ReasonStreamSync, LastSeq: seq})
		}
	}
	acked := func(c net.Conn) func() *udp.RegisterAck {
		return func() *udp.RegisterAck {
			buf := make([]byte, 2048)
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
				_ = c.SetReadDeadline(deadline)
				n, err := c.Read(buf)
				if err != nil {
					break
				}
				if m, _ := udp.Decode(buf[:n]); m != nil {
					if a, ok := m.(*udp.RegisterAck); ok {
						return a
					}
				}
			}
			t.Fatal("no RegisterAck")
			return nil
		}
	}
	oc, osend := socketAs(t, otherUID, d.addr)
	report(osend, acked(oc), "acct-batch", 4, 500_000) // 3 × 4 × 0.5 ms = 6 ms
	mc, err := net.Dial("udp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	msend := func(m udp.Message) {
		b, err := udp.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	report(msend, acked(mc), "acct-svc", 2, 250_000) // 3 × 2 × 0.25 ms = 1.5 ms

	want := map[string]int64{other: 6_000_000, me: 1_500_000}
	var ts map[string]tenantJSON
	waitFor(5*time.Second, func() bool {
		ts = tenantsOf(t, d)
		return ts[other].UsedNs == want[other] && ts[me].UsedNs == want[me]
	})
	for tenant, used := range want {
		x := ts[tenant]
		if x.UsedNs != used || x.MeasuredNs != used || len(x.TaskKeys) != 1 {
			t.Errorf("tenant %s: %+v; want %d ns used, all measured, one task key", tenant, x, used)
		}
	}
	if k := ts[other].TaskKeys; len(k) == 1 && k[0].TaskKey != "uid65534:acct-batch" {
		t.Errorf("the other user's task key is %q, want uid65534:acct-batch", k[0].TaskKey)
	}
	m := adminMetrics(t, d.dataDir)
	for tenant, used := range want {
		name := fmt.Sprintf("fikit_tenant_gpu_time_used_seconds_total{tenant=%q}", tenant)
		if v, ok := m[name]; !ok || v != float64(used)/1e9 {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, float64(used)/1e9)
		}
	}
	text := runCmd(t, 10*time.Second, nil, requireBins(t, "fikit")[0], "status", "--data-dir", d.dataDir)
	if !strings.Contains(text.Stdout, "GPU time by tenant") || !strings.Contains(text.Stdout, other) {
		t.Errorf("fikit status shows no GPU time by tenant:\n%s", text.Stdout)
	}

	// The accounts outlive the daemon.
	d.stop(t)
	d = startServe(t, dir, "", "--profile-runs", "10")
	defer d.stop(t)
	ts = tenantsOf(t, d)
	for tenant, used := range want {
		if ts[tenant].UsedNs != used {
			t.Errorf("after a restart, tenant %s used %d ns, want %d", tenant, ts[tenant].UsedNs, used)
		}
	}
}
