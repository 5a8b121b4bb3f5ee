package trace

// Span is one kernel of an analytic schedule, in ns from the run's start.
type Span struct {
	LaunchNs int64 // the host launches it (end of its host time)
	StartNs  int64 // the device starts it
	EndNs    int64 // the device finishes it
}

// Schedule is the analytic timeline of one run alone on a fifo device.
type Schedule struct {
	JCTNs   int64   // end of the last kernel
	Kernels []Span  // one per launch
	GapsNs  []int64 // GapsNs[i]: device idle time between kernel i's end and kernel i+1's start
	BusyNs  int64   // sum of kernel durations
	IdleNs  int64   // JCTNs - BusyNs: idle device time within the run, the head included
}

// AnalyticJCT computes what one run of t takes alone on a fifo device (one
// kernel at a time, in launch order) when the host spends cpuNs before each
// launch (cpuNs < 0: the trace's own host times, zero when it has none) and a
// launch reaches the device launchLatencyNs after it is made:
//
//	launch_i = host_0 + … + host_i
//	start_i  = max(launch_i + launchLatencyNs, end_{i-1})
//	end_i    = start_i + duration_i
//	JCT      = end_{n-1}
//
// The replayer paces its launches the same way, so a replay alone should take
// JCT plus the cost of its final synchronisation.
func AnalyticJCT(t *Trace, cpuNs, launchLatencyNs int64) Schedule {
	host := t.HostTimesNs(cpuNs)
	n := len(t.Kernels)
	s := Schedule{Kernels: make([]Span, n)}
	if n > 1 {
		s.GapsNs = make([]int64, n-1)
	}
	var launch, prevEnd int64
	for i, k := range t.Kernels {
		launch += host[i]
		start := max(launch+launchLatencyNs, prevEnd)
		end := start + k.DurationNs
		s.Kernels[i] = Span{LaunchNs: launch, StartNs: start, EndNs: end}
		if i > 0 {
			s.GapsNs[i-1] = start - prevEnd
		}
		s.BusyNs += k.DurationNs
		prevEnd = end
	}
	s.JCTNs = prevEnd
	s.IdleNs = s.JCTNs - s.BusyNs
	return s
}
