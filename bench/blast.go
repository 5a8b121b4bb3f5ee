package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fikit/fikit/bench/harness"
	"github.com/fikit/fikit/udp"
)

// blast measures how many hook messages a daemon processes per second: a
// separate `fikit serve` limited to one core (taskset, GOMAXPROCS=1) gets
// LaunchNotify and LaunchBatch datagrams from one registered holder as
// fast as one sender thread, pinned to another core, can send them
// (sendmmsg); what the daemon processed is its own Prometheus counter
// fikit_messages_received_total, read before and after.
func (r *runner) blast(ctx context.Context) ([]Blast, error) {
	up, err := freePort("udp")
	if err != nil {
		return nil, err
	}
	tp, err := freePort("tcp")
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", up)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", tp)
	args := []string{"serve", "--ephemeral", "--listen", addr, "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", tp), "--log-level", "error"}
	limit := "GOMAXPROCS=1"
	name := filepath.Join(r.o.Bin, "fikit")
	if ts, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 {
		args = append([]string{"-c", "0", name}, args...)
		name, limit = ts, "CPU 0 (taskset), GOMAXPROCS=1"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	scrape := func() (string, error) {
		resp, err := http.Get(metrics)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := scrape(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("daemon metrics at %s did not answer", metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cl, err := udp.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	reply, err := cl.Request(&udp.Register{Seq: 1, TaskKey: "bench/blast", PID: uint32(os.Getpid()), DeviceName: "fikit bench blast"}, time.Second)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	ack, ok := reply.(*udp.RegisterAck)
	if !ok {
		return nil, fmt.Errorf("register: got %s", reply.Type())
	}
	conn, err := udp.Listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	dst, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}

	// The sender runs on a thread of its own, on the other core.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if unix.SchedGetaffinity(0, &old) == nil && runtime.NumCPU() >= 2 {
		var set unix.CPUSet
		set.Set(1)
		if unix.SchedSetaffinity(0, &set) == nil {
			defer unix.SchedSetaffinity(0, &old)
		}
	}

	seq := uint32(1)
	var out []Blast
	for _, per := range []int{1, 8} {
		typ := "LaunchNotify"
		if per > 1 {
			typ = "LaunchBatch"
		}
		read := func() (float64, time.Time, error) {
			t0 := time.Now()
			text, err := scrape()
			if err != nil {
				return 0, t0, err
			}
			t1 := time.Now()
			v, err := counter(text, "fikit_messages_received_total", `type="`+typ+`"`)
			if err != nil {
				v, err = 0, nil // not received yet: no sample of that label
			}
			return v, t0.Add(t1.Sub(t0) / 2), err
		}
		_ = cl.Send(&udp.Heartbeat{TaskID: ack.TaskID})
		c0, t0, err := read()
		if err != nil {
			return nil, err
		}
		sent := 0
		buf := make([]byte, 0, 64*udp.MaxDatagram)
		dgs := make([]udp.Datagram, 0, 64)
		end := time.Now().Add(r.p.blastDur)
		for time.Now().Before(end) {
			buf, dgs = buf[:0], dgs[:0]
			base := uint64(harness.MonotonicNs())
			for i := 0; i < 64; i++ {
				start := len(buf)
				var m udp.Message
				if per == 1 {
					m = &udp.LaunchNotify{TaskID: ack.TaskID, Seq: seq, KernelID: uint64(seq%16 + 1)}
				} else {
					ls := make([]udp.Launch, per)
					for j := range ls {
						ls[j] = udp.Launch{KernelID: uint64((seq+uint32(j))%16 + 1), OffsetNS: uint32(j * 1000)}
					}
					m = &udp.LaunchBatch{TaskID: ack.TaskID, Seq: seq, BaseNS: base, Launches: ls}
				}
				seq += uint32(per)
				if buf, err = udp.Append(buf, m); err != nil {
					return nil, err
				}
				dgs = append(dgs, udp.Datagram{Payload: buf[start:len(buf):len(buf)], Addr: dst})
			}
			n, err := conn.WriteBatch(dgs)
			sent += n
			if err != nil && n == 0 {
				time.Sleep(50 * time.Microsecond) // the send buffer is full
			}
		}
		c1, t1, err := read()
		if err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond) // the backlog drains
		c2, _, err := read()
		if err != nil {
			return nil, err
		}
		el := t1.Sub(t0).Seconds()
		b := Blast{Type: typ, PerMessage: per, DurationS: el, SentPerS: float64(sent) / r.p.blastDur.Seconds(),
			MsgsPerS: (c1 - c0) / el, Limit: limit}
		b.LaunchesPerS = b.MsgsPerS * float64(per)
		if sent > 0 {
			b.LostPct = 100 * max(0, 1-(c2-c0)/float64(sent))
		}
		out = append(out, b)
	}
	_ = cl.Send(&udp.Goodbye{TaskID: ack.TaskID})
	return out, nil
}
