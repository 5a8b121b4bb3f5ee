package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// micro is the micro-benchmark section: the hook's cost per launch
// (hook-bench), simgpu's own cost (simgpu-bench), the grant round trip
// against a raw UDP echo, and the daemon's message throughput. It runs
// first: the simulator uses the notify latency and grant round trip it
// measures.
func (r *runner) micro(ctx context.Context) error {
	m := &Micro{}
	r.logf(" hook-bench: %d rounds of %d launches per mode", r.p.hookRounds, r.p.hookLaunch)
	if hb, err := r.hookBench(ctx); err != nil {
		m.HookError = err.Error()
		r.logf("  hook-bench: %v", err)
	} else {
		m.Hook = hb
		r.logf("  launch: no hook %.0f ns, holder %.0f ns (+%.0f ns), profiling %.0f ns; notify p50 %.0f µs",
			hb.NoHookNs, hb.HolderNs, hb.HolderAddedNs, hb.ProfilingNs, hb.NotifyP50Ns/1e3)
		if hb.NotifyP50Ns > 0 {
			r.simNotify = time.Duration(hb.NotifyP50Ns)
		}
	}
	if sg, err := r.simgpuBench(ctx); err == nil {
		m.SimGPU = sg
	} else {
		r.logf("  simgpu-bench: %v", err)
	}
	r.logf(" grant round trip vs UDP echo: %d samples each", r.p.rttSamples)
	if g, err := grantRTT(r.d.Addr(), r.p.rttSamples); err != nil {
		m.GrantError = err.Error()
		r.logf("  grant RTT: %v", err)
	} else {
		m.Grant = g
		r.logf("  grant p50 %.1f µs, echo p50 %.1f µs: %.2fx", g.GrantP50/1e3, g.EchoP50/1e3, g.RatioP50)
		r.simGrant = time.Duration(g.GrantP50)
	}
	r.logf(" daemon throughput: %s per message type", r.p.blastDur)
	if bl, err := r.blast(ctx); err != nil {
		m.BlastError = err.Error()
		r.logf("  throughput: %v", err)
	} else {
		m.Throughput = bl
		for _, b := range bl {
			r.logf("  %s ×%d: %.0f msgs/s processed (%.0f launches/s), %.0f sent/s, %.1f%% lost", b.Type, b.PerMessage,
				b.MsgsPerS, b.LaunchesPerS, b.SentPerS, b.LostPct)
		}
	}
	r.add(Scenario{Section: SecMicro, Name: "micro-benchmarks", Micro: m}, nil)
	for _, f := range [][2]string{{"hook-bench", m.HookError}, {"grant round trip", m.GrantError}, {"daemon throughput", m.BlastError}} {
		if f[1] != "" {
			r.res.Meta.Failures = append(r.res.Meta.Failures, "micro "+f[0]+": "+f[1])
		}
	}
	return nil
}

// cEnv is the environment of the C benches: simgpu as libcuda, on a
// private shared segment (the default one may be in use by others).
func (r *runner) cEnv(tag string) ([]string, func()) {
	shm := fmt.Sprintf("fikit-bench-%d-%s", os.Getpid(), tag)
	env := append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(r.o.Bin, "simgpu"), "FIKIT_SIMGPU_SHM=/"+shm)
	return env, func() { os.Remove(filepath.Join("/dev/shm", shm)) }
}

func (r *runner) hookBench(ctx context.Context) (*HookBench, error) {
	args := []string{"--json", "--hook", filepath.Join(r.o.Bin, "libfikit_hook.so"),
		"--rounds", strconv.Itoa(r.p.hookRounds), "--launches", strconv.Itoa(r.p.hookLaunch)}
	if ptx := filepath.Join(r.o.Bin, "..", "hookclient", "test", "data", "kernels.ptx"); fileExists(ptx) {
		args = append(args, "--ptx", ptx)
	}
	out, err := r.runC(ctx, "hook", filepath.Join(r.o.Bin, "hook-bench"), args...)
	if err != nil {
		return nil, err
	}
	var hb HookBench
	if err := json.Unmarshal(out, &hb); err != nil {
		return nil, fmt.Errorf("hook-bench output: %w", err)
	}
	hb.HolderAddedNs = hb.HolderNs - hb.NoHookNs
	hb.GraphAddedNs, hb.BoardGraphAdd = hb.HolderGraphNs-hb.NoHookGraphNs, hb.BoardGraphNs-hb.NoHookGraphNs
	hb.EagerAddedNs, hb.BoardEagerAdd = hb.HolderEagerNs-hb.NoHookEagerNs, hb.BoardEagerNs-hb.NoHookEagerNs
	return &hb, nil
}

func (r *runner) simgpuBench(ctx context.Context) (*SimGPUCost, error) {
	out, err := r.runC(ctx, "simgpu", filepath.Join(r.o.Bin, "simgpu", "simgpu-bench"), "--json")
	if err != nil {
		return nil, err
	}
	var raw struct {
		Launch float64 `json:"launch_ns"`
		Event  float64 `json:"event_record_ns"`
		P50    float64 `json:"wait_p50_ns"`
		P99    float64 `json:"wait_p99_ns"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("simgpu-bench output: %w", err)
	}
	return &SimGPUCost{LaunchNs: raw.Launch, EventRecNs: raw.Event, WaitP50Ns: raw.P50, WaitP99Ns: raw.P99}, nil
}

// runC runs a C bench and returns its last stdout line.
func (r *runner) runC(ctx context.Context, tag, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	env, cleanup := r.cEnv(tag)
	defer cleanup()
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, lastLine(stderr.String()))
	}
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	return lines[len(lines)-1], nil
}

// grantRTT times LaunchRequest→Grant against the daemon at addr for a task
// that is granted at once (the only task: a holder, whose requests the core
// grants immediately), and the same datagram against a trivial UDP echo
// server in this process, in interleaved blocks so that machine noise hits
// both alike.
func grantRTT(addr string, samples int) (*GrantRTT, error) {
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("echo server: %w", err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	dc, err := udp.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	ec, err := udp.Dial(echo.LocalAddr().String())
	if err != nil {
		return nil, err
	}
	defer ec.Close()

	var uuid [16]byte
	copy(uuid[:], "fikit-bench-rtt!")
	reply, err := dc.Request(&udp.Register{Seq: 1, TaskKey: "bench/rtt", PID: uint32(os.Getpid()), Priority: 0,
		DeviceUUID: uuid, DeviceName: "fikit bench rtt"}, time.Second)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	ack, ok := reply.(*udp.RegisterAck)
	if !ok {
		return nil, fmt.Errorf("register: got %s", reply.Type())
	}
	if ack.Role != udp.RoleHolder {
		return nil, fmt.Errorf("register: role %s, want holder (is another task on the device?)", ack.Role)
	}
	defer dc.Send(&udp.Goodbye{TaskID: ack.TaskID})
	// The same request answered in the task's board slot (a futex wake),
	// where the daemon has a board.
	var slot *board.Waiter
	if ack.Board != "" {
		if slot, err = board.OpenWaiter(ack.Board, ack.BoardGen); err != nil {
			return nil, err
		}
		defer slot.Close()
	}
	seq := uint32(0)
	grant := func() (time.Duration, error) {
		seq++
		t0 := time.Now()
		if err := dc.Send(&udp.LaunchRequest{TaskID: ack.TaskID, Seq: seq, KernelID: 0x5eed}); err != nil {
			return 0, err
		}
		for {
			b, err := dc.ReceiveRaw(time.Second)
			if err != nil {
				return 0, fmt.Errorf("waiting for grant %d: %w", seq, err)
			}
			d := time.Since(t0) // decoding is the client's work, not the round trip's
			if m, err := udp.Decode(b); err == nil {
				if g, ok := m.(*udp.Grant); ok && g.Seq == seq {
					return d, nil
				}
			}
		}
	}
	viaSlot := func() (time.Duration, error) {
		seq++
		if !slot.Ask(ack.TaskID, seq) {
			return 0, fmt.Errorf("board slot of task %d: not the task's", ack.TaskID)
		}
		t0 := time.Now()
		if err := dc.Send(&udp.LaunchRequest{TaskID: ack.TaskID, Seq: seq, KernelID: 0x5eed}); err != nil {
			return 0, err
		}
		if _, ok := slot.Await(ack.TaskID, seq, time.Second); !ok {
			return 0, fmt.Errorf("no grant %d in the board slot", seq)
		}
		return time.Since(t0), nil
	}
	payload, err := udp.Append(nil, &udp.LaunchRequest{TaskID: ack.TaskID, Seq: 1, KernelID: 0x5eed})
	if err != nil {
		return nil, err
	}
	echo1 := func() (time.Duration, error) {
		t0 := time.Now()
		if err := ec.SendRaw(payload); err != nil {
			return 0, err
		}
		if _, err := ec.ReceiveRaw(time.Second); err != nil {
			return 0, fmt.Errorf("echo: %w", err)
		}
		return time.Since(t0), nil
	}
	const block = 100
	var gs, es, bs []int64
	type probe struct {
		f   func() (time.Duration, error)
		out *[]int64
	}
	for i := 0; len(gs) < samples; i++ {
		order := []probe{{grant, &gs}, {echo1, &es}}
		if slot != nil {
			order = append(order, probe{viaSlot, &bs})
		}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, pr := range order {
			for j := 0; j < block; j++ {
				d, err := pr.f()
				if err != nil {
					return nil, err
				}
				if i >= 2 { // the first blocks warm up
					*pr.out = append(*pr.out, int64(d))
				}
			}
		}
		_ = dc.Send(&udp.Heartbeat{TaskID: ack.TaskID})
	}
	g, e := Summarize(gs, 0), Summarize(es, 0)
	out := &GrantRTT{Samples: len(gs), GrantP50: g.P50, GrantP99: g.P99, EchoP50: e.P50, EchoP99: e.P99,
		RatioP50: ratio(g.P50, e.P50), Daemon: "in-process fikit daemon (harness), holder task granted at once",
		ReplyType: "Grant"}
	if len(bs) > 0 {
		b := Summarize(bs, 0)
		out.SlotP50, out.SlotP99 = b.P50, b.P99
	}
	return out, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(network string) (int, error) {
	switch network {
	case "udp":
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	default:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
}

var errNoCounter = errors.New("counter not found")

// counter reads one sample of a Prometheus text exposition.
func counter(text, name, label string) (float64, error) {
	prefix := name + "{" + label + "}"
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, prefix)), 64)
		}
	}
	return 0, fmt.Errorf("%s%s: %w", name, label, errNoCounter)
}
