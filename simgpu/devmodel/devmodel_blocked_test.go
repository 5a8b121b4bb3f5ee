package devmodel

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// Blocked time: how long a ready kernel waited for other contexts' kernels
// and context switches (the ground truth behind fikit's interference figure).

func TestBlockedBySliceAndSwitch(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	a, b := openCtx(t, d), openCtx(t, d)
	got := run(t, d, []timedOp{
		{0, a, kernel(0, 10000*us, 1)},
		{500 * us, b, kernel(0, 1000*us, 2)},
	})
	// a runs [4, 2004] µs; b, ready at 504, waits for a's slice and the
	// switch (1525 µs) and runs [2029, 3029]; a, preempted at 2004, waits
	// for two switches and b (1050 µs) before its second segment.
	want := []struct {
		ctx             int
		arrive, blocked int64
	}{{a, 4 * us, 0}, {b, 504 * us, 1525 * us}, {a, 4 * us, 1050 * us}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].Ctx != w.ctx || got[i].Arrive != w.arrive || int64(got[i].Blocked) != w.blocked {
			t.Errorf("segment %d: ctx %d arrive %d blocked %d, want ctx %d arrive %d blocked %d",
				i, got[i].Ctx, got[i].Arrive, got[i].Blocked, w.ctx, w.arrive, w.blocked)
		}
	}
	for ctx, w := range map[int]Totals{
		a: {Kernels: 1, Busy: 10 * time.Millisecond, Blocked: 1050 * time.Microsecond},
		b: {Kernels: 1, Busy: 1 * time.Millisecond, Blocked: 1525 * time.Microsecond},
	} {
		if tot, err := d.ContextTotals(ctx); err != nil || tot != w {
			t.Errorf("context %d totals %+v (%v), want %+v", ctx, tot, err, w)
		}
	}
	if _, err := d.ContextTotals(63); err == nil {
		t.Error("totals of a context that is not open")
	}
}

// A context's own queued work is not interference: two kernels of one
// context on one stream, and on two streams, are never blocked.
func TestOwnWorkIsNotBlocked(t *testing.T) {
	for _, model := range []Model{Timeslice, FIFO} {
		cfg := legacyConfig()
		cfg.Model = model
		d := newDev(t, cfg)
		a := openCtx(t, d)
		segs := run(t, d, []timedOp{
			{0, a, kernel(0, 100*us, 1)},
			{1 * us, a, kernel(0, 100*us, 2)},
			{2 * us, a, kernel(1, 100*us, 3)},
		})
		for _, s := range segs {
			if s.Blocked != 0 {
				t.Errorf("%v: kernel %d of the only context blocked %v", model, s.Tag, s.Blocked)
			}
		}
	}
}

// With one stream per context a kernel is ready from its arrival or its
// predecessor's end, whichever is later, until it runs; the engine is never
// idle while a kernel is ready, so every moment a ready kernel does not run
// is blocked time. Checked against that, from the segments alone, for random
// workloads under both models, whatever the advance step.
func TestBlockedMatchesSegments(t *testing.T) {
	for _, model := range []Model{Timeslice, FIFO} {
		for _, step := range []int64{0, 7 * us} {
			cfg := legacyConfig()
			cfg.Model = model
			cfg.Timeslice = 300 * time.Microsecond
			d := newDev(t, cfg)
			ctxs := []int{openCtx(t, d), openCtx(t, d), openCtx(t, d)}
			rng := rand.New(rand.NewPCG(21, uint64(step)))
			var ops []timedOp
			now := int64(0)
			for i := 0; i < 400; i++ {
				now += rng.Int64N(50 * us)
				ops = append(ops, timedOp{now, ctxs[rng.IntN(3)], kernel(0, 1+rng.Int64N(200*us), uint64(i))})
			}
			var segs []Segment
			if step == 0 {
				segs = run(t, d, ops)
			} else {
				for t0 := int64(0); len(ops) > 0 || d.NextEvent() != Never; t0 += step {
					segs = append(segs, d.Advance(t0)...)
					for len(ops) > 0 && ops[0].at <= t0 {
						enqueue(t, d, ops[0].ctx, ops[0].op, t0)
						ops = ops[1:]
					}
				}
			}
			checkBlocked(t, model, segs)
			var sum [3]time.Duration
			for _, s := range segs {
				sum[s.Ctx] += s.Blocked
			}
			var any time.Duration
			for i, c := range ctxs {
				tot, err := d.ContextTotals(c)
				if err != nil || tot.Blocked != sum[c] {
					t.Fatalf("%v step %d: context %d totals %+v (%v), segments sum %v", model, step, i, tot, err, sum[c])
				}
				any += tot.Blocked
			}
			if any == 0 {
				t.Fatalf("%v: nothing was ever blocked: the workload does not contend", model)
			}
		}
	}
}

func checkBlocked(t *testing.T, model Model, segs []Segment) {
	t.Helper()
	type kernelRun struct {
		ctx     int
		arrive  int64
		segs    []Segment
		blocked time.Duration
	}
	byKernel := map[[2]uint64]*kernelRun{}
	var order [][2]uint64
	for _, s := range segs {
		k := [2]uint64{uint64(s.Ctx), s.Seq}
		kr := byKernel[k]
		if kr == nil {
			kr = &kernelRun{ctx: s.Ctx, arrive: s.Arrive}
			byKernel[k] = kr
			order = append(order, k)
		}
		kr.segs = append(kr.segs, s)
		kr.blocked += s.Blocked
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i][0] != order[j][0] {
			return order[i][0] < order[j][0]
		}
		return order[i][1] < order[j][1]
	})
	prevEnd := map[int]int64{}
	for _, k := range order {
		kr := byKernel[k]
		ready := max(kr.arrive, prevEnd[kr.ctx])
		want := kr.segs[0].Start - ready
		for i := 1; i < len(kr.segs); i++ {
			want += kr.segs[i].Start - kr.segs[i-1].End
		}
		if int64(kr.blocked) != want {
			t.Fatalf("%v: kernel %v (arrive %d, ready %d, segments %+v): blocked %d, want %d",
				model, k, kr.arrive, ready, kr.segs, kr.blocked, want)
		}
		prevEnd[kr.ctx] = kr.segs[len(kr.segs)-1].End
	}
}
