package scheduler

import (
	"math"
	"slices"
)

// This file is a task's arrivals: the intervals between its run starts, how
// regular they are, and the holder TTL they give (docs/scheduler.md
// "Arrivals"). The run-gap predictor (predict.go, nextRunStart) looks at the
// last four intervals for the next run's start; these look at the last
// sixteen for the process the runs arrive by.

// ArrivalClass says how a task's runs arrive, judged by the coefficient of
// variation (CV: standard deviation over mean) of its recent intervals
// between run starts: periodic (a camera, a poller, a steady client:
// CV ≤ periodicCV), Poisson (independent requests: CV near 1), bursty
// (requests in bursts with long pauses between: CV ≥ burstyCV), or unknown
// (fewer than minArrivals intervals seen).
type ArrivalClass string

const (
	ArrivalsUnknown  ArrivalClass = "unknown"
	ArrivalsPeriodic ArrivalClass = "periodic"
	ArrivalsPoisson  ArrivalClass = "poisson"
	ArrivalsBursty   ArrivalClass = "bursty"
)

// The classes' bounds. An exponential's CV is 1; sixteen samples of one
// estimate it within about ±0.25, so periodic and bursty keep a margin from
// it on either side.
const (
	minArrivals = 8
	periodicCV  = 0.35
	burstyCV    = 1.5
)

// arrivals keeps a task's recent intervals between run starts.
type arrivals struct {
	iv   [16]int64
	n, i int
}

func (a *arrivals) add(x int64) {
	if x <= 0 {
		return
	}
	a.iv[a.i] = x
	a.i = (a.i + 1) % len(a.iv)
	if a.n < len(a.iv) {
		a.n++
	}
}

// stats are the intervals' mean and CV (0, 0 when none).
func (a *arrivals) stats() (mean float64, cv float64) {
	if a.n == 0 {
		return 0, 0
	}
	for _, x := range a.iv[:a.n] {
		mean += float64(x)
	}
	mean /= float64(a.n)
	var v float64
	for _, x := range a.iv[:a.n] {
		d := float64(x) - mean
		v += d * d
	}
	return mean, math.Sqrt(v/float64(a.n)) / mean
}

// spread is the intervals' range (greatest less least; 0 when none).
func (a *arrivals) spread() int64 {
	if a.n == 0 {
		return 0
	}
	lo, hi := a.iv[0], a.iv[0]
	for _, x := range a.iv[1:a.n] {
		lo, hi = mini(lo, x), maxi(hi, x)
	}
	return hi - lo
}

// least is the least of the recent intervals (0 when none). A periodic
// service sends on a clock and is late by varying amounts, never early: its
// least interval is a period less the greatest lateness it recovered from,
// so the latest start plus it is no later than the clock's next tick
// whenever the latest start was no later than that — while the last few
// intervals, or the latest start plus their least, miss the clock by
// the latest start's lateness.
func (a *arrivals) least() int64 {
	if a.n == 0 {
		return 0
	}
	return slices.Min(a.iv[:a.n])
}

// class is what the intervals look like.
func (a *arrivals) class() ArrivalClass {
	if a.n < minArrivals {
		return ArrivalsUnknown
	}
	_, cv := a.stats()
	switch {
	case cv <= periodicCV:
		return ArrivalsPeriodic
	case cv >= burstyCV:
		return ArrivalsBursty
	}
	return ArrivalsPoisson
}

// runStarted records that t started a run at at (its first launch after a
// run end), for the arrival statistics.
func (t *task) runStarted(at int64) {
	if t.lastRunStart > 0 && at > t.lastRunStart {
		t.arr.add(at - t.lastRunStart)
	}
	t.lastRunStart = at
}

// holderTTL is how long t stays active after its last launch: α × its mean
// interval between run starts (within the TTL bounds) once a few are known
// (minTTLArrivals), else HolderTTL. A service whose requests come every
// 1.5 s keeps the GPU between them; one that came every 5 ms and stopped
// lets the lower priorities hold soon after, not a second later
// (anticipatory scheduling: seed 004, "Anticipation").
func (n *Node) holderTTL(t *task) int64 {
	if n.cfg.HolderTTLAlpha <= 0 || t.arr.n < minTTLArrivals {
		return n.cfg.HolderTTL
	}
	mean, _ := t.arr.stats()
	ttl := int64(n.cfg.HolderTTLAlpha * mean)
	return min(max(ttl, n.cfg.HolderTTLMin), n.cfg.HolderTTLMax)
}

// minTTLArrivals is how many intervals make a TTL from arrivals.
const minTTLArrivals = 4

// ArrivalInfo describes one task's arrivals for status output.
type ArrivalInfo struct {
	Task  TaskID       `json:"task"`
	Class ArrivalClass `json:"class"`
	// IntervalNs is the mean interval between its recent run starts, CV
	// their coefficient of variation, Samples how many there are.
	IntervalNs int64   `json:"interval_ns"`
	CV         float64 `json:"cv"`
	Samples    int     `json:"samples"`
	// TTLNs is its holder TTL now.
	TTLNs int64 `json:"holder_ttl_ns"`
}

// Arrivals describes every task's arrivals, by GPU then id.
func (n *Node) Arrivals() []ArrivalInfo {
	out := []ArrivalInfo{}
	for _, g := range n.order {
		for _, t := range g.tasks {
			mean, cv := t.arr.stats()
			out = append(out, ArrivalInfo{Task: t.id, Class: t.arr.class(), IntervalNs: int64(mean), CV: cv,
				Samples: t.arr.n, TTLNs: n.holderTTL(t)})
		}
	}
	return out
}
