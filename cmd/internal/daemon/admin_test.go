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
