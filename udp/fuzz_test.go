package udp

import (
	"bytes"
	"errors"
	"testing"
)

// seeds are the fuzz targets' seeds: every vector of the lists behind
// testdata/vectors.txt, decode_only.txt and invalid.txt, as datagrams and in
// the text form (a message added to the table is fuzzed from its vectors,
// with no corpus files to keep).
func seeds(t testing.TB) (datagrams [][]byte, texts []string) {
	for _, v := range vectorCases() {
		b, err := Append(nil, v.msg)
		if err != nil {
			t.Fatal(err)
		}
		datagrams = append(datagrams, b)
		texts = append(texts, Format(v.msg))
	}
	for _, c := range decodeOnlyCases() {
		datagrams = append(datagrams, mustHex(t, c.hex))
		texts = append(texts, c.text)
	}
	for _, c := range invalidCases() {
		datagrams = append(datagrams, mustHex(t, c.hex))
	}
	texts = append(texts, "", "Grant", "Grant task_id=1", `Error code=1 task_id=0 message="unterminated`,
		`Error code=1 task_id=0 message="\q"`, "Measurements task_id=1 run=1 records=[[1,2,3];[]]",
		"KernelInfo task_id=1 kernel_id=1 name=\"\" grid=[1,2] block=[1,2,3]", "Heartbeat task_id=4294967296")
	return datagrams, texts
}

// FuzzDecode checks that decoding never panics, that every error wraps
// exactly one sentinel, that the hand-written fast path agrees with the
// msgpack-based path, and that every accepted datagram re-encodes to a
// datagram that decodes to the same message. It starts from every vector.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x93, 0x01, 0x06, 0x01})
	datagrams, _ := seeds(f)
	for _, b := range datagrams {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d, full Decoder
		m, err := d.Decode(b)
		if err != nil {
			n := 0
			for _, s := range sentinels {
				if errors.Is(err, s.err) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%x: %v wraps %d sentinels", b, err, n)
			}
		}
		if _, ok := d.fast(b); ok {
			mf, errf := full.decodeFull(b)
			if errf != nil || err != nil || !sameMessage(mf, m, len(b)) {
				t.Fatalf("%x: fast path gives %v, %v; full path %v, %v", b, m, err, mf, errf)
			}
		}
		m2, err2 := full.decodeFull(b)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("%x: Decode %v, full %v", b, err, err2)
		}
		if err != nil {
			return
		}
		if !sameMessage(m, m2, len(b)) {
			t.Fatalf("%x: Decode %s, full %s", b, Format(m), Format(m2))
		}
		enc, err := Append(nil, m)
		if err != nil {
			t.Fatalf("%x decodes to %s which does not encode: %v", b, Format(m), err)
		}
		m3, err := Decode(enc)
		if err != nil || !sameMessage(m3, m, len(enc)) {
			t.Fatalf("%x → %s → %x → %v, %v", b, Format(m), enc, m3, err)
		}
		if len(enc) > len(b) && !bytes.Equal(enc, b) {
			t.Fatalf("%x: canonical encoding %x is longer", b, enc)
		}
	})
}

// FuzzParseText checks that the text parser of the vector files never
// panics and that what it accepts formats back to text that parses to the
// same message.
func FuzzParseText(f *testing.F) {
	f.Add("Grant task_id=7 seq=300 credit=0")
	_, texts := seeds(f)
	for _, s := range texts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseText(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) && !errors.Is(err, ErrMissingField) {
				t.Fatalf("%q: %v wraps no parser sentinel", s, err)
			}
			return
		}
		text := Format(m)
		m2, err := ParseText(text)
		if err != nil || !sameMessage(m2, m, 0) || Format(m2) != text {
			t.Fatalf("%q → %q → %v, %v", s, text, m2, err)
		}
		if _, _, _, err := splitVectorLine("v " + text + " | 00"); err != nil {
			t.Fatalf("%q does not fit a vector line: %v", text, err)
		}
	})
}

// FuzzAppend builds messages from arbitrary field values: Append either
// refuses them with ErrRange or produces a datagram of at most MaxDatagram
// bytes that decodes to the same message.
func FuzzAppend(f *testing.F) {
	f.Add(uint8(1), uint64(1), uint64(2), uint64(3), "key", []byte("name"))
	f.Add(uint8(13), uint64(1), uint64(2), uint64(3), "", bytes.Repeat([]byte("n"), 2000))
	f.Add(uint8(4), uint64(1<<40), uint64(7), uint64(300), "", bytes.Repeat([]byte{0xff, 3}, 40))
	f.Fuzz(func(t *testing.T, typ uint8, a, b, c uint64, s string, raw []byte) {
		var m Message
		switch Type(typ % 14) {
		case TypeRegister:
			var id [16]byte
			copy(id[:], raw)
			m = Register{Seq: uint32(a), TaskKey: s, PID: uint32(b), Priority: uint8(c), DeviceUUID: id, DeviceName: string(raw), HookFlags: uint32(a >> 32)}
		case TypeLaunchNotify:
			m = LaunchNotify{TaskID: uint32(a), Seq: uint32(b), KernelID: c}
		case TypeMeasurements:
			var recs []Record
			for i := 0; i+1 < len(raw); i += 2 {
				recs = append(recs, Record{KernelID: a * uint64(raw[i]), DurationNS: b >> raw[i], GapNS: c, Flags: RecordFlags(raw[i+1])})
			}
			m = Measurements{TaskID: uint32(a), Run: uint32(b), Records: recs}
		case TypeRunEnd:
			m = RunEnd{TaskID: uint32(a), Run: uint32(b), Kernels: uint32(c), RunNS: a ^ c, Reason: RunEndReason(b >> 32)}
		case TypeRegisterAck:
			m = RegisterAck{Seq: uint32(a), TaskID: uint32(b), Role: Role(c), Phase: Phase(c >> 8), ProfileRuns: uint32(a >> 32), HeartbeatMS: uint32(b >> 32)}
		case TypeState:
			m = State{TaskID: uint32(a), Role: Role(b), Phase: Phase(c), Credit: uint32(a >> 32)}
		case TypeError:
			m = Error{Code: ErrorCode(a), TaskID: uint32(b), Message: s + string(raw)}
		case TypeKernelInfo:
			m = KernelInfo{TaskID: uint32(a), KernelID: b, Name: string(raw) + s, Grid: [3]uint32{uint32(c), uint32(c >> 32), uint32(a >> 32)}, Block: [3]uint32{uint32(b >> 32), 1, 0}}
		default:
			m = Grant{TaskID: uint32(a), Seq: uint32(b), Credit: uint32(c)}
		}
		enc, err := Append(nil, m)
		if err != nil {
			if !errors.Is(err, ErrRange) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Append(%s): %v", Format(m), err)
			}
			return
		}
		if len(enc) > MaxDatagram {
			t.Fatalf("Append(%s) made %d bytes", Format(m), len(enc))
		}
		got, err := Decode(enc)
		if err != nil || !sameMessage(got, m, len(enc)) {
			t.Fatalf("Append(%s) = %x, decodes to %v, %v", Format(m), enc, got, err)
		}
	})
}
