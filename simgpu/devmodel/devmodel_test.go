package devmodel

import (
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

const us = int64(time.Microsecond)

// legacyConfig is the legacy preset, whose numbers (25 µs switch, 2 ms
// slice, 4 µs launch latency) the expectations of these tests are written in.
func legacyConfig() Config {
	cfg, err := Preset("legacy")
	if err != nil {
		panic(err)
	}
	return cfg
}

// The presets: the default one is DefaultConfig, every one is a valid
// device, the legacy one keeps the model before calibration, and an unknown
// name is refused.
func TestPresets(t *testing.T) {
	names := PresetNames()
	if len(names) < 2 || names[0] != DefaultPreset || DefaultPreset != "h200" {
		t.Fatalf("presets %v, default %q: want h200 first", names, DefaultPreset)
	}
	for _, n := range names {
		cfg, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(cfg, 0)
		if err != nil {
			t.Fatalf("preset %s: %v", n, err)
		}
		d.Close()
	}
	if def, _ := Preset(DefaultPreset); def != DefaultConfig() {
		t.Errorf("DefaultConfig %+v is not preset %s's %+v", DefaultConfig(), DefaultPreset, def)
	}
	want := Config{Model: Timeslice, Timeslice: 2 * time.Millisecond, Switch: 25 * time.Microsecond,
		LaunchLatency: 4 * time.Microsecond, DefaultKernel: 10 * time.Microsecond, CopyBytesPerSec: 25e9}
	if got := legacyConfig(); got != want {
		t.Errorf("legacy %+v, want %+v", got, want)
	}
	h200, _ := Preset("h200")
	if h200.Switch != 140*time.Microsecond || h200.Timeslice != 2*time.Millisecond || h200.LaunchLatency != 5*time.Microsecond {
		t.Errorf("h200 %v: want 140µs switch, 2ms slice, 5µs launch latency (docs/simgpu.md)", h200)
	}
	if _, err := Preset("h100"); !errors.Is(err, ErrPreset) {
		t.Errorf("unknown preset: %v, want ErrPreset", err)
	}
}

func newDev(t *testing.T, cfg Config) *Device {
	t.Helper()
	d, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func openCtx(t *testing.T, d *Device) int {
	t.Helper()
	c, err := d.OpenContext(1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kernel(stream uint32, dur int64, tag uint64) Op {
	return Op{Type: Kernel, Stream: stream, Duration: time.Duration(dur), Tag: tag}
}

func enqueue(t *testing.T, d *Device, ctx int, op Op, now int64) uint64 {
	t.Helper()
	seq, err := d.Enqueue(ctx, op, now)
	if err != nil {
		t.Fatalf("enqueue at %d: %v", now, err)
	}
	return seq
}

// run enqueues ops at their times (advancing first, as the driver does) and
// then runs the device dry; it returns every segment.
type timedOp struct {
	at  int64
	ctx int
	op  Op
}

func run(t *testing.T, d *Device, ops []timedOp) []Segment {
	t.Helper()
	var segs []Segment
	for _, o := range ops {
		segs = append(segs, d.Advance(o.at)...)
		enqueue(t, d, o.ctx, o.op, o.at)
	}
	segs = append(segs, d.Advance(int64(1)<<60)...)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return segs
}

func checkNoOverlap(t *testing.T, segs []Segment) {
	t.Helper()
	s := append([]Segment(nil), segs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start < s[j].Start })
	for i := 1; i < len(s); i++ {
		if s[i].Start < s[i-1].End {
			t.Fatalf("segments overlap: %+v and %+v", s[i-1], s[i])
		}
	}
}

func TestFIFOAnalytic(t *testing.T) {
	cfg := legacyConfig()
	cfg.Model = FIFO
	d := newDev(t, cfg)
	ctx := openCtx(t, d)
	rng := rand.New(rand.NewPCG(1, 2))
	lat := int64(cfg.LaunchLatency)
	var ops []timedOp
	var want []Segment
	now, prevEnd := int64(1000), int64(0)
	for i := 0; i < 500; i++ {
		now += rng.Int64N(60 * us) // launch-bound and device-bound stretches
		dur := 1*us + rng.Int64N(40*us)
		ops = append(ops, timedOp{now, ctx, kernel(0, dur, uint64(i))})
		start := max(now+lat, prevEnd)
		prevEnd = start + dur
		want = append(want, Segment{Start: start, End: prevEnd, Tag: uint64(i)})
	}
	got := run(t, d, ops)
	if len(got) != len(want) {
		t.Fatalf("got %d segments, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Start != want[i].Start || got[i].End != want[i].End || got[i].Tag != want[i].Tag || !got[i].Last {
			t.Fatalf("kernel %d: got %+v, want start %d end %d", i, got[i], want[i].Start, want[i].End)
		}
	}
	if st := d.Stats(); st.Switches != 0 || st.Kernels != 500 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFIFOAcrossContexts(t *testing.T) {
	cfg := legacyConfig()
	cfg.Model = FIFO
	d := newDev(t, cfg)
	ctxs := []int{openCtx(t, d), openCtx(t, d), openCtx(t, d)}
	rng := rand.New(rand.NewPCG(3, 4))
	lat, sw := int64(cfg.LaunchLatency), int64(cfg.Switch)
	var ops []timedOp
	type exp struct{ start, end int64 }
	want := map[uint64]exp{}
	now, prevEnd, prevCtx := int64(0), int64(0), -1
	for i := 0; i < 300; i++ {
		now += rng.Int64N(30 * us)
		c := ctxs[rng.IntN(len(ctxs))]
		dur := 5*us + rng.Int64N(30*us)
		ops = append(ops, timedOp{now, c, kernel(0, dur, uint64(i))})
		start := max(now+lat, prevEnd)
		if prevCtx >= 0 && c != prevCtx {
			start += sw // a switch begins when the engine turns to the new context
		}
		prevEnd, prevCtx = start+dur, c
		want[uint64(i)] = exp{start, prevEnd}
	}
	got := run(t, d, ops)
	checkNoOverlap(t, got)
	for _, s := range got {
		if w := want[s.Tag]; s.Start != w.start || s.End != w.end {
			t.Fatalf("kernel %d: got [%d,%d] want [%d,%d]", s.Tag, s.Start, s.End, w.start, w.end)
		}
	}
}

func TestTimeslicePreemption(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	a, b := openCtx(t, d), openCtx(t, d)
	got := run(t, d, []timedOp{
		{0, a, kernel(0, 10000*us, 1)},
		{500 * us, b, kernel(0, 1000*us, 2)},
	})
	want := []Segment{
		{Ctx: a, Tag: 1, Start: 4 * us, End: 2004 * us, Index: 0},
		{Ctx: b, Tag: 2, Start: 2029 * us, End: 3029 * us, Index: 0, Last: true},
		{Ctx: a, Tag: 1, Start: 3054 * us, End: 11054 * us, Index: 1, Last: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Ctx != w.Ctx || g.Tag != w.Tag || g.Start != w.Start || g.End != w.End || g.Index != w.Index || g.Last != w.Last {
			t.Fatalf("segment %d: got %+v want %+v", i, g, w)
		}
	}
	st := d.Stats()
	if st.Switches != 2 || st.Preemptions != 1 || st.Switching != 2*cfg.Switch || st.Busy != 11*time.Millisecond {
		t.Fatalf("stats %+v", st)
	}
}

func TestRoundRobin(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	c := []int{openCtx(t, d), openCtx(t, d), openCtx(t, d)}
	got := run(t, d, []timedOp{
		{0, c[0], kernel(0, 5000*us, 0)},
		{0, c[1], kernel(0, 5000*us, 1)},
		{0, c[2], kernel(0, 5000*us, 2)},
	})
	wantCtx := []int{0, 1, 2, 0, 1, 2, 0, 1, 2}
	wantLen := []int64{2000, 2000, 2000, 2000, 2000, 2000, 1000, 1000, 1000}
	if len(got) != len(wantCtx) {
		t.Fatalf("got %d segments: %+v", len(got), got)
	}
	for i, s := range got {
		if s.Ctx != c[wantCtx[i]] || s.End-s.Start != wantLen[i]*us || s.Index != i/3 {
			t.Fatalf("segment %d: %+v", i, s)
		}
		if i > 0 && s.Start-got[i-1].End != int64(cfg.Switch) {
			t.Fatalf("segment %d starts %d after the previous: want one switch", i, s.Start-got[i-1].End)
		}
	}
	if end := got[len(got)-1].End; end != 4*us+15000*us+8*int64(cfg.Switch) {
		t.Fatalf("end %d", end)
	}
}

func TestContextRunsItsReadyWorkFirst(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	a, b := openCtx(t, d), openCtx(t, d)
	var ops []timedOp
	for i := 0; i < 10; i++ {
		ops = append(ops, timedOp{0, a, kernel(0, 100*us, uint64(i))})
	}
	for i := 0; i < 10; i++ {
		ops = append(ops, timedOp{0, b, kernel(0, 100*us, uint64(10+i))})
	}
	got := run(t, d, ops)
	for i, s := range got {
		wantCtx := a
		if i >= 10 {
			wantCtx = b
		}
		if s.Ctx != wantCtx || s.Tag != uint64(i) {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	if gap := got[10].Start - got[9].End; gap != int64(cfg.Switch) {
		t.Fatalf("gap at the switch %d", gap)
	}
	if st := d.Stats(); st.Switches != 1 || st.Busy != 2*time.Millisecond || st.Preemptions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStreamOrder(t *testing.T) {
	for _, model := range []Model{Timeslice, FIFO} {
		cfg := legacyConfig()
		cfg.Model = model
		d := newDev(t, cfg)
		ctxs := []int{openCtx(t, d), openCtx(t, d)}
		rng := rand.New(rand.NewPCG(5, 6))
		var ops []timedOp
		now := int64(0)
		for i := 0; i < 400; i++ {
			now += rng.Int64N(20 * us)
			op := kernel(uint32(rng.IntN(4)), 1*us+rng.Int64N(50*us), uint64(i))
			ops = append(ops, timedOp{now, ctxs[rng.IntN(2)], op})
		}
		got := run(t, d, ops)
		checkNoOverlap(t, got)
		last := map[[2]int]uint64{}
		for _, s := range got {
			k := [2]int{s.Ctx, int(s.Stream)}
			if s.Seq < last[k] {
				t.Fatalf("%v: stream %v out of order: seq %d after %d", model, k, s.Seq, last[k])
			}
			last[k] = s.Seq
		}
	}
}

func TestEarliestArrivalWithinContext(t *testing.T) {
	d := newDev(t, legacyConfig())
	c := openCtx(t, d)
	got := run(t, d, []timedOp{
		{0, c, kernel(1, 100*us, 1)},
		{1 * us, c, kernel(1, 100*us, 2)},
		{2 * us, c, kernel(2, 10*us, 3)},
	})
	want := [][2]int64{{4, 104}, {104, 204}, {204, 214}}
	for i, s := range got {
		if s.Start != want[i][0]*us || s.End != want[i][1]*us {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
}

func copyOp(stream uint32, bytes uint64, nonBlocking bool) Op {
	return Op{Type: Copy, Stream: stream, Bytes: bytes, NonBlocking: nonBlocking}
}

func endOf(t *testing.T, d *Device, ctx int, seq uint64) int64 {
	t.Helper()
	done, end, err := d.Done(ctx, seq)
	if err != nil || !done {
		t.Fatalf("op %d: done=%v err=%v", seq, done, err)
	}
	return end
}

func TestLegacyStreamOrdering(t *testing.T) {
	d := newDev(t, legacyConfig()) // 25 GB/s: 25000 bytes take 1 µs
	c := openCtx(t, d)
	k1 := enqueue(t, d, c, kernel(1, 100*us, 1), 0)
	d.Advance(1 * us)
	c2 := enqueue(t, d, c, copyOp(LegacyStream, 25000, false), 1*us) // waits for k1 (blocking stream 1)
	d.Advance(2 * us)
	c3 := enqueue(t, d, c, copyOp(2, 25000, false), 2*us) // blocking: waits for the legacy c2
	d.Advance(3 * us)
	c4 := enqueue(t, d, c, copyOp(3, 25000, true), 3*us) // non-blocking: waits for nothing
	d.Advance(1 << 40)
	if e := endOf(t, d, c, k1); e != 104*us {
		t.Fatalf("k1 end %d", e)
	}
	if e := endOf(t, d, c, c4); e != 8*us {
		t.Fatalf("non-blocking copy end %d, want 8us", e)
	}
	if e := endOf(t, d, c, c2); e != 105*us {
		t.Fatalf("legacy copy end %d, want 105us", e)
	}
	if e := endOf(t, d, c, c3); e != 106*us {
		t.Fatalf("blocking copy after legacy end %d, want 106us", e)
	}
}

func TestWaitEvent(t *testing.T) {
	d := newDev(t, legacyConfig())
	a, b := openCtx(t, d), openCtx(t, d)
	enqueue(t, d, a, kernel(1, 200*us, 1), 0)
	ev := enqueue(t, d, a, Op{Type: Event, Stream: 1}, 0)
	d.Advance(1 * us)
	enqueue(t, d, b, Op{Type: Wait, Stream: 2, WaitCtx: a, WaitGen: d.ContextGen(a), WaitSeq: ev}, 1*us)
	cp := enqueue(t, d, b, copyOp(2, 25000, false), 1*us)
	free := enqueue(t, d, b, copyOp(3, 25000, false), 1*us)
	d.Advance(1 << 40)
	if e := endOf(t, d, a, ev); e != 204*us {
		t.Fatalf("event end %d", e)
	}
	if e := endOf(t, d, b, cp); e != 205*us {
		t.Fatalf("copy after the wait ends %d, want 205us", e)
	}
	if e := endOf(t, d, b, free); e != 6*us {
		t.Fatalf("independent copy ends %d, want 6us", e)
	}
	if _, err := d.Enqueue(b, Op{Type: Wait, WaitCtx: a, WaitGen: d.ContextGen(a), WaitSeq: 99}, 2*us); !errors.Is(err, ErrInvalid) {
		t.Fatalf("wait for an op never enqueued: %v", err)
	}
}

func TestCopyEngine(t *testing.T) {
	d := newDev(t, legacyConfig())
	a, b := openCtx(t, d), openCtx(t, d)
	enqueue(t, d, a, kernel(1, 100*us, 1), 0)
	ca := enqueue(t, d, a, copyOp(2, 2500000, false), 0) // 100 µs
	cb := enqueue(t, d, b, copyOp(0, 2500000, false), 0)
	segs := d.Advance(1 << 40)
	if len(segs) != 1 || segs[0].Start != 4*us || segs[0].End != 104*us {
		t.Fatalf("kernel beside copies: %+v", segs)
	}
	if e := endOf(t, d, a, ca); e != 104*us {
		t.Fatalf("first copy end %d", e)
	}
	if e := endOf(t, d, b, cb); e != 204*us { // one copy at a time, no switch cost
		t.Fatalf("second copy end %d", e)
	}
	if st := d.Stats(); st.Switches != 0 {
		t.Fatalf("copies paid switches: %+v", st)
	}
}

func TestRingFull(t *testing.T) {
	d := newDev(t, legacyConfig())
	c := openCtx(t, d)
	for i := 0; i < RingSize; i++ {
		enqueue(t, d, c, kernel(0, 1*us, 0), 0)
	}
	if _, err := d.Enqueue(c, kernel(0, 1*us, 0), 0); !errors.Is(err, ErrFull) {
		t.Fatalf("want ErrFull, got %v", err)
	}
	if d.InFlight(c) != RingSize {
		t.Fatalf("in flight %d", d.InFlight(c))
	}
	d.Advance(1 << 40)
	if n := d.Retire(c); n != RingSize {
		t.Fatalf("retired %d", n)
	}
	seq := enqueue(t, d, c, kernel(0, 1*us, 0), 1<<40)
	if seq != RingSize+1 {
		t.Fatalf("seq after wrap %d", seq)
	}
	if done, _, _ := d.Done(c, 1); !done {
		t.Fatal("a retired op must read as done")
	}
}

func TestDropContext(t *testing.T) {
	cfg := legacyConfig()
	d := newDev(t, cfg)
	a, b := openCtx(t, d), openCtx(t, d)
	var seqs []uint64
	for i := 0; i < 5; i++ {
		seqs = append(seqs, enqueue(t, d, a, kernel(0, 1000*us, 1), 0))
	}
	d.Advance(100 * us)
	kb := enqueue(t, d, b, kernel(0, 10*us, 2), 100*us)
	segs, err := d.DropContext(a, 500*us)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || !segs[0].Dropped || !segs[0].Last || segs[0].End != 500*us {
		t.Fatalf("drop segments %+v", segs)
	}
	for _, s := range seqs {
		if done, _, _ := d.Done(a, s); !done {
			t.Fatalf("op %d of the dropped context is not done", s)
		}
	}
	segs = d.Advance(1 << 40)
	if len(segs) != 1 || segs[0].Start != 500*us+int64(cfg.Switch) || endOf(t, d, b, kb) != 535*us {
		t.Fatalf("survivor %+v", segs)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CloseContext(a, 1<<40); err != nil {
		t.Fatal(err)
	}
	if d.ContextGen(a) != 0 {
		t.Fatal("closed context still open")
	}
}

func TestParseModel(t *testing.T) {
	for _, m := range []Model{Timeslice, FIFO} {
		if got, err := ParseModel(m.String()); err != nil || got != m {
			t.Errorf("ParseModel(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseModel("round-robin"); !errors.Is(err, ErrConfig) {
		t.Errorf("an unknown model: %v", err)
	}
}
