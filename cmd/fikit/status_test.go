package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fikit/fikit/cmd/internal/daemon"
)

// The status table shows each task's weight and GPU time, and the GPU time
// by tenant and task key.
func TestPrintStatusAccounts(t *testing.T) {
	st := &daemon.Status{Listen: "127.0.0.1:7070",
		Tasks: []daemon.TaskStatus{{ID: 3, Key: "svc", Priority: 5, Role: "waiter", Phase: "sharing", Tenant: "uid:1000",
			Weight: 2, Throttled: true, GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000, GrantedNs: 2_000}}},
		Tenants: []daemon.TenantStatus{{Tenant: "uid:1000", GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000},
			TaskKeys: []daemon.TaskKeyStatus{{TaskKey: "svc", GPUTime: daemon.GPUTime{UsedNs: 1_500_000_000}}}}}}
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"WEIGHT", "waiter (throttled)", "1.5s", "2µs", "GPU time by tenant", "uid:1000", "(all 1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
