package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/udp"
)

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader(`
# who        best
uid:1000     3
key:batch-*  7   # batch jobs
remote       5
user:root    0
*            6
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uid   uint32
		known bool
		key   string
		want  uint8
	}{
		{1000, true, "svc", 3},
		{1000, true, "batch-1", 3}, // the first match decides
		{1001, true, "batch-1", 7},
		{1001, false, "svc", 5},
		{0, true, "svc", 0},
		{1001, true, "svc", 6},
	} {
		if got, r := p.Allowed(c.uid, c.known, c.key); got != c.want || r == nil {
			t.Errorf("Allowed(%d, %v, %q) = %d (%v), want %d", c.uid, c.known, c.key, got, r, c.want)
		}
	}
	if got, r := (&PriorityPolicy{}).Allowed(5, true, "x"); got != 0 || r != nil {
		t.Errorf("empty policy: %d %v", got, r)
	}
	d := DefaultPolicy(1000)
	if b, _ := d.Allowed(1000, true, "x"); b != 0 {
		t.Error("default: the daemon's user limited")
	}
	if b, _ := d.Allowed(0, true, "x"); b != 0 {
		t.Error("default: root limited")
	}
	if b, _ := d.Allowed(1001, true, "x"); b != 5 {
		t.Error("default: another user not limited to 5")
	}
	if b, _ := d.Allowed(1000, false, "x"); b != 5 {
		t.Error("default: an unknown user not limited to 5")
	}
	for _, bad := range []string{"uid:x 1", "uid:1 10", "uid:1", "key:[ 1", "group:1 2", "user:no-such-user-fikit 1", "* 1 2"} {
		if _, err := ParsePolicy(strings.NewReader(bad)); !errors.Is(err, ErrPolicy) {
			t.Errorf("%q: %v, want ErrPolicy", bad, err)
		}
	}
	if _, err := LoadPolicy(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrPolicy) {
		t.Errorf("missing file: %v", err)
	}
}

// Group rules match a uid whose user is in the group, primary or
// supplementary; a uid the daemon cannot see, or without a user, matches
// none.
func TestPolicyGroups(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader("gid:2000 1\ngroup:root 2\n* 6"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules[1].Kind != "gid" || p.Rules[1].GID != 0 {
		t.Fatalf("group:root parsed as %+v", p.Rules[1])
	}
	p.groupsOf = func(uid uint32) []uint32 {
		return map[uint32][]uint32{1000: {1000, 2000}, 1001: {1001}, 0: {0}}[uid]
	}
	for _, c := range []struct {
		uid   uint32
		known bool
		want  uint8
	}{{1000, true, 1}, {1001, true, 6}, {0, true, 2}, {1000, false, 6}, {4242, true, 6}} {
		if got, _ := p.Allowed(c.uid, c.known, "svc"); got != c.want {
			t.Errorf("Allowed(uid %d, known %v) = %d, want %d", c.uid, c.known, got, c.want)
		}
	}
	// The system's groups: root's user is in group root.
	sys := &PriorityPolicy{}
	if gids := sys.groupsOfUID(0); !slices.Contains(gids, 0) {
		t.Errorf("root's groups %v lack gid 0", gids)
	}
	if gids := sys.groupsOfUID(0x7ffffff0); len(gids) != 0 {
		t.Errorf("a uid without a user has groups %v", gids)
	}
}

// TestPeerUID: the kernel's word on who owns a local socket, by both ways
// of asking, for a bound and for a connected socket.
func TestPeerUID(t *testing.T) {
	d, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dst := d.LocalAddr().(*net.UDPAddr).AddrPort()
	bound, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer bound.Close()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	me := uint32(os.Getuid())
	for _, c := range []interface{ LocalAddr() net.Addr }{bound, conn} {
		src := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if uid, ok := peerUID(src, dst); !ok || uid != me {
			t.Errorf("peerUID(%v) = %d, %v; want %d", src, uid, ok, me)
		}
		if uid, ok := scanUID(src); !ok || uid != me {
			t.Errorf("scanUID(%v) = %d, %v; want %d", src, uid, ok, me)
		}
		if uid, err := diagUID(src, dst); err != nil {
			t.Logf("sock_diag unavailable (%v): the scan answers", err)
		} else if uid != me {
			t.Errorf("diagUID(%v) = %d, want %d", src, uid, me)
		}
	}
	src := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	conn.Close()
	if _, ok := peerUID(src, dst); ok {
		t.Error("a closed socket still found")
	}
}

// TestPriorityPolicy: a claim better than the policy allows its user is
// registered at the allowed priority and the hook told so; an allowed one
// is kept.
func TestPriorityPolicy(t *testing.T) {
	me := uint32(os.Getuid())
	for _, c := range []struct {
		policy string
		want   uint8
	}{{"* 5", 5}, {"uid:" + strconv.FormatUint(uint64(me), 10) + " 0\n* 5", 0}, {"key:svc 2\n* 0", 2}, {"remote 0\n* 4", 4}} {
		p, err := ParsePolicy(strings.NewReader(c.policy))
		if err != nil {
			t.Fatal(err)
		}
		s := startServerWith(t, Config{Listen: "127.0.0.1:0", Store: store.NewMemory(), Scheduler: scheduler.DefaultConfig(), Policy: p})
		ack, e := newFakeHook(t, s).registerAnswered(&udp.Register{Seq: 1, TaskKey: "svc", PID: 1, Priority: 0,
			DeviceUUID: [16]byte{1}, DeviceName: "g"}, c.want > 0)
		if ack == nil {
			t.Fatalf("%q: no ack", c.policy)
		}
		ts := s.Status().Tasks
		if len(ts) != 1 || ts[0].Priority != c.want {
			t.Fatalf("%q: tasks %+v, want one at priority %d", c.policy, ts, c.want)
		}
		if c.want > 0 && (e == nil || e.Code != udp.CodeInvalidValue || e.TaskID != ack.TaskID) {
			t.Errorf("%q: hook told %+v, want an invalid-value error about task %d", c.policy, e, ack.TaskID)
		}
		if c.want == 0 && e != nil {
			t.Errorf("%q: an allowed claim drew %+v", c.policy, e)
		}
	}
}
