package devmodel

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// Properties over random workloads, forecasts, configuration errors and
// repair. The rule-by-rule tests are in devmodel_test.go.

// randomWork enqueues a random multi-context, multi-stream workload,
// advancing either to each enqueue time or in steps of `step` (0: event-driven).
func randomWork(t *testing.T, model Model, seed uint64, step int64, check func(d *Device, now int64)) []Segment {
	cfg := legacyConfig()
	cfg.Model = model
	cfg.Timeslice = 300 * time.Microsecond
	d := newDev(t, cfg)
	ctxs := []int{openCtx(t, d), openCtx(t, d), openCtx(t, d)}
	rng := rand.New(rand.NewPCG(seed, 7))
	type pend struct {
		at  int64
		ctx int
		op  Op
	}
	var ops []pend
	now := int64(0)
	for i := 0; i < 300; i++ {
		now += rng.Int64N(40 * us)
		c := ctxs[rng.IntN(3)]
		var op Op
		switch r := rng.IntN(10); {
		case r < 7:
			op = kernel(uint32(rng.IntN(3)), rng.Int64N(400*us), uint64(i))
		case r < 9:
			op = copyOp(uint32(rng.IntN(3)), uint64(rng.IntN(1<<20)), rng.IntN(2) == 0)
		default:
			op = Op{Type: Event, Stream: uint32(rng.IntN(3))}
		}
		ops = append(ops, pend{now, c, op})
	}
	var segs []Segment
	t0 := int64(0)
	for len(ops) > 0 || d.NextEvent() != Never {
		next := Never
		if len(ops) > 0 {
			next = ops[0].at
		}
		if step > 0 {
			t0 += step
		} else {
			t0 = min(next, d.NextEvent())
		}
		if t0 > next {
			t0 = next
		}
		segs = append(segs, d.Advance(t0)...)
		if check != nil {
			check(d, t0)
		}
		for len(ops) > 0 && ops[0].at <= t0 {
			enqueue(t, d, ops[0].ctx, ops[0].op, ops[0].at)
			ops = ops[1:]
		}
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, c := range ctxs {
			d.Retire(c)
		}
	}
	return segs
}

func TestEventDrivenMatchesFineSteps(t *testing.T) {
	for _, model := range []Model{Timeslice, FIFO} {
		a := randomWork(t, model, 11, 0, nil)
		b := randomWork(t, model, 11, 3*us, nil)
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%v: %d vs %d segments", model, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%v: segment %d differs: %+v vs %+v", model, i, a[i], b[i])
			}
		}
		checkNoOverlap(t, a)
		pre := 0
		for _, s := range a {
			if !s.Last {
				pre++
			}
		}
		if model == Timeslice && pre == 0 {
			t.Fatal("the random workload never preempted: the test does not exercise slices")
		}
	}
}

func TestForecastIsALowerBound(t *testing.T) {
	type query struct {
		ctx int
		seq uint64
		fc  int64
	}
	var qs []query
	var dev *Device
	check := func(d *Device, now int64) {
		dev = d
		for ci := 0; ci < 3; ci++ {
			for seq := uint64(1); seq <= 120; seq += 7 {
				if fc := d.Forecast(ci, seq, now); fc != Never {
					if done, _, _ := d.Done(ci, seq); !done {
						qs = append(qs, query{ci, seq, fc})
					}
				}
			}
		}
	}
	segs := randomWork(t, Timeslice, 21, 0, check)
	_ = dev
	ends := map[[2]uint64]int64{}
	for _, s := range segs {
		if s.Last {
			ends[[2]uint64{uint64(s.Ctx), s.Seq}] = s.End
		}
	}
	n := 0
	for _, q := range qs {
		if e, ok := ends[[2]uint64{uint64(q.ctx), q.seq}]; ok {
			n++
			if q.fc > e {
				t.Fatalf("forecast %d for ctx %d seq %d is after its end %d", q.fc, q.ctx, q.seq, e)
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d forecasts checked", n)
	}
}

func TestForecastExactWhenAlone(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	c := openCtx(t, d)
	var seqs []uint64
	for i := 0; i < 20; i++ {
		seqs = append(seqs, enqueue(t, d, c, kernel(0, int64(i+1)*10*us, 0), int64(i)*us))
	}
	fc := d.Forecast(c, seqs[19], 20*us)
	segs := d.Advance(1 << 40)
	if end := segs[len(segs)-1].End; fc != end {
		t.Fatalf("forecast %d, actual %d", fc, end)
	}
}

func TestConfigErrors(t *testing.T) {
	cfg := legacyConfig()
	cfg.Timeslice = 0
	if _, err := New(cfg, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("want ErrConfig, got %v", err)
	}
	d := newDev(t, legacyConfig())
	if _, err := d.Enqueue(5, kernel(0, 1, 0), 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("enqueue on a closed context: %v", err)
	}
	c := openCtx(t, d)
	if _, err := d.Enqueue(c, kernel(MaxStreams, 1, 0), 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("stream out of range: %v", err)
	}
	for i := 1; i < MaxContexts; i++ {
		openCtx(t, d)
	}
	if _, err := d.OpenContext(1); !errors.Is(err, ErrNoContext) {
		t.Fatalf("65th context: %v", err)
	}
}

func TestRepairKeepsValidState(t *testing.T) {
	d := newDev(t, legacyConfig())
	a, b := openCtx(t, d), openCtx(t, d)
	enqueue(t, d, a, kernel(1, 3000*us, 1), 0)
	enqueue(t, d, a, kernel(2, 10*us, 2), 0)
	enqueue(t, d, b, kernel(0, 10*us, 3), 0)
	d.Advance(100 * us)
	before := d.Forecast(b, 1, 100*us)
	if n := d.Repair(); n != 0 {
		t.Fatalf("repair of a valid state made %d fixes", n)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if after := d.Forecast(b, 1, 100*us); after != before {
		t.Fatalf("repair changed the schedule: %d -> %d", before, after)
	}
	segs := d.Advance(1 << 40)
	if len(segs) != 4 { // a's first kernel is preempted once by b
		t.Fatalf("segments after repair %+v", segs)
	}
}
