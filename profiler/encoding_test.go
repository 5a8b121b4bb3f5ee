package profiler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fikit/fikit/profiler"
)

// sampleProfile builds a small complete profile deterministically.
func sampleProfile(t testing.TB, seed uint64, target int) *profiler.Profile {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	b, err := profiler.NewBuilder("python serve.py --model resnet50", "NVIDIA H100 80GB HBM3", target)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{0x9f86d081884c7d65, 0x1, math.MaxUint64}
	for i, id := range ids {
		b.AddKernelInfo(profiler.KernelInfo{ID: id, Name: []string{"_Z6kernelPf", "fkr_void_20at_3a_3ak__1", "é\x01"}[i],
			Grid: [3]uint32{uint32(i + 1), 2, 3}, Block: [3]uint32{256, 1, math.MaxUint32}})
	}
	for run := uint32(1); !b.Complete(); run++ {
		var recs []profiler.Record
		n := 1 + r.IntN(8)
		for i := 0; i < n; i++ {
			recs = append(recs, profiler.Record{KernelID: ids[r.IntN(len(ids))], DurationNs: randDuration(r), GapNs: randDuration(r)})
		}
		recs[n-1].Flags = profiler.FlagGapSpansRunEnd
		b.AddRecords(run, recs)
		b.EndRun(run, uint32(n), uint64(r.Int64N(1e8)), r.IntN(4) != 0)
	}
	return b.Profile()
}

func TestBinaryRoundTrip(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		p := sampleProfile(t, seed, 10+int(seed))
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		q, err := profiler.DecodeBinary(enc)
		if err != nil {
			t.Fatal(err)
		}
		mustEqualProfiles(t, p, q)
		assertSameStats(t, p, q)
		var u profiler.Profile
		if err := u.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		assertSameStats(t, p, &u)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		p := sampleProfile(t, seed, 10)
		j, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		q, err := profiler.DecodeJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		mustEqualProfiles(t, p, q)
		assertSameStats(t, p, q)
		var u profiler.Profile
		if err := json.Unmarshal(j, &u); err != nil {
			t.Fatal(err)
		}
		assertSameStats(t, p, &u)
	}
}

// assertSameStats compares every number a caller can read, exactly.
func assertSameStats(t *testing.T, p, q *profiler.Profile) {
	t.Helper()
	if p.TaskKey != q.TaskKey || p.GPU != q.GPU || p.Phase != q.Phase || p.Runs != q.Runs ||
		p.TargetRuns != q.TargetRuns || p.DiscardedRuns != q.DiscardedRuns || len(p.Kernels) != len(q.Kernels) {
		t.Fatalf("header differs: %+v vs %+v", p, q)
	}
	same := func(what string, a, b *profiler.Dist) {
		if a.Count != b.Count || a.Mean != b.Mean || a.M2 != b.M2 || a.Min != b.Min || a.Max != b.Max || a.P50 != b.P50 || a.P90 != b.P90 ||
			a.Sketch.ZeroCount() != b.Sketch.ZeroCount() || a.Quantile(0.99) != b.Quantile(0.99) {
			t.Fatalf("%s differs: %+v vs %+v", what, a, b)
		}
	}
	same("run time", &p.RunTime, &q.RunTime)
	same("duration", &p.Duration, &q.Duration)
	same("gap", &p.Gap, &q.Gap)
	for id, k := range p.Kernels {
		l, ok := q.Kernel(id)
		if !ok || k.Name != l.Name || k.Grid != l.Grid || k.Block != l.Block {
			t.Fatalf("kernel %x differs", id)
		}
		same("kernel duration", &k.Duration, &l.Duration)
		same("kernel gap", &k.Gap, &l.Gap)
	}
}

func TestBinaryRejects(t *testing.T) {
	p := sampleProfile(t, 3, 10)
	enc, _ := p.MarshalBinary()

	if _, err := profiler.DecodeBinary(append(append([]byte(nil), enc...), 0xc0)); !errors.Is(err, profiler.ErrMalformed) {
		t.Errorf("trailing byte: %v", err)
	}
	for i := 0; i < len(enc); i++ {
		if _, err := profiler.DecodeBinary(enc[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	v2 := append([]byte(nil), enc...)
	v2[1] = 2 // the version, a positive fixint after the array header
	if _, err := profiler.DecodeBinary(v2); !errors.Is(err, profiler.ErrVersion) {
		t.Errorf("version 2: %v", err)
	}
	// Every single-bit flip either decodes to a valid profile or fails cleanly.
	for i := 0; i < len(enc); i++ {
		for bit := 0; bit < 8; bit++ {
			m := append([]byte(nil), enc...)
			m[i] ^= 1 << bit
			if q, err := profiler.DecodeBinary(m); err == nil {
				if err := profiler.ValidateProfile(q); err != nil {
					t.Fatalf("flip %d.%d decoded an invalid profile: %v", i, bit, err)
				}
			}
		}
	}
}

func TestBinaryExtraElementsIgnored(t *testing.T) {
	p := sampleProfile(t, 4, 10)
	enc, _ := p.MarshalBinary()
	// Rewrite the top-level array with one extra trailing element.
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	dec := msgpack.NewDecoder(bytes.NewReader(enc))
	var elems []msgpack.RawMessage
	n, _ := dec.DecodeArrayLen()
	for i := 0; i < n; i++ {
		var raw msgpack.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		elems = append(elems, raw)
	}
	_ = e.EncodeArrayLen(n + 1)
	for _, raw := range elems {
		_ = e.Encode(raw)
	}
	_ = e.EncodeString("a newer field")
	q, err := profiler.DecodeBinary(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	mustEqualProfiles(t, p, q)
}

func TestJSONRejects(t *testing.T) {
	p := sampleProfile(t, 5, 10)
	good, _ := json.Marshal(p)
	for name, tc := range map[string]struct {
		edit func(map[string]any)
		want error
	}{
		"format":    {func(m map[string]any) { m["format"] = "other" }, profiler.ErrMalformed},
		"version":   {func(m map[string]any) { m["version"] = 2 }, profiler.ErrVersion},
		"phase":     {func(m map[string]any) { m["phase"] = "idle" }, profiler.ErrInvalid},
		"runs":      {func(m map[string]any) { m["runs"] = 3 }, profiler.ErrInvalid},
		"task key":  {func(m map[string]any) { m["task_key"] = "" }, profiler.ErrInvalid},
		"target":    {func(m map[string]any) { m["target_runs"] = 5000 }, profiler.ErrInvalid},
		"kernel id": {func(m map[string]any) { kernel0(m)["id"] = "xyz" }, profiler.ErrInvalid},
		"count": {func(m map[string]any) {
			kernel0(m)["duration"].(map[string]any)["count"] = 1e6
		}, profiler.ErrInvalid},
		"mean": {func(m map[string]any) {
			kernel0(m)["gap"].(map[string]any)["mean_ns"] = -1
		}, profiler.ErrInvalid},
		"min above max": {func(m map[string]any) {
			kernel0(m)["duration"].(map[string]any)["min_ns"] = 1e12
		}, profiler.ErrInvalid},
		"zero min without zeros": {func(m map[string]any) {
			d := kernel0(m)["duration"].(map[string]any)
			d["min_ns"], d["sketch"].(map[string]any)["zero_count"] = 0, 0
		}, profiler.ErrInvalid},
		"bin": {func(m map[string]any) {
			kernel0(m)["duration"].(map[string]any)["sketch"] = map[string]any{"bins": [][2]int64{{1 << 40, 1}}}
		}, profiler.ErrInvalid},
		"duplicate kernel": {func(m map[string]any) {
			ks := m["kernels"].([]any)
			m["kernels"] = append(ks, ks[0])
		}, profiler.ErrInvalid},
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		tc.edit(m)
		bad, _ := json.Marshal(m)
		if _, err := profiler.DecodeJSON(bytes.NewReader(bad)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	for _, bad := range []string{"", "[]", "{", string(good) + "{}", `{"task_key":"k","phase":"sharing","runs":1,"kernels":[]}`} {
		if _, err := profiler.DecodeJSON(strings.NewReader(bad)); err == nil {
			t.Errorf("%.40q decoded", bad)
		}
	}
}

func kernel0(m map[string]any) map[string]any { return m["kernels"].([]any)[0].(map[string]any) }

func TestKernelIDText(t *testing.T) {
	for _, id := range []uint64{0, 1, 0x9f86d081884c7d65, math.MaxUint64} {
		s := profiler.FormatKernelID(id)
		if len(s) != 16 {
			t.Fatalf("%x → %q", id, s)
		}
		got, err := profiler.ParseKernelID(s)
		if err != nil || got != id {
			t.Fatalf("%q → %x, %v", s, got, err)
		}
	}
	if got, err := profiler.ParseKernelID("0x9F86D081884C7D65"); err != nil || got != 0x9f86d081884c7d65 {
		t.Errorf("0x upper case: %x, %v", got, err)
	}
	for _, bad := range []string{"", "1", "+9f86d081884c7d6", "9f86d081884c7d6g", "0x", "9f86d081884c7d651"} {
		if _, err := profiler.ParseKernelID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPhaseText(t *testing.T) {
	for _, p := range []profiler.Phase{profiler.PhaseProfiling, profiler.PhaseSharing} {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q profiler.Phase
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("%v → %s → %v, %v", p, b, q, err)
		}
	}
	if _, err := profiler.Phase(0).MarshalText(); err == nil {
		t.Error("phase 0 marshalled")
	}
}

func FuzzDecodeBinary(f *testing.F) {
	for seed := uint64(0); seed < 3; seed++ {
		enc, err := sampleProfile(f, seed, 10).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{0x91, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profiler.DecodeBinary(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		q, err := profiler.DecodeBinary(enc)
		if err != nil {
			t.Fatalf("re-encoded profile does not decode: %v", err)
		}
		assertSameStats(t, p, q)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for seed := uint64(0); seed < 2; seed++ {
		j, err := json.Marshal(sampleProfile(f, seed, 10))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j)
	}
	f.Add([]byte(`{"format":"fikit-profile","version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profiler.DecodeJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		j, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := profiler.DecodeJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatalf("re-encoded profile does not decode: %v", err)
		}
		assertSameStats(t, p, q)
	})
}

// TestSeedCorpusCurrent keeps the committed fuzz seeds in step with the
// format: the "valid" seeds must decode.
func TestSeedCorpusCurrent(t *testing.T) {
	for target, decode := range map[string]func([]byte) error{
		"FuzzDecodeBinary": func(b []byte) error { _, err := profiler.DecodeBinary(b); return err },
		"FuzzDecodeJSON":   func(b []byte) error { _, err := profiler.DecodeJSON(bytes.NewReader(b)); return err },
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, "valid"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a fuzz corpus file", target)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if err := decode([]byte(s)); err != nil {
			t.Errorf("%s seed 'valid' no longer decodes: %v", target, err)
		}
	}
}
