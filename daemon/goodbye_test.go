package daemon

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A hook says Goodbye in its exit handler, then its process ends: when the
// daemon learns of the exit before it has read the Goodbye (it was busy
// with other datagrams), it reads what is queued first and takes the task's
// end as the normal one it is, not as an exit without Goodbye.
func TestGoodbyeQueuedBeforeExitIsHeard(t *testing.T) {
	logs := &syncBuffer{}
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHook(t, s)
	child := childOwning(t, h.conn)
	// The loop stops before it reaps exits, once armed: the Goodbye is
	// sent and the process ends meanwhile, as if both came while the
	// daemon was handling a batch.
	var armed atomic.Bool
	var taskID uint32
	staged := make(chan bool, 1)
	s.beforeReap = func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		b, _ := udp.Append(nil, &udp.Goodbye{TaskID: taskID})
		_, _ = h.conn.Write(b)
		_ = child.Process.Kill()
		_ = child.Wait()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if s.exits.pending() {
				staged <- true
				return
			}
		}
		staged <- false
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	h.send(&udp.Register{Seq: 1, TaskKey: "svc", PID: uint32(child.Process.Pid), Priority: 0,
		DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"})
	ack, _ := h.recv(2 * time.Second).(*udp.RegisterAck)
	if ack == nil {
		t.Fatal("no RegisterAck")
	}
	taskID = ack.TaskID
	if !waitUntil(5*time.Second, func() bool { return s.exits.size() == 1 }) {
		t.Fatal("the task's process is not watched")
	}
	armed.Store(true)
	h.send(&udp.Heartbeat{TaskID: taskID}) // wakes the loop
	select {
	case ok := <-staged:
		if !ok {
			t.Fatal("the exit was not seen")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not come to reap exits")
	}
	if !waitUntil(5*time.Second, func() bool { return len(s.Status().Tasks) == 0 }) {
		t.Fatal("the task is still registered")
	}
	out := logs.String()
	if strings.Contains(out, "without goodbye") || !strings.Contains(out, `msg="task left"`) {
		t.Errorf("a Goodbye queued before the exit was not heard first:\n%s", out)
	}
}
