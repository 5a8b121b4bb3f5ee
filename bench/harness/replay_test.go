package harness

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReplayCommand(t *testing.T) {
	svc := Service{Trace: "h100/x", Runs: 5, CPUNs: -1, Every: 5 * time.Millisecond, Args: []string{"--graph"}}
	name, args := ReplayCommand("/b", svc)
	want := []string{"--trace", "h100/x", "--runs", "5", "--json", "--quiet", "--interval", "5ms", "--graph"}
	if name != "/b/fikit-replay" || !slices.Equal(args, want) {
		t.Errorf("unhooked: %s %q, want /b/fikit-replay %q", name, args, want)
	}
	svc.Hooked, svc.Prio, svc.Scheduler, svc.TaskKey = true, 5, "127.0.0.1:1", "k"
	name, args = ReplayCommand("/b", svc)
	if name != "/b/fikit" || !strings.HasPrefix(strings.Join(args, " "),
		"run --priority 5 --scheduler 127.0.0.1:1 --task-key k -- /b/fikit-replay --trace h100/x") {
		t.Errorf("hooked: %s %q", name, args)
	}
	svc.TaskKey = "" // fikit run's default key, not an empty one
	if _, args = ReplayCommand("/b", svc); slices.Contains(args, "--task-key") {
		t.Errorf("hooked without a key: %q", args)
	}
}

func TestParseRuns(t *testing.T) {
	out := `{"run":0,"start_ns":10,"jct_ns":5,"kernels":3,"wait_ns":2}
noise
{"run":1,"start_ns":20,"jct_ns":7,"kernels":3,"blocked_ns":1}
{"summary":{"runs":2},"pid":42}
`
	runs, err := ParseRuns(out)
	if err != nil || len(runs) != 2 || *runs[0].WaitNs != 2 || *runs[1].BlockedNs != 1 || runs[1].WaitNs != nil {
		t.Fatalf("ParseRuns = %+v, %v", runs, err)
	}
	if got := JCTs(runs); !slices.Equal(got, []int64{5, 7}) {
		t.Errorf("JCTs = %v", got)
	}
	if _, err := ParseRuns(`{"run":x}`); err == nil {
		t.Error("a torn run line parsed")
	}
}
