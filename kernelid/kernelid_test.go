package kernelid

import (
	"encoding/binary"
	"hash/fnv"
	"testing"
)

// Values computed outside Go (Python, spelled out from docs/design.md), so the
// test fails if the algorithm drifts together with the vector file.
func TestIDPinned(t *testing.T) {
	max := uint32(0xffffffff)
	for _, v := range []struct {
		name        string
		grid, block [3]uint32
		want        uint64
	}{
		{"", [3]uint32{}, [3]uint32{}, 0x7bd7cd961b67150b},
		{"a", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0xfa328b8e2244a923},
		{"_Z10add_kernelPfPKfS1_i", [3]uint32{256, 1, 1}, [3]uint32{256, 1, 1}, 0x1a60b5313197dee7},
		{"", [3]uint32{max, max, max}, [3]uint32{max, max, max}, 0x58760220b93b5fea},
	} {
		if got := ID(v.name, v.grid, v.block); got != v.want {
			t.Errorf("ID(%q, %v, %v) = %016x, want %016x", v.name, v.grid, v.block, got, v.want)
		}
	}
}

// referenceID computes a kernel ID with hash/fnv and the mixer written out
// again, independently of ID.
func referenceID(name string, grid, block [3]uint32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var dims [24]byte
	for i, v := range [6]uint32{grid[0], grid[1], grid[2], block[0], block[1], block[2]} {
		binary.LittleEndian.PutUint32(dims[4*i:], v)
	}
	h.Write(dims[:])
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func TestIDMatchesReference(t *testing.T) {
	for _, v := range kernelIDCases() {
		if got, want := ID(v.name, v.grid, v.block), referenceID(v.name, v.grid, v.block); got != want {
			t.Errorf("ID(%q, %v, %v) = %016x, reference %016x", v.name, v.grid, v.block, got, want)
		}
	}
}

func TestSplitForm(t *testing.T) {
	for _, v := range kernelIDCases() {
		nh := HashName(v.name)
		if got, want := nh.ID(v.grid, v.block), ID(v.name, v.grid, v.block); got != want {
			t.Errorf("HashName(%q).ID = %016x, ID = %016x", v.name, got, want)
		}
	}
	// The name state is FNV-1a over the name and one 0x00 byte.
	h := fnv.New64a()
	h.Write([]byte("kernel\x00"))
	if got := uint64(HashName("kernel")); got != h.Sum64() {
		t.Errorf("HashName = %016x, want %016x", got, h.Sum64())
	}
}

func TestIDSensitivity(t *testing.T) {
	base := ID("k", [3]uint32{1, 2, 3}, [3]uint32{4, 5, 6})
	seen := map[uint64]string{base: "base"}
	for name, id := range map[string]uint64{
		"grid.x":  ID("k", [3]uint32{2, 2, 3}, [3]uint32{4, 5, 6}),
		"grid.z":  ID("k", [3]uint32{1, 2, 4}, [3]uint32{4, 5, 6}),
		"block.x": ID("k", [3]uint32{1, 2, 3}, [3]uint32{5, 5, 6}),
		"swap":    ID("k", [3]uint32{4, 5, 6}, [3]uint32{1, 2, 3}),
		"name":    ID("K", [3]uint32{1, 2, 3}, [3]uint32{4, 5, 6}),
		"suffix":  ID("k\x01", [3]uint32{1, 2, 3}, [3]uint32{4, 5, 6}),
	} {
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s give the same ID %016x", name, prev, id)
		}
		seen[id] = name
	}
}

func TestGraphName(t *testing.T) {
	if got := GraphName(nil); got != "fikit.graph:" {
		t.Errorf("GraphName(nil) = %q", got)
	}
	got := GraphName([]uint64{0x1a60b5313197dee7, 0xf, 0xffffffffffffffff})
	want := "fikit.graph:1a60b5313197dee7,000000000000000f,ffffffffffffffff"
	if got != want {
		t.Errorf("GraphName = %q, want %q", got, want)
	}
	ids, ok := GraphKernelIDs(got)
	if !ok || len(ids) != 3 || ids[0] != 0x1a60b5313197dee7 || ids[1] != 0xf || ids[2] != ^uint64(0) {
		t.Errorf("GraphKernelIDs(%q) = %x, %v", got, ids, ok)
	}
	if GraphID([]uint64{1}) != ID(GraphName([]uint64{1}), [3]uint32{}, [3]uint32{}) {
		t.Error("GraphID is not the ID of GraphName with zero dims")
	}
	for _, bad := range []string{"", "fikit.graph", "fikit.graph:1", "fikit.graph:000000000000000F",
		"fikit.graph:0000000000000001,", "fikit.graph:,0000000000000001", "fikit.graph:+000000000000001"} {
		if ids, ok := GraphKernelIDs(bad); ok {
			t.Errorf("GraphKernelIDs(%q) = %x, true", bad, ids)
		}
	}
}

func FuzzGraphKernelIDs(f *testing.F) {
	f.Add("fikit.graph:")
	f.Add("fikit.graph:1a60b5313197dee7,000000000000000f")
	f.Fuzz(func(t *testing.T, name string) {
		ids, ok := GraphKernelIDs(name)
		if ok && GraphName(ids) != name {
			t.Fatalf("%q parses to %x which formats as %q", name, ids, GraphName(ids))
		}
	})
}

func BenchmarkID(b *testing.B) {
	name := "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
	b.Run("full", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = ID(name, [3]uint32{uint32(i), 1, 1}, [3]uint32{128, 1, 1})
		}
	})
	b.Run("finish", func(b *testing.B) {
		nh := HashName(name)
		for i := 0; b.Loop(); i++ {
			_ = nh.ID([3]uint32{uint32(i), 1, 1}, [3]uint32{128, 1, 1})
		}
	})
}
