package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// recordServer is a daemon that is not serving: the test feeds datagrams
// through its receive path itself, as FuzzHandle does.
func recordServer(t *testing.T, st store.Store, rec *syncBuffer, log *slog.Logger) *Server {
	t.Helper()
	cfg := scheduler.DefaultConfig()
	cfg.IdleFloor = int64(10 * time.Second) // no idle filling: windows only
	// A loaded test machine may pause the test for longer than a heartbeat
	// interval: no task is dropped or loses its role meanwhile.
	cfg.DeadAfter = int64(60 * time.Second)
	cfg.HolderTTL = int64(60 * time.Second)
	// Datagrams are fed from made-up sources, whose users the daemon cannot
	// see: no priority policy.
	s, err := New(Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg, Record: rec, Logger: log, Policy: &PriorityPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.timer.close(); s.conn.Close() })
	return s
}

// feed handles datagrams as one receive batch and flushes the decisions.
func (s *Server) feed(t *testing.T, src netip.AddrPort, ms ...udp.Message) []udp.Message {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		b, err := udp.Append(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		s.handle(b, src)
	}
	s.sendReady()
	var out []udp.Message
	for _, d := range s.out {
		m, err := udp.Decode(d.Payload)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	s.out, s.outBuf = s.out[:0], s.outBuf[:0]
	return out
}

// tickAndSend steps a Tick and sends what the core decided.
func (s *Server) tickAndSend() {
	s.mu.Lock()
	s.step(event{core: scheduler.Tick{Now: s.now()}})
	s.sendReady()
	s.out, s.outBuf = s.out[:0], s.outBuf[:0]
	s.mu.Unlock()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// A holder's gap is filled: the record shows both registrations, the
// window, the grant into it with the kernel and the window's end as its
// deadline, the early stop, the prediction error and the holder's run.
func TestRecordDecisions(t *testing.T) {
	st := store.NewMemory()
	if err := st.Put(gapProfile(t, "hp", 2_000_000_000)); err != nil {
		t.Fatal(err)
	}
	var rec syncBuffer
	s := recordServer(t, st, &rec, nil)
	hpSrc, lpSrc := netip.MustParseAddrPort("127.0.0.1:40001"), netip.MustParseAddrPort("127.0.0.1:40002")
	var hpID, lpID uint32
	for _, m := range s.feed(t, hpSrc, &udp.Register{Seq: 1, TaskKey: "hp", PID: 100, Priority: 0, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"}) {
		if a, ok := m.(*udp.RegisterAck); ok {
			hpID = a.TaskID
		}
	}
	for _, m := range s.feed(t, lpSrc, &udp.Register{Seq: 1, TaskKey: "lp", PID: 105, Priority: 5, DeviceUUID: [16]byte{1}, DeviceName: "test-gpu"}) {
		if a, ok := m.(*udp.RegisterAck); ok {
			lpID = a.TaskID
		}
	}
	if hpID == 0 || lpID == 0 {
		t.Fatal("registrations not acknowledged")
	}
	// Kernel 7 leaves a 2 s gap: the waiting kernel 5 is granted into it
	// once the holder's kernel has (nearly) drained.
	s.feed(t, hpSrc, &udp.LaunchNotify{TaskID: hpID, Seq: 1, KernelID: 99})
	s.feed(t, lpSrc, &udp.LaunchRequest{TaskID: lpID, Seq: 1, KernelID: 5})
	s.feed(t, hpSrc, &udp.LaunchNotify{TaskID: hpID, Seq: 2, KernelID: 7})
	time.Sleep(200 * time.Microsecond)
	s.tick()
	// The holder is back long before its predicted return: an early stop.
	s.feed(t, hpSrc, &udp.LaunchNotify{TaskID: hpID, Seq: 3, KernelID: 99},
		&udp.RunEnd{TaskID: hpID, Run: 1, Kernels: 3, RunNS: 400_000, Reason: udp.ReasonStreamSync, LastSeq: 3})
	s.feed(t, hpSrc, &udp.Goodbye{TaskID: hpID})
	if err := s.Record(nil); err != nil {
		t.Fatal(err)
	}
	recs, err := decisions.Parse(strings.NewReader(rec.buf.String()), "record")
	if err != nil {
		t.Fatalf("%v\n%s", err, rec.buf.String())
	}
	find := func(kind string, ok func(decisions.Record) bool) decisions.Record {
		t.Helper()
		for _, r := range recs {
			if r.Kind == kind && (ok == nil || ok(r)) {
				return r
			}
		}
		t.Fatalf("no %s record in\n%s", kind, rec.buf.String())
		return decisions.Record{}
	}
	hp := find(decisions.KindRegister, func(r decisions.Record) bool { return r.Key == "hp" })
	if hp.Task != hpID || hp.PID != 100 || hp.Priority != 0 || hp.Role != "holder" || hp.Phase != "sharing" {
		t.Errorf("hp registration = %+v", hp)
	}
	lp := find(decisions.KindRegister, func(r decisions.Record) bool { return r.Key == "lp" })
	if lp.Task != lpID || lp.PID != 105 || lp.Priority != 5 || lp.Role != "waiter" {
		t.Errorf("lp registration = %+v", lp)
	}
	w := find(decisions.KindWindow, nil)
	if w.End-w.Start < 1_000_000_000 || w.GPU == "" {
		t.Errorf("window = %+v, want the 2 s gap", w)
	}
	g := find(decisions.KindGrant, func(r decisions.Record) bool { return r.Task == lpID })
	if g.Seq != 1 || g.Kernel != 5 || g.Reason != "window" || g.Deadline != w.End {
		t.Errorf("grant = %+v, window %+v", g, w)
	}
	we := find(decisions.KindWindowEnd, nil)
	if we.Reason != "early_stop" || we.Start != w.Start || we.End != w.End || we.T >= w.End {
		t.Errorf("window end = %+v, window %+v", we, w)
	}
	if p := find(decisions.KindPrediction, func(r decisions.Record) bool { return r.Task == hpID }); p.Samples == 0 || p.AbsErrNs < 0 {
		t.Errorf("prediction = %+v", p)
	}
	run := find(decisions.KindRun, nil)
	if run.Task != hpID || run.Kernels != 3 || run.RunNs != 400_000 || run.Start == 0 || run.End != run.Start+400_000 {
		t.Errorf("run = %+v", run)
	}
	find(decisions.KindLeave, func(r decisions.Record) bool { return r.Task == hpID })
}

// gapProfile is sharingProfile with kernel 7's gap gapNs long: long enough
// that the test's own pauses on a loaded machine never outlast it.
func gapProfile(t *testing.T, key string, gapNs uint64) *profiler.Profile {
	b, err := profiler.NewBuilder(key, "test-gpu", 10)
	if err != nil {
		t.Fatal(err)
	}
	for run := uint32(1); run <= 10; run++ {
		b.AddRecords(run, []profiler.Record{
			{KernelID: 99, DurationNs: 20_000, GapNs: 5_000},
			{KernelID: 7, DurationNs: 50_000, GapNs: gapNs},
			{KernelID: 99, DurationNs: 20_000, Flags: profiler.FlagGapSpansRunEnd},
		})
		b.EndRun(run, 3, 2*gapNs, true)
	}
	return b.Profile()
}

type failWriter struct {
	mu sync.Mutex
	n  int
}

func (f *failWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	return 0, errors.New("no space left on device")
}

// A record that cannot be written is logged once; the daemon goes on
// scheduling.
func TestRecordWriteErrorKeepsServing(t *testing.T) {
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	fw := &failWriter{}
	cfg := scheduler.DefaultConfig()
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: cfg, Record: fw, Logger: log, Policy: &PriorityPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.timer.close(); s.conn.Close() }()
	src := netip.MustParseAddrPort("127.0.0.1:40003")
	for i := 0; i < 3000; i++ {
		acked := false
		for _, m := range s.feed(t, src, &udp.Register{Seq: 1, TaskKey: strings.Repeat("k", 150), PID: uint32(1000 + i),
			Priority: 3, DeviceUUID: [16]byte{2}, DeviceName: "g"}) {
			_, ok := m.(*udp.RegisterAck)
			acked = acked || ok
		}
		if !acked {
			t.Fatalf("registration %d not acknowledged", i)
		}
		if i%500 == 0 {
			time.Sleep(5 * time.Millisecond) // let the writer try
		}
	}
	if err := s.Record(nil); err != nil {
		t.Fatal(err)
	}
	fw.mu.Lock()
	writes := fw.n
	fw.mu.Unlock()
	if writes != 1 {
		t.Errorf("%d writes to a failing writer, want 1 (recording stops)", writes)
	}
	if n := strings.Count(logBuf.buf.String(), "recording decisions stopped"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logBuf.buf.String())
	}
}

// The admin socket streams the record for the seconds asked; while it does,
// a second recording is refused.
func TestRecordFromAdminSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	s := startServer(t, store.NewMemory(), scheduler.DefaultConfig(), sock)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client.Get("http://fikit/v1/record?seconds=1")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for {
		s.mu.Lock()
		busy := s.rec != nil
		s.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recording did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := client.Get("http://fikit/v1/record?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("second recording: status %d, want 409", resp.StatusCode)
	}
	newFakeHook(t, s).register("svc", 2)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	recs, err := decisions.Parse(strings.NewReader(r.body), "admin")
	if err != nil {
		t.Fatalf("%v\n%s", err, r.body)
	}
	found := false
	for _, d := range recs {
		found = found || (d.Kind == decisions.KindRegister && d.Key == "svc" && d.Priority == 2)
	}
	if !found {
		t.Errorf("no registration in the streamed record:\n%s", r.body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec != nil {
		t.Error("still recording after the stream ended")
	}
}
