package daemon

import (
	"bytes"
	"net/netip"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// TestRemoteDatagramsNeedTheKey: with --auth-key-file, a datagram from
// another host is heard only with the key's MAC, and the answers to it
// carry one; one without (or signed with another key, or reflected) is
// dropped without an answer and counted. Loopback hooks still need none,
// and get answers without one.
func TestRemoteDatagramsNeedTheKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(), AuthKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.timer.close(); s.conn.Close() }()
	hook, _ := udp.NewAuthenticator(key)
	stranger, _ := udp.NewAuthenticator(bytes.Repeat([]byte{7}, 32))
	remote := netip.MustParseAddrPort("192.0.2.10:40000")
	local := netip.MustParseAddrPort("127.0.0.1:40001")

	reg := func(seq uint32) []byte {
		b, err := udp.Append(nil, &udp.Register{Seq: seq, TaskKey: "remote svc", PID: 7, Priority: 3, DeviceName: "gpu",
			HookFlags: udp.HookSendsToken})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// deliver hands b to the daemon from src and returns its answers.
	deliver := func(b []byte, src netip.AddrPort) [][]byte {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.handle(b, src)
		s.sendReady()
		var out [][]byte
		for _, d := range s.out {
			if d.Addr == src {
				out = append(out, bytes.Clone(d.Payload))
			}
		}
		s.out, s.outBuf = s.out[:0], s.outBuf[:0]
		return out
	}
	unauth := func() float64 {
		var m dto.Metric
		if err := s.met.unauthenticated.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	for name, b := range map[string][]byte{
		"unsigned":       reg(1),
		"another key's":  stranger.Seal(reg(2), udp.ToDaemon),
		"reflected":      hook.Seal(reg(3), udp.ToHook),
		"a cut MAC":      hook.Seal(reg(4), udp.ToDaemon)[:len(reg(4))+udp.TrailerSize-1],
		"a flipped byte": func() []byte { d := hook.Seal(reg(5), udp.ToDaemon); d[4] ^= 1; return d }(),
	} {
		if out := deliver(b, remote); len(out) != 0 {
			t.Errorf("%s Register from another host was answered: %x", name, out)
		}
	}
	if n := unauth(); n != 5 {
		t.Errorf("unauthenticated datagrams counted %v, want 5", n)
	}
	if n := len(s.Status().Tasks); n != 0 {
		t.Fatalf("%d tasks registered from unsigned datagrams", n)
	}

	// Signed: registered, and the answers are signed for the hook: the
	// ack, and the Error saying the default policy registered it at 5.
	out := deliver(hook.Seal(reg(9), udp.ToDaemon), remote)
	var ack *udp.RegisterAck
	var demoted *udp.Error
	for _, d := range out {
		msg, err := hook.Open(d, udp.ToHook)
		if err != nil {
			t.Fatalf("an answer to a remote hook: %v", err)
		}
		switch m := mustDecode(t, msg).(type) {
		case *udp.RegisterAck:
			ack = m
		case *udp.Error:
			demoted = m
		}
	}
	if ack == nil || ack.Token == 0 || demoted == nil || demoted.Code != udp.CodeInvalidValue {
		t.Fatalf("answers to a signed Register: ack %+v, error %+v", ack, demoted)
	}
	// A signed request with the token is granted (signed); the same request
	// unsigned is dropped.
	req, _ := udp.Append(nil, &udp.LaunchRequest{TaskID: ack.TaskID, Seq: 1, KernelID: 5, Token: ack.Token})
	if out := deliver(req, remote); len(out) != 0 {
		t.Errorf("an unsigned request with the right token was answered")
	}
	granted := false
	for _, d := range deliver(hook.Seal(bytes.Clone(req), udp.ToDaemon), remote) {
		msg, err := hook.Open(d, udp.ToHook)
		if err != nil {
			t.Fatalf("an answer to a signed request: %v", err)
		}
		granted = granted || mustDecode(t, msg).Type() == udp.TypeGrant
	}
	if !granted {
		t.Error("a signed request was not granted")
	}
	if n := unauth(); n != 6 {
		t.Errorf("unauthenticated datagrams counted %v, want 6", n)
	}

	// A loopback hook signs nothing and gets plain answers.
	acked := false
	for _, d := range deliver(reg(10), local) {
		acked = acked || mustDecode(t, d).Type() == udp.TypeRegisterAck
	}
	if !acked {
		t.Error("an unsigned local Register was not acknowledged")
	}
}

func mustDecode(t *testing.T, b []byte) udp.Message {
	t.Helper()
	m, err := udp.Decode(b)
	if err != nil {
		t.Fatalf("%x: %v", b, err)
	}
	return m
}

// A hook that signs its datagrams to a daemon without a key is told why
// they fail, not just "trailing bytes".
func TestSignedDatagramToKeylessDaemon(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.timer.close(); s.conn.Close() }()
	hook, _ := udp.NewAuthenticator([]byte("0123456789abcdef"))
	b, _ := udp.Append(nil, &udp.Heartbeat{TaskID: 1})
	src := netip.MustParseAddrPort("192.0.2.10:40000")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle(hook.Seal(b, udp.ToDaemon), src)
	if len(s.out) != 1 {
		t.Fatalf("%d answers", len(s.out))
	}
	m, err := udp.Decode(s.out[0].Payload)
	e, ok := m.(*udp.Error)
	if err != nil || !ok || !bytes.Contains([]byte(e.Message), []byte("--auth-key-file")) {
		t.Fatalf("answer %#v, %v; want an Error naming --auth-key-file", m, err)
	}
}
