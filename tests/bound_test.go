package tests

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fikit/fikit/simgpu/timeline"
	"github.com/fikit/fikit/udp"
	"github.com/fikit/fikit/udp/board"
)

// kernelSpan is one kernel on simgpu's timeline: from its arrival on the
// device to its end.
type kernelSpan struct{ arrive, start, end int64 }

func kernelSpans(recs []timeline.Record) []kernelSpan {
	by := map[uint64]*kernelSpan{}
	var order []uint64
	for _, r := range recs {
		s := by[r.Seq]
		if s == nil {
			s = &kernelSpan{arrive: r.ArriveNs, start: r.StartNs}
			by[r.Seq] = s
			order = append(order, r.Seq)
		}
		s.start = min(s.start, r.StartNs)
		s.end = max(s.end, r.EndNs)
	}
	out := make([]kernelSpan, 0, len(order))
	for _, q := range order {
		out = append(out, *by[q])
	}
	slices.SortFunc(out, func(a, b kernelSpan) int { return int(a.arrive - b.arrive) })
	return out
}

// backlogAt is the device time the task's kernels still had to run when k
// arrived (its own included): what a better task arriving then would
// have found ahead of it.
func backlogAt(ks []kernelSpan, k kernelSpan) int64 {
	var b int64
	for _, o := range ks {
		if o.arrive <= k.arrive && o.end > k.arrive {
			b += o.end - max(k.arrive, o.start)
		}
	}
	return b
}

// TestHookMicrosecondBound: while a better priority is registered on its
// GPU, a task keeps its predicted GPU time queued or running within the
// daemon's bound (KernelTimes; docs/scheduler.md "The µs bound"), kept from
// the predicted durations and the clock: a kernel longer than the bound
// goes alone, and nothing goes that would still run when the better
// priority is predicted back (the board's next_ns). Ground truth: simgpu's
// timeline. Each run of the launcher launches its three kernels back to
// back and then synchronizes.
func TestHookMicrosecondBound(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	const kernelNs = 100_000
	for _, c := range []struct {
		name           string
		bound, predict uint32 // the daemon's bound and its prediction of every kernel
		better         bool
		// most: the largest backlog a kernel's arrival may find (its own
		// included); least: what it must reach at least (unbounded).
		most, least int64
		nextIn      time.Duration // a better return predicted this long after the first launch
	}{
		{name: "bounded", bound: 150_000, predict: kernelNs, better: true, most: 150_000 + boundSlack},
		{name: "no better priority", bound: 150_000, predict: kernelNs, least: 250_000},
		{name: "longer than the bound: alone", bound: 150_000, predict: 200_000, better: true, most: kernelNs + boundSlack},
		{name: "a better return predicted", bound: 1_000_000, predict: kernelNs, better: true, most: 1_000_000 + boundSlack,
			nextIn: 2 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBoard(t)
			mask := uint64(1 << 7)
			if c.better {
				mask |= 1
			}
			p := schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing, Board: b, Registered: mask,
				KernelTimes: &udp.KernelTimes{BoundNS: c.bound, DefaultNS: c.predict},
				Hint:        &board.Hint{NextNs: board.NoneExpected, SwitchNs: 140_000}}
			if c.nextIn > 0 {
				p.HintAt, p.HintNextIn = 2, c.nextIn
			}
			sched := newFakeSched(t, p)
			tl := timelineOf(t)
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=7", "FIKIT_CONNECT_TIMEOUT_MS=3000",
				"FIKIT_SIMGPU_TIMELINE="+tl)
			// The kernel times arrive after the RegisterAck: the first
			// run's launches may go before them.
			r := runCmd(t, hookTimeout, env, launcher, kernelsPTX(t), "direct", "8", "100000")
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			ks := kernelSpans(readTimeline(t, tl))
			if len(ks) != 24 {
				t.Fatalf("%d kernels on the timeline, want 24", len(ks))
			}
			var most int64
			for _, k := range ks[3:] {
				most = max(most, backlogAt(ks, k))
			}
			if c.most > 0 && most > c.most || most < c.least {
				t.Fatalf("the largest backlog a kernel found on arrival: %.0fus; want %s", float64(most)/1e3,
					map[bool]string{true: "≤ " + us(c.most), false: "≥ " + us(c.least)}[c.most > 0])
			}
			t.Logf("%s: the largest backlog a kernel found on arrival %s", c.name, us(most))
			if next := sched.HintNext(); c.nextIn > 0 {
				for i, k := range ks {
					if k.arrive < next && k.end > next+boundSlack {
						t.Errorf("kernel %d ran across the predicted return (%s before it to %s after)", i,
							us(next-k.arrive), us(k.end-next))
					}
				}
			}
		})
	}
}

// boundSlack is what a backlog may exceed the bound by: the cursor counts a
// launch from its call, simgpu from its arrival on the device, and a
// launching thread that waited wakes late on a loaded host (a later
// arrival, a smaller backlog: the slack only covers the start).
const boundSlack = 30_000

func us(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// TestHookBoardResume: the waiter the daemon lets resume (the board's
// resume_task: the fake daemon's first task ID) that waits for a grant
// goes without it once the board shows the better priorities' runs ended,
// their next run leaving room (docs/scheduler.md "Resuming on the board"), and reports the launch;
// the later launches go without asking while the better priorities stay
// between runs. With resume off the launch waits for the grant (here: its
// timeout: the fake daemon never answers).
func TestHookBoardResume(t *testing.T) {
	launcher := requireBins(t, "hook-launcher")[0]
	const grantTimeout = 3 * time.Second
	for _, resume := range []bool{true, false} {
		t.Run(map[bool]string{true: "resume", false: "off"}[resume], func(t *testing.T) {
			b := newBoard(t)
			sched := newFakeSched(t, schedPolicy{Role: udp.RoleWaiter, Phase: udp.PhaseSharing, Board: b, NoGrant: true,
				Registered:  1 | 1<<7,
				KernelTimes: &udp.KernelTimes{BoundNS: 1_000_000, DefaultNS: 50_000},
				Hint:        &board.Hint{NextNs: board.NoneExpected, SwitchNs: 140_000, Resume: resume, ResumeTask: 1}})
			// The better priority is inside a run.
			b.Note(0, 0, monoNow())
			tl := timelineOf(t)
			env := hookEnv(t, uniqueShm(t), sched.Addr(), "FIKIT_PRIORITY=7", "FIKIT_CONNECT_TIMEOUT_MS=3000",
				"FIKIT_GRANT_TIMEOUT_MS="+strconv.FormatInt(grantTimeout.Milliseconds(), 10),
				"FIKIT_SIMGPU_TIMELINE="+tl)
			p := startCmd(t, env, launcher, kernelsPTX(t), "direct", "2", "50000")
			// Its first launch asks, and waits: the daemon never answers.
			if !waitFor(10*time.Second, func() bool { return len(ofType[*udp.LaunchRequest](sched.Received())) > 0 }) {
				t.Fatalf("no launch request: %s", p.Kill())
			}
			time.Sleep(100 * time.Millisecond)
			ended := monoNow()
			b.RunEnd(0, 0, ended) // the better priority's run ends
			r := p.Wait(2 * grantTimeout)
			if r.ExitCode != 0 {
				t.Fatalf("launcher: %v", r)
			}
			ks := kernelSpans(readTimeline(t, tl))
			if len(ks) != 6 {
				t.Fatalf("%d kernels on the timeline, want 6", len(ks))
			}
			wait := time.Duration(ks[0].arrive - ended)
			reqs := ofType[*udp.LaunchRequest](sched.Received())
			t.Logf("first kernel on the device %v after the run end; %d launch requests", wait.Round(time.Microsecond), len(reqs))
			if !resume {
				if wait < grantTimeout/2 {
					t.Fatalf("with resume off the first launch went %v after the run end, before its grant timed out", wait)
				}
				return
			}
			if wait < 0 || wait > time.Second {
				t.Fatalf("the first launch went %v after the better priority's run end on the board, want at once", wait)
			}
			if len(reqs) != 1 {
				t.Errorf("%d launch requests, want 1: the launches after the resume go unasked", len(reqs))
			}
			// Every launch reported: the resumed one too (its report takes
			// the request out of the daemon's queue).
			if !waitFor(2*time.Second, func() bool { return len(launchesByTask(sched.Received())[1]) >= 6 }) {
				t.Errorf("launches heard: %+v", launchesByTask(sched.Received())[1])
			}
			for _, l := range launchesByTask(sched.Received())[1] {
				if l.Seq == reqs[0].Seq && !l.Request {
					return
				}
			}
			t.Errorf("the resumed launch %d was not reported after its request", reqs[0].Seq)
		})
	}
}
