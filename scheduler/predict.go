package scheduler

// This file holds the core's predictions of kernel durations and gaps.

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
	if ke, ok := t.est.kernel(k); ok {
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

// perCredit is the GPU time reserved for one launch on credit, whose kernel
// is not known yet: the task's mean kernel duration. Each credited launch
// then accounts its own kernel's mean.
func (n *Node) perCredit(t *task) int64 {
	if t.est != nil && t.est.MeanNs > 0 {
		return t.est.MeanNs
	}
	return n.estimate(t, 0)
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

// learnRunGap keeps a conservative estimate of the time from a run end to
// the holder's next launch: the least of the recent observations.
func (t *task) learnRunGap(observed int64) {
	copy(t.runGaps[1:], t.runGaps[:len(t.runGaps)-1])
	t.runGaps[0] = observed
	if t.runGapN < len(t.runGaps) {
		t.runGapN++
	}
	t.runGap = t.runGaps[0]
	for _, v := range t.runGaps[:t.runGapN] {
		t.runGap = mini(t.runGap, v)
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
