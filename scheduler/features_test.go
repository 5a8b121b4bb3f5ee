package scheduler

import (
	"sort"
	"strings"
	"testing"
)

// The core's /metrics rows come from the features' tables: each row is
// named once (with its labels), says what it counts, and counters are
// named as Prometheus counters are.
func TestMetricsRows(t *testing.T) {
	seen := map[string]bool{}
	var st Stats
	for _, m := range Metrics() {
		var labels []string
		for k, v := range m.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		key := m.Name + "{" + strings.Join(labels, ",") + "}"
		if seen[key] {
			t.Errorf("%s: twice", key)
		}
		seen[key] = true
		if !strings.HasPrefix(m.Name, "fikit_") || m.Help == "" || m.Value == nil {
			t.Errorf("%s: needs the fikit_ prefix, a help text and a value", key)
		}
		if !m.Gauge && !strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: a counter's name ends in _total", key)
		}
		if m.Value(&st) != 0 {
			t.Errorf("%s: not 0 in zero stats", key)
		}
	}
	st.FairTurns, st.PreSwitchHits = 3, 5
	got := map[string]float64{}
	for _, m := range Metrics() {
		got[m.Name] = m.Value(&st)
	}
	if got["fikit_fair_turns_total"] != 3 || got["fikit_pre_switch_hits_total"] != 5 {
		t.Errorf("rows read the wrong counters: %v", got)
	}
}
