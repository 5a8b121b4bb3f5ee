package udp

import (
	"errors"
	"strings"
	"testing"
)

func TestDecoderReuse(t *testing.T) {
	var d Decoder
	a, _ := Append(nil, Measurements{TaskID: 1, Run: 1, Records: recordRun(3)})
	b, _ := Append(nil, Measurements{TaskID: 2, Run: 2, Records: recordRun(2)})
	m1, err := d.Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.(*Measurements).Records) != 3 {
		t.Fatal("wrong record count")
	}
	m2, err := d.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if m1 != m2 || m2.(*Measurements).TaskID != 2 || len(m2.(*Measurements).Records) != 2 {
		t.Error("Decoder did not reuse its Measurements")
	}
	// Decode (package level) returns independent messages.
	p1, _ := Decode(a)
	p2, _ := Decode(b)
	if p1 == p2 || len(p1.(*Measurements).Records) != 3 {
		t.Error("Decode shares state between calls")
	}
	// A decoded string does not alias the datagram.
	e, _ := Append(nil, Error{Code: CodeMalformed, Message: "hello"})
	m, _ := d.Decode(e)
	for i := range e {
		e[i] = 0
	}
	if m.(*Error).Message != "hello" {
		t.Error("decoded string aliases the datagram")
	}
}

func TestDecodeAllocs(t *testing.T) {
	var d Decoder
	for _, m := range []Message{
		LaunchNotify{TaskID: 3, Seq: 70000, KernelID: 0xeabe423fa458ec9a},
		LaunchRequest{TaskID: 3, Seq: 70000, KernelID: 0xeabe423fa458ec9a},
		Heartbeat{TaskID: 3},
		Grant{TaskID: 3, Seq: 9, Credit: 4},
		RunEnd{TaskID: 1, Run: 2, Kernels: 3, RunNS: 4, Reason: ReasonExplicit},
		Measurements{TaskID: 1, Run: 2, Records: recordRun(40)},
	} {
		b, _ := Append(nil, m)
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(b) }); n != 0 {
			t.Errorf("Decoder.Decode(%v) allocates %.1f times", m.Type(), n)
		}
	}
	// The msgpack-based path too, for a non-canonical form.
	b := mustHex(t, "97010601"+"00"+"93010203"+"82a161019102a162"+"92c0c2")
	if _, err := d.Decode(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(b) }); n != 0 {
		t.Errorf("full path allocates %.1f times", n)
	}
}

func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, MaxDatagram)
	m := Grant{TaskID: 3, Seq: 9, Credit: 4}
	if n := testing.AllocsPerRun(100, func() { _, _ = Append(buf[:0], m) }); n > 1 {
		t.Errorf("Append allocates %.1f times", n)
	}
}

// Hostile lengths must not make the decoder allocate beyond the datagram.
func TestDecodeHostileLengths(t *testing.T) {
	var d Decoder
	for _, h := range []string{
		"94010601dbffffffff", "94010601c6ffffffff", "94010601ddffffffff", "94010601dfffffffff",
		"94010601c9ffffffff01", "9501040101ddffffffff", "9501040101dcffff", "95010c0100dbffffffff",
		"99010101dbffffffff", "97010d0102dd7fffffff",
	} {
		b := mustHex(t, h)
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := d.Decode(b); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: %v", h, err)
			}
		})
		// The error value itself allocates a little; a buffer sized by the
		// hostile length would be megabytes.
		if allocs > 8 {
			t.Errorf("%s: %.0f allocations", h, allocs)
		}
	}
	if cap(d.recs) > MaxDatagram {
		t.Errorf("records buffer grew to %d", cap(d.recs))
	}
}

func TestDecodeTooLarge(t *testing.T) {
	b := make([]byte, MaxDatagram+1)
	if _, err := Decode(b); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode of %d bytes: %v", len(b), err)
	}
}

func TestDecodeErrorsName(t *testing.T) {
	for _, v := range []struct{ hex, want string }{
		{"9501020102d3ffffffffffffffff", "LaunchNotify: kernel_id"},
		{"95010c0600a0", "Error: code"},
		{"920106", "Heartbeat: task_id"},
		{"9501040101919401020304", "record 0: flags"},
	} {
		_, err := Decode(mustHex(t, v.hex))
		if err == nil || !strings.Contains(err.Error(), v.want) {
			t.Errorf("%s: error %v does not name %q", v.hex, err, v.want)
		}
	}
}

func TestFastPathCovers(t *testing.T) {
	var d Decoder
	for _, v := range vectorCases() {
		b, _ := Append(nil, v.msg)
		_, ok := d.fast(b)
		if ok != intOnly[v.msg.Type()] {
			t.Errorf("%s: fast path %v", v.name, ok)
		}
	}
}
