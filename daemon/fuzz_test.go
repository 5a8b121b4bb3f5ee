package daemon

import (
	"bufio"
	"encoding/hex"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

// FuzzHandle feeds arbitrary datagrams through the daemon's receive path
// (decode, core, replies): whatever arrives, the daemon must not panic, and
// a valid registration afterwards must still be answered.
func FuzzHandle(f *testing.F) {
	// Seeds: every wire vector (valid messages of every type) and every
	// invalid one, as hex after the last " | " of each line.
	for _, path := range []string{"../udp/testdata/vectors.txt", "../udp/testdata/invalid.txt"} {
		file, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") || !strings.Contains(line, " | ") {
				continue
			}
			parts := strings.Split(line, " | ")
			field := parts[len(parts)-1]
			if strings.HasSuffix(path, "invalid.txt") && len(parts) >= 3 {
				field = parts[1]
			}
			if fs := strings.Fields(field); len(fs) > 0 {
				if b, err := hex.DecodeString(fs[0]); err == nil {
					f.Add(b)
				}
			}
		}
		file.Close()
	}
	s, err := New(Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig()})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { s.timer.close(); s.conn.Close() }()
	src := netip.MustParseAddrPort("127.0.0.1:40000")
	reg, err := udp.Append(nil, &udp.Register{Seq: 1, TaskKey: "after", PID: 7, Priority: 3, DeviceName: "gpu"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.handle(b, src)
		s.sendReady()
		s.out, s.outBuf = s.out[:0], s.outBuf[:0]
		// Still serving: a registration is acknowledged.
		s.handle(reg, src)
		s.sendReady()
		acked := false
		for _, d := range s.out {
			if m, err := udp.Decode(d.Payload); err == nil && m.Type() == udp.TypeRegisterAck {
				acked = true
			}
		}
		if !acked {
			t.Fatal("no RegisterAck after the datagram")
		}
		s.out, s.outBuf = s.out[:0], s.outBuf[:0]
	})
}
