package kernelid

import (
	"strconv"
	"strings"
)

// FNV-1a 64 parameters.
const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// GraphPrefix starts the name of every graph launch (see [GraphName]).
const GraphPrefix = "fikit.graph:"

// NameHash is the state of the kernel ID hash after the name and its
// terminating 0x00 byte: the part of a kernel ID that depends on the name only.
type NameHash uint64

// HashName runs steps 1 and 2 of the kernel ID over name.
func HashName(name string) NameHash {
	h := uint64(fnvOffset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime64
	}
	h *= fnvPrime64 // ^= 0x00 changes nothing
	return NameHash(h)
}

// ID finishes a kernel ID: FNV-1a over grid and block as little-endian
// uint32s, then the splitmix64 finaliser.
func (n NameHash) ID(grid, block [3]uint32) uint64 {
	h := uint64(n)
	for _, v := range [6]uint32{grid[0], grid[1], grid[2], block[0], block[1], block[2]} {
		for range 4 {
			h ^= uint64(v & 0xff)
			h *= fnvPrime64
			v >>= 8
		}
	}
	return mix(h)
}

// ID returns the kernel ID of a launch of the kernel name with the given grid
// and block dimensions.
func ID(name string, grid, block [3]uint32) uint64 {
	return HashName(name).ID(grid, block)
}

// mix is the splitmix64 finaliser.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// GraphName returns the name of a graph launch whose kernel nodes have the
// given kernel IDs, in node order: GraphPrefix followed by the IDs as 16
// lowercase hex digits each, joined by ','.
func GraphName(kernelIDs []uint64) string {
	var b strings.Builder
	b.Grow(len(GraphPrefix) + 17*len(kernelIDs))
	b.WriteString(GraphPrefix)
	var buf [16]byte
	for i, id := range kernelIDs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendHex16(buf[:0], id))
	}
	return b.String()
}

// GraphID returns the kernel ID of a graph launch: the ID of its GraphName
// with all-zero grid and block.
func GraphID(kernelIDs []uint64) uint64 {
	return ID(GraphName(kernelIDs), [3]uint32{}, [3]uint32{})
}

// GraphKernelIDs parses a name made by GraphName. It reports false for any
// other name.
func GraphKernelIDs(name string) ([]uint64, bool) {
	rest, ok := strings.CutPrefix(name, GraphPrefix)
	if !ok {
		return nil, false
	}
	if rest == "" {
		return []uint64{}, true
	}
	ids := make([]uint64, 0, (len(rest)+1)/17)
	for part := range strings.SplitSeq(rest, ",") {
		if len(part) != 16 || strings.ToLower(part) != part {
			return nil, false
		}
		id, err := strconv.ParseUint(part, 16, 64)
		if err != nil {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// FormatID writes a kernel ID the way the vector files and tools do: 16
// lowercase hex digits.
func FormatID(id uint64) string {
	var buf [16]byte
	return string(appendHex16(buf[:0], id))
}

func appendHex16(dst []byte, v uint64) []byte {
	const hexdigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexdigits[(v>>uint(shift))&0xf])
	}
	return dst
}
