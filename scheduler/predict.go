package scheduler

// This file holds the core's predictions of kernel durations and gaps.

// holderKernel predicts a holder's kernel k launched as seq: its duration
// and the idle gap after it (hasGap false when none is known, or the next
// thing is the run's end; last when k is known to end its run). By
// position when the profile's sequence has k there — a kernel's gap
// depends on where in the run it is — else by kernel ID (the paper's SK and
// SG).
func (n *Node) holderKernel(h *task, k uint64, seq uint32) (dur, gap int64, hasGap, last bool) {
	h.lastPos = -1
	if h.refreshing() {
		// Its profile is known to be stale: durations as best known, but
		// none of its in-run gaps is trusted enough to fill until the new
		// version is complete (drift.go).
		return n.duration(h, k), 0, false, false
	}
	if s, ok := n.seqAt(h, seq, k); ok {
		p := n.position(h, seq)
		last = n.cfg.RunEndByPosition && p == len(h.est.Seq)-1 && !h.offSequence
		h.lastPos = p
		gap := s.GapNs
		if c, ok := h.posCorr[p]; ok {
			gap = c
		}
		return s.DurNs, gap, p < len(h.est.Seq)-1, last
	}
	if n.position(h, seq) >= 0 {
		// Off the profile's sequence: a later match by position may be
		// chance (the run is longer than profiled, or the anchor is off).
		h.offSequence = true
	}
	ke, ok := h.est.kernel(k)
	return n.duration(h, k), n.gapOf(h, k), ok && ke.HasGap, false
}

// correctGap moves the gap prediction after h's previous kernel (by its
// position when it was predicted by position, else by its kernel ID)
// towards the gap the daemon saw after it (GapEWMA): an estimate above the
// observation (the holder came back sooner: a fill would have delayed it)
// moves by at least half the difference at once, one below it by the
// weight, so that gaps filled on a stale prediction shrink fast and grow
// back slowly.
func (n *Node) correctGap(h *task, observed int64) {
	w := n.cfg.GapEWMA
	update := func(prev int64) int64 {
		ww := w
		if observed < prev {
			ww = max(w, gapDownWeight)
		}
		return int64((1-ww)*float64(prev) + ww*float64(observed))
	}
	if h.lastPos >= 0 && h.est != nil && h.lastPos < len(h.est.Seq) {
		prev, ok := h.posCorr[h.lastPos]
		if !ok {
			prev = h.est.Seq[h.lastPos].GapNs
		}
		if h.posCorr == nil {
			h.posCorr = map[int]int64{}
		}
		h.posCorr[h.lastPos] = update(prev)
		return
	}
	prev, ok := h.gapCorr[h.lastKernel]
	if !ok {
		prev = n.gapOf(h, h.lastKernel)
	}
	if h.gapCorr == nil {
		h.gapCorr = map[uint64]int64{}
	}
	h.gapCorr[h.lastKernel] = update(prev)
}

// gapDownWeight is the least weight an observation below the estimate gets.
const gapDownWeight = 0.5

// gapOf is SG[k] for holder h, corrected online when enabled.
func (n *Node) gapOf(h *task, k uint64) int64 {
	if c, ok := h.gapCorr[k]; ok {
		return c
	}
	ke, _ := h.est.kernel(k)
	return ke.GapNs
}

// duration is the predicted duration of a holder's kernel (its mean).
func (n *Node) duration(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok && !ke.Unmeasured {
		return ke.MeanNs
	}
	return n.estimate(t, k)
}

// meanDuration is the expected duration of a low-priority kernel that was
// launched: its mean, else the task's mean, else the conservative estimate.
func (n *Node) meanDuration(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok && ke.MeanNs > 0 {
		return ke.MeanNs
	}
	if t.est != nil && t.est.MeanNs > 0 {
		return t.est.MeanNs
	}
	return n.estimate(t, k)
}

// position is where launch seq falls in t's run by its profile's sequence
// (runs repeat one kernel order, so the arithmetic holds across runs), or
// -1 when unknown.
func (n *Node) position(t *task, seq uint32) int {
	if !n.cfg.Positional || t.est == nil || len(t.est.Seq) == 0 || t.runStartSeq == 0 {
		return -1
	}
	l := int64(len(t.est.Seq))
	return int(((int64(int32(seq-t.runStartSeq)) % l) + l) % l)
}

// anchorRun notes the first launch the core sees of a task as the start of
// its run; after that, run ends move the anchor (see runEnded). Arrival
// order does not matter: a waiter's requests may overtake its run-end
// report, which goes through the hook's sender.
func (t *task) anchorRun(seq uint32) {
	if t.runStartSeq == 0 {
		t.runStartSeq = seq
	}
}

// seqAt is the profile's estimate for kernel k launched as seq, when the
// sequence has k at that position.
func (n *Node) seqAt(t *task, seq uint32, k uint64) (SeqEstimate, bool) {
	p := n.position(t, seq)
	if p < 0 || t.est.Seq[p].ID != k {
		return SeqEstimate{}, false
	}
	return t.est.Seq[p], true
}

// upcoming is the expected duration of t's launch seq whose kernel is not
// known yet: its position's in the sequence, else the task's p90 (credit
// sized by the mean of kernels as varied as a transformer's lets a few long
// ones overrun the room it was given).
func (n *Node) upcoming(t *task, seq uint32) int64 {
	if p := n.position(t, seq); p >= 0 {
		return maxi(t.est.Seq[p].DurNs, 1)
	}
	return n.estimate(t, 0)
}

// launched is the expected duration of t's kernel k launched as seq.
func (n *Node) launched(t *task, k uint64, seq uint32) int64 {
	if s, ok := n.seqAt(t, seq, k); ok {
		return s.DurNs
	}
	return n.meanDuration(t, k)
}

// estimateAt is the conservative duration of a waiting launch seq of k: its
// position's mean when the sequence knows it (a precise prediction), else
// estimate.
func (n *Node) estimateAt(t *task, k uint64, seq uint32) int64 {
	if s, ok := n.seqAt(t, seq, k); ok {
		return s.DurNs
	}
	return n.estimate(t, k)
}

// estimate is the conservative duration of a waiting kernel: its p90, else
// its task's p90, else the configured default.
func (n *Node) estimate(t *task, k uint64) int64 {
	if ke, ok := t.est.kernel(k); ok && ke.P90Ns > 0 {
		return ke.P90Ns
	}
	if t.est != nil && t.est.P90Ns > 0 {
		return t.est.P90Ns
	}
	return n.cfg.DefaultKernel
}

// noteLag records how long a launch report took to arrive: a decaying
// maximum, so a burst of late reports is remembered for a while.
func (t *task) noteLag(lag int64) {
	t.lag -= t.lag / 16
	t.lag = maxi(t.lag, lag)
}

// recent keeps the last few observations of an interval.
type recent struct {
	v [4]int64
	n int
}

func (r *recent) add(x int64) {
	copy(r.v[1:], r.v[:len(r.v)-1])
	r.v[0] = x
	if r.n < len(r.v) {
		r.n++
	}
}

// least is the conservative estimate: the least recent observation.
func (r *recent) least() int64 {
	m := r.v[0]
	for _, x := range r.v[1:r.n] {
		m = mini(m, x)
	}
	return m
}

// spread is how much the recent observations disagree.
func (r *recent) spread() int64 {
	lo, hi := r.v[0], r.v[0]
	for _, x := range r.v[1:r.n] {
		lo, hi = mini(lo, x), maxi(hi, x)
	}
	return hi - lo
}

// learnRunGap records the time from a run end to the holder's next launch.
func (t *task) learnRunGap(observed int64) { t.runGaps.add(observed) }

// learnRunEvery records the interval between a holder's run starts.
func (t *task) learnRunEvery(observed int64) { t.runStarts.add(observed) }

// nextRunStart predicts when a holder whose run ended at end starts its
// next run (0: unknown). Services whose requests arrive on a clock start
// runs periodically whatever their runs' lengths; services that serve the
// next request when done with the last leave a steady gap after each run.
// Which one a service is shows in which interval has been the steadier;
// the estimate is the least recent observation of that one (while either
// has fewer than two observations, the sooner of both).
func (t *task) nextRunStart(end int64) int64 {
	at, _ := t.nextRunWindow(end)
	return at
}

// nextRunWindow is nextRunStart and the latest start the same recent
// observations allow (their greatest; for periodic arrivals, at least
// the range of the last sixteen intervals after the start): the window the next run is
// expected to start in. A start later than that is the service's lateness
// beyond what it has shown, or a request that did not come. Only for runs
// that come on a clock (arrivals not Poisson or bursty): independent
// requests are as likely at any time, their recent intervals' spread is
// about their mean, and a window that wide would hold the lower
// priorities back for most of each interval without making a request
// likelier to come then (the window is empty: late is at).
func (t *task) nextRunWindow(end int64) (at, late int64) {
	at, late = t.runWindow(end)
	switch t.arr.class() {
	case ArrivalsPoisson, ArrivalsBursty:
		late = at
	case ArrivalsPeriodic:
		// Four intervals show little of a clock's jitter: the window
		// opens no later than the clock says and is at least as wide as
		// the last sixteen intervals' range.
		if c := t.arr.least(); c > 0 && at > 0 && t.lastRunStart > 0 {
			at = mini(at, t.lastRunStart+c)
		}
		late = maxi(late, at+t.arr.spread())
	}
	return at, late
}

func (t *task) runWindow(end int64) (at, late int64) {
	g, e := &t.runGaps, &t.runStarts
	switch {
	case g.n == 0:
		return 0, 0
	case e.n == 0 || t.runStart == 0:
		return end + g.least(), end + g.least() + g.spread()
	case g.n < 2 || e.n < 2:
		a, b := end+g.least(), t.runStart+e.least()
		return mini(a, b), maxi(a+g.spread(), b+e.spread())
	case e.spread() <= g.spread():
		return t.runStart + e.least(), t.runStart + e.least() + e.spread()
	default:
		return end + g.least(), end + g.least() + g.spread()
	}
}

// meanJCT is the holder's typical run time: observed in the sharing phase,
// else measured while profiling.
func (t *task) meanJCT() int64 {
	if t.jct > 0 {
		return t.jct
	}
	if t.est != nil {
		return t.est.MeanJCTNs
	}
	return 0
}

// budgetJCT is the run time a holder's delay budget is a share of: its JCT
// measured alone while profiled, else as observed. Not the observed one
// first: it grows with the delay filling causes and with host contention,
// and a budget that grows with the delay it bounds does not bound it.
func (t *task) budgetJCT() int64 {
	if t.est != nil && t.est.MeanJCTNs > 0 {
		return t.est.MeanJCTNs
	}
	return t.jct
}

// PredictionCounters: fill opportunities, and how the holders' predictions
// fared.
type PredictionCounters struct {
	Windows     uint64 `json:"windows"`
	IdlePeriods uint64 `json:"idle_periods"`
	EarlyStops  uint64 `json:"early_stops"`
	// BoardElections: the board showed a better priority active before its reports came.
	BoardElections uint64 `json:"board_elections"`
	// BoardStops: the board showed a holder's launch before its report came.
	BoardStops        uint64 `json:"board_stops"`
	PredictionSamples uint64 `json:"prediction_samples"`
	// Sums over the samples: mean = sum / samples.
	PredictionAbsErrNs int64 `json:"prediction_abs_error_sum_ns"`
	PredictionErrNs    int64 `json:"prediction_error_sum_ns"`
	// ShortGapWindows: windows a holder's launch cut short while granted
	// low-priority work was predicted still to run (the gap was shorter
	// than predicted); ShortGapFills: the grants into them.
	ShortGapWindows uint64 `json:"short_gap_windows"`
	ShortGapFills   uint64 `json:"short_gap_fills"`
}

var predictionMetrics = []Metric{
	{Name: "fikit_early_stops_total", Help: "Fill windows closed early by a holder launch.", Value: func(s *Stats) float64 { return count(s.EarlyStops) }},
	{Name: "fikit_board_early_stops_total", Help: "Holder launches seen on the board before their reports came (each an early stop).",
		Value: func(s *Stats) float64 { return count(s.BoardStops) }},
	{Name: "fikit_short_gap_windows_total", Help: "Fill windows a holder's launch cut short while granted work was predicted to run.",
		Value: func(s *Stats) float64 { return count(s.ShortGapWindows) }},
	{Name: "fikit_short_gap_fills_total", Help: "Grants into fill windows the holder cut short (gaps shorter than predicted).",
		Value: func(s *Stats) float64 { return count(s.ShortGapFills) }},
}
