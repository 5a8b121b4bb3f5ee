package udp

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// The C hook's message table (hookclient/wire_gen.h) is generated from
// this one (udp/internal/wiregen, whose test fails while it is stale); the
// shared vectors (testdata/vectors.txt), which the C test encodes and decodes
// too, tie the C codec's bytes to Go's.

// Every row of the table is complete, its fields fit the decoder's value
// slots, its constructor makes its own type, and the shared vectors cover it.
func TestTableRows(t *testing.T) {
	vec, err := os.ReadFile("testdata/vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for ty, m := range messages {
		typ := Type(ty)
		if m.name == "" {
			if typ.Valid() || typ.Direction() != 0 {
				t.Errorf("type %d: no row but valid", ty)
			}
			continue
		}
		rows++
		if m.dir != ToDaemon && m.dir != ToHook || len(m.fields) == 0 || len(m.fields) > maxFields || m.new == nil {
			t.Errorf("%s: incomplete row %+v", m.name, m)
			continue
		}
		if got := m.new().Type(); got != typ {
			t.Errorf("%s: its constructor makes a %v", m.name, got)
		}
		if !strings.Contains(string(vec), " "+m.name+" ") {
			t.Errorf("%s: no vector in testdata/vectors.txt", m.name)
		}
	}
	if rows != len(Schema()) {
		t.Errorf("%d rows, the schema has %d", rows, len(Schema()))
	}
}

// Every message to the daemon whose first field is task_id is a TaskMessage
// (the daemon checks its sender), and reports that field; no other is.
func TestTaskMessagesMatchTable(t *testing.T) {
	for ty, def := range messages {
		if def.name == "" {
			continue
		}
		m := newMessage(Type(ty))
		isTask := def.dir == ToDaemon && len(def.fields) > 0 && def.fields[0].name == "task_id"
		tm, ok := m.(TaskMessage)
		if ok != isTask {
			t.Errorf("%s: TaskMessage %v, want %v", def.name, ok, isTask)
			continue
		}
		if !ok {
			continue
		}
		var v values
		v.u[0] = 0xdeadbeef
		m.get(&v)
		if got := tm.Task(); got != 0xdeadbeef {
			t.Errorf("%s: Task() = %#x, want the task_id field %#x", def.name, got, 0xdeadbeef)
		}
	}
}

// The first type after the table is unknown to every decoder (the vector
// files name no such number: it moves when a message is added).
func TestFirstUnknownType(t *testing.T) {
	first := Type(len(messages))
	b := []byte{0x93, ProtocolVersion, byte(first), 0x01}
	var d Decoder
	if _, err := d.Decode(b); !errors.Is(err, ErrUnknownType) {
		t.Errorf("type %d: Decoder.Decode: %v, want ErrUnknownType", first, err)
	}
	if _, err := Decode(b); !errors.Is(err, ErrUnknownType) {
		t.Errorf("type %d: Decode: %v, want ErrUnknownType", first, err)
	}
	if first.Valid() || first.Direction() != 0 {
		t.Errorf("type %d is valid", first)
	}
}
