package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A Register flood from one socket is logged within its rate limit (it
// used to write two lines per datagram), the suppressed lines are counted,
// and the daemon keeps serving: another socket's registration (on the same
// address, as every local hook's) is answered and logged.
func TestRegisterFloodLogIsLimited(t *testing.T) {
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	flood := newFakeHook(t, s)
	const n = 500
	for i := 1; i <= n; i++ {
		flood.send(&udp.Register{Seq: uint32(i), TaskKey: "flood", PID: 1, Priority: 5, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
		if i%50 == 0 {
			time.Sleep(time.Millisecond) // let the socket buffer drain
		}
	}
	if !waitUntil(5*time.Second, func() bool { return countReceived(s, "Register") >= n }) {
		t.Fatalf("the daemon received %v of %d Registers", countReceived(s, "Register"), n)
	}
	lines := strings.Count(logBuf.String(), "\n")
	if lines > 2*logBurst+5 {
		t.Errorf("%d Registers from one source wrote %d log lines", n, lines)
	}
	other := newFakeHook(t, s)
	other.register("other", 5)
	if !waitUntil(2*time.Second, func() bool { return strings.Contains(logBuf.String(), "key=other") }) {
		t.Errorf("another source's registration was not logged:\n%s", logBuf.String())
	}
	time.Sleep(time.Second / logPerSec) // a token back for the flood's source
	flood.send(&udp.Register{Seq: n + 1, TaskKey: "flood", PID: 1, Priority: 5, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	if !waitUntil(2*time.Second, func() bool { return strings.Contains(logBuf.String(), "log lines suppressed") }) {
		t.Errorf("the suppressed lines were not counted:\n%s", logBuf.String())
	}
	t.Logf("%d Registers: %d log lines", n, lines)
}

func countReceived(s *Server, typ string) float64 {
	mfs, _ := s.met.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "fikit_messages_received_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func waitUntil(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}
