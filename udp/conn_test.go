package udp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"
)

const testTimeout = 5 * time.Second

// serveGrants answers every LaunchRequest with a Grant, batching the
// replies of one Read, and reports every decode error.
func serveGrants(t *testing.T, c *Conn, decodeErrs chan<- error) {
	var d Decoder
	var out []Datagram
	var bufs [batchSize][]byte
	for {
		out = out[:0]
		_, err := c.Read(func(p []byte, from netip.AddrPort) {
			m, err := d.Decode(p)
			if err != nil {
				decodeErrs <- err
				return
			}
			if r, ok := m.(*LaunchRequest); ok {
				i := len(out)
				bufs[i], _ = Append(bufs[i][:0], Grant{TaskID: r.TaskID, Seq: r.Seq, Credit: 1})
				out = append(out, Datagram{Payload: bufs[i], Addr: from})
			}
		})
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			t.Error(err)
			return
		}
		if n, err := c.WriteBatch(out); err != nil || n != len(out) {
			t.Errorf("WriteBatch = %d of %d, %v", n, len(out), err)
		}
	}
}

func testRoundTrip(t *testing.T, listen, dial string) {
	srv, err := Listen(listen)
	if err != nil {
		t.Skipf("listen %s: %v", listen, err)
	}
	defer srv.Close()
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	wg.Go(func() { serveGrants(t, srv, errs) })
	defer wg.Wait()
	defer srv.Close()

	cl, err := Dial(netip.AddrPortFrom(netip.MustParseAddr(dial), srv.LocalAddr().Port()).String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// One request and reply.
	m, err := cl.Request(LaunchRequest{TaskID: 9, Seq: 1, KernelID: 42}, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := m.(*Grant); !ok || *g != (Grant{TaskID: 9, Seq: 1, Credit: 1}) {
		t.Fatalf("reply %s", Format(m))
	}
	// A burst, answered in batches, in order.
	const burst = 50
	for i := 2; i < 2+burst; i++ {
		if err := cl.Send(LaunchRequest{TaskID: 9, Seq: uint32(i), KernelID: 42}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 2+burst; i++ {
		m, err := cl.Receive(testTimeout)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if g, ok := m.(*Grant); !ok || g.Seq != uint32(i) {
			t.Fatalf("reply %d: %s", i, Format(m))
		}
	}
	// An oversized datagram arrives as MaxDatagram+1 bytes and is rejected.
	if err := cl.SendRaw(make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("oversized datagram: %v", err)
		}
	case <-time.After(testTimeout):
		t.Error("oversized datagram not seen")
	}
	// Nothing else arrives.
	if _, err := cl.ReceiveRaw(50 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("unexpected datagram or error: %v", err)
	}
}

func TestConnIPv4(t *testing.T)      { testRoundTrip(t, "127.0.0.1:0", "127.0.0.1") }
func TestConnIPv6(t *testing.T)      { testRoundTrip(t, "[::1]:0", "::1") }
func TestConnDualStack(t *testing.T) { testRoundTrip(t, ":0", "127.0.0.1") }

func TestConnSenderAddress(t *testing.T) {
	srv, cl := listenAndDial(t)
	if err := cl.Send(Heartbeat{TaskID: 5}); err != nil {
		t.Fatal(err)
	}
	var from netip.AddrPort
	var got []byte
	if _, err := srv.Read(func(p []byte, f netip.AddrPort) { got, from = append([]byte(nil), p...), f }); err != nil {
		t.Fatal(err)
	}
	if from != cl.LocalAddr() || string(got) != "\x93\x01\x06\x05" {
		t.Errorf("got %x from %v, want heartbeat from %v", got, from, cl.LocalAddr())
	}
	// WriteBatch of nothing, and of an empty payload.
	if n, err := srv.WriteBatch(nil); n != 0 || err != nil {
		t.Errorf("WriteBatch(nil) = %d, %v", n, err)
	}
	if n, err := srv.WriteBatch([]Datagram{{Addr: from}}); n != 1 || err != nil {
		t.Errorf("WriteBatch(empty payload) = %d, %v", n, err)
	}
	if b, err := cl.ReceiveRaw(testTimeout); err != nil || len(b) != 0 {
		t.Errorf("empty datagram: %x, %v", b, err)
	}
	// An IPv6 destination on an IPv4 socket fails cleanly.
	if _, err := srv.WriteBatch([]Datagram{{Payload: []byte{1}, Addr: netip.MustParseAddrPort("[::1]:9")}}); err == nil {
		t.Error("IPv6 destination on an IPv4 socket did not fail")
	}
}

func TestConnCloseStopsServe(t *testing.T) {
	srv, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Serve(func([]byte, netip.AddrPort) {}) }()
	time.Sleep(20 * time.Millisecond)
	srv.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after Close")
	}
}

func TestReadAllocs(t *testing.T) {
	srv, cl := listenAndDial(t)
	msg, _ := Append(nil, LaunchNotify{TaskID: 1, Seq: 1, KernelID: 1})
	var d Decoder
	fn := func(p []byte, from netip.AddrPort) { _, _ = d.Decode(p) }
	allocs := testing.AllocsPerRun(50, func() {
		if err := cl.SendRaw(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Read(fn); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("send+Read+Decode: %.1f allocations", allocs)
	// The client's send may allocate in the runtime; the read path does not.
	if allocs > 1 {
		t.Errorf("send+Read+Decode allocates %.1f times", allocs)
	}
}

// The kernel's count of datagrams dropped for a full receive buffer is read
// back: flooding a socket nobody reads drops datagrams, and SocketStats
// says how many.
func TestSocketStatsCountsDrops(t *testing.T) {
	c, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.SocketStats()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops != 0 || st.ReadBuffer <= 0 {
		t.Fatalf("fresh socket: %+v", st)
	}
	s, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(c.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 1400)
	sent := 4*st.ReadBuffer/len(payload) + 1000
	for i := 0; i < sent; i++ {
		s.Write(payload) // loopback: a full buffer drops, the write succeeds
	}
	st2, err := c.SocketStats()
	if err != nil {
		t.Fatal(err)
	}
	if st2.Drops == 0 || st2.Drops >= uint64(sent) {
		t.Fatalf("%d datagrams into a %d-byte buffer nobody reads: %d drops", sent, st.ReadBuffer, st2.Drops)
	}
	t.Logf("%d datagrams into a %d KiB buffer: %d dropped", sent, st.ReadBuffer>>10, st2.Drops)
}

// ReadQueued reads what is queued even past the read deadline (where Read
// reads nothing), a batch at a time, and says when the queue is empty.
func TestReadQueuedIgnoresDeadline(t *testing.T) {
	srv, cl := listenAndDial(t)
	msg, _ := Append(nil, Heartbeat{TaskID: 1})
	const sent = batchSize + 3
	for range sent {
		if err := cl.SendRaw(msg); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // loopback delivers at once; be generous
	_ = srv.SetReadDeadline(time.Unix(1, 0))
	if n, err := srv.Read(func([]byte, netip.AddrPort) {}); !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("Read past its deadline = %d, %v; want 0 and a deadline error", n, err)
	}
	got := 0
	count := func([]byte, netip.AddrPort) { got++ }
	n, drained, err := srv.ReadQueued(count)
	if err != nil || n != batchSize || drained {
		t.Fatalf("first ReadQueued = %d, drained %v, %v; want a full batch, not drained", n, drained, err)
	}
	n, drained, err = srv.ReadQueued(count)
	if err != nil || n != sent-batchSize || !drained {
		t.Fatalf("second ReadQueued = %d, drained %v, %v; want the rest, drained", n, drained, err)
	}
	if n, drained, err = srv.ReadQueued(count); err != nil || n != 0 || !drained {
		t.Fatalf("ReadQueued of an empty queue = %d, drained %v, %v", n, drained, err)
	}
	if got != sent || srv.Drained(batchSize) || !srv.Drained(batchSize-1) {
		t.Fatalf("read %d of %d; Drained(full batch) %v", got, sent, srv.Drained(batchSize))
	}
}

// listenAndDial returns a Conn on a loopback port and a Client of it,
// closed when the test ends.
func listenAndDial(t *testing.T) (*Conn, *Client) {
	t.Helper()
	srv, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl, err := Dial(srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return srv, cl
}
