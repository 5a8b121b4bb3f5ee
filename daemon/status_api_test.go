package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// statusDoc documents the status API field by field.
const statusDoc = "../docs/status-api.md"

var (
	snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	// Time units other than the API's one (ns): a key ending so is a
	// duration in another unit, or a name that reads as one.
	otherUnit = regexp.MustCompile(`_(us|µs|ms|s|sec|secs|seconds|millis|micros|nanos|nanoseconds|min|minutes|h|hours)$`)
	docRow    = regexp.MustCompile("^\\| `([^`]+)` \\|([^|]*)\\|([^|]*)\\|")
)

// The status document, as the admin socket serves it, is in one style:
// snake_case keys, no null anywhere (lists are [] when empty), times in ns
// with keys ending in _ns and no other unit; every key is a row of
// docs/status-api.md and every row a key, with the row's unit "ns" exactly
// for the keys ending in _ns; the scheduler's keys are its settings'.
func TestStatusAPIStyle(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	st := store.NewMemory()
	if err := st.Put(sharingProfile(t, "hp")); err != nil {
		t.Fatal(err)
	}
	// A task the previous daemon had that does not come back: its place is
	// held (awaited) for the whole test.
	if err := st.PutRoster([]store.Known{{TaskKey: "gone", PID: 1, Priority: 3, GPU: "00"}}); err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.DefaultConfig()
	cfg.RejoinGrace = int64(time.Hour)
	s := startServer(t, st, cfg, sock)

	empty := getStatus(t, sock)
	if !strings.Contains(string(empty), `"tasks":[]`) {
		t.Errorf("a daemon without tasks: want \"tasks\":[], got %s", empty)
	}
	checkStatusStyle(t, empty)

	hp, lp := newFakeHook(t, s), newFakeHook(t, s)
	hp.register("hp", 0)
	lp.register("lp", 5)
	raw := getStatus(t, sock)
	var st2 Status
	if err := json.Unmarshal(raw, &st2); err != nil || len(st2.Tasks) != 2 {
		t.Fatalf("status with two tasks: %v\n%s", err, raw)
	}
	leaves := checkStatusStyle(t, raw)

	rows := readStatusDoc(t)
	for path := range leaves {
		if strings.HasPrefix(path, "scheduler.") {
			continue // checked against the settings below
		}
		if _, ok := rows[path]; !ok {
			t.Errorf("%s: not documented in %s (add a row: key, type, unit, meaning)", path, statusDoc)
		}
	}
	for path, unit := range rows {
		if strings.Contains(path, "<") {
			continue // a rule, not a key
		}
		if _, ok := leaves[path]; !ok {
			t.Errorf("%s is documented in %s but the daemon does not send it", path, statusDoc)
		}
		if (unit == "ns") != strings.HasSuffix(path, "_ns") {
			t.Errorf("%s: documented unit %q; times are in ns and only their keys end in _ns", path, unit)
		}
	}

	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	sched, _ := doc["scheduler"].(map[string]any)
	if len(sched) != len(scheduler.Settings) {
		t.Errorf("scheduler: %d keys for %d settings", len(sched), len(scheduler.Settings))
	}
	for _, set := range scheduler.Settings {
		k := set.JSONKey()
		if _, ok := sched[k]; !ok {
			t.Errorf("scheduler: no key %s for setting %s", k, set.Name)
		}
		if (set.Kind == scheduler.KindDuration) != strings.HasSuffix(k, "_ns") {
			t.Errorf("scheduler.%s: a time's key ends in _ns, and only a time's", k)
		}
	}
	checkNsFields(t, reflect.TypeOf(Status{}), "status")
}

// The admin socket's status round-trips through Status (what `fikit
// status` prints from), settings included.
func TestStatusRoundTrip(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fikit.sock")
	cfg := scheduler.DefaultConfig()
	cfg.SwitchCost = int64(140 * time.Microsecond)
	cfg.Policy = "fifo"
	s := startServer(t, store.NewMemory(), cfg, sock)
	newFakeHook(t, s).register("svc", 3)
	var got Status
	if err := json.Unmarshal(getStatus(t, sock), &got); err != nil {
		t.Fatal(err)
	}
	// The settings, not the ablations (variants set those; no status key).
	for _, set := range scheduler.Settings {
		if g, w := set.Get(&got.Scheduler), set.Get(&cfg); g != w {
			t.Errorf("scheduler setting %s: got %s, want %s", set.Name, g, w)
		}
	}
	if len(got.Tasks) != 1 || got.Tasks[0].Key != "svc" || got.Tasks[0].Priority != 3 || got.Stats.Registered != 1 {
		t.Errorf("tasks %+v, stats %+v", got.Tasks, got.Stats)
	}
}

func getStatus(t *testing.T, sock string) []byte {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := client.Get("http://fikit/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/status: %s %v", resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return b
}

// checkStatusStyle walks a status document and returns the paths of its
// values ("stats", "tasks[].id") with their kinds.
func checkStatusStyle(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, raw)
	}
	leaves := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case nil:
			t.Errorf("%s is null (an empty list is [], a missing value a zero)", path)
		case map[string]any:
			if path != "" && !strings.HasSuffix(path, "[]") {
				leaves[path] = "object"
			}
			for k, e := range v {
				p := k
				if path != "" {
					p = path + "." + k
				}
				if !snakeKey.MatchString(k) {
					t.Errorf("%s: key %q is not snake_case", p, k)
				}
				if otherUnit.MatchString(k) {
					t.Errorf("%s: times are in ns, keys ending in _ns", p)
				}
				walk(p, e)
			}
		case []any:
			leaves[path] = "list"
			for _, e := range v {
				walk(path+"[]", e)
			}
		default:
			leaves[path] = reflect.TypeOf(v).Kind().String()
		}
	}
	walk("", doc)
	return leaves
}

// readStatusDoc returns the documented keys with their unit column.
func readStatusDoc(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(statusDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := docRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = strings.TrimSpace(m[3])
		}
	}
	if len(rows) < 10 {
		t.Fatalf("%s: %d rows found; has the table's layout changed?", statusDoc, len(rows))
	}
	return rows
}

// checkNsFields: a Go field that holds nanoseconds (named …Ns, or a
// time.Duration) has a JSON key ending in _ns, and a field whose key ends
// in _ns is an integer.
func checkNsFields(t *testing.T, typ reflect.Type, path string) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || slices.Contains([]reflect.Type{reflect.TypeOf(scheduler.Config{})}, typ) {
		return // Config marshals itself, from the settings (checked above)
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			checkNsFields(t, f.Type, path) // embedded: its fields are the parent's keys
			continue
		}
		if key == "" || key == "-" {
			if key == "" {
				t.Errorf("%s.%s: no json tag (the Go name would be the key)", path, f.Name)
			}
			continue
		}
		ns := strings.HasSuffix(f.Name, "Ns") || f.Type == reflect.TypeOf(time.Duration(0))
		if ns != strings.HasSuffix(key, "_ns") {
			t.Errorf("%s.%s: key %q; nanoseconds go in a key ending in _ns, and only they", path, f.Name, key)
		}
		if ns && f.Type.Kind() != reflect.Int64 {
			t.Errorf("%s.%s: nanoseconds are an int64", path, f.Name)
		}
		checkNsFields(t, f.Type, path+"."+key)
	}
}
