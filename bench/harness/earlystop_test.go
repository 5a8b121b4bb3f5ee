package harness

import (
	"testing"

	"github.com/fikit/fikit/simgpu/timeline"
)

// The stop latency follows the LP stream under way when the HP's first
// kernel arrives, and no further; a stream that had ended, or LP kernels
// that came after a pause (asked for and granted), do not count.
func TestEarlyStopOf(t *testing.T) {
	const hp, lp = 1, 2
	k := func(pid int, at int64) timeline.Record { return timeline.Record{PID: pid, ArriveNs: at} }
	recs := []timeline.Record{
		// Run 1 starts at 1000 µs, its first kernel arrives at 1010 µs; the
		// LP stream (every 10 µs) goes on to 1050 µs, then a granted fill
		// at 1200 µs.
		k(lp, 960_000), k(lp, 970_000), k(lp, 980_000), k(lp, 990_000), k(lp, 1_000_000),
		k(hp, 1_010_000), k(lp, 1_011_000), k(lp, 1_030_000), k(lp, 1_050_000), k(lp, 1_200_000),
		// Run 2 at 3000 µs: the LP stopped at 2900 µs.
		k(lp, 2_900_000), k(hp, 3_005_000), k(lp, 3_100_000),
		// Run 3 at 5000 µs: the LP's last launch before is 25 µs before the
		// HP's, its next 40 µs after that one: stopped in time.
		k(lp, 4_990_000), k(hp, 5_015_000), k(lp, 5_030_000),
	}
	// A later segment of a preempted kernel is not an arrival.
	recs = append(recs, timeline.Record{PID: lp, ArriveNs: 1_060_000, Seg: 1})
	runs := []Run{{StartNs: 1_000_000, JCTNs: 2_000_000}, {StartNs: 3_000_000, JCTNs: 1_000_000}, {StartNs: 5_000_000, JCTNs: 1_000_000}}
	stops, counts := EarlyStopOf(recs, runs, hp, lp)
	want := []int64{40_000, 0, 0}
	wantN := []int{5, 1, 1}
	for i := range runs {
		if stops[i] != want[i] || counts[i] != wantN[i] {
			t.Errorf("run %d: stop %d ns, %d LP kernels; want %d, %d", i, stops[i], counts[i], want[i], wantN[i])
		}
	}
	e := SummarizeEarlyStop(stops, counts)
	if e.Runs != 3 || e.StopP50Ns != 0 || e.StopP99Ns != 40_000 {
		t.Errorf("summary %+v", e)
	}
}
