package profiler_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/fikit/fikit/profiler"
)

// genRun is one generated run as the daemon would see it.
type genRun struct {
	num     uint32
	records []profiler.Record
	sent    []profiler.Record // what reaches the Builder (records lost or duplicated)
	kernels uint32            // the RunEnd's kernel count
	runNs   uint64
	commit  bool
}

// clean reports whether the Builder must fold this run.
func (g *genRun) clean() bool {
	return g.commit && len(g.records) > 0 && len(g.sent) == len(g.records) && uint32(len(g.sent)) == g.kernels
}

type genTask struct {
	infos []profiler.KernelInfo
	runs  []genRun
}

func randDuration(r *rand.Rand) uint64 {
	switch r.IntN(10) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(10)) + 1
	case 2:
		return uint64(r.Int64N(1e9)) // up to a second
	}
	return uint64(r.Int64N(200_000)) + 1000
}

func genTaskRuns(r *rand.Rand, nRuns int) genTask {
	var g genTask
	nk := 1 + r.IntN(12)
	ids := make([]uint64, nk)
	for i := range ids {
		ids[i] = r.Uint64()
		g.infos = append(g.infos, profiler.KernelInfo{
			ID: ids[i], Name: fmt.Sprintf("_Z7kernel%dPf", i),
			Grid: [3]uint32{uint32(1 + r.IntN(1024)), 1, 1}, Block: [3]uint32{256, 1, 1},
		})
	}
	for t := 0; t < nRuns; t++ {
		run := genRun{num: uint32(t + 1), commit: r.IntN(5) != 0, runNs: uint64(r.Int64N(5e7)) + 1}
		n := 1 + r.IntN(40)
		if r.IntN(30) == 0 {
			n = 0
		}
		for i := 0; i < n; i++ {
			rec := profiler.Record{KernelID: ids[r.IntN(nk)], DurationNs: randDuration(r), GapNs: randDuration(r)}
			switch r.IntN(10) {
			case 0:
				rec.Flags |= profiler.FlagGapSpansRunEnd
			case 1:
				rec.Flags |= profiler.FlagOverlapped
				rec.GapNs = 0
			}
			if i == n-1 {
				rec.Flags |= profiler.FlagGapSpansRunEnd // the hook flags a run's last gap
			}
			run.records = append(run.records, rec)
			// A run lasts at least as long as each of its kernels and
			// in-run gaps (EndRun refuses runs that do not).
			run.runNs = max(run.runNs, rec.DurationNs)
			if rec.Flags&profiler.FlagGapSpansRunEnd == 0 {
				run.runNs = max(run.runNs, rec.GapNs)
			}
		}
		run.sent = run.records
		run.kernels = uint32(n)
		switch r.IntN(20) {
		case 0: // a lost Measurements datagram
			if n > 1 {
				cut := r.IntN(n)
				run.sent = append(append([]profiler.Record(nil), run.records[:cut]...), run.records[cut+1:]...)
			}
		case 1: // a duplicated one
			if n > 0 {
				run.sent = append(append([]profiler.Record(nil), run.records...), run.records[0])
			}
		}
		g.runs = append(g.runs, run)
	}
	return g
}

// feed drives a Builder the way the daemon does: kernel infos first,
// records in random batches, sometimes the first batch of the next run
// before the current run's RunEnd.
func feed(t *testing.T, r *rand.Rand, b *profiler.Builder, g genTask) {
	t.Helper()
	for _, info := range g.infos {
		b.AddKernelInfo(info)
	}
	early := -1 // records of run index early already sent
	for i := range g.runs {
		run := &g.runs[i]
		if early != i {
			sendBatches(r, b, run.num, run.sent)
		}
		if i+1 < len(g.runs) && r.IntN(4) == 0 {
			next := &g.runs[i+1]
			sendBatches(r, b, next.num, next.sent)
			early = i + 1
		}
		wasComplete := b.Complete()
		got := b.EndRun(run.num, run.kernels, run.runNs, run.commit)
		var want profiler.RunOutcome
		switch {
		case wasComplete:
			want = profiler.RunIgnored
		case run.kernels == 0 && len(run.sent) == 0:
			want = profiler.RunEmpty
		case !run.commit:
			want = profiler.RunDiscarded
		case !run.clean():
			want = profiler.RunIncomplete
		default:
			want = profiler.RunCommitted
		}
		if got != want {
			t.Fatalf("run %d: EndRun = %v, want %v", run.num, got, want)
		}
	}
}

func sendBatches(r *rand.Rand, b *profiler.Builder, run uint32, recs []profiler.Record) {
	for len(recs) > 0 {
		n := 1 + r.IntN(len(recs))
		batch := append([]profiler.Record(nil), recs[:n]...)
		b.AddRecords(run, batch)
		for i := range batch { // the Builder must have copied them
			batch[i] = profiler.Record{KernelID: 0xbad}
		}
		recs = recs[n:]
	}
}

// naive computes the paper's formulas directly over the committed runs.
type naiveKernel struct {
	durations, gaps []float64
}

func naive(g genTask, target int) (map[uint64]*naiveKernel, []float64, []float64, []float64) {
	ks := make(map[uint64]*naiveKernel)
	var runTimes, allDur, allGap []float64
	committed := 0
	for _, run := range g.runs {
		if committed == target || !run.clean() {
			continue
		}
		committed++
		runTimes = append(runTimes, float64(run.runNs))
		nt := len(run.records)
		// Σ_t Σ_{0<i≤N_t} K_{t,i}·δ(ID_{t,i}, j) and Σ_t Σ_{0<i<N_t} G_{t,i}·δ(ID_{t,i}, j),
		// with gaps that span a run end left out.
		for _, j := range kernelIDs(g) {
			for i := 0; i < nt; i++ {
				rec := run.records[i]
				if rec.KernelID != j { // δ(ID_{t,i}, j) = 0
					continue
				}
				k := ks[j]
				if k == nil {
					k = &naiveKernel{}
					ks[j] = k
				}
				k.durations = append(k.durations, float64(rec.DurationNs))
				allDur = append(allDur, float64(rec.DurationNs))
				if i < nt-1 && rec.Flags&profiler.FlagGapSpansRunEnd == 0 {
					k.gaps = append(k.gaps, float64(rec.GapNs))
					allGap = append(allGap, float64(rec.GapNs))
				}
			}
		}
	}
	return ks, runTimes, allDur, allGap
}

func kernelIDs(g genTask) []uint64 {
	var ids []uint64
	for _, info := range g.infos {
		ids = append(ids, info.ID)
	}
	return ids
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// stddev is the two-pass population standard deviation.
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := mean(xs)
	var s float64
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

// exactQuantile uses the sketch's rank convention: the value of rank
// ⌊q·(n−1)⌋.
func exactQuantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(math.Floor(q*float64(len(s)-1)))]
}

func close(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))+1e-9
}

func checkDist(t *testing.T, what string, d *profiler.Dist, xs []float64) {
	t.Helper()
	if d.Count != uint64(len(xs)) {
		t.Fatalf("%s: count %d, naive %d", what, d.Count, len(xs))
	}
	if len(xs) == 0 {
		if d.Mean != 0 || d.P90 != 0 {
			t.Fatalf("%s: empty with mean %v p90 %v", what, d.Mean, d.P90)
		}
		return
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if float64(d.Min) != lo || float64(d.Max) != hi {
		t.Fatalf("%s: min/max %d/%d, naive %v/%v", what, d.Min, d.Max, lo, hi)
	}
	if m := mean(xs); !close(d.Mean, m, 1e-9) {
		t.Fatalf("%s: mean %v, naive %v", what, d.Mean, m)
	}
	if s := stddev(xs); !close(d.Stddev(), s, 1e-6) && math.Abs(d.Stddev()-s) > 1e-6*mean(xs) {
		t.Fatalf("%s: stddev %v, naive two-pass %v", what, d.Stddev(), s)
	}
	for _, q := range []struct {
		q   float64
		got float64
	}{{0.5, d.P50}, {0.9, d.P90}} {
		exact := exactQuantile(xs, q.q)
		if math.Abs(q.got-exact) > profiler.SketchRelativeAccuracy*exact+1e-9 {
			t.Fatalf("%s: p%v %v, exact %v: beyond 1%%", what, q.q*100, q.got, exact)
		}
	}
}

func TestBuilderMatchesPaperFormulas(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			target := profiler.MinProfileRuns + r.IntN(20)
			g := genTaskRuns(r, 1+r.IntN(3*target))
			b, err := profiler.NewBuilder("task", "GPU", target)
			if err != nil {
				t.Fatal(err)
			}
			feed(t, r, b, g)
			p := b.Profile()
			ks, runTimes, allDur, allGap := naive(g, target)

			if int(p.Runs) != len(runTimes) {
				t.Fatalf("runs %d, naive %d", p.Runs, len(runTimes))
			}
			wantPhase := profiler.PhaseProfiling
			if len(runTimes) == target {
				wantPhase = profiler.PhaseSharing
			}
			if p.Phase != wantPhase || b.Complete() != (wantPhase == profiler.PhaseSharing) {
				t.Fatalf("phase %v after %d of %d runs", p.Phase, p.Runs, target)
			}
			if len(p.Kernels) != len(ks) {
				t.Fatalf("%d kernels, naive %d", len(p.Kernels), len(ks))
			}
			for id, nk := range ks {
				k, ok := p.Kernel(id)
				if !ok {
					t.Fatalf("kernel %x missing", id)
				}
				checkDist(t, fmt.Sprintf("kernel %x SK", id), &k.Duration, nk.durations)
				checkDist(t, fmt.Sprintf("kernel %x SG", id), &k.Gap, nk.gaps)
				if k.Name == "" || k.Block != [3]uint32{256, 1, 1} {
					t.Fatalf("kernel %x not named: %+v", id, k)
				}
			}
			checkDist(t, "run time", &p.RunTime, runTimes)
			checkDist(t, "task duration", &p.Duration, allDur)
			checkDist(t, "task gap", &p.Gap, allGap)
			if err := profiler.ValidateProfile(p); err != nil {
				t.Fatal(err)
			}

			// Discarded runs leave no trace: feeding only the runs that
			// were folded gives the same profile.
			var only genTask
			only.infos = g.infos
			for _, run := range g.runs {
				if run.clean() && len(only.runs) < target {
					only.runs = append(only.runs, run)
				}
			}
			b2, _ := profiler.NewBuilder("task", "GPU", target)
			feed(t, r, b2, only)
			p2 := b2.Profile()
			p2.DiscardedRuns, p2.Discards = p.DiscardedRuns, p.Discards
			for i := range p2.History {
				p2.History[i].Discarded = p.History[i].Discarded
			}
			mustEqualProfiles(t, p, p2)
		})
	}
}

func mustEqualProfiles(t *testing.T, a, b *profiler.Profile) {
	t.Helper()
	ab, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bb, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, bb) {
		t.Fatalf("profiles differ:\n%s\n%s", mustJSON(t, a), mustJSON(t, b))
	}
}

func mustJSON(t *testing.T, p *profiler.Profile) []byte {
	t.Helper()
	j, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func rec(id, dur, gap uint64, flags uint8) profiler.Record {
	return profiler.Record{KernelID: id, DurationNs: dur, GapNs: gap, Flags: flags}
}

func TestBuilderPaperExample(t *testing.T) {
	// §3.2: j is the 1st and 5th kernel of run 1 and the 2nd and 6th of run 2;
	// SK_j = (K11+K15+K22+K26)/4, SG_j likewise.
	const j, o = 0xa, 0xb
	b, _ := profiler.NewBuilder("t", "g", 10)
	run1 := []profiler.Record{rec(j, 2, 10, 0), rec(o, 1, 1, 0), rec(o, 1, 1, 0), rec(o, 1, 1, 0), rec(j, 4, 20, 0), rec(o, 1, 0, profiler.FlagGapSpansRunEnd)}
	run2 := []profiler.Record{rec(o, 1, 1, 0), rec(j, 6, 30, 0), rec(o, 1, 1, 0), rec(o, 1, 1, 0), rec(o, 1, 1, 0), rec(j, 8, 40, profiler.FlagGapSpansRunEnd)}
	b.AddRecords(1, run1)
	if got := b.EndRun(1, 6, 100, true); got != profiler.RunCommitted {
		t.Fatal(got)
	}
	b.AddRecords(2, run2)
	b.EndRun(2, 6, 100, true)
	k, _ := b.Profile().Kernel(j)
	if k.Duration.Mean != 5 || k.Count() != 4 {
		t.Errorf("SK_j = %v over %d, want 5 over 4", k.Duration.Mean, k.Count())
	}
	// The 6th kernel of run 2 is the run's last: its gap spans the run end.
	if k.Gap.Mean != 20 || k.Gap.Count != 3 {
		t.Errorf("SG_j = %v over %d, want 20 over 3", k.Gap.Mean, k.Gap.Count)
	}
}

func TestProfileRunsBounds(t *testing.T) {
	for _, tc := range []struct {
		t  int
		ok bool
	}{{0, false}, {9, false}, {10, true}, {100, true}, {1000, true}, {1001, false}, {-1, false}} {
		_, err := profiler.NewBuilder("k", "g", tc.t)
		if (err == nil) != tc.ok {
			t.Errorf("NewBuilder(T=%d) error %v", tc.t, err)
		}
		if err != nil && !errors.Is(err, profiler.ErrInvalidProfileRuns) {
			t.Errorf("T=%d: %v is not ErrInvalidProfileRuns", tc.t, err)
		}
	}
}

func TestBuilderTBoundary(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	for run := uint32(1); run <= 12; run++ {
		b.AddRecords(run, []profiler.Record{rec(1, uint64(run), 5, profiler.FlagGapSpansRunEnd)})
		got := b.EndRun(run, 1, 1000, true)
		want := profiler.RunCommitted
		if run > 10 {
			want = profiler.RunIgnored
		}
		if got != want {
			t.Fatalf("run %d: %v, want %v", run, got, want)
		}
		if b.Complete() != (run >= 10) || (b.Phase() == profiler.PhaseSharing) != (run >= 10) {
			t.Fatalf("run %d: complete %v phase %v", run, b.Complete(), b.Phase())
		}
	}
	p := b.Profile()
	k, _ := p.Kernel(1)
	if p.Runs != 10 || k.Count() != 10 || k.Duration.Mean != 5.5 {
		t.Fatalf("runs %d count %d mean %v: runs past T were folded", p.Runs, k.Count(), k.Duration.Mean)
	}
}

func TestBuilderDiscards(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	// Overlapped another task: the caller does not commit.
	b.AddRecords(1, []profiler.Record{rec(1, 10, 1, 0), rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(1, 2, 100, false); got != profiler.RunDiscarded {
		t.Errorf("uncommitted run: %v", got)
	}
	// One record lost.
	b.AddRecords(2, []profiler.Record{rec(1, 10, 1, 0)})
	if got := b.EndRun(2, 2, 100, true); got != profiler.RunIncomplete {
		t.Errorf("short run: %v", got)
	}
	// Every record lost.
	if got := b.EndRun(3, 2, 100, true); got != profiler.RunIncomplete {
		t.Errorf("run without records: %v", got)
	}
	// No kernel at all.
	if got := b.EndRun(4, 0, 100, true); got != profiler.RunEmpty {
		t.Errorf("empty run: %v", got)
	}
	// Run 5's RunEnd is lost; run 6 ends.
	b.AddRecords(5, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	b.AddRecords(6, []profiler.Record{rec(2, 10, 1, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(6, 1, 100, true); got != profiler.RunCommitted {
		t.Errorf("run 6: %v", got)
	}
	if got := b.EndRun(5, 1, 100, true); got != profiler.RunIncomplete {
		t.Errorf("late RunEnd of run 5: %v", got)
	}
	// BeginRun resets a run.
	b.AddRecords(7, []profiler.Record{rec(1, 10, 1, 0)})
	b.BeginRun(7)
	b.AddRecords(7, []profiler.Record{rec(2, 30, 1, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(7, 1, 100, true); got != profiler.RunCommitted {
		t.Errorf("run 7: %v", got)
	}
	p := b.Profile()
	if _, ok := p.Kernel(1); ok || p.Runs != 2 || len(p.Kernels) != 1 {
		t.Fatalf("discarded runs left a trace: runs %d, kernels %d", p.Runs, len(p.Kernels))
	}
	if k, _ := p.Kernel(2); k.Duration.Mean != 20 {
		t.Errorf("mean %v, want 20", k.Duration.Mean)
	}
	if p.DiscardedRuns != 5 {
		t.Errorf("DiscardedRuns = %d, want 5 (1, 2, 3, 5 dropped at 6's end, 5 again)", p.DiscardedRuns)
	}
}

func TestBuilderLateRecords(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	b.AddRecords(5, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(5, 1, 10, true); got != profiler.RunCommitted {
		t.Fatal(got)
	}
	// A duplicated datagram of run 5, and one of run 4, after run 5 ended.
	b.AddRecords(5, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	b.AddRecords(4, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	b.AddRecords(6, []profiler.Record{rec(1, 20, 1, profiler.FlagGapSpansRunEnd)})
	if got := b.EndRun(6, 1, 20, true); got != profiler.RunCommitted {
		t.Fatal(got)
	}
	p := b.Profile()
	if k, _ := p.Kernel(1); p.Runs != 2 || p.DiscardedRuns != 0 || k.Count() != 2 {
		t.Fatalf("late records counted: runs %d, discarded %d, count %d", p.Runs, p.DiscardedRuns, k.Count())
	}
}

func TestBuilderPendingBound(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	for run := uint32(1); run <= 2*profiler.MaxPendingRuns; run++ {
		b.AddRecords(run, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	}
	// The oldest runs were dropped; the newest is still there.
	if got := b.EndRun(1, 1, 10, true); got != profiler.RunIncomplete {
		t.Errorf("run 1: %v", got)
	}
	if got := b.EndRun(2*profiler.MaxPendingRuns, 1, 10, true); got != profiler.RunCommitted {
		t.Errorf("newest run: %v", got)
	}
}

func TestBuilderRunWraps(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	b.AddRecords(math.MaxUint32, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	b.AddRecords(0, []profiler.Record{rec(1, 10, 1, profiler.FlagGapSpansRunEnd)})
	// Ending run 0 (after the wrap) drops MaxUint32, which came before it.
	if got := b.EndRun(0, 1, 10, true); got != profiler.RunCommitted {
		t.Fatal(got)
	}
	if got := b.EndRun(math.MaxUint32, 1, 10, true); got != profiler.RunIncomplete {
		t.Errorf("run before the wrap: %v", got)
	}
}

func TestKernelInfoLate(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	b.AddRecords(1, []profiler.Record{rec(7, 10, 1, profiler.FlagGapSpansRunEnd)})
	b.EndRun(1, 1, 10, true)
	if k, _ := b.Profile().Kernel(7); k.Name != "" {
		t.Fatalf("named before KernelInfo: %q", k.Name)
	}
	b.AddKernelInfo(profiler.KernelInfo{ID: 7, Name: "_Z1kv", Grid: [3]uint32{2, 1, 1}, Block: [3]uint32{32, 1, 1}})
	k, _ := b.Profile().Kernel(7)
	if k.Name != "_Z1kv" || k.Grid != [3]uint32{2, 1, 1} || k.Block != [3]uint32{32, 1, 1} {
		t.Fatalf("late KernelInfo not applied: %+v", k)
	}
}

func TestResumeBuilder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	g := genTaskRuns(r, 60)
	for i := range g.runs { // every run clean, so the split point is exact
		g.runs[i].commit, g.runs[i].sent = true, g.runs[i].records
		g.runs[i].kernels = uint32(len(g.runs[i].records))
	}
	var folded []genRun
	for _, run := range g.runs {
		if run.clean() {
			folded = append(folded, run)
		}
	}
	first := genTask{infos: g.infos, runs: folded[:5]}
	rest := genTask{runs: folded[5:]}

	straight, _ := profiler.NewBuilder("k", "g", 20)
	feed(t, r, straight, genTask{infos: g.infos, runs: folded})

	b, _ := profiler.NewBuilder("k", "g", 20)
	feed(t, r, b, first)
	enc, err := b.Profile().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := profiler.DecodeBinary(enc)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := profiler.ResumeBuilder(stored, 20)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, r, resumed, rest)
	if !resumed.Complete() {
		t.Fatal("resumed builder not complete")
	}
	mustEqualProfiles(t, straight.Profile(), resumed.Profile())

	// A complete profile stays complete whatever T is asked for.
	again, _ := profiler.ResumeBuilder(resumed.Profile(), 1000)
	if !again.Complete() || again.TargetRuns() != 20 {
		t.Errorf("resuming a sharing profile: complete %v, T %d", again.Complete(), again.TargetRuns())
	}
}

func TestProfileQueries(t *testing.T) {
	b, _ := profiler.NewBuilder("k", "g", 10)
	for run := uint32(1); run <= 10; run++ {
		recs := []profiler.Record{rec(1, 100, 50, 0), rec(2, 1000, 10, 0), rec(1, 100, 0, profiler.FlagGapSpansRunEnd)}
		b.AddRecords(run, recs)
		b.EndRun(run, 3, 2000+uint64(run), true)
	}
	p := b.Profile()
	if k, _ := p.Kernel(2); k.Duration.P90 != 1000 || k.Duration.P50 != 1000 || k.Gap.P90 != 10 {
		t.Errorf("a constant kernel's quantiles are not exact: %+v", k.Duration)
	}
	if !close(p.P90Duration(), 1000, 0.01) {
		t.Errorf("P90Duration %v, want ≈1000", p.P90Duration())
	}
	if !close(p.TypicalGap(), 10, 0.01) { // gaps: 10 × {50, 10}; median 10
		t.Errorf("TypicalGap %v, want ≈10", p.TypicalGap())
	}
	if p.MeanJCT() != 2005.5 || !close(p.P90JCT(), 2009, 0.01) {
		t.Errorf("JCT mean %v p90 %v", p.MeanJCT(), p.P90JCT())
	}
	if _, ok := p.Kernel(3); ok {
		t.Error("unknown kernel found")
	}
	k, ok := p.Kernel(2)
	if !ok || k.TotalNs() != 10*1000 || k.Gap.Stddev() != 0 {
		t.Errorf("kernel 2: %+v", k)
	}
}
