package tests

// Forged messages from a local process that is not the task's: a Goodbye
// under the high-priority service's task ID removed it at once, and
// LaunchRequests under the low-priority service's ID were granted to the
// forger (the security issue's findings). The forger here is the test
// process itself; the services are hooked replays.

import (
	"encoding/hex"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fikit/fikit/internal/stats"
	"github.com/fikit/fikit/udp"
)

func TestForgedMessagesDoNoHarm(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	maddr := freeTCPAddr(t)
	d := startServe(t, t.TempDir(), "", "--metrics-listen", maddr)
	env := simgpuEnv(t, uniqueShm(t))
	hp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: "sec-hp", sched: d.addr, hooked: true,
		runs: 400, interval: 10 * time.Millisecond}
	lp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 5, key: "sec-lp", sched: d.addr, hooked: true,
		runs: 1000000}
	procs := startReplays(t, env, hp, lp)
	defer procs[1].KillGroup()
	// The daemon proves in the background that each registering process
	// owns the socket it registered from.
	ids := map[string]uint32{}
	if !waitFor(20*time.Second, func() bool {
		clear(ids)
		for _, ta := range d.status(t).Tasks {
			if ta.Verified {
				ids[ta.Key] = ta.ID
			}
		}
		return ids[hp.key] != 0 && ids[lp.key] != 0
	}) {
		t.Fatalf("the services did not register, or their processes were not verified: %v", ids)
	}
	grants0 := metrics(t, maddr)["fikit_grants_total"]

	c, send := rawSender(t, d.addr)
	const requests = 20
	send(&udp.Goodbye{TaskID: ids[hp.key]})
	for i := range requests {
		send(&udp.LaunchRequest{TaskID: ids[lp.key], Seq: 1<<30 + uint32(i), KernelID: 1})
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(make([]byte, 2048)); err == nil {
		t.Errorf("the forger got a %d-byte answer", n)
	}
	after := map[string]uint32{}
	for _, ta := range d.status(t).Tasks {
		after[ta.Key] = ta.ID
	}
	m := metrics(t, maddr)
	forged := m["fikit_forged_messages_total"]
	t.Logf("task IDs before %v, after %v; forged messages dropped %.0f; grants in the meantime %.0f",
		ids, after, forged, m["fikit_grants_total"]-grants0)
	if after[hp.key] != ids[hp.key] {
		t.Errorf("a forged Goodbye removed the high-priority task (ID %d, now %d)", ids[hp.key], after[hp.key])
	}
	if after[lp.key] != ids[lp.key] {
		t.Errorf("the low-priority task's registration changed (ID %d, now %d)", ids[lp.key], after[lp.key])
	}
	if forged != requests+1 {
		t.Errorf("fikit_forged_messages_total = %.0f, want %d", forged, requests+1)
	}
	// The services' own messages are heard: the high-priority one serves
	// every request, the low-priority one is granted launches.
	r := procs[0].Wait(2 * time.Minute)
	if r.ExitCode != 0 || len(parseRuns(t, r.Stdout)) != hp.runs {
		t.Fatalf("high-priority service: %s", r)
	}
	if g := metrics(t, maddr)["fikit_grants_total"] - grants0; g == 0 {
		t.Error("the low-priority service was granted nothing")
	}
}

// A squatter registers at priority 0 with the GPU's UUID (anyone can read
// it), keeps a heartbeat and one fake launch every 200 ms, and never ends a
// run. Profiling at the best priority it held alone, and the real
// high-priority service, its profile complete, waited as long as the
// squatter lived (the security issue's finding: all of 5 s). Its turn is
// bounded now (--profile-turn, 1 s): after that the service runs.
func TestSquatterDoesNotStopTheService(t *testing.T) {
	requireBins(t, "fikit", "fikit-replay", "libfikit_hook.so", "simgpu/libcuda.so.1")
	const (
		squatFor = 4 * time.Second
		interval = 10 * time.Millisecond
		turn     = time.Second // --profile-turn's default
	)
	d := startServe(t, t.TempDir(), "", "--profile-runs", "10")
	env := simgpuEnv(t, uniqueShm(t))
	hp := replaySpec{trace: "h100/mobilenet_4_fwd", cpuNs: 5000, prio: 0, key: "squat-hp", sched: d.addr, warmup: 2}
	p := hp
	p.runs, p.warmup = 23, 0
	profileFully(t, d, env, p)

	hp.runs, hp.interval, hp.hooked = int(2*squatFor/interval), interval, true
	cmd, args := hp.command(t)
	svc := startCmd(t, env, cmd, args...)
	defer svc.KillGroup()
	var gpu, model string
	if !waitFor(20*time.Second, func() bool {
		for _, ta := range d.status(t).Tasks {
			if ta.Key == hp.key {
				gpu, model = ta.GPU, ta.Model
			}
		}
		return gpu != ""
	}) {
		t.Fatal("the service did not register")
	}
	uuid, err := hex.DecodeString(gpu)
	if err != nil || len(uuid) != 16 {
		t.Fatalf("GPU UUID %q: %v", gpu, err)
	}

	// The squatter.
	c, send := rawSender(t, d.addr)
	reg := &udp.Register{Seq: 1, TaskKey: "squatter", PID: uint32(os.Getpid()), Priority: 0, DeviceName: model}
	copy(reg.DeviceUUID[:], uuid)
	send(reg)
	buf := make([]byte, 2048)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("the squatter got no answer: %v", err)
	}
	m, err := udp.Decode(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	ack, ok := m.(*udp.RegisterAck)
	if !ok || ack.Role != udp.RoleHolder || ack.Phase != udp.PhaseProfiling {
		t.Fatalf("the squatter registered as %#v, want a profiling holder", ack)
	}
	squatStart := monoNow()
	seq, lastLaunch := uint32(1), time.Time{}
	for time.Duration(monoNow()-squatStart) < squatFor {
		send(&udp.Heartbeat{TaskID: ack.TaskID})
		if time.Since(lastLaunch) >= 200*time.Millisecond {
			send(&udp.LaunchNotify{TaskID: ack.TaskID, Seq: seq, KernelID: 9})
			seq, lastLaunch = seq+1, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	squatEnd := monoNow()
	send(&udp.Goodbye{TaskID: ack.TaskID})

	r := svc.Wait(2 * time.Minute)
	if r.ExitCode != 0 {
		t.Fatalf("service: %s", r)
	}
	// The service's runs that started while the squatter lived, past its
	// turn (and a margin for a loaded host).
	var jcts []int64
	for _, run := range parseRuns(t, r.Stdout) {
		if run.StartNs >= squatStart+int64(turn+500*time.Millisecond) && run.StartNs+run.JCTNs <= squatEnd {
			jcts = append(jcts, run.JCTNs)
		}
	}
	due := int((squatFor - turn - 500*time.Millisecond) / interval)
	t.Logf("while the squatter lived, after its turn: %d runs of the %d due, p50 JCT %v", len(jcts), due, time.Duration(stats.Quantile(jcts, 0.5)))
	if len(jcts) < due/2 {
		t.Errorf("the squatter stopped the service: %d runs of the %d due after its turn", len(jcts), due)
	}
}

// rawSender is a UDP socket of the test process to the daemon at addr, and
// a function that sends one message on it.
func rawSender(t *testing.T, addr string) (net.Conn, func(udp.Message)) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, sendOn(t, c)
}

// startReplays starts each replay, in order.
func startReplays(t *testing.T, env []string, specs ...replaySpec) []*proc {
	t.Helper()
	var procs []*proc
	for _, s := range specs {
		cmd, args := s.command(t)
		procs = append(procs, startCmd(t, env, cmd, args...))
	}
	return procs
}

// sendOn is a function that sends one message on c.
func sendOn(t *testing.T, c net.Conn) func(udp.Message) {
	return func(m udp.Message) {
		b, err := udp.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}
