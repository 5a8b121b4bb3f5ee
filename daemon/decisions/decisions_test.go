package decisions

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseTestdata(t *testing.T) {
	recs, err := Read("testdata/records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 13 {
		t.Fatalf("%d records, want 13", len(recs))
	}
	g := recs[3]
	if g.Kind != KindGrant || g.Task != 2 || g.Seq != 17 || g.Kernel != 0xff || g.Credit != 3 || g.Deadline != 9000 || g.Reason != "window" {
		t.Errorf("grant = %+v", g)
	}
	if r := recs[0]; r.Kind != KindRegister || r.Priority != 0 || r.Key != "demo-hp" || r.PID != 4242 {
		t.Errorf("register = %+v", r)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].T < recs[i-1].T {
			t.Fatalf("not sorted at %d", i)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		`{"kind":"grant"}`,            // no time
		`{"t_ns":1}`,                  // no kind
		`{"t_ns":1,"kind":""}`,        // empty kind
		`[1,2]`,                       // not an object
		`{"t_ns":"1","kind":"grant"}`, // wrong type
		`{"t_ns":1,"kind":"grant","kernel":"xyz"}`,
		`{"t_ns":1,"kind":"grant","kernel":"00000000000000000"}`,
		`{"t_ns":1,"kind":"grant"`,
	} {
		_, err := Parse(strings.NewReader("{\"t_ns\":0,\"kind\":\"hold\"}\n"+in+"\n"), "x")
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat", in, err)
		} else if !strings.Contains(err.Error(), "x:2:") {
			t.Errorf("%s: error %q does not name the line", in, err)
		}
	}
}

// A record the daemon is still writing ends in a half-written line:
// ParseLive skips it and says which; a finished bad line stays an error.
func TestParseLiveTornLastLine(t *testing.T) {
	full, err := os.ReadFile("testdata/records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	const half = `{"t_ns":9999,"kind":"gra`
	recs, torn, err := ParseLive(bytes.NewReader(append(full, half...)), "x")
	if err != nil || torn == nil || len(recs) != 13 {
		t.Fatalf("torn tail: %d records, torn %+v, err %v; want 13, the torn line, nil", len(recs), torn, err)
	}
	if torn.Line != 15 || torn.Bytes != len(half) {
		t.Errorf("torn = %+v, want line 15, %d bytes", torn, len(half))
	}
	// Parse (a finished file) still calls it an error.
	if _, err := Parse(bytes.NewReader(append(full, half...)), "x"); !errors.Is(err, ErrFormat) {
		t.Errorf("Parse of a torn tail: %v, want ErrFormat", err)
	}
	// A finished (newline-terminated) bad line is an error, last or not.
	if _, _, err := ParseLive(strings.NewReader(string(full)+half+"\n"), "x"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "x:15:") {
		t.Errorf("terminated bad last line: %v, want ErrFormat at x:15", err)
	}
	// An unterminated line that parses is kept.
	recs, torn, err = ParseLive(strings.NewReader(string(full)+`{"t_ns":9999,"kind":"hold"}`), "x")
	if err != nil || torn != nil || len(recs) != 14 {
		t.Errorf("complete unterminated line: %d records, torn %+v, err %v", len(recs), torn, err)
	}
}

// Records written by a Writer read back the same.
func TestWriterRoundTrip(t *testing.T) {
	want := []Record{
		{T: 1, Kind: KindRegister, Task: 1, PID: 9, Key: "k \"q\" <tab>\t", Priority: 3, GPU: "ab", Role: "holder", Phase: "sharing"},
		{T: 2, Kind: KindGrant, Task: 2, Seq: 5, Kernel: 0xfedcba9876543210, Credit: 7, Deadline: 99, Reason: "window"},
		{T: 3, Kind: KindWindowEnd, GPU: "ab", Start: 2, End: 99, Reason: "early_stop"},
		{T: 4, Kind: KindPrediction, Task: 1, Samples: 3, ErrNs: -5, AbsErrNs: 9},
		{T: 5, Kind: KindRun, Task: 1, Run: 2, Kernels: 100, RunNs: 1000, Start: 3, End: 1003},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, func(err error) { t.Errorf("write error: %v", err) })
	for i, r := range want {
		w.Add(r)
		if i%2 == 1 {
			w.Flush()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Parse(&buf, "buf")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

// A failing writer stops the recording with one error; Add and Flush go on
// returning at once.
func TestWriterError(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	w := NewWriter(&failingWriter{}, func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	big := strings.Repeat("x", 1000)
	for i := 0; i < 10_000; i++ {
		w.Add(Record{T: int64(i), Kind: KindHold, Key: big})
		w.Flush()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "disk full") {
		t.Fatalf("errors = %v, want one", errs)
	}
}

type blockingWriter struct{ release chan struct{} }

func (b blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

// A writer that blocks costs records, counted in a lost record, never the
// caller's time; Close gives up after closeWait.
func TestWriterBlocked(t *testing.T) {
	defer func(d time.Duration) { closeWait = d }(closeWait)
	closeWait = 100 * time.Millisecond
	bw := blockingWriter{release: make(chan struct{})}
	defer close(bw.release)
	w := NewWriter(bw, nil)
	start := time.Now()
	big := strings.Repeat("y", 10_000) // fills bufio's buffer: the goroutine blocks
	for i := 0; i < 5*queueBatches; i++ {
		w.Add(Record{T: int64(i), Kind: KindHold, Key: big})
		w.Flush()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Add/Flush took %v with a blocked writer", d)
	}
	if w.lost == 0 {
		t.Fatal("no records counted lost")
	}
	w.Add(Record{T: 1 << 40, Kind: KindHold})
	if b := w.batch; len(b) != 2 || b[0].Kind != KindLost || b[0].Count == 0 || b[0].T != 1<<40 {
		t.Fatalf("batch after losses = %+v", b)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close of a blocked writer returned no error")
	}
}

// FuzzParse: whatever the input, Parse returns records or an ErrFormat,
// never panics, and what it accepts survives a write and a read.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/records.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"t_ns":1,"kind":"grant","kernel":"1"}`))
	f.Add([]byte(`{"t_ns":-5,"kind":"x","task":4294967295}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := Parse(bytes.NewReader(data), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, func(err error) { t.Errorf("write: %v", err) })
		for _, r := range recs {
			if r.Kind == "" {
				t.Fatalf("accepted a record without kind: %+v", r)
			}
			w.Add(r)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(io.Reader(&buf), "again")
		if err != nil {
			t.Fatalf("re-reading what was written: %v", err)
		}
		if len(again) != len(recs) {
			t.Fatalf("%d records, %d after a round trip", len(recs), len(again))
		}
	})
}
