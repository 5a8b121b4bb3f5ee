package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// A client of the admin socket that keeps its connection open and idle (an
// HTTP keep-alive nobody reuses) does not hold the daemon's descriptor and
// goroutine for ever: the daemon closes idle connections. Before, the soak
// (tests/soak_test.go) saw one descriptor and one goroutine more per
// metrics scrape, for the daemon's lifetime.
func TestAdminClosesIdleConnections(t *testing.T) {
	defer func(d time.Duration) { adminIdleTimeout = d }(adminIdleTimeout)
	adminIdleTimeout = 200 * time.Millisecond
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	startServer(t, store.NewMemory(), scheduler.DefaultConfig(), sock)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: fikit\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = br.ReadByte()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection after %v: %v, want the daemon to close it (EOF)", time.Since(start).Round(time.Millisecond), err)
	}
}

// gauge reads a gauge of the daemon's registry (0 if absent).
func gauge(s *Server, name string) float64 {
	mfs, _ := s.met.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	return -1
}

// The metrics of what the daemon holds per task (what `make soak` watches)
// count a registered task and drop to zero when it says goodbye.
func TestPerTaskMetrics(t *testing.T) {
	st, cfg := boardTestSetup(t)
	s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: st, Scheduler: cfg,
		Board: filepath.Join(t.TempDir(), "board")})
	h := newFakeHook(t, s)
	a := h.register("svc", 5)
	names := []string{"fikit_board_slots_in_use", "fikit_task_records", "fikit_tasks"}
	for _, n := range names {
		if v := gauge(s, n); v != 1 {
			t.Errorf("%s = %v with one task registered, want 1", n, v)
		}
	}
	h.send(&udp.Goodbye{TaskID: a.TaskID})
	if !waitUntil(2*time.Second, func() bool {
		for _, n := range names {
			if gauge(s, n) != 0 {
				return false
			}
		}
		return true
	}) {
		for _, n := range names {
			t.Errorf("%s = %v after the goodbye, want 0", n, gauge(s, n))
		}
	}
	if v := gauge(s, "fikit_exit_watches"); v < 0 {
		t.Errorf("fikit_exit_watches missing")
	}
}
