package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// With AccessGroup the board and the admin socket are that group's, mode
// 0660; without, the board is the daemon's user's alone.
func TestAccessGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another group needs root (or membership of a second group)")
	}
	const gid = 4242
	dir := t.TempDir()
	sock, brd := filepath.Join(dir, "fikit.sock"), filepath.Join(dir, "board")
	startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(),
		AdminSocket: sock, Board: brd, AccessGroup: gid})
	for _, p := range []string{sock, brd} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; g != gid || fi.Mode().Perm() != 0o660 {
			t.Errorf("%s: group %d mode %v, want group %d mode 0660", filepath.Base(p), g, fi.Mode().Perm(), gid)
		}
	}

	dir = t.TempDir()
	brd = filepath.Join(dir, "board")
	startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(), Board: brd})
	if fi, err := os.Stat(brd); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("board without a group: %v %v, want mode 0600", fi.Mode(), err)
	}
}

// Others than the daemon's user and root read through the admin socket
// and change nothing.
func TestAdminChangesAreTheOwners(t *testing.T) {
	const owner = 1000
	h := ownerChanges(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), owner)
	for _, c := range []struct {
		uid          any // the peer's uid (uint32), or nil: not known
		method, path string
		want         int
	}{
		{uint32(owner), http.MethodDelete, "/v1/profiles/m/k", http.StatusOK},
		{uint32(0), http.MethodPut, "/v1/profiles", http.StatusOK},
		{uint32(owner), http.MethodGet, "/v1/record", http.StatusOK},
		{uint32(2000), http.MethodGet, "/v1/status", http.StatusOK},
		{uint32(2000), http.MethodGet, "/metrics", http.StatusOK},
		{uint32(2000), http.MethodGet, "/v1/profiles/m/k", http.StatusOK},
		{uint32(2000), http.MethodDelete, "/v1/profiles/m/k", http.StatusForbidden},
		{uint32(2000), http.MethodPut, "/v1/profiles", http.StatusForbidden},
		{uint32(2000), http.MethodGet, "/v1/record", http.StatusForbidden},
		{nil, http.MethodDelete, "/v1/profiles/m/k", http.StatusForbidden},
		{nil, http.MethodGet, "/v1/status", http.StatusOK},
	} {
		r := httptest.NewRequest(c.method, "http://fikit"+c.path, nil)
		if c.uid != nil {
			r = r.WithContext(context.WithValue(r.Context(), peerKey{}, c.uid))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("uid %v %s %s: %d, want %d", c.uid, c.method, c.path, w.Code, c.want)
		}
	}
}
