package tests

import (
	"strings"
	"testing"
	"time"
)

// A hooked service that ends normally says Goodbye, and the daemon does not
// log its end as an anomaly. The replayer (a Go program: Go's exit runs no
// atexit handler, where the hook says it) was logged "task exited without
// goodbye" at every normal end.
func TestNormalExitSaysGoodbye(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	d := startServe(t, t.TempDir(), "")
	defer d.stop(t)
	env := simgpuEnv(t, uniqueShm(t))
	const services = 3
	for i := 0; i < services; i++ {
		cmd, args := replaySpec{trace: "h100/resnet50_4_fwd", runs: 3, cpuNs: -1, hooked: true, prio: i,
			key: "goodbye-" + string(rune('a'+i)), sched: d.addr}.command(t)
		if r := runCmd(t, time.Minute, env, cmd, args...); r.ExitCode != 0 {
			t.Fatalf("replay %d: %s", i, r)
		}
	}
	// Either way the daemon forgets the tasks: by their Goodbye, or by
	// watching their processes end.
	if !waitFor(10*time.Second, func() bool { return len(d.status(t).Tasks) == 0 }) {
		t.Fatalf("tasks still registered after their processes ended: %+v", d.status(t).Tasks)
	}
	log := d.Stderr()
	if n := strings.Count(log, `msg="task left"`); n != services {
		t.Errorf("%d tasks left with a Goodbye, want %d", n, services)
	}
	if strings.Contains(log, "without goodbye") {
		t.Errorf("a normal exit logged as one without Goodbye:\n%s", tail(log, 3000))
	}
}
