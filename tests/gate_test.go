package tests

import (
	"os"
	"testing"
	"time"

	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// TestHookGate: a lower-priority task launches on a permission only while
// it is fresh (docs/design.md "Board"). A waiter's credit goes unused, and
// each launch asks, once a better priority launched on the board after
// what the grant was given against, or once the grant expired; with
// FIKIT_BOARD=off the board is not looked at. A grant that is stale on
// arrival is asked for again (the daemon reads the board first), at most
// FK_REASK_MAX times. A holder of lower priority (the better one idle past
// its TTL) asks for every launch once the better one launches on the
// board.
func TestHookGate(t *testing.T) {
	const reaskMax = 4 // FK_REASK_MAX (hookclient/core.h)
	launcher := requireBins(t, "hook-launcher")[0]
	type want int
	const (
		useCredit want = iota // a request, then `credit` launches without
		askEach               // every launch a request
	)
	cases := []struct {
		name  string
		board bool
		// better: priority 0 launched on the board before the test's
		// service started, after the grants' seen time.
		better bool
		gate   udp.Gate
		env    []string
		want   want
		// spoil, if set, breaks the board after the better launch: the
		// hook then goes by UDP alone (and uses its credit).
		spoil func(t *testing.T, path string)
		// fresh: the fake daemon answers a request asked again against
		// now; asks: the requests each asking launch makes.
		fresh bool
		asks  int
	}{
		{name: "fresh", board: true, gate: udp.Gate{SeenNS: uint64(monoNow())}, want: useCredit},
		// The grant against now that the second ask gets is fresh: its
		// credit is used.
		{name: "better launched", board: true, better: true, gate: udp.Gate{SeenNS: 1}, fresh: true, want: useCredit,
			asks: 2},
		{name: "better launched, the daemon never learns", board: true, better: true, gate: udp.Gate{SeenNS: 1},
			want: askEach, asks: 1 + reaskMax},
		{name: "better launched, board off", board: true, better: true, gate: udp.Gate{SeenNS: 1},
			env: []string{"FIKIT_BOARD=off"}, want: useCredit},
		{name: "board removed", board: true, better: true, gate: udp.Gate{SeenNS: 1}, want: useCredit,
			spoil: func(t *testing.T, path string) { os.Remove(path) }},
		{name: "board of another daemon", board: true, better: true, gate: udp.Gate{SeenNS: 1}, want: useCredit,
			spoil: func(t *testing.T, path string) {
				if _, err := board.Create(path); err != nil { // a new generation at the same path
					t.Fatal(err)
				}
			}},
		{name: "board truncated", board: true, better: true, gate: udp.Gate{SeenNS: 1}, want: useCredit,
			spoil: func(t *testing.T, path string) { os.Truncate(path, 100) }},
		{name: "expired", gate: udp.Gate{ExpiresNS: 1}, want: askEach},
		{name: "not expired", gate: udp.Gate{ExpiresNS: uint64(monoNow() + int64(time.Hour))}, want: useCredit},
	}
	const credit = 2
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing, Credit: credit, Gate: c.gate,
				FreshReasks: c.fresh}
			if c.board {
				p.Board = newBoard(t)
			}
			sched := newFakeSched(t, p)
			if c.better {
				// The section the service's GPU will get is the first.
				p.Board.Note(0, 0, monoNow())
			}
			if c.spoil != nil {
				c.spoil(t, p.Board.Path())
			}
			env := hookEnv(t, uniqueShm(t), sched.Addr(), append([]string{"FIKIT_PRIORITY=7",
				"FIKIT_CONNECT_TIMEOUT_MS=3000", "FIKIT_GRANT_TIMEOUT_MS=5000"}, c.env...)...)
			_, ls := launchAll(t, sched, env, launcher, kernelsPTX(t), "direct", "4")
			for i, l := range ls {
				wantReq := c.want == askEach || i%(credit+1) == 0
				wantAsks := 0
				if wantReq {
					wantAsks = max(c.asks, 1)
				}
				if l.Seq != uint32(i+1) || l.Request != wantReq || l.Asks != wantAsks {
					t.Errorf("launch %d: %+v, want seq %d request %v asked %d times", i, l, i+1, wantReq, wantAsks)
				}
			}
		})
	}

	t.Run("holder overtaken", func(t *testing.T) {
		b := newBoard(t)
		const at = 6
		sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, Board: b, NoteAt: at})
		env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=7", "FIKIT_CONNECT_TIMEOUT_MS=3000",
			"FIKIT_GRANT_TIMEOUT_MS=5000")
		// Runs of 1 ms kernels: the sender reports the first launches
		// long before the last run is launched.
		_, ls := launchAll(t, sched, env, launcher, kernelsPTX(t), "direct", "30", "1000000")
		first := -1
		for i, l := range ls {
			switch {
			case l.Request && first < 0:
				first = i
			case !l.Request && first >= 0:
				t.Errorf("launch %d went unasked after launch %d asked: %+v", i, first, l)
			}
		}
		if first < at || first == len(ls)-1 {
			t.Fatalf("first request at launch %d of %d: want one after launch %d, and asking from then on", first, len(ls), at)
		}
		t.Logf("the holder asked from launch %d (the better priority launched on the board at launch %d heard) of %d", first, at, len(ls))
	})
}

// TestHookInflightBound: while a better priority is registered on its GPU
// (the board says so), a task has at most FIKIT_INFLIGHT kernels queued or
// running — what a returning better task finds ahead of it; with no better
// one registered its launches are not held back. Ground truth: simgpu's
// timeline, each kernel from its arrival on the device to its end.
func TestHookInflightBound(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	for _, c := range []struct {
		name   string
		better bool
		max    int // most kernels in flight at once: at most (bound), or at least (unbound)
	}{{"better registered", true, 1}, {"alone", false, 2}} {
		t.Run(c.name, func(t *testing.T) {
			b := newBoard(t)
			sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, Board: b})
			mask := uint64(1 << 7)
			if c.better {
				mask |= 1
			}
			b.SetRegistered(0, mask) // the section the service's GPU will get
			tl := timelineOf(t)
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=7", "FIKIT_CONNECT_TIMEOUT_MS=3000",
				"FIKIT_INFLIGHT=1", "FIKIT_SIMGPU_TIMELINE="+tl)
			r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "direct", "5", "200000")
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			units := parseLauncher(t, r.Stdout)
			type span struct{ from, to int64 }
			kern := map[uint64]*span{}
			for _, rec := range readTimeline(t, tl) {
				s := kern[rec.Seq]
				if s == nil {
					s = &span{from: rec.ArriveNs}
					kern[rec.Seq] = s
				}
				s.to = max(s.to, rec.EndNs)
			}
			if len(kern) != len(units) {
				t.Fatalf("%d kernels on the timeline, %d launched", len(kern), len(units))
			}
			most := 0
			for _, s := range kern {
				n := 0
				for _, o := range kern {
					if o.from <= s.from && s.from < o.to {
						n++
					}
				}
				most = max(most, n)
			}
			if c.better && most > c.max || !c.better && most < c.max {
				t.Fatalf("at most %d kernels in flight at once (want %s %d)", most, map[bool]string{true: "≤", false: "≥"}[c.better], c.max)
			}
			t.Logf("%s: at most %d of %d kernels in flight at once", c.name, most, len(units))
		})
	}
}
