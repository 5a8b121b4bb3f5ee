package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
)

// metrics are the daemon's Prometheus metrics, on a registry of its own so
// that several servers (tests, benchmarks) can live in one process.
type metrics struct {
	reg          *prometheus.Registry
	received     *prometheus.CounterVec
	sent         *prometheus.CounterVec
	decodeErrors prometheus.Counter
	forged       prometheus.Counter
	// boardAnswers: grants and holds given in a waiter's board slot.
	boardAnswers prometheus.Counter
	// unauthenticated: datagrams from other hosts without a valid MAC.
	unauthenticated prometheus.Counter
	demoted         prometheus.Counter
	weightDemoted   prometheus.Counter
	// byType caches the vectors' counters per message type: a label lookup
	// per datagram would be on every grant's path.
	receivedBy, sentBy [256]prometheus.Counter
}

// countReceived and countSent count one datagram of type t.
func (m *metrics) countReceived(t udp.Type) { m.counter(&m.receivedBy, m.received, t).Inc() }
func (m *metrics) countSent(t udp.Type)     { m.counter(&m.sentBy, m.sent, t).Inc() }

func (m *metrics) counter(cache *[256]prometheus.Counter, vec *prometheus.CounterVec, t udp.Type) prometheus.Counter {
	c := cache[t]
	if c == nil {
		c = vec.WithLabelValues(t.String())
		cache[t] = c
	}
	return c
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fikit_messages_received_total", Help: "Datagrams received from hooks, by message type.",
		}, []string{"type"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fikit_messages_sent_total", Help: "Datagrams sent to hooks, by message type.",
		}, []string{"type"}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_decode_errors_total", Help: "Datagrams that failed to decode.",
		}),
		demoted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_priority_demotions_total", Help: "Registrations that claimed a better priority than the policy allows them, registered lower.",
		}),
		weightDemoted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_weight_demotions_total", Help: "Registrations that claimed a larger weight than the policy allows them, registered with less.",
		}),
		boardAnswers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_board_answers_total", Help: "Grants and holds given in a waiter's board slot (a futex wake) instead of a datagram.",
		}),
		unauthenticated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_unauthenticated_datagrams_total", Help: "Datagrams from another host without a valid MAC (--auth-key-file), dropped.",
		}),
		forged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_forged_messages_total", Help: "Datagrams for a task without its registration token, or from a socket not of its process, dropped.",
		}),
	}
	stat := func(f func(scheduler.Stats) float64) func() float64 {
		return func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return f(s.core.Stats())
		}
	}
	persisted := func(f func(persistStats) float64) func() float64 {
		return func() float64 { return f(s.pers.stats()) }
	}
	m.reg.MustRegister(m.received, m.sent, m.decodeErrors, m.forged, m.demoted, m.weightDemoted, m.unauthenticated, m.boardAnswers,
		newUsageCollector(s),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_fair_turns_total", Help: "Turns among waiting tasks of one priority that passed to another task (each a context switch between them)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.FairTurns) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_fair_throttles_total", Help: "Holders that ran the fair lag ahead of their equals and waited for them."},
			stat(func(st scheduler.Stats) float64 { return float64(st.FairThrottles) })),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_tasks", Help: "Registered tasks."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Tasks) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_waiting_launches", Help: "Launch requests waiting for a grant."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Waiting) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_grants_total", Help: "Launches granted to waiting tasks."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Grants) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_granted_seconds_total", Help: "Predicted GPU time granted to waiting tasks."},
			stat(func(st scheduler.Stats) float64 { return float64(st.GrantedNs) / 1e9 })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_early_stops_total", Help: "Fill windows closed early by a holder launch."},
			stat(func(st scheduler.Stats) float64 { return float64(st.EarlyStops) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_board_early_stops_total", Help: "Holder launches seen on the board before their reports came (each an early stop)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.BoardStops) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_lost_notifications_total", Help: "Launch notifications that never arrived (still missing after 64 later ones)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.LostNotifies) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_reordered_notifications_total", Help: "Launch notifications that arrived after a later one (late, not lost)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.ReorderedNotifies) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_refused_requests_total", Help: "Launch requests refused: the task had too many waiting."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Refused) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_tasks_dropped_total", Help: "Tasks dropped for missing heartbeats."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Dropped) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_udp_receive_drops_total", Help: "Datagrams the kernel dropped because the daemon's receive buffer was full."},
			func() float64 { st, _ := s.conn.SocketStats(); return float64(st.Drops) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_udp_receive_buffer_bytes", Help: "The daemon's UDP receive buffer (SO_RCVBUF)."},
			func() float64 { st, _ := s.conn.SocketStats(); return float64(st.ReadBuffer) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiles_saved_total", Help: "Profile versions written to the store (synced)."},
			persisted(func(st persistStats) float64 { return float64(st.saved) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiles_completed_total", Help: "Complete profiles written to the store (synced)."},
			persisted(func(st persistStats) float64 { return float64(st.completed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_store_errors_total", Help: "Profile writes the store refused (retried; see the log)."},
			persisted(func(st persistStats) float64 { return float64(st.failures) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_profiles_unsaved", Help: "Profile versions waiting to be written (kept in memory)."},
			persisted(func(st persistStats) float64 { return float64(st.pending) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiles_unsaved_dropped_total", Help: "Superseded profile versions dropped while the store refused writes."},
			persisted(func(st persistStats) float64 { return float64(st.dropped) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_switch_calibrations_total", Help: "Switch calibrations asked of hooks (--switch-cost auto)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.Calibrations) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_switch_calibrations_answered_total", Help: "Switch calibrations hooks answered."},
			stat(func(st scheduler.Stats) float64 { return float64(st.CalibrationsAnswered) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_board_resumes_total", Help: "Queued launches that went on the board's word, the better priorities between runs (--board-resume)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.BoardResumes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_pre_switches_total", Help: "Warm-ups asked of holders' hooks ahead of a predicted request (--pre-switch)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.PreSwitches) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_pre_switch_hits_total", Help: "Holder runs that started after their warm-up, within the guard (--pre-switch)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.PreSwitchHits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_pre_switch_early_total", Help: "Holder runs that started before their warm-up was asked (--pre-switch)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.PreSwitchEarly) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_pre_switch_misses_total", Help: "Pre-switch guards that ended without the holder (--pre-switch)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.PreSwitchMisses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_pre_switch_off_total", Help: "Tasks whose pre-switches were turned off for a low hit rate (--pre-switch)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.PreSwitchOff) })),
		switchCost{s},
		// What the daemon holds per task or per client, for leak hunting
		// (`make soak` watches them stay flat while services come and go).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_board_slots_in_use", Help: "Board waiter slots owned by a task."},
			locked(s, func() float64 { return float64(s.board.SlotsInUse()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_task_records", Help: "Tasks the daemon keeps addresses for (should equal fikit_tasks)."},
			locked(s, func() float64 { return float64(len(s.tasks)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_exit_watches", Help: "Hooked processes watched through a pidfd."},
			func() float64 { return float64(s.exits.size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_log_sources", Help: "Datagram sources the log rate limiter remembers (bounded)."},
			locked(s, func() float64 { return float64(len(s.srcLog.sources)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_store_bytes", Help: "Size of the profile store's files, as the store last computed it (0: not known)."},
			func() float64 {
				if sz, ok := s.cfg.Store.(interface{ SizeBytes() int64 }); ok {
					return float64(sz.SizeBytes())
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiling_runs_total", Help: "Profiling runs committed."},
			stat(func(st scheduler.Stats) float64 { return float64(st.RunsCommitted) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiling_runs_discarded_total", Help: "Profiling runs discarded (any reason: fikit_profiling_discards_total has them by reason)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.RunsDiscarded) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_drift_samples_total", Help: "Sampled sharing-phase runs compared with their profiles."},
			stat(func(st scheduler.Stats) float64 { return float64(st.DriftSamples) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_drift_mismatches_total", Help: "Checked runs that did not match their profiles (kernel IDs, durations or fillable gaps)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.DriftMismatches) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiles_refreshed_total", Help: "Profile versions completed after a drift."},
			stat(func(st scheduler.Stats) float64 { return float64(st.ProfilesRefreshed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_short_gap_windows_total", Help: "Fill windows a holder's launch cut short while granted work was predicted to run."},
			stat(func(st scheduler.Stats) float64 { return float64(st.ShortGapWindows) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_short_gap_fills_total", Help: "Grants into fill windows the holder cut short (gaps shorter than predicted)."},
			stat(func(st scheduler.Stats) float64 { return float64(st.ShortGapFills) })),
	)
	for _, r := range profiler.DiscardReasons() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_profiling_discards_total",
			Help: "Profiling runs discarded, by reason (docs/operations.md).", ConstLabels: prometheus.Labels{"reason": r.String()}},
			stat(func(st scheduler.Stats) float64 { return float64(st.RunsDiscardedBy[r]) })))
	}
	for _, k := range []string{scheduler.DriftKernels, scheduler.DriftTiming} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_drift_events_total",
			Help: "Tasks found drifting from their profiles (then profiled again), by check.", ConstLabels: prometheus.Labels{"kind": k}},
			stat(func(st scheduler.Stats) float64 {
				if k == scheduler.DriftKernels {
					return float64(st.DriftKernelEvents)
				}
				return float64(st.DriftTimingEvents)
			})))
	}
	return m
}

// locked reads f under the server's lock.
func locked(s *Server, f func() float64) func() float64 {
	return func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return f()
	}
}

// Metrics returns the daemon's Prometheus registry.
func (s *Server) Metrics() *prometheus.Registry { return s.met.reg }

// switchCost is the switch each GPU's policy assumes, a gauge per GPU.
type switchCost struct{ s *Server }

var switchCostDesc = prometheus.NewDesc("fikit_switch_cost_seconds",
	"The context switch the policy assumes on each GPU: measured (--switch-cost auto), the prior until then, or the setting.",
	[]string{"gpu", "measured"}, nil)

func (c switchCost) Describe(ch chan<- *prometheus.Desc) { ch <- switchCostDesc }

func (c switchCost) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	sw := c.s.core.Switches()
	c.s.mu.Unlock()
	for _, g := range sw {
		ch <- prometheus.MustNewConstMetric(switchCostDesc, prometheus.GaugeValue, float64(g.CostNs)/1e9, g.GPU,
			map[bool]string{true: "true", false: "false"}[g.Measured])
	}
}
