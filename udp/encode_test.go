package udp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEncodedSize(t *testing.T) {
	for _, v := range vectorCases() {
		b, err := Append(nil, v.msg)
		if err != nil {
			t.Fatal(err)
		}
		var vals values
		v.msg.put(&vals)
		size := encodedSize(present(messages[v.msg.Type()].fields, &vals), &vals)
		if v.msg.Type() == TypeKernelInfo && size > MaxDatagram {
			size = MaxDatagram
		}
		if size != len(b) {
			t.Errorf("%s: encodedSize %d, encoded %d bytes", v.name, size, len(b))
		}
	}
}

func TestAppendKeepsDst(t *testing.T) {
	dst := []byte("prefix")
	b, err := Append(dst, Heartbeat{TaskID: 1})
	if err != nil || string(b) != "prefix\x93\x01\x06\x01" {
		t.Errorf("Append = %q, %v", b, err)
	}
	b, err = Append(dst, Register{Priority: 10})
	if !errors.Is(err, ErrRange) || string(b) != "prefix" {
		t.Errorf("Append of invalid = %q, %v", b, err)
	}
	if _, err := Append(nil, nil); err == nil {
		t.Error("Append(nil) did not fail")
	}
}

func TestAppendRejects(t *testing.T) {
	for _, v := range []struct {
		msg  Message
		want error
	}{
		{Register{Priority: 10}, ErrRange},
		{Register{DeviceName: strings.Repeat("d", 1400)}, ErrTooLarge},
		{RunEnd{Reason: 0}, ErrRange},
		{RunEnd{Reason: 6}, ErrRange},
		{RegisterAck{Role: 0, Phase: PhaseProfiling}, ErrRange},
		{RegisterAck{Role: RoleHolder, Phase: 3}, ErrRange},
		{State{Role: RoleWaiter, Phase: 0}, ErrRange},
		{Error{Code: 0}, ErrRange},
		{Error{Code: 6}, ErrRange},
		{Error{Code: CodeMalformed, Message: strings.Repeat("m", 1393)}, ErrTooLarge},
		{Measurements{Records: []Record{{Flags: 4}}}, ErrRange},
		{Measurements{Records: make([]Record, 300)}, ErrTooLarge},
	} {
		if b, err := Append(nil, v.msg); !errors.Is(err, v.want) {
			t.Errorf("Append(%s) = %d bytes, %v; want %v", short(Format(v.msg)), len(b), err, v.want)
		}
	}
	// The longest Error message that fits.
	if b, err := Append(nil, Error{Code: CodeMalformed, Message: strings.Repeat("m", 1392)}); err != nil || len(b) != MaxDatagram {
		t.Errorf("Append of a 1400-byte Error = %d bytes, %v", len(b), err)
	}
}

func TestKernelInfoCut(t *testing.T) {
	for _, dims := range [][3]uint32{{0, 0, 0}, {1, 2, 3}, {math.MaxUint32, 65536, 255}} {
		for _, task := range []uint32{0, 200, math.MaxUint32} {
			for n := 0; n < 2000; n += 7 {
				name := strings.Repeat("n", n)
				m := KernelInfo{TaskID: task, KernelID: uint64(n) << 40, Name: name, Grid: dims, Block: dims}
				b, err := Append(nil, m)
				if err != nil {
					t.Fatalf("Append(KernelInfo with %d-byte name): %v", n, err)
				}
				got, err := Decode(b)
				if err != nil {
					t.Fatal(err)
				}
				gn := got.(*KernelInfo).Name
				switch {
				case len(b) > MaxDatagram:
					t.Fatalf("%d-byte name: %d-byte datagram", n, len(b))
				case gn != name && (len(b) != MaxDatagram || !strings.HasPrefix(name, gn)):
					t.Fatalf("%d-byte name: cut to %d bytes in a %d-byte datagram", n, len(gn), len(b))
				}
			}
		}
	}
}

func TestFitStr(t *testing.T) {
	for avail := 0; avail < 70000; avail++ {
		n := fitStr(avail)
		if avail > 0 && strSize(n) > avail {
			t.Fatalf("fitStr(%d) = %d takes %d bytes", avail, n, strSize(n))
		}
		if strSize(n+1) <= avail {
			t.Fatalf("fitStr(%d) = %d, but %d fits", avail, n, n+1)
		}
	}
}

func TestPackMeasurements(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		recs := make([]Record, rng.IntN(400))
		for i := range recs {
			shift := rng.UintN(64)
			recs[i] = Record{KernelID: rng.Uint64() >> shift, DurationNS: rng.Uint64() >> rng.UintN(64),
				GapNS: rng.Uint64() >> rng.UintN(64), Flags: RecordFlags(rng.UintN(4))}
		}
		task, run := rng.Uint32()>>rng.UintN(32), rng.Uint32()>>rng.UintN(32)
		var got []Record
		rest := recs
		for first := true; first || len(rest) > 0; first = false {
			b, n, err := PackMeasurements(nil, task, run, rest)
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			if len(b) > MaxDatagram || (len(rest) > 0 && n == 0) {
				t.Fatalf("trial %d: %d records in %d bytes", trial, n, len(b))
			}
			if n < len(rest) {
				if _, err := Append(nil, Measurements{TaskID: task, Run: run, Records: rest[:n+1]}); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("trial %d: %d records packed but %d fit", trial, n, n+1)
				}
			}
			m, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			mm := m.(*Measurements)
			if mm.TaskID != task || mm.Run != run || len(mm.Records) != n {
				t.Fatalf("trial %d: decoded %s", trial, short(Format(m)))
			}
			got = append(got, mm.Records...)
			rest = rest[n:]
		}
		if !sameMessage(Measurements{Records: got}, Measurements{Records: recs}, 0) {
			t.Fatalf("trial %d: records differ after packing", trial)
		}
	}
	// 47 worst-case records fit, 48 do not.
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = maxRecord
	}
	if _, n, _ := PackMeasurements(nil, math.MaxUint32, math.MaxUint32, recs); n != 47 {
		t.Errorf("packed %d worst-case records, want 47", n)
	}
}

func TestErrorCodeOf(t *testing.T) {
	for _, c := range invalidCases() {
		_, err := Decode(mustHex(t, c.hex))
		want := CodeMalformed
		switch c.err {
		case "ErrVersion":
			want = CodeUnsupportedVersion
		case "ErrRange":
			want = CodeInvalidValue
		}
		if got := ErrorCodeOf(err); got != want {
			t.Errorf("%s: ErrorCodeOf(%v) = %v, want %v", c.name, err, got, want)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, v := range []struct{ got, want string }{
		{TypeKernelInfo.String(), "KernelInfo"},
		{Type(0).String(), "Type(0)"},
		{Type(len(messages)).String(), fmt.Sprintf("Type(%d)", len(messages))},
		{RoleWaiter.String(), "waiter"},
		{PhaseSharing.String(), "sharing"},
		{ReasonCopyToHost.String(), "copy-to-host"},
		{CodeOverloaded.String(), "overloaded"},
		{(FlagGapSpansRunEnd | FlagOverlapped | 8).String(), "gap-spans-run-end|overlapped|0x8"},
		{RecordFlags(0).String(), "0"},
	} {
		if v.got != v.want {
			t.Errorf("got %q, want %q", v.got, v.want)
		}
	}
}

// Append's pooled state must not carry one message's fields into the next:
// a Register's hook_flags (field 6) left behind made the next RegisterAck
// without a board encode an empty board (field 6, a string) — a longer,
// non-canonical datagram, now and then (the pool decides).
func TestAppendForgetsThePreviousMessage(t *testing.T) {
	want := mustHex(t, "9801080101010164cd03e8")
	ack := &RegisterAck{Seq: 1, TaskID: 1, Role: RoleHolder, Phase: PhaseProfiling, ProfileRuns: 100, HeartbeatMS: 1000}
	for i := 0; i < 100; i++ {
		if _, err := Append(nil, &Register{Seq: 1, TaskKey: "k", HookFlags: 5, Priority: 1}); err != nil {
			t.Fatal(err)
		}
		got, err := Append(nil, ack)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after a Register, RegisterAck encodes to %x, %v; want %x", got, err, want)
		}
	}
}
