package tests

// Faults: many hooked clients at once on a 2-core host. With 64, the
// scheduler used to be effectively off: 55 of 64 ran un-hooked (no answer to
// Register in time), 156 heartbeat drops, 14,143 UDP receive drops, at most
// 8 tasks registered at once, no profile completed. Every client must
// register, profile and be scheduled, and nothing may be dropped.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientReplays bounds how often a client serves its runs.
const clientReplays = 3

func TestFaultManyClients(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	fikit := requireBins(t, "fikit")[0]
	sc := faultsScale()
	n := sc.clients
	dir := t.TempDir()
	maddr := freeTCPAddr(t)
	// At the default log level: logging every decision (debug) for 64
	// clients would be most of the daemon's work.
	d := startServe(t, dir, "", "--profile-runs", "10", "--metrics-listen", maddr, "--log-level", cmp.Or(os.Getenv("FIKIT_FAULTS_LOG_LEVEL"), "info"))
	env := simgpuEnv(t, uniqueShm(t))
	m0 := metrics(t, maddr)

	// Each client is a small open-loop service (mobilenet requests, 10 a
	// second: all of them together keep the simulated GPU about busy),
	// priorities spread over 0–9, long enough to profile (the runs that
	// overlap another task's are discarded) and then share. Arrivals are
	// Poisson, each client's own: clients started together at a fixed
	// interval stay in phase, so every lower-priority profiling run
	// overlapped a higher-priority run and was discarded, by construction
	// (8 clients: 5–7 profiles of 8 after 360 runs each).
	const runs = 120
	specs := make([]replaySpec, n)
	procs := make([]*proc, n)
	start := time.Now()
	for i := range procs {
		specs[i] = replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: i % 10, key: fmt.Sprintf("client-%02d", i),
			sched: d.addr, hooked: true, runs: runs, poisson: 10, seed: i + 1}
		cmd, args := specs[i].command(t)
		procs[i] = startCmd(t, env, cmd, args...)
	}
	maxRegistered := 0
	registeredNow := func() int {
		k := 0
		for _, ta := range d.status(t).Tasks {
			if strings.HasPrefix(ta.Key, "client-") {
				k++
			}
		}
		maxRegistered = max(maxRegistered, k)
		return k
	}
	waitFor(30*time.Second, func() bool { return registeredNow() == n })
	// Debugging aids: FIKIT_FAULTS_DAEMON_LOG keeps the daemon's log,
	// FIKIT_FAULTS_LOG_LEVEL sets its level.
	// A client whose profile is not complete when its runs are done serves
	// again (a service keeps serving): with the GPU about busy, a
	// low-priority task's profiling runs are mostly discarded (another
	// task's work overlaps them), so its profile takes longer.
	complete := func(key string) bool {
		r := runCmd(t, 30*time.Second, nil, fikit, "profile", "show", key, "--data-dir", dir, "--json")
		var show profileShowJSON
		return r.ExitCode == 0 && json.Unmarshal([]byte(r.Stdout), &show) == nil && show.Phase == "sharing"
	}
	type clientResult struct {
		replays          int
		failed, unhooked bool
	}
	results := make([]clientResult, n)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, res := procs[i], &results[i]
			for {
				r := p.Wait(5 * time.Minute)
				res.replays++
				if r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != runs {
					res.failed = true
					t.Errorf("client %d: %s", i, r)
				}
				res.unhooked = res.unhooked || strings.Contains(r.Stderr, "un-hooked")
				if res.replays == clientReplays || complete(specs[i].key) {
					return
				}
				cmd, args := specs[i].command(t)
				p = startCmd(t, env, cmd, args...)
			}
		}()
	}
	wg.Wait()
	failed, unhooked, maxReplays := 0, 0, 0
	for _, r := range results {
		if r.failed {
			failed++
		}
		if r.unhooked {
			unhooked++
		}
		maxReplays = max(maxReplays, r.replays)
	}
	took := time.Since(start)
	m1 := metrics(t, maddr)

	// Who registered, who completed a profile, who reached sharing.
	log := d.Stderr()
	registered, sharing := 0, 0
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("client-%02d", i)
		if strings.Contains(log, `msg="task registered"`) && strings.Contains(log, "key="+key+" ") {
			registered++
		}
	}
	r := runCmd(t, 30*time.Second, nil, fikit, "profile", "ls", "--data-dir", dir, "--json")
	var list []struct {
		TaskKey string `json:"task_key"`
		Phase   string `json:"phase"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		t.Fatalf("profile ls: %v: %s", err, r)
	}
	for _, p := range list {
		if strings.HasPrefix(p.TaskKey, "client-") && p.Phase == "sharing" {
			sharing++
		}
	}
	if path := os.Getenv("FIKIT_FAULTS_DAEMON_LOG"); path != "" {
		_ = os.WriteFile(path, []byte(log), 0o644)
	}
	// A drop of a live task: its process was still there (a drop as it
	// exits is logged as an exit). A live task that lost its registration
	// registers again from the same pid.
	hbDrops := strings.Count(log, "task dropped: no heartbeat")
	lateExits := strings.Count(log, `seen=late`)
	reregs := reRegistrations(log)
	udpDrops := m1["fikit_udp_receive_drops_total"] - m0["fikit_udp_receive_drops_total"]
	grants := m1["fikit_grants_total"] - m0["fikit_grants_total"]
	d.stop(t)

	if registered != n {
		t.Errorf("%d of %d clients registered", registered, n)
	}
	if sharing != n {
		t.Errorf("%d of %d clients have a complete profile:\n%s", sharing, n, r.Stdout)
	}
	if udpDrops != 0 {
		t.Errorf("the kernel dropped %.0f datagrams to the daemon", udpDrops)
	}
	if hbDrops != 0 {
		t.Errorf("%d tasks dropped for missing heartbeats", hbDrops)
	}
	if reregs != 0 {
		t.Errorf("%d registrations came from a process that had registered before", reregs)
	}
	faultReport(t, "many hooked clients at once", fmt.Sprintf("%d clients", n), verdict(t),
		fmt.Sprintf("registered %d (at most %d at once), complete profiles %d, UDP drops %.0f, heartbeat drops %d, re-registrations %d, exits seen only at dead-after %d, ran un-hooked at some point %d, failed %d, grants %.0f; %d runs each, at most %d times; %v",
			registered, maxRegistered, sharing, udpDrops, hbDrops, reregs, lateExits, unhooked, failed, grants, runs, maxReplays, took.Round(time.Second)))
}

// reRegistrations counts the registrations in a daemon log that came from a
// pid that had registered before.
func reRegistrations(log string) int {
	seen, n := map[string]bool{}, 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `msg="task registered"`) {
			continue
		}
		i := strings.Index(l, " pid=")
		if i < 0 {
			continue
		}
		pid, _, _ := strings.Cut(l[i+5:], " ")
		if seen[pid] {
			n++
		}
		seen[pid] = true
	}
	return n
}
