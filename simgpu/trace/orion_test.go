package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sharedTraces is ../shared/traces seen from this package, present in the
// workspace but not on every clone.
const sharedTraces = "../../../shared/traces"

// TestEmbeddedTraces checks every embedded trace against an independent
// reading of its raw text: names and durations in order, and the grid and
// block rule.
func TestEmbeddedTraces(t *testing.T) {
	var names []string
	for _, n := range EmbeddedNames() {
		if !strings.HasPrefix(n, scenarioPrefix) {
			names = append(names, n)
		}
	}
	if len(names) != 10 {
		t.Fatalf("EmbeddedNames = %v, want 10 Orion traces", names)
	}
	for _, name := range names {
		tr, err := Embedded(name)
		if err != nil {
			t.Fatalf("Embedded(%q): %v", name, err)
		}
		raw, err := orionFS.ReadFile("orion/" + name + ".csv")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		if len(tr.Kernels) != len(lines)-1 {
			t.Fatalf("%s: %d kernels, file has %d rows", name, len(tr.Kernels), len(lines)-1)
		}
		hasGeom := strings.HasSuffix(lines[0], ",Block,Grid")
		for i, line := range lines[1:] {
			f := strings.Split(line, ",")
			k := tr.Kernels[i]
			dur, _ := strconv.ParseInt(f[4], 10, 64)
			sm, _ := strconv.ParseUint(f[3], 10, 32)
			if k.Name != f[0] || k.DurationNs != dur || k.SMUsage != uint32(sm) {
				t.Fatalf("%s row %d: got %q %d %d, raw %q", name, i+2, k.Name, k.DurationNs, k.SMUsage, line)
			}
			wantGrid, wantBlock := [3]uint32{uint32(max(sm, 1)), 1, 1}, [3]uint32{256, 1, 1}
			if hasGeom {
				if b, _ := strconv.ParseUint(f[5], 10, 32); b != 0 {
					wantBlock[0] = uint32(b)
				}
				if g, _ := strconv.ParseUint(f[6], 10, 32); g != 0 {
					wantGrid[0] = uint32(g)
				}
			}
			if k.Grid != wantGrid || k.Block != wantBlock {
				t.Fatalf("%s row %d: grid %v block %v, want %v %v", name, i+2, k.Grid, k.Block, wantGrid, wantBlock)
			}
		}
		if err := tr.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if tr.HasHostTime || tr.Format != FormatOrion {
			t.Errorf("%s: HasHostTime %v format %v", name, tr.HasHostTime, tr.Format)
		}
	}
	// resnet50 on H100 records geometry: row 3 is BatchNorm with Block 512, Grid 256.
	tr, _ := Embedded("h100/resnet50_4_fwd")
	if k := tr.Kernels[1]; k.Name != "BatchNorm" || k.Block != [3]uint32{512, 1, 1} || k.Grid != [3]uint32{256, 1, 1} {
		t.Errorf("h100 resnet50 kernel 1 = %+v", k)
	}
}

// TestEmbeddedCopiesShared checks the embedded copies are byte-identical to
// ../shared/traces where that exists.
func TestEmbeddedCopiesShared(t *testing.T) {
	if _, err := os.Stat(sharedTraces); err != nil {
		t.Skipf("no %s on this clone", sharedTraces)
	}
	for _, name := range EmbeddedNames() {
		if strings.HasPrefix(name, scenarioPrefix) {
			continue // derived here (scenario/README.md), not copies of the shared traces
		}
		gpu, model, _ := strings.Cut(name, "/")
		shared, err := os.ReadFile(filepath.Join(sharedTraces, "orion-"+gpu, model+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		emb, _ := orionFS.ReadFile("orion/" + name + ".csv")
		if !bytes.Equal(shared, emb) {
			t.Errorf("embedded %s differs from shared copy", name)
		}
	}
}

func TestLoad(t *testing.T) {
	want, err := Embedded("h100/resnet50_4_fwd")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h100/resnet50_4_fwd", "orion-h100/resnet50_4_fwd.csv", "orion/h100/resnet50_4_fwd"} {
		got, err := Load(name)
		if err != nil {
			t.Fatalf("Load(%q): %v", name, err)
		}
		if !sameKernels(got, want) {
			t.Errorf("Load(%q) differs from embedded", name)
		}
	}
	// A file path wins and is read as a file.
	dir := t.TempDir()
	p := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(p, []byte("Name,Duration\nk,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil || len(got.Kernels) != 1 || got.Source != p {
		t.Fatalf("Load(file) = %+v, %v", got, err)
	}
	_, err = Load(filepath.Join(dir, "missing.csv"))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "h100/bert_2_fwd") {
		t.Errorf("Load(missing) = %v, want ErrNotFound listing embedded traces", err)
	}
	if _, err := Embedded("h100/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Embedded(nope) = %v", err)
	}
}

func TestReadOrionVariants(t *testing.T) {
	const base = "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,98,100480\nBatchNorm,0,0,64,40480\n"
	cases := []struct {
		name, in string
		check    func(t *testing.T, tr *Trace)
	}{
		{"plain", base, nil},
		{"crlf", strings.ReplaceAll(base, "\n", "\r\n"), nil},
		{"bom", "\xEF\xBB\xBF" + base, nil},
		{"trailing blank lines", base + "\n\n  \n\r\n", nil},
		{"no final newline", strings.TrimSuffix(base, "\n"), nil},
		{"header case and spaces", "name, PROFILE ,memory_footprint,Sm_Usage,duration\nConv,1,0,98,100480\nBatchNorm,0,0,64,40480\n", nil},
		{"float duration", "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,98.0,100479.6\nBatchNorm,0,0,64,4.048e4\n", nil},
		{"grid block reversed and empty", "Name,Profile,Memory_footprint,SM_usage,Duration,Grid,Block\nConv,1,0,98,100480,,\nBatchNorm,0,0,64,40480,256,512\n",
			func(t *testing.T, tr *Trace) {
				if tr.Kernels[0].Grid != [3]uint32{98, 1, 1} || tr.Kernels[0].Block != [3]uint32{256, 1, 1} {
					t.Errorf("derived geometry %v %v", tr.Kernels[0].Grid, tr.Kernels[0].Block)
				}
				if tr.Kernels[1].Grid != [3]uint32{256, 1, 1} || tr.Kernels[1].Block != [3]uint32{512, 1, 1} {
					t.Errorf("recorded geometry %v %v", tr.Kernels[1].Grid, tr.Kernels[1].Block)
				}
			}},
		{"only required columns, extra column", "Duration,Name,Comment\n100480,Conv,x\n40480,BatchNorm,y\n",
			func(t *testing.T, tr *Trace) {
				if k := tr.Kernels[0]; k.Profile != ProfileUnknown || k.SMUsage != 0 || k.Grid != [3]uint32{1, 1, 1} {
					t.Errorf("defaults: %+v", k)
				}
			}},
		{"quoted name", "Name,Profile,Memory_footprint,SM_usage,Duration\n\"Conv, fused\",1,0,98,100480\nBatchNorm,0,0,64,40480\n",
			func(t *testing.T, tr *Trace) {
				if tr.Kernels[0].Name != "Conv, fused" {
					t.Errorf("name %q", tr.Kernels[0].Name)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := ReadOrion(strings.NewReader(c.in), "in.csv")
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Kernels) != 2 {
				t.Fatalf("%d kernels", len(tr.Kernels))
			}
			if c.check != nil {
				c.check(t, tr)
				return
			}
			k := tr.Kernels[1]
			if tr.Kernels[0].Name != "Conv" || tr.Kernels[0].DurationNs != 100480 || k.Name != "BatchNorm" ||
				k.DurationNs != 40480 || k.SMUsage != 64 || k.Profile != ProfileMemory || k.Grid != [3]uint32{64, 1, 1} {
				t.Errorf("kernels %+v", tr.Kernels)
			}
		})
	}
}

func TestReadOrionErrors(t *testing.T) {
	const hdr = "Name,Profile,Memory_footprint,SM_usage,Duration\n"
	cases := []struct {
		name, in string
		want     error
		msg      string // substring of the error text
	}{
		{"empty", "", ErrEmpty, "bad.csv: "},
		{"header only", hdr, ErrEmpty, "header only"},
		{"no duration column", "Name,Profile\nConv,1\n", ErrHeader, "bad.csv:1: bad header: no duration column"},
		{"duplicate column", "Name,Duration,name\nConv,1,x\n", ErrHeader, "bad.csv:1:15: field name: bad header: duplicate"},
		{"bad duration", hdr + "Conv,1,0,98,100480\nBN,0,0,64,fast\n", ErrValue, `bad.csv:3:11: field Duration: invalid value: "fast"`},
		{"negative duration", hdr + "Conv,1,0,98,-5\n", ErrValue, "bad.csv:2:13: field Duration"},
		{"huge duration", hdr + "Conv,1,0,98,1e300\n", ErrValue, "out of range"},
		{"bad profile", hdr + "Conv,2,0,98,5\n", ErrValue, "bad.csv:2:6: field Profile"},
		{"bad sm usage", hdr + "Conv,1,0,-3,5\n", ErrValue, "field SM_usage"},
		{"too few fields", hdr + "Conv,1,0,98\n", ErrFieldCount, "bad.csv:2: wrong number of fields: 4 fields, header has 5"},
		{"too many fields", hdr + "Conv,1,0,98,5,6\n", ErrFieldCount, "bad.csv:2:"},
		{"block too big", "Name,Duration,Block,Grid\nConv,5,2048,1\n", ErrValue, "bad.csv:2:8: field Block"},
		{"empty name", hdr + ",1,0,98,5\n", ErrValue, "bad.csv:2:1: field Name: invalid value: empty kernel name"},
		{"control char in name", hdr + "Co\x01nv,1,0,98,5\n", ErrValue, "control character"},
		// Orion does not quote, so quotes are lazy: an unclosed one swallows the rest.
		{"unclosed quote", hdr + "\"Conv,1,0,98,5\nX,1,0,1,1\n", ErrFieldCount, "bad.csv:2: wrong number of fields: 1 fields"},
		{"error after crlf lines", strings.ReplaceAll(hdr+"A,1,0,1,5\nB,1,0,1,x\n", "\n", "\r\n"), ErrValue, "bad.csv:3:9: field Duration"},
		{"bom shifts columns", "\xEF\xBB\xBFName,Duration,Name\n", ErrHeader, "bad.csv:1:18:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := ReadOrion(strings.NewReader(c.in), "bad.csv")
			if err == nil {
				t.Fatalf("no error, got %d kernels", len(tr.Kernels))
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %v is not %v", err, c.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "bad.csv" {
				t.Errorf("error %v is not a *ParseError naming the file", err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not contain %q", err, c.msg)
			}
		})
	}
}

func sameKernels(a, b *Trace) bool {
	if len(a.Kernels) != len(b.Kernels) || a.HasHostTime != b.HasHostTime {
		return false
	}
	for i := range a.Kernels {
		if a.Kernels[i] != b.Kernels[i] {
			return false
		}
	}
	return true
}
