package trace

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func roundTrip(t *testing.T, tr *Trace) *Trace {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := Read(bytes.NewReader(buf.Bytes()), "rt.csv")
	if err != nil {
		t.Fatalf("Read back: %v\n%s", err, buf.String())
	}
	if got.Format != FormatFikit || got.Source != "rt.csv" {
		t.Errorf("format %v source %q", got.Format, got.Source)
	}
	return got
}

func TestFikitRoundTripEmbedded(t *testing.T) {
	for _, name := range EmbeddedNames() {
		tr, err := Embedded(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := roundTrip(t, tr); !sameKernels(got, tr) || got.HasHostTime != tr.HasHostTime {
			t.Errorf("%s: round trip changed the trace", name)
		}
	}
}

func TestFikitRoundTripOddNames(t *testing.T) {
	tr := &Trace{HasHostTime: true, Kernels: []Kernel{
		{Name: `void f<a, b>("x")`, DurationNs: 1, HostNs: 0, Grid: [3]uint32{7, 8, 9}, Block: [3]uint32{4, 4, 4}, Profile: ProfileCompute},
		{Name: "#not a comment", DurationNs: 0, HostNs: 60_000_000_000, Grid: [3]uint32{MaxGridX, MaxGridYZ, 1}, Block: [3]uint32{1, 1, 64}, Profile: ProfileUnknown},
		{Name: " padded ", DurationNs: 5, HostNs: 3, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1024, 1, 1}, SMUsage: 9, MemoryFootprint: 1 << 40},
		{Name: "ünïcode ∑", DurationNs: 5, HostNs: 3, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 32, 1}},
	}}
	if got := roundTrip(t, tr); !sameKernels(got, tr) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got.Kernels, tr.Kernels)
	}
}

func TestFikitRead(t *testing.T) {
	in := "\xEF\xBB\xBF# fikit-trace v1\r\n# a comment\r\n\r\nname,duration_ns,host_ns,grid,block\r\n" +
		"Conv,1000,500,8x2,32x4x2\r\n# mid comment\r\n\"a,b\",20,0,,\r\n\r\n"
	tr, err := Read(strings.NewReader(in), "f.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Kernel{
		{Name: "Conv", DurationNs: 1000, HostNs: 500, Grid: [3]uint32{8, 2, 1}, Block: [3]uint32{32, 4, 2}, Profile: ProfileUnknown},
		{Name: "a,b", DurationNs: 20, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{256, 1, 1}, Profile: ProfileUnknown},
	}
	if !tr.HasHostTime || tr.Format != FormatFikit || !sameKernels(tr, &Trace{HasHostTime: true, Kernels: want}) {
		t.Errorf("got %+v", tr)
	}
	// Without host_ns the trace has no host time.
	tr, err = ReadFikit(strings.NewReader("# fikit-trace v1\nduration_ns,name\n5,k\n"), "g.csv")
	if err != nil || tr.HasHostTime || tr.Kernels[0].Name != "k" || tr.Kernels[0].DurationNs != 5 {
		t.Errorf("got %+v, %v", tr, err)
	}
}

func TestFikitErrors(t *testing.T) {
	const v = "# fikit-trace v1\n"
	cases := []struct {
		name, in string
		want     error
		msg      string
	}{
		{"wrong first line", "# something\nname,duration_ns\nk,1\n", ErrHeader, "f.csv:1: bad header"},
		{"newer version", "# fikit-trace v2\nname,duration_ns\nk,1\n", ErrVersion, `f.csv:1: unsupported trace version: "# fikit-trace v2"`},
		{"no header", v + "# only comments\n", ErrEmpty, "no header"},
		{"header only", v + "name,duration_ns\n", ErrEmpty, "header only"},
		{"unknown column", v + "name,duration_ns,host_us\nk,1,2\n", ErrHeader, `f.csv:2:18: field host_us: bad header: unknown column "host_us"`},
		{"missing name", v + "duration_ns\n1\n", ErrHeader, "f.csv:2: bad header: no name column"},
		{"bad host", v + "# c\nname,duration_ns,host_ns\nk,1,2\nk,1,\n", ErrValue, "f.csv:5:5: field host_ns"},
		{"bad grid", v + "name,duration_ns,grid\nk,1,2x2x2x2\n", ErrValue, "f.csv:3:5: field grid: invalid value: \"2x2x2x2\" has more"},
		{"zero grid", v + "name,duration_ns,grid\nk,1,0x1\n", ErrValue, "f.csv:3:5: field grid: invalid value: grid 0x1x1"},
		{"block too many threads", v + "name,duration_ns,block\nk,1,1024x2\n", ErrValue, "more than 1024 threads"},
		{"field count", v + "name,duration_ns\nk,1,2\n", ErrFieldCount, "f.csv:3: wrong number of fields"},
		{"bad quote", v + "name,duration_ns\n\"k\"x,1\n", ErrSyntax, "f.csv:3:3: malformed csv"},
		{"bad profile", v + "name,duration_ns,profile\nk,1,x\n", ErrValue, "f.csv:3:5: field profile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in), "f.csv")
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v is not %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not contain %q", err, c.msg)
			}
		})
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	bad := []*Trace{
		{},
		{Kernels: []Kernel{{Name: "", DurationNs: 1, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}}},
		{Kernels: []Kernel{{Name: "k", DurationNs: -1, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}}},
		{Kernels: []Kernel{{Name: "k", DurationNs: 1, Grid: [3]uint32{0, 1, 1}, Block: [3]uint32{1, 1, 1}}}},
		{Kernels: []Kernel{{Name: "k", DurationNs: 1, HostNs: 5, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}}},
		{Kernels: []Kernel{{Name: "a\nb", DurationNs: 1, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}}},
	}
	for i, tr := range bad {
		if err := Write(&bytes.Buffer{}, tr); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: Write = %v, want ErrInvalid", i, err)
		}
	}
}
