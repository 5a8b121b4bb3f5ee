package bench

import "time"

// estimate is the expected wall time of the plan in seconds: each step's
// runs at their predicted JCTs and intervals, plus procCostS per process.
// Slowdowns under sharing are taken as 2× (they are measured, not known).
func (r *runner) estimate() float64 {
	p := r.p
	s := 0.0
	proc := func(n int) { s += procCostS * float64(n) }
	jct := func(key string) float64 { return r.alone[key] / 1e9 }
	// micro: hook-bench (5 modes per round and a paced holder run), the
	// round trips, two blasts and a daemon start.
	s += float64(p.hookRounds) * (1.1 + 25e-6*float64(p.hookLaunch))
	s += 2 * float64(p.rttSamples) * 80e-6
	s += 2*(p.blastDur.Seconds()+0.4) + 0.5
	for _, sv := range r.services() {
		s += float64(p.profileRuns+5) * (jct(sv.Key) + float64(sv.Post)/1e9)
		proc(1)
	}
	for _, tr := range p.overhead {
		k := "bench/hp/" + tr
		n := runsFor(p.ovBudget, r.alone[k], 20, 300)
		s += 2 * float64(p.ovReps) * 3 * float64(n+3) * jct(k)
		proc(2 * p.ovReps * 3)
	}
	pairMode := func(hpKey string, every time.Duration, runs int, lpKey string, reps int, control bool) float64 {
		together := 2.0 // sharing and fikit
		if control {
			together++
		}
		span := float64(runs+3) * max(every.Seconds(), jct(hpKey))
		lpN := runsFor(600*time.Millisecond, r.alone[lpKey], 5, 40)
		// exclusive HP, exclusive LP, then the modes together (each with an
		// LP warm-up of two runs at about half speed).
		t := span + float64(lpN+1)*jct(lpKey) + together*(span+4*jct(lpKey))
		return float64(reps) * (t + (2+2*together)*procCostS)
	}
	for _, pr := range p.pairs {
		hk, lk := "bench/hp/"+pr.HP, "bench/lp/"+pr.LP
		s += pairMode(hk, hpInterval(r.alone[hk]), p.hpRuns, lk, p.reps, true)
		s += pairMode(hk, p.preEvery, p.preRuns, lk, 1, false)
		// IV d: HP alone, LP alone, then sharing and fikit.
		ck := "bench/hpc/" + pr.HP
		hn := runsFor(600*time.Millisecond, r.alone[ck]+hpPostNs, 20, 150)
		lpSpan := float64(p.stableRuns+1) * lpInterval(r.alone[lk]).Seconds()
		s += float64(hn)*(jct(ck)+hpPostNs/1e9) + 3*lpSpan + 4*(jct(ck)+hpPostNs/1e9) + 6*procCostS
	}
	for _, pr := range p.headline {
		ck, lk, hk := "bench/hpc/"+pr.HP, "bench/lp/"+pr.LP, "bench/hp/"+pr.HP
		for _, k := range p.ratios {
			hpSpan := float64(k) * (jct(ck) + hpPostNs/1e9)
			s += float64(p.ratioTrials) * (max(hpSpan, 2*jct(lk)) + 2*procCostS)
		}
		s += float64(len(p.variants)) * pairMode(hk, hpInterval(r.alone[hk]), p.hpRuns, lk, 1, false)
	}
	// Busy host (the pairs again, slower under the hog: taken as 1.5×),
	// sparse HP (every sparseEvery on the headline pairs, Poisson on the
	// pairs) and bursts: exclusive, sharing and fikit once each.
	for _, pr := range p.pairs {
		hk, lk := "bench/hp/"+pr.HP, "bench/lp/"+pr.LP
		s += 1.5 * pairMode(hk, hpInterval(r.alone[hk]), p.hpRuns, lk, 1, false)
		s += pairMode(hk, hpInterval(r.alone[hk]), p.hpRuns, lk, 1, false)
		perRun := p.burstGap/time.Duration(p.burstN) + time.Duration(r.alone[hk])
		s += pairMode(hk, perRun, p.burstN*p.bursts, lk, 1, false)
	}
	for _, pr := range p.headline {
		s += pairMode("bench/hp/"+pr.HP, p.sparseEvery, p.sparseRuns, "bench/lp/"+pr.LP, 1, false)
	}
	// The workloads: exclusive, default sharing and fikit (board on and
	// off: taken as the control's third mode).
	for _, w := range p.workloads {
		every := w.HP.Every
		if w.HP.Poisson > 0 {
			every = time.Duration(float64(time.Second) / w.HP.Poisson)
		}
		s += pairMode(w.HP.Key, every, w.HP.Runs, w.LP.Key, 1, len(w.Modes) > 2)
	}
	// The simulator, the timelines and the report: a few seconds per pair.
	s += 2 * float64(len(p.pairs)+len(p.headline)*len(p.variants)+len(p.workloads))
	return s
}
