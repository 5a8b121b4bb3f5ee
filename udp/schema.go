package udp

// The message table in exported form, for generators: udp/internal/wiregen
// writes the C hook's message table and decoder (hookclient/wire_gen.h) and
// docs/design.md's message tables from it, so that a message is one row of
// the table in messages.go.

// FieldKind is the wire form of a field.
type FieldKind uint8

const (
	KindUint     FieldKind = FieldKind(kUint)     // an unsigned integer in [Lo, Hi]
	KindStr      FieldKind = FieldKind(kStr)      // msgpack str
	KindBin16    FieldKind = FieldKind(kBin16)    // msgpack bin of 16 bytes
	KindTriple   FieldKind = FieldKind(kTriple)   // array of 3 u32
	KindRecords  FieldKind = FieldKind(kRecords)  // array of records (Elems)
	KindLaunches FieldKind = FieldKind(kLaunches) // array of launches (Elems)
	// KindKernelTimes is an array of kernel durations (Elems).
	KindKernelTimes FieldKind = FieldKind(kKernelTimes)
)

// FieldSpec is one field of a message, in wire order.
type FieldSpec struct {
	Name     string
	Kind     FieldKind
	Lo, Hi   uint64 // KindUint: the values allowed
	Optional bool   // a later addition: last, left out while zero, absent reads as zero
	Fit      bool   // the string an encoder cuts so that the datagram fits
	// Elems are the fields of one element of a KindRecords or KindLaunches
	// array (each element is an array of them).
	Elems []FieldSpec
}

// MessageSpec is one message type: a row of the protocol's table.
type MessageSpec struct {
	Type   Type
	Name   string
	Dir    Direction
	Note   string // what it is for (docs/design.md's tables)
	Fields []FieldSpec
}

// Schema returns the protocol's message types in type order.
func Schema() []MessageSpec {
	var out []MessageSpec
	for t, m := range messages {
		if m.name == "" {
			continue
		}
		ms := MessageSpec{Type: Type(t), Name: m.name, Dir: m.dir, Note: m.note}
		for _, f := range m.fields {
			fs := specOf(f)
			switch f.kind {
			case kRecords:
				fs.Elems = specsOf(recordFields[:])
			case kLaunches:
				fs.Elems = specsOf(launchFields[:])
			case kKernelTimes:
				fs.Elems = specsOf(kernelTimeFields[:])
			}
			ms.Fields = append(ms.Fields, fs)
		}
		out = append(out, ms)
	}
	return out
}

func specOf(f field) FieldSpec {
	return FieldSpec{Name: f.name, Kind: FieldKind(f.kind), Lo: f.lo, Hi: f.hi, Optional: f.opt, Fit: f.fit}
}

func specsOf(fs []field) []FieldSpec {
	out := make([]FieldSpec, len(fs))
	for i, f := range fs {
		out[i] = specOf(f)
	}
	return out
}
