package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/kernelid"
	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/store/storetest"
)

// testProfile builds a profile with two named kernels and one unnamed:
// heavy (1000 ns, once a run), light (100 ns, twice a run, a replayer name),
// and 0x3 (10 ns, once a run, no KernelInfo). scale multiplies durations.
func testProfile(t *testing.T, key, gpu string, scale uint64, withLight bool) *profiler.Profile {
	t.Helper()
	b, err := profiler.NewBuilder(key, gpu, 10)
	if err != nil {
		t.Fatal(err)
	}
	b.AddKernelInfo(profiler.KernelInfo{ID: 1, Name: "_Z5heavyPf", Grid: [3]uint32{1024, 1, 1}, Block: [3]uint32{256, 1, 1}})
	b.AddKernelInfo(profiler.KernelInfo{ID: 2, Name: kernelid.ReplayEntryName("void at::light_kernel"), Grid: [3]uint32{8, 2, 1}, Block: [3]uint32{32, 4, 1}})
	for run := uint32(1); !b.Complete(); run++ {
		recs := []profiler.Record{{KernelID: 1, DurationNs: 1000 * scale, GapNs: 50}}
		if withLight {
			recs = append(recs,
				profiler.Record{KernelID: 2, DurationNs: 100 * scale, GapNs: 20},
				profiler.Record{KernelID: 2, DurationNs: 100 * scale, GapNs: 40})
		}
		recs = append(recs, profiler.Record{KernelID: 3, DurationNs: 10 * scale, Flags: profiler.FlagGapSpansRunEnd})
		b.AddRecords(run, recs)
		b.EndRun(run, uint32(len(recs)), 5000, true)
	}
	return b.Profile()
}

// seed writes profiles into a Badger store in dir.
func seed(t *testing.T, dir string, ps ...*profiler.Profile) {
	t.Helper()
	s, err := store.OpenBadger(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if err := s.Put(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// fikit runs the CLI and returns its standard output.
func fikit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"fikit"}, args...), &out)
	return out.String(), err
}

func mustFikit(t *testing.T, args ...string) string {
	t.Helper()
	out, err := fikit(t, args...)
	if err != nil {
		t.Fatalf("fikit %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestProfileLsShowContract(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, testProfile(t, "python serve.py --port 1", "NVIDIA H100", 1, true))

	var ls []map[string]any
	if err := json.Unmarshal([]byte(mustFikit(t, "profile", "ls", "--json", "--data-dir", dir)), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0]["task_key"] != "python serve.py --port 1" || ls[0]["phase"] != "sharing" ||
		ls[0]["runs"] != 10.0 || ls[0]["kernels"] != 3.0 || ls[0]["gpu"] != "NVIDIA H100" {
		t.Fatalf("ls --json: %v", ls)
	}

	// Flags after the key, as the acceptance checks write them.
	out := mustFikit(t, "profile", "show", "python serve.py --port 1", "--json", "--data-dir", dir)
	var show struct {
		TaskKey string `json:"task_key"`
		Phase   string `json:"phase"`
		Runs    int    `json:"runs"`
		Kernels []struct {
			ID           string   `json:"id"`
			Name         string   `json:"name"`
			Grid         []uint32 `json:"grid"`
			Block        []uint32 `json:"block"`
			Count        int      `json:"count"`
			MeanDuration float64  `json:"mean_duration_ns"`
			P90Duration  float64  `json:"p90_duration_ns"`
			MeanGap      float64  `json:"mean_gap_ns"`
			P90Gap       float64  `json:"p90_gap_ns"`
		} `json:"kernels"`
	}
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatal(err)
	}
	if show.TaskKey != "python serve.py --port 1" || show.Phase != "sharing" || show.Runs != 10 || len(show.Kernels) != 3 {
		t.Fatalf("show --json header: %s", out)
	}
	heavy, light, unnamed := show.Kernels[0], show.Kernels[1], show.Kernels[2] // by total time
	if heavy.ID != "0000000000000001" || heavy.Name != "heavy" || heavy.Count != 10 || heavy.MeanDuration != 1000 ||
		heavy.MeanGap != 50 || len(heavy.Grid) != 3 || heavy.Grid[0] != 1024 || len(heavy.Block) != 3 || heavy.Block[0] != 256 {
		t.Errorf("heavy kernel: %+v", heavy)
	}
	if light.Name != "void at::light_kernel" || light.Count != 20 || light.MeanDuration != 100 || light.MeanGap != 30 ||
		light.Grid[1] != 2 || light.Block[1] != 4 {
		t.Errorf("light kernel: %+v", light)
	}
	if light.P90Duration < 99 || light.P90Duration > 101 || light.P90Gap < 39.6 || light.P90Gap > 40.4 {
		t.Errorf("light p90s: %v %v", light.P90Duration, light.P90Gap)
	}
	if unnamed.ID != "0000000000000003" || unnamed.Name != "(unnamed)" || unnamed.MeanGap != 0 {
		t.Errorf("unnamed kernel: %+v", unnamed)
	}

	table := mustFikit(t, "profile", "show", "--data-dir", dir, "python serve.py --port 1")
	for _, want := range []string{"sharing, 10 of 10 runs", "heavy", "void at::light_kernel", "1024,1,1", "1.00µs", "KERNEL"} {
		if !strings.Contains(table, want) {
			t.Errorf("show table lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(table, "heavy") > strings.Index(table, "light_kernel") {
		t.Errorf("show table not sorted by total time:\n%s", table)
	}
	lsTable := mustFikit(t, "profile", "ls", "--data-dir", dir)
	if !strings.Contains(lsTable, "python serve.py --port 1") || !strings.Contains(lsTable, "NVIDIA H100") {
		t.Errorf("ls table:\n%s", lsTable)
	}
}

func TestProfileUnknownKey(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, testProfile(t, "a", "GPU", 1, true))
	for _, args := range [][]string{
		{"profile", "show", "nope", "--data-dir", dir},
		{"profile", "show", "nope", "--json", "--data-dir", dir},
		{"profile", "export", "nope", "--data-dir", dir},
		{"profile", "rm", "nope", "--data-dir", dir},
		{"profile", "show", "a", "--gpu", "Other", "--data-dir", dir},
	} {
		_, err := fikit(t, args...)
		if err == nil || exitCode(err) == 0 || !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no profile for task key") {
			t.Errorf("%v: %v", args, err)
		}
	}
	// An existing directory without a store is an empty one.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	out := mustFikit(t, "profile", "ls", "--json", "--data-dir", empty)
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("ls of an empty directory: %q", out)
	}
}

// A data directory that does not exist is an error, status non-zero, for
// every command that reads one (it printed an empty table, status 0), and
// reading it creates nothing.
func TestMissingDataDirIsAnError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{
		{"profile", "ls"},
		{"profile", "ls", "--json"},
		{"profile", "show", "nope"},
		{"profile", "export", "nope"},
		{"profile", "rm", "nope"},
		{"profile", "diff", "a", "b"},
		{"status"},
		{"sim", "--profile", "a:runs=1"},
	} {
		out, err := fikit(t, append(args, "--data-dir", missing)...)
		if err == nil || exitCode(err) == 0 || !errors.Is(err, errNoDataDir) || !strings.Contains(err.Error(), missing) {
			t.Errorf("%v: want an error naming %s, got %v (output %q)", args, missing, err, out)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading created the data directory: %v", err)
	}
}

func TestProfileUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"profile", "show", "--data-dir", dir},
		{"profile", "show", "a", "b", "--data-dir", dir},
		{"profile", "show", "a", "--bogus", "--data-dir", dir},
		{"profile", "show", "a", "--gpu"},
		{"profile", "diff", "a", "--data-dir", dir},
	} {
		if _, err := fikit(t, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: %v (exit %d)", args, err, exitCode(err))
		}
	}
	// "--" ends flags, so a key may start with a dash.
	_, err := fikit(t, "profile", "show", "--data-dir", dir, "--", "--weird")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"--weird"`) {
		t.Errorf("key after --: %v", err)
	}
}

func TestProfileSeveralGPUs(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, testProfile(t, "svc", "NVIDIA A100", 2, true), testProfile(t, "svc", "NVIDIA H100", 1, true))
	_, err := fikit(t, "profile", "show", "svc", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), `"NVIDIA A100"`) || !strings.Contains(err.Error(), `"NVIDIA H100"`) ||
		!strings.Contains(err.Error(), "--gpu") {
		t.Fatalf("ambiguous key: %v", err)
	}
	out := mustFikit(t, "profile", "show", "svc", "--gpu", "NVIDIA A100", "--json", "--data-dir", dir)
	if !strings.Contains(out, `"mean_duration_ns": 2000`) {
		t.Errorf("--gpu did not pick the A100 profile:\n%s", out)
	}
}

func TestProfileExportImport(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "new")
	p := testProfile(t, "svc", "GPU", 1, true)
	seed(t, src, p)

	exported := mustFikit(t, "profile", "export", "svc", "--data-dir", src)
	file := filepath.Join(t.TempDir(), "svc.json")
	mustFikit(t, "profile", "export", "svc", "--out", file, "--data-dir", src)
	onDisk, err := os.ReadFile(file)
	if err != nil || string(onDisk) != exported {
		t.Fatalf("--out wrote something else: %v", err)
	}

	out := mustFikit(t, "profile", "import", file, "--data-dir", dst)
	if !strings.Contains(out, `imported "svc" on "GPU"`) {
		t.Errorf("import said %q", out)
	}
	if a, b := mustFikit(t, "profile", "export", "svc", "--data-dir", dst), exported; a != b {
		t.Fatalf("export after import differs:\n%s\n%s", a, b)
	}
	s, err := store.OpenBadger(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("GPU", "svc")
	s.Close()
	if err != nil || !storetest.Equal(got, p) {
		t.Fatalf("imported profile differs: %v", err)
	}

	if _, err := fikit(t, "profile", "import", file, "--data-dir", dst); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("import over an existing profile: %v", err)
	}
	mustFikit(t, "profile", "import", file, "--force", "--data-dir", dst)
	out = mustFikit(t, "profile", "import", file, "--gpu", "Other GPU", "--json", "--data-dir", dst)
	if !strings.Contains(out, `"gpu": "Other GPU"`) {
		t.Errorf("import --gpu: %s", out)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	show := mustFikit(t, "profile", "show", "svc", "--json", "--data-dir", src)
	os.WriteFile(bad, []byte(show), 0o600)
	if _, err := fikit(t, "profile", "import", bad, "--data-dir", dst); !errors.Is(err, profiler.ErrMalformed) {
		t.Errorf("importing show output: %v", err)
	}
}

func TestProfileRm(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, testProfile(t, "svc", "A", 1, true), testProfile(t, "svc", "B", 1, true))
	if _, err := fikit(t, "profile", "rm", "svc", "--data-dir", dir); err == nil {
		t.Fatal("rm of an ambiguous key succeeded")
	}
	out := mustFikit(t, "profile", "rm", "svc", "--gpu", "A", "--json", "--data-dir", dir)
	if !strings.Contains(out, `"removed": true`) {
		t.Errorf("rm --json: %s", out)
	}
	mustFikit(t, "profile", "rm", "svc", "--data-dir", dir) // only B is left
	if out := mustFikit(t, "profile", "ls", "--json", "--data-dir", dir); strings.TrimSpace(out) != "[]" {
		t.Errorf("after rm: %s", out)
	}
}

func TestProfileDiff(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, testProfile(t, "old", "GPU", 1, true), testProfile(t, "new", "GPU", 3, false))
	var d struct {
		RunTimeRatio float64 `json:"run_time_ratio"`
		Kernels      []struct {
			ID       string  `json:"id"`
			DurRatio float64 `json:"duration_ratio"`
		} `json:"kernels"`
		OnlyA []struct {
			Name string `json:"name"`
		} `json:"only_a"`
		OnlyB []json.RawMessage `json:"only_b"`
	}
	out := mustFikit(t, "profile", "diff", "old", "new", "--json", "--data-dir", dir)
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Kernels) != 2 || d.Kernels[0].DurRatio != 3 || d.Kernels[1].DurRatio != 3 || d.RunTimeRatio != 1 {
		t.Errorf("kernels in both: %s", out)
	}
	if len(d.OnlyA) != 1 || d.OnlyA[0].Name != "void at::light_kernel" || len(d.OnlyB) != 0 {
		t.Errorf("kernels in one: %s", out)
	}
	table := mustFikit(t, "profile", "diff", "old", "new", "--data-dir", dir)
	if !strings.Contains(table, "3.000") || !strings.Contains(table, "1 only in A") {
		t.Errorf("diff table:\n%s", table)
	}
}

func TestProfileThroughDaemon(t *testing.T) {
	dir := t.TempDir()
	// The daemon's part: it holds the Badger directory and serves the socket.
	s, err := store.OpenBadger(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(testProfile(t, "svc", "GPU", 1, true)); err != nil {
		t.Fatal(err)
	}
	_, err = fikit(t, "profile", "ls", "--data-dir", dir)
	if err == nil || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), socketName) {
		t.Fatalf("locked store without a socket: %v", err)
	}

	l, err := net.Listen("unix", socketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: store.Handler(s)}
	go srv.Serve(l)
	defer srv.Close()

	out := mustFikit(t, "profile", "show", "svc", "--json", "--data-dir", dir)
	if !strings.Contains(out, `"name": "heavy"`) {
		t.Errorf("show through the daemon:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "svc.json")
	mustFikit(t, "profile", "export", "svc", "-o", file, "--data-dir", dir)
	mustFikit(t, "profile", "rm", "svc", "--data-dir", dir)
	if _, err := s.Get("GPU", "svc"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rm through the daemon: %v", err)
	}
	mustFikit(t, "profile", "import", file, "--data-dir", dir)
	if _, err := s.Get("GPU", "svc"); err != nil {
		t.Errorf("import through the daemon: %v", err)
	}
}

func TestDataDirFor(t *testing.T) {
	for _, tc := range []struct {
		euid      int
		xdg, home string
		want      string
	}{
		{0, "/x/state", "/root", "/var/lib/fikit"},
		{1000, "/x/state", "/home/u", "/x/state/fikit"},
		{1000, "relative", "/home/u", "/home/u/.local/state/fikit"},
		{1000, "", "/home/u", "/home/u/.local/state/fikit"},
		{1000, "", "", ""},
	} {
		if got := dataDirFor(tc.euid, tc.xdg, tc.home); got != tc.want {
			t.Errorf("dataDirFor(%d, %q, %q) = %q, want %q", tc.euid, tc.xdg, tc.home, got, tc.want)
		}
	}
}

func TestFmtNs(t *testing.T) {
	for ns, want := range map[float64]string{0: "0ns", 999: "999ns", 1000: "1.00µs", 12345: "12.3µs", 123456: "123µs", 1.5e6: "1.50ms", 2e9: "2.00s"} {
		if got := fmtNs(ns); got != want {
			t.Errorf("fmtNs(%v) = %q, want %q", ns, got, want)
		}
	}
}

// `profile show` lists a profile's versions, when and why each came, and
// its discarded runs by reason.
func TestProfileShowVersions(t *testing.T) {
	dir := t.TempDir()
	v1 := testProfile(t, "svc", "GPU", 1, false)
	v1.StampHistory(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	b, err := profiler.NewVersion(v1, "drift: kernel durations +30%, 3 sampled runs in a row", 10)
	if err != nil {
		t.Fatal(err)
	}
	b.AddRecords(1, []profiler.Record{{KernelID: 1, DurationNs: 1, Flags: profiler.FlagGapSpansRunEnd}})
	b.EndRunWhy(1, 1, 10, profiler.DiscardUncertain)
	for run := uint32(2); !b.Complete(); run++ {
		b.AddRecords(run, []profiler.Record{{KernelID: 1, DurationNs: 1300, Flags: profiler.FlagGapSpansRunEnd}})
		b.EndRun(run, 1, 5000, true)
	}
	v2 := b.Profile()
	v2.StampHistory(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC).UnixNano())
	seed(t, dir, v2)
	var show struct {
		Version  uint32            `json:"profile_version"`
		Reason   string            `json:"reason"`
		Discards map[string]uint32 `json:"discards"`
		Versions []struct {
			Version uint32 `json:"version"`
			Time    string `json:"time"`
			Reason  string `json:"reason"`
			Runs    uint32 `json:"runs"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(mustFikit(t, "profile", "show", "svc", "--json", "--data-dir", dir)), &show); err != nil {
		t.Fatal(err)
	}
	if show.Version != 2 || !strings.HasPrefix(show.Reason, "drift:") || show.Discards["hook_uncertain"] != 1 ||
		len(show.Versions) != 2 || show.Versions[0].Time != "2026-01-02T03:04:05Z" || show.Versions[0].Reason != "new service" ||
		show.Versions[1].Version != 2 || show.Versions[1].Time != "2026-02-03T04:05:06Z" || show.Versions[1].Runs != 10 {
		t.Fatalf("show --json: %+v", show)
	}
	table := mustFikit(t, "profile", "show", "svc", "--data-dir", dir)
	for _, want := range []string{"version   2 (drift: kernel durations +30%", "v1  2026-01-02T03:04:05Z", "hook_uncertain 1"} {
		if !strings.Contains(table, want) {
			t.Errorf("show table lacks %q:\n%s", want, table)
		}
	}
}
