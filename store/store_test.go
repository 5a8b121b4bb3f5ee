package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/store/storetest"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openBadger(t *testing.T, dir string) *store.Badger {
	t.Helper()
	b, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func TestBadger(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openBadger(t, t.TempDir()) })
}

// serveRemote serves a store on a unix socket and returns a RemoteStore for it.
func serveRemote(t *testing.T, s store.Store) *store.RemoteStore {
	t.Helper()
	return serveRemoteHandler(t, s, store.Handler(s))
}

func serveRemoteHandler(t *testing.T, s store.Store, h http.Handler) *store.RemoteStore {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return store.Remote(sock)
}

func TestRemote(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return serveRemote(t, openBadger(t, t.TempDir()))
	})
}

// TestRemoteServeMux mounts Handler in an http.ServeMux, as the daemon's
// admin socket does; the mux cleans "." and ".." path segments.
func TestRemoteServeMux(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := store.NewMemory()
		mux := http.NewServeMux()
		mux.Handle("/v1/profiles", store.Handler(s))
		mux.Handle("/v1/profiles/", store.Handler(s))
		return serveRemoteHandler(t, s, mux)
	})
}

func TestBadgerPersistsAndLayout(t *testing.T) {
	dir := t.TempDir()
	b := openBadger(t, dir)
	p := storetest.Profile("python serve.py", "NVIDIA H100", 1, 3)
	if err := b.Put(p); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir)
	got, err := b.Get("NVIDIA H100", "python serve.py")
	if err != nil || !storetest.Equal(got, p) {
		t.Fatalf("after reopen: %v", err)
	}
	b.Close()

	// The documented key layout, read with Badger directly.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys []string
	db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, string(it.Item().KeyCopy(nil)))
			v, _ := it.Item().ValueCopy(nil)
			enc, _ := p.MarshalBinary()
			if !bytes.Equal(v, enc) {
				t.Errorf("value is not the profile's MarshalBinary")
			}
		}
		return nil
	})
	if len(keys) != 1 || keys[0] != "v1/profile/NVIDIA H100\x00python serve.py" {
		t.Fatalf("keys %q", keys)
	}
}

func TestBadgerLocked(t *testing.T) {
	dir := t.TempDir()
	b := openBadger(t, dir)
	defer b.Close()
	_, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "Another process") {
		t.Errorf("Badger's error is not wrapped: %v", err)
	}
	// A directory that cannot be opened for another reason is not "locked".
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	if _, err := store.OpenBadger(notDir, nil); err == nil || errors.Is(err, store.ErrLocked) {
		t.Fatalf("open of a file: %v", err)
	}
}

// vmSize reads the process's virtual memory size in KiB.
func vmSize(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Skip("no VmSize")
	return 0
}

func TestBadgerAddressSpace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before := vmSize(t)
	b := openBadger(t, t.TempDir())
	defer b.Close()
	if err := b.Put(storetest.Profile("k", "g", 1, 1)); err != nil {
		t.Fatal(err)
	}
	// Badger's defaults map about 4 GB (two 1 GiB value-log mappings,
	// 64 MiB memtables); the tuned store must stay far below.
	if grew := (vmSize(t) - before) << 10; grew > 512<<20 {
		t.Fatalf("opening the store grew the address space by %d MiB", grew>>20)
	}
}

func TestRemoteUnavailable(t *testing.T) {
	r := store.Remote(filepath.Join(t.TempDir(), "no.sock"))
	if _, err := r.List(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("List without a daemon: %v", err)
	}
	if _, err := r.Get("g", "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get without a daemon: %v", err)
	}
}

func TestHandlerRoutes(t *testing.T) {
	s := store.NewMemory()
	s.Put(storetest.Profile("a/b", "GPU", 1, 1))
	h := store.Handler(s)
	for _, tc := range []struct {
		method, target string
		status         int
	}{
		{"GET", "/v1/profiles", 200},
		{"GET", "/v1/profiles/", 200},
		{"GET", "/v1/profiles/GPU/a%2Fb", 200},
		{"GET", "/v1/profiles/GPU/a/b", 404},
		{"GET", "/v1/profiles/GPU/missing", 404},
		{"GET", "/v1/profiles/GPU", 404},
		{"GET", "/v2/profiles", 404},
		{"POST", "/v1/profiles", 405},
		{"PUT", "/v1/profiles/GPU/a%2Fb", 405},
		{"PUT", "/v1/profiles", 400}, // empty body
		{"DELETE", "/v1/profiles/GPU/a%2Fb", 204},
		{"DELETE", "/v1/profiles/GPU/a%2Fb", 404},
	} {
		req := httptest.NewRequest(tc.method, "http://fikit"+tc.target, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d (%s)", tc.method, tc.target, w.Code, tc.status, w.Body.String())
		}
		if w.Code >= 400 && !strings.Contains(w.Body.String(), `"code"`) {
			t.Errorf("%s %s: error body %q", tc.method, tc.target, w.Body.String())
		}
	}
}

// An empty store lists [] over HTTP, not null, whatever the store.
func TestHandlerListsEmpty(t *testing.T) {
	b := openBadger(t, t.TempDir())
	defer b.Close()
	for _, s := range []store.Store{store.NewMemory(), b} {
		w := httptest.NewRecorder()
		store.Handler(s).ServeHTTP(w, httptest.NewRequest("GET", "http://fikit/v1/profiles", nil))
		if body := strings.TrimSpace(w.Body.String()); w.Code != 200 || body != "[]" {
			t.Errorf("%T: GET /v1/profiles of an empty store: %d %s", s, w.Code, body)
		}
	}
}

func TestBadgerPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write anywhere")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(dir, 0o500)
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	if _, err := store.OpenBadger(dir, nil); !errors.Is(err, os.ErrPermission) || errors.Is(err, store.ErrLocked) {
		t.Fatalf("open of a read-only directory: %v", err)
	}
}

// A directory other users may write to is refused before anything is
// written in it; a directory the store creates is the owner's alone.
func TestBadgerInsecureDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if _, err := store.OpenBadger(dir, nil); !errors.Is(err, store.ErrInsecureDir) {
		t.Fatalf("open of a world-writable directory: %v, want ErrInsecureDir", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the refused open wrote %d files", len(ents))
	}
	// A directory it creates is its owner's alone.
	fresh := filepath.Join(t.TempDir(), "fresh")
	b, err := store.OpenBadger(fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a new store directory: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}
}

// recordLevels is a slog handler that remembers the levels it saw.
type recordLevels struct{ levels *[]slog.Level }

func (h recordLevels) Enabled(context.Context, slog.Level) bool { return true }
func (h recordLevels) Handle(_ context.Context, r slog.Record) error {
	*h.levels = append(*h.levels, r.Level)
	return nil
}
func (h recordLevels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordLevels) WithGroup(string) slog.Handler      { return h }

func TestBadgerLogsWarningsOnly(t *testing.T) {
	var levels []slog.Level
	dir := t.TempDir()
	for i := 0; i < 2; i++ { // create, then reopen (Badger logs replays at INFO)
		b, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: slog.New(recordLevels{&levels})})
		if err != nil {
			t.Fatal(err)
		}
		b.Put(storetest.Profile("k", "g", uint64(i), 2))
		b.Close()
	}
	for _, l := range levels {
		if l < slog.LevelWarn {
			t.Fatalf("Badger logged at %v", l)
		}
	}
}
