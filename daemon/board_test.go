package daemon

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// TestBoard: a daemon with a board names it to hooks on its host, says
// there which priorities are registered, gives every grant its gate, and
// believes the board when a lower holder's request says a better task is
// back before the better task's own reports do.
func TestBoard(t *testing.T) {
	st, cfg := boardTestSetup(t)
	cfg.IdleFloor = int64(10 * time.Second)
	// Long enough that a loaded host does not expire the holder between
	// its launch and the request the window is for (100 ms did).
	cfg.HolderTTL = int64(time.Second)
	cfg.MaxCredit = 0
	path := filepath.Join(t.TempDir(), "board")
	t.Cleanup(func() { // registered first, so it runs after the daemon's stop
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("board left after the daemon stopped: %v", err)
		}
	})
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg, Board: path})

	hp, lp, req := newFakeHook(t, s), newFakeHook(t, s), newFakeHook(t, s)
	ha, la := hp.register("hp", 0), lp.register("lp", 5)
	for _, a := range []*udp.RegisterAck{ha, la} {
		if a.Board != path || a.BoardGen == 0 || a.BoardGPU != 0 {
			t.Fatalf("ack names board %q gen %d section %d, want %q", a.Board, a.BoardGen, a.BoardGPU, path)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil || binary.LittleEndian.Uint64(raw[16:]) != ha.BoardGen {
		t.Fatalf("board file: %v", err)
	}
	if reg := binary.LittleEndian.Uint64(raw[64+96:]); reg != 1<<0|1<<5 {
		t.Fatalf("registered = %#x, want priorities 0 and 5", reg)
	}

	// A window opens after kernel 7: the waiting kernel's grant is given
	// against the holder's launch and expires with the window.
	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 1, KernelID: 99})
	req.send(&udp.LaunchRequest{TaskID: la.TaskID, Seq: 1, KernelID: 5})
	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 2, KernelID: 7})
	g := recvType[*udp.Grant](t, req, 5*time.Second)
	now := uint64(monotonic())
	// A window's grant expires at the window's end; on a loaded host the
	// request may instead be granted once the holder's TTL ran out, as a
	// holder's, without expiry (the scenario files pin the expiries).
	if g.SeenNS == 0 || g.SeenNS > now || (g.ExpiresNS != 0 && g.ExpiresNS <= g.SeenNS) {
		t.Fatalf("grant gate %+v (now %d): want 0 < seen ≤ now, and expires after seen if any", g.Gate, now)
	}

	// The holder idles past its TTL while the low one keeps asking: the
	// low one holds.
	deadline := time.Now().Add(10 * time.Second)
	holder := false
	for seq := uint32(2); !holder && time.Now().Before(deadline); seq++ {
		req.send(&udp.LaunchRequest{TaskID: la.TaskID, Seq: seq, KernelID: 5})
		hp.send(&udp.Heartbeat{TaskID: ha.TaskID})
		if st, ok := lp.recv(20 * time.Millisecond).(*udp.State); ok && st.Role == udp.RoleHolder {
			holder = true
		}
	}
	if !holder {
		t.Fatal("the low one never held")
	}
	// The high one launches: on the board only (its report is late). The
	// low one's hook, seeing it, asks; the daemon reads the board, makes the
	// high one the holder and holds the request.
	for req.recv(20*time.Millisecond) != nil {
	} // answers to the requests above
	for lp.recv(20*time.Millisecond) != nil {
	} // a holder that asks is told its role again: those states
	b := boardOf(t, s)
	b.Note(0, 0, monotonic())
	req.send(&udp.LaunchRequest{TaskID: la.TaskID, Seq: 1000, KernelID: 5})
	if st := recvType[*udp.State](t, lp, 2*time.Second); st.Role != udp.RoleWaiter {
		t.Fatalf("low one told %+v, want waiter", st)
	}
	for m := req.recv(30 * time.Millisecond); m != nil; m = req.recv(30 * time.Millisecond) {
		if g, ok := m.(*udp.Grant); ok && g.Seq == 1000 {
			t.Fatalf("the request was granted though the board showed the high one back: %+v", g)
		}
	}
	if n := s.Status().Stats.BoardElections; n != 1 {
		t.Errorf("board elections %d, want 1", n)
	}

}

// recvType waits for the next message of type T on h, skipping others.
func recvType[T udp.Message](t *testing.T, h *fakeHook, timeout time.Duration) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m, ok := h.recv(time.Until(deadline)).(T); ok {
			return m
		}
	}
	var zero T
	t.Fatalf("no %T in %v", zero, timeout)
	return zero
}

func boardOf(t *testing.T, s *Server) *board.Board {
	t.Helper()
	if s.board == nil {
		t.Fatal("no board")
	}
	return s.board
}

// A hook the policy registered at a worse priority than it claimed is not
// given the board: it would note its launches there at the claimed level,
// and lower priorities would make way for it.
func TestDemotedHookGetsNoBoard(t *testing.T) {
	pol, err := ParsePolicy(strings.NewReader("* 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "board")
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(),
		Board: path, Policy: pol})
	if a := newFakeHook(t, s).register("claims-0", 0); a.Board != "" {
		t.Errorf("a hook demoted from 0 to 5 was given the board %q", a.Board)
	}
	if a := newFakeHook(t, s).register("claims-5", 5); a.Board != path {
		t.Errorf("a hook registered as it claimed was given board %q, want %q", a.Board, path)
	}
}

// A local task's waiting thread is answered in its board slot (a futex
// wake), not by a datagram; a request that does not wait there (another
// thread's, while the slot is taken) is answered by UDP; the slot is freed
// when the task leaves.
func TestBoardSlotAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board")
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(), Board: path})
	h := newFakeHook(t, s)
	a := h.register("svc", 0)
	w, err := board.OpenWaiter(a.Board, a.BoardGen)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Ask(a.TaskID, 1) {
		t.Fatal("the task does not own its slot")
	}
	h.send(&udp.LaunchRequest{TaskID: a.TaskID, Seq: 1, KernelID: 5, Token: a.Token})
	if _, ok := w.Await(a.TaskID, 1, 2*time.Second); !ok {
		t.Fatal("no grant in the slot")
	}
	// Another request while the slot is taken goes by UDP.
	if !w.Ask(a.TaskID, 2) {
		t.Fatal("ask 2")
	}
	h.send(&udp.LaunchRequest{TaskID: a.TaskID, Seq: 3, KernelID: 5, Token: a.Token})
	if g := recvType[*udp.Grant](t, h, 2*time.Second); g.Seq != 3 {
		t.Fatalf("UDP grant %+v, want seq 3", g)
	}
	if m := h.recv(50 * time.Millisecond); m != nil {
		t.Fatalf("a datagram for the slot's request: %#v", m)
	}
	var met dto.Metric
	if err := s.met.boardAnswers.Write(&met); err != nil || met.GetCounter().GetValue() != 1 {
		t.Errorf("fikit_board_answers_total = %v (%v), want 1", met.GetCounter().GetValue(), err)
	}
	// Goodbye frees the slot: a thread waiting in it is woken, ungranted.
	done := make(chan bool)
	go func() { _, ok := w.Await(a.TaskID, 2, 5*time.Second); done <- ok }()
	h.send(&udp.Goodbye{TaskID: a.TaskID, Token: a.Token})
	select {
	case ok := <-done:
		if ok {
			t.Error("granted in a freed slot")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the goodbye did not free the slot")
	}
}

// TestBoardEarlyStop: a holder's launch that the board shows before its
// report comes ends the window a waiter was filling. The waiter's hook, seeing
// the launch, asks; that request waits instead of being granted against the
// very launch it saw.
func TestBoardEarlyStop(t *testing.T) {
	st, cfg := boardTestSetup(t)
	// Nothing but the board may end the window or make the holder idle
	// while the test looks: kernel 7's gap is 5 s here, as the window of
	// the default 20 ms could end before a loaded host (make test's
	// parallel packages) delivered the first request, which then waited
	// for the holder's next run.
	if err := st.Put(sharingProfileGap(t, "hp", uint64(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	cfg.IdleFloor, cfg.RunIdle, cfg.HolderTTL = int64(10*time.Second), int64(10*time.Second), int64(10*time.Second)
	cfg.MaxCredit = 0
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg, Board: filepath.Join(t.TempDir(), "board")})
	hp, lp, req := newFakeHook(t, s), newFakeHook(t, s), newFakeHook(t, s)
	ha, la := hp.register("hp", 0), lp.register("lp", 5)

	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 1, KernelID: 99})
	hp.send(&udp.LaunchNotify{TaskID: ha.TaskID, Seq: 2, KernelID: 7})
	req.send(&udp.LaunchRequest{TaskID: la.TaskID, Seq: 1, KernelID: 5})
	if g := recvType[*udp.Grant](t, req, 5*time.Second); g.Seq != 1 || g.ExpiresNS == 0 {
		t.Fatalf("grant %+v, want seq 1 into the window (with its end)", g)
	}

	boardOf(t, s).Note(0, 0, monotonic()) // the holder is back; its report is late
	req.send(&udp.LaunchRequest{TaskID: la.TaskID, Seq: 2, KernelID: 5})
	for m := req.recv(200 * time.Millisecond); m != nil; m = req.recv(50 * time.Millisecond) {
		if g, ok := m.(*udp.Grant); ok {
			t.Fatalf("granted %+v though the board showed the holder back", g)
		}
	}
	if n := s.Status().Stats.BoardStops; n != 1 {
		t.Errorf("board early stops %d, want 1", n)
	}
}

// boardTestSetup is a store with sharing profiles for the keys "hp" and
// "lp", and a config under which no task is dropped while a test runs.
func boardTestSetup(t *testing.T) (store.Store, scheduler.Config) {
	st := store.NewMemory()
	for _, k := range []string{"hp", "lp"} {
		if err := st.Put(sharingProfile(t, k)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := scheduler.DefaultConfig()
	cfg.DeadAfter, cfg.HeartbeatInterval = int64(10*time.Second), int64(time.Second)
	return st, cfg
}
