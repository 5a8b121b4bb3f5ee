package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fikit/fikit/daemon/decisions"
)

func TestWritePairTrace(t *testing.T) {
	dir := t.TempDir()
	dec := filepath.Join(dir, "d.jsonl")
	f, err := os.Create(dec)
	if err != nil {
		t.Fatal(err)
	}
	w := decisions.NewWriter(f, nil)
	w.Add(decisions.Record{T: 100, Kind: decisions.KindRegister, Task: 1, PID: 7, Key: "hp"})
	w.Add(decisions.Record{T: 150, Kind: decisions.KindRegister, Task: 2, PID: 8, Key: "lp", Priority: 5})
	w.Add(decisions.Record{T: 8000, Kind: decisions.KindRun, Task: 1, Start: 1000, End: 7000, RunNs: 6000})
	w.Add(decisions.Record{T: 22000, Kind: decisions.KindRun, Task: 1, Start: 19000, End: 21000, RunNs: 2000})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tl := "../simgpu/timeline/testdata/records.jsonl"
	if err := writePairTrace(dir, "r50 (H) + bert (L)", tl, dec, 1, 30000); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r50__H__+_bert__L_.trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatal("invalid JSON")
	}
	if fi, err := os.Stat(filepath.Join(dir, "r50__H__+_bert__L_.png")); err != nil || fi.Size() == 0 {
		t.Fatalf("png: %v", err)
	}
	// Without a decision record: the middle of the span.
	if err := writePairTrace(dir, "plain", tl, "", 1, 30000); err != nil {
		t.Fatal(err)
	}
	if from, to := pairPNGSpanOf(nil, 0, 100_000_000); from != 40_000_000 || to != 60_000_000 {
		t.Errorf("span without runs = %d, %d", from, to)
	}
}
