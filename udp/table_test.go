package udp

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The C hook (hookclient/wire.h) keeps its own enums, as C must: this test
// is what ties them to the Go table, so a message or value added on one side
// only fails here. Field order is tied by the shared vectors
// (testdata/vectors.txt), which the C test encodes and decodes too.

// cEnums reads every "FK_NAME = N" and "#define FK_NAME N" of hookclient/wire.h.
func cEnums(t *testing.T) map[string]uint64 {
	t.Helper()
	f, err := os.Open("../hookclient/wire.h")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	re := regexp.MustCompile(`\b(FK_[A-Z0-9_]+)\s*=\s*(\d+)|#define\s+(FK_[A-Z0-9_]+)\s+(\d+)\s*$`)
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, m := range re.FindAllStringSubmatch(sc.Text(), -1) {
			name, num := m[1], m[2]
			if name == "" {
				name, num = m[3], m[4]
			}
			v, _ := strconv.ParseUint(num, 10, 64)
			out[name] = v
		}
	}
	return out
}

// upperSnake turns "LaunchNotify" into "LAUNCH_NOTIFY".
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func TestCEnumsMatchTable(t *testing.T) {
	c := cEnums(t)
	want := map[string]uint64{}
	for ty, m := range messages {
		if m.name != "" {
			want["FK_MSG_"+upperSnake(m.name)] = uint64(ty)
		}
	}
	// Values inside messages: Go constant → C name.
	for name, v := range map[string]uint64{
		"FK_ROLE_HOLDER": uint64(RoleHolder), "FK_ROLE_WAITER": uint64(RoleWaiter),
		"FK_PHASE_PROFILING": uint64(PhaseProfiling), "FK_PHASE_SHARING": uint64(PhaseSharing),
		"FK_MEAS_GAP_SPANS_RUN_END": uint64(FlagGapSpansRunEnd), "FK_MEAS_OVERLAPPED": uint64(FlagOverlapped),
		"FK_RUN_END_STREAM_SYNC": uint64(ReasonStreamSync), "FK_RUN_END_CTX_SYNC": uint64(ReasonContextSync),
		"FK_RUN_END_EVENT_SYNC": uint64(ReasonEventSync), "FK_RUN_END_DTOH_COPY": uint64(ReasonCopyToHost),
		"FK_RUN_END_EXPLICIT": uint64(ReasonExplicit),
		"FK_ERR_UNKNOWN_TASK": uint64(CodeUnknownTask), "FK_ERR_VERSION": uint64(CodeUnsupportedVersion),
		"FK_ERR_MALFORMED": uint64(CodeMalformed), "FK_ERR_INVALID": uint64(CodeInvalidValue),
		"FK_ERR_OVERLOADED": uint64(CodeOverloaded),
		"FK_WIRE_VERSION":   ProtocolVersion, "FK_MAX_DATAGRAM": MaxDatagram,
	} {
		want[name] = v
	}
	for name, v := range want {
		got, ok := c[name]
		if !ok {
			t.Errorf("hookclient/wire.h has no %s (= %d)", name, v)
		} else if got != v {
			t.Errorf("hookclient/wire.h: %s = %d, the Go table says %d", name, got, v)
		}
	}
	for name, v := range c {
		if strings.HasPrefix(name, "FK_MSG_") {
			if _, ok := want[name]; !ok {
				t.Errorf("hookclient/wire.h: %s = %d is not in the Go message table", name, v)
			}
		}
	}
}

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
	if rows != 14 {
		t.Errorf("%d message types; update this count with the table", rows)
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
