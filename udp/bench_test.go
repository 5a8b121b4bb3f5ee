package udp

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

func benchMessages() []struct {
	name string
	msg  Message
} {
	return []struct {
		name string
		msg  Message
	}{
		{"LaunchNotify", LaunchNotify{TaskID: 3, Seq: 70000, KernelID: 0xeabe423fa458ec9a}},
		{"LaunchRequest", LaunchRequest{TaskID: 3, Seq: 70000, KernelID: 0xeabe423fa458ec9a}},
		{"Heartbeat", Heartbeat{TaskID: 3}},
		{"Grant", Grant{TaskID: 3, Seq: 70000, Credit: 4}},
		{"Register", Register{Seq: 1, TaskKey: "python3 serve.py --port 8000", PID: 4242, DeviceUUID: testUUID, DeviceName: "NVIDIA H100 80GB HBM3"}},
		{"KernelInfo", KernelInfo{TaskID: 1, KernelID: 0xeabe423fa458ec9a, Name: "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", Grid: [3]uint32{1024, 1, 1}, Block: [3]uint32{128, 1, 1}}},
		{"Measurements47", Measurements{TaskID: 1, Run: 2, Records: func() []Record {
			r := make([]Record, 47)
			for i := range r {
				r[i] = maxRecord
			}
			return r
		}()}},
	}
}

// BenchmarkDecode measures a receive loop's Decoder per message type; "full"
// forces the msgpack-based path the fast path otherwise skips.
func BenchmarkDecode(b *testing.B) {
	for _, c := range benchMessages() {
		enc, err := Append(nil, c.msg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			var d Decoder
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := d.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		if intOnly[c.msg.Type()] {
			b.Run(c.name+"/full", func(b *testing.B) {
				var d Decoder
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.full(enc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("Invalid", func(b *testing.B) {
		enc := mustHex(b, "9501020102d3ffffffffffffffff")
		var d Decoder
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Decode(enc); err == nil {
				b.Fatal("accepted")
			}
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	for _, c := range benchMessages() {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, MaxDatagram)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Append(buf[:0], c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServe measures the daemon's receive path, Conn.Read and a
// Decoder on one goroutine, with LaunchNotify datagrams over loopback; b.N
// counts datagrams received and decoded.
//
//   - blast: a sender goroutine sends sendmmsg batches as fast as it can
//     while the receiver reads; msgs/s is the rate received end to end, and
//     whichever side is slower (on loopback the sender also pays for the
//     kernel's delivery) sets it.
//   - drain: the socket buffer is filled first and only the draining is
//     timed: the receiver's own capacity on one core.
//
// "single" reads one datagram per system call instead of recvmmsg batches.
func BenchmarkServe(b *testing.B) {
	b.Run("blast", func(b *testing.B) { benchBlast(b, true) })
	b.Run("blast-single", func(b *testing.B) { benchBlast(b, false) })
	b.Run("drain", func(b *testing.B) { benchDrain(b, true) })
	b.Run("drain-single", func(b *testing.B) { benchDrain(b, false) })
}

type benchReceiver struct {
	srv, snd *Conn
	out      []Datagram
	d        Decoder
	buf      []byte
	n, bad   int
	seqs     uint64
	fn       func(p []byte, from netip.AddrPort)
}

func newBenchReceiver(b *testing.B) *benchReceiver {
	r := &benchReceiver{buf: make([]byte, readBufferSize)}
	var err error
	if r.srv, err = Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	if r.snd, err = Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.srv.Close(); r.snd.Close() })
	to := r.srv.LocalAddr()
	r.out = make([]Datagram, batchSize)
	for i := range r.out {
		p, _ := Append(nil, LaunchNotify{TaskID: 3, Seq: uint32(70000 + i), KernelID: 0xeabe423fa458ec9a})
		r.out[i] = Datagram{Payload: p, Addr: to}
	}
	r.fn = func(p []byte, _ netip.AddrPort) {
		m, err := r.d.Decode(p)
		if err != nil {
			r.bad++
			return
		}
		if ln, ok := m.(*LaunchNotify); ok {
			r.seqs += uint64(ln.Seq)
		}
		r.n++
	}
	return r
}

// receive reads once: a batch, or one datagram.
func (r *benchReceiver) receive(b *testing.B, batch bool) {
	if batch {
		if _, err := r.srv.Read(r.fn); err != nil {
			b.Fatal(err)
		}
		return
	}
	k, from, err := r.srv.uc.ReadFromUDPAddrPort(r.buf)
	if err != nil {
		b.Fatal(err)
	}
	r.fn(r.buf[:k], from)
}

func (r *benchReceiver) report(b *testing.B, elapsed time.Duration) {
	if r.bad > 0 || r.seqs == 0 {
		b.Fatalf("%d datagrams failed to decode", r.bad)
	}
	b.ReportMetric(float64(r.n)/elapsed.Seconds(), "msgs/s")
}

func benchBlast(b *testing.B, batch bool) {
	r := newBenchReceiver(b)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = r.snd.WriteBatch(r.out)
		}
	})
	defer wg.Wait()
	defer close(stop)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for r.n < b.N {
		r.receive(b, batch)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	r.report(b, elapsed)
}

// drainFill datagrams fit in the 4 MiB socket buffer Listen asks for.
const drainFill = 1024

func benchDrain(b *testing.B, batch bool) {
	r := newBenchReceiver(b)
	// A socket buffer smaller than asked for would drop datagrams and stall.
	if err := r.srv.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	for r.n < b.N {
		b.StopTimer()
		for range drainFill / batchSize {
			if _, err := r.snd.WriteBatch(r.out); err != nil {
				b.Fatal(err)
			}
		}
		want := r.n + drainFill
		b.StartTimer()
		start := time.Now()
		for r.n < want {
			r.receive(b, batch)
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	r.report(b, elapsed)
}
