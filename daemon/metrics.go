package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
	podsRaised      prometheus.Counter // tasks of pods raised once known (pods.go)
	unknownPods     prometheus.Counter // registrations of pods not known yet
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
		podsRaised: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_pod_tasks_raised_total", Help: "Tasks of pods the informer did not know at registration, told to register again once it did.",
		}),
		unknownPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fikit_unknown_pod_registrations_total", Help: "Registrations over the unix socket from a pod the informer did not know (lowest priority until it does).",
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
	stat := func(f func(*scheduler.Stats) float64) func() float64 {
		return func() float64 {
			s.mu.Lock()
			st := s.core.Stats()
			s.mu.Unlock()
			return f(&st)
		}
	}
	persisted := func(f func(persistStats) float64) func() float64 {
		return func() float64 { return f(s.pers.stats()) }
	}
	m.reg.MustRegister(m.received, m.sent, m.decodeErrors, m.forged, m.demoted, m.weightDemoted, m.unauthenticated, m.boardAnswers,
		m.podsRaised, m.unknownPods,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_pods_injected_unregistered", Help: "Running pods of this node the webhook put under the hook that never registered (a musl image, a hook that failed to load, or no CUDA use yet)."},
			func() float64 {
				s.mu.Lock()
				defer s.mu.Unlock()
				return float64(s.unhookedPods(time.Now()))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fikit_unix_peers", Help: "Hook sockets the unix sockets know (stand-in addresses), forgotten when their tasks leave."},
			func() float64 {
				n := 0
				for _, c := range s.unix {
					n += c.Peers()
				}
				return float64(n)
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fikit_unix_unanswerable_total", Help: "Datagrams on the unix sockets from unbound sockets (no path to answer), dropped."},
			func() float64 {
				var n uint64
				for _, c := range s.unix {
					n += c.Unanswerable()
				}
				return float64(n)
			}),
		newUsageCollector(s),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
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
	)
	// The core's counters: one row each in scheduler.Metrics (the
	// features' tables), none written here by hand.
	for _, row := range scheduler.Metrics() {
		v := stat(row.Value)
		if row.Gauge {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: row.Name, Help: row.Help, ConstLabels: row.Labels}, v))
			continue
		}
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: row.Name, Help: row.Help, ConstLabels: row.Labels}, v))
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
