package replay

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestParseRunq(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"123 4567 8\n", 4567, true},
		{"0 0 0", 0, true},
		{"123\n", 0, false},
		{"1 x 2", 0, false},
		{"1 -5 2", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRunq([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseRunq(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The replay's own thread has a run-queue clock where the kernel keeps
// schedstat, and it never runs backwards.
func TestRunqClockReads(t *testing.T) {
	c := openRunq()
	if c == nil {
		t.Skip("no /proc/thread-self/schedstat here")
	}
	defer c.close()
	a, ok1 := c.read()
	b, ok2 := c.read()
	if !ok1 || !ok2 || b < a {
		t.Errorf("reads %d (%v) then %d (%v)", a, ok1, b, ok2)
	}
}

// hookDevice is a fakeDevice under a hook that waits: each synchronisation
// adds the next of waits to the hook's total (fikit_own_wait_ns).
type hookDevice struct {
	*fakeDevice
	waits []int64
	total int64
	syncs int
}

func (d *hookDevice) Synchronize() error {
	if d.syncs < len(d.waits) {
		d.total += d.waits[d.syncs]
	}
	d.syncs++
	return d.fakeDevice.Synchronize()
}

func (d *hookDevice) HookWaits() (HookWaits, bool) {
	return HookWaits{Ns: d.total, Lapses: d.total / 1000}, true
}

// A run's hook_wait_ns is what the hook's total grew by during the run; a
// device without the hook reports none.
func TestReplayReportsHookWaitPerRun(t *testing.T) {
	dev := &hookDevice{fakeDevice: &fakeDevice{}, waits: []int64{9, 0, 2000, 5}, total: 100}
	var out, errw bytes.Buffer
	err := Run(context.Background(), []string{"fikit-replay", "--trace", "h100/mobilenet_4_fwd", "--runs", "3", "--warmup", "1",
		"--cpu-ns", "0", "--json", "-q"}, &out, &errw, func(int) (Device, error) { return dev, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := parseJSON(t, out.String())
	want := []int64{0, 2000, 5} // the warmup's 9 is in no measured run
	if len(j.runs) != 3 {
		t.Fatalf("%d runs", len(j.runs))
	}
	for i, r := range j.runs {
		if r.HookWaitNs == nil || *r.HookWaitNs != want[i] {
			t.Errorf("run %d hook wait %v, want %d", i, r.HookWaitNs, want[i])
		}
		if wantL := map[int]int64{1: 2}[i]; r.HookWaitLapses == nil || *r.HookWaitLapses != wantL {
			t.Errorf("run %d hook lapses %v, want %d", i, r.HookWaitLapses, wantL)
		}
	}
	out2, err := runFake(t, &fakeDevice{}, "--trace", "h100/mobilenet_4_fwd", "--runs", "1", "--cpu-ns", "0", "--json", "-q")
	if err != nil || strings.Contains(out2, "hook_wait_ns") {
		t.Errorf("fake device without the hook: %v %s", err, out2)
	}
}
