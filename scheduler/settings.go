package scheduler

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SettingKind is how a setting's value is written and parsed.
type SettingKind uint8

const (
	KindDuration SettingKind = iota + 1 // Go duration ("100us"), or ns
	KindInt
	KindFloat
	KindBool
	KindChoice // one of Choices
)

// Setting is one scheduler knob in one place: its name is the flag of
// `fikit serve` and `fikit sim` and the key of scenario files' config lines;
// its default is DefaultConfig's; its bounds are what Validate enforces;
// docs/scheduler.md's settings table is generated from the rows
// (TestSettingsDoc, -rewrite).
type Setting struct {
	Name string
	Kind SettingKind
	Help string
	// Min and Max bound the value (ns for durations), inclusive unless
	// MinOpen; unused for bools and choices.
	Min, Max float64
	MinOpen  bool
	Choices  []string
	// Auto, if set, is a word a duration setting also takes: the value -1,
	// "decide it yourself" (switch-cost auto: measured per GPU).
	Auto  string
	field func(*Config) any // *int64, *int, *float64, *bool or *string
}

const maxDuration = float64(time.Hour)

// Settings are the scheduler's knobs, in the order they are documented.
var Settings = []Setting{
	{Name: "profile-runs", Kind: KindInt, Min: 10, Max: 1000,
		Help: "clean runs a new service is profiled for (T)", field: func(c *Config) any { return &c.ProfileRuns }},
	{Name: "policy", Kind: KindChoice, Choices: policyNames(),
		Help: "fill policy: which waiting kernel goes into a predicted gap, and whether equal priorities share by GPU time", field: func(c *Config) any { return &c.Policy }},
	{Name: "fair-lag", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help:  "fair shares among equal priorities: how far (GPU time / weight) a task may run ahead of the slowest active one before it waits",
		field: func(c *Config) any { return &c.FairLag }},
	{Name: "fair-idle", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help:  "an equal that neither launched nor asked this long no longer holds the others back (fair shares)",
		field: func(c *Config) any { return &c.FairIdle }},
	{Name: "min-gap", Kind: KindDuration, Max: maxDuration,
		Help: "shortest predicted gap worth filling", field: func(c *Config) any { return &c.MinGap }},
	{Name: "switch-cost", Kind: KindDuration, Max: maxDuration, Auto: "auto",
		Help:  "GPU context-switch cost assumed by the policy; auto: measured per GPU by the hooks (calibration)",
		field: func(c *Config) any { return &c.SwitchCost }},
	{Name: "switch-cost-prior", Kind: KindDuration, Max: maxDuration,
		Help: "switch cost assumed for a GPU whose switch has not been measured yet (switch-cost auto)", field: func(c *Config) any { return &c.SwitchCostPrior }},
	{Name: "switch-calibrate", Kind: KindDuration, Min: float64(time.Millisecond), Max: maxDuration,
		Help: "how often a GPU's switch is measured again (switch-cost auto; more often until a few samples are in)", field: func(c *Config) any { return &c.SwitchCalibrate }},
	{Name: "inflight-budget", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "most predicted low-priority GPU time outstanding (the daemon's idle periods, and each hook's own bound with hook-bound)", field: func(c *Config) any { return &c.InflightBudget }},
	{Name: "delay-budget", Kind: KindFloat, Min: 0, Max: 1,
		Help: "share of a holder's JCT alone (its profile's) that filling may delay each of its runs", field: func(c *Config) any { return &c.DelayBudget }},
	{Name: "idle-alpha", Kind: KindFloat, Min: 0, MinOpen: true, Max: 1000,
		Help: "a holder is idle after this many typical gaps without a launch", field: func(c *Config) any { return &c.IdleAlpha }},
	{Name: "run-idle", Kind: KindDuration, Max: maxDuration,
		Help: "silence after which a holder inside a run counts as idle", field: func(c *Config) any { return &c.RunIdle }},
	{Name: "idle-starve", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "an idle GPU this long lets a waiting kernel longer than the idle cap go", field: func(c *Config) any { return &c.IdleStarve }},
	{Name: "grant-lease", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "credit given in an idle period may be used this long", field: func(c *Config) any { return &c.GrantLease }},
	{Name: "holder-ttl", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "a task holds the GPU this long after its last launch (while its arrivals are unknown, or with holder-ttl-alpha 0)", field: func(c *Config) any { return &c.HolderTTL }},
	{Name: "profile-turn", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "a task profiling alone that ends no run this long lets the others of its priority hold", field: func(c *Config) any { return &c.ProfileTurn }},
	{Name: "rejoin-grace", Kind: KindDuration, Min: 0, Max: maxDuration,
		Help: "after a restart a task known before holds its place this long at most: nothing of a worse priority holds or is granted on its GPU until it registers again (0: off)", field: func(c *Config) any { return &c.RejoinGrace }},
	{Name: "default-kernel", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "duration assumed for kernels of unprofiled tasks", field: func(c *Config) any { return &c.DefaultKernel }},
	{Name: "skip-limit", Kind: KindInt, Min: 1, Max: 1 << 20,
		Help: "passes over a waiting kernel before it goes first", field: func(c *Config) any { return &c.SkipLimit }},
	{Name: "hold-interval", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "how often a queued request is told to keep waiting", field: func(c *Config) any { return &c.HoldInterval }},
	{Name: "heartbeat-interval", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "how often hooks are told to send a heartbeat (< dead-after)", field: func(c *Config) any { return &c.HeartbeatInterval }},
	{Name: "dead-after", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "a task that sent nothing this long is dropped", field: func(c *Config) any { return &c.DeadAfter }},
	{Name: "dead-after-watched", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "dead-after for a local task whose exit the daemon sees at once (pidfd); at least dead-after", field: func(c *Config) any { return &c.DeadAfterWatched }},
	{Name: "max-credit", Kind: KindInt, Min: 0, Max: math.MaxUint32,
		Help: "most launches granted without a round trip (0 disables credit)", field: func(c *Config) any { return &c.MaxCredit }},
	{Name: "drift-sample", Kind: KindInt, Min: 0, Max: 1 << 20,
		Help:  "in the sharing phase a task's hook measures one run in this many, to see its profile drift (0: none; new kernel IDs are seen anyway)",
		field: func(c *Config) any { return &c.DriftSample }},
	{Name: "drift-threshold", Kind: KindFloat, Min: 0, MinOpen: true, Max: 100,
		Help:  "a checked run mismatches its profile when the share of its launches of kernel IDs the profile lacks, or its kernels' total duration's relative error, is above this",
		field: func(c *Config) any { return &c.DriftThreshold }},
	{Name: "drift-runs", Kind: KindInt, Min: 0, Max: 1000,
		Help:  "consecutive mismatching checked runs that make a drift, after which the task is profiled again without stopping the others (0: off)",
		field: func(c *Config) any { return &c.DriftRuns }},
}

// LookupSetting finds a setting by name.
func LookupSetting(name string) (Setting, bool) {
	i := slices.IndexFunc(Settings, func(s Setting) bool { return s.Name == name })
	if i < 0 {
		return Setting{}, false
	}
	return Settings[i], true
}

// Get formats the setting's value in c.
func (s Setting) Get(c *Config) string {
	switch p := s.field(c).(type) {
	case *int64:
		if s.Auto != "" && *p == -1 {
			return s.Auto
		}
		return time.Duration(*p).String()
	case *int:
		return strconv.Itoa(*p)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	}
	panic("scheduler: setting " + s.Name + " has a field of no known type")
}

// Default is the setting's value in DefaultConfig.
func (s Setting) Default() string {
	c := DefaultConfig()
	return s.Get(&c)
}

// Set parses v and stores it in c if it is within the setting's bounds.
func (s Setting) Set(c *Config, v string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s=%q: %s", ErrConfig, s.Name, v, why) }
	switch p := s.field(c).(type) {
	case *int64:
		if s.Auto != "" && v == s.Auto {
			*p = -1
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseInt(v, 10, 64)
			if nerr != nil {
				return bad("not a duration")
			}
			d = time.Duration(n)
		}
		if err := s.check(float64(d)); err != nil {
			return bad(err.Error())
		}
		*p = int64(d)
	case *int:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad("not an integer")
		}
		if err := s.check(float64(n)); err != nil {
			return bad(err.Error())
		}
		*p = int(n)
	case *float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) {
			return bad("not a number")
		}
		if err := s.check(f); err != nil {
			return bad(err.Error())
		}
		*p = f
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad("not true or false")
		}
		*p = b
	case *string:
		if !slices.Contains(s.Choices, v) {
			return bad("not one of " + strings.Join(s.Choices, ", "))
		}
		*p = v
	}
	return nil
}

// check reports whether x is within the bounds.
func (s Setting) check(x float64) error {
	if x < s.Min || (s.MinOpen && x == s.Min) || x > s.Max {
		return fmt.Errorf("outside %s", s.Bounds())
	}
	return nil
}

// Bounds describes the allowed values for people ("0 < x ≤ 1h0m0s").
func (s Setting) Bounds() string {
	switch s.Kind {
	case KindBool:
		return "true or false"
	case KindChoice:
		return strings.Join(s.Choices, ", ")
	}
	f := func(x float64) string {
		switch s.Kind {
		case KindDuration:
			return time.Duration(x).String()
		case KindInt:
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	op := "≤"
	if s.MinOpen {
		op = "<"
	}
	b := fmt.Sprintf("%s %s x ≤ %s", f(s.Min), op, f(s.Max))
	if s.Auto != "" {
		b = s.Auto + ", or " + b
	}
	return b
}

// validateSettings checks every setting's bounds in c.
func (c Config) validateSettings() error {
	for _, s := range append(Settings[:len(Settings):len(Settings)], Ablations...) {
		v := s.Get(&c)
		probe := DefaultConfig()
		if err := s.Set(&probe, v); err != nil {
			return err
		}
	}
	return nil
}

// JSONKey is the setting's key in JSON (the daemon's status,
// docs/status-api.md): its name in snake_case, and for a duration the
// suffix _ns, the value being nanoseconds.
func (s Setting) JSONKey() string {
	k := strings.ReplaceAll(s.Name, "-", "_")
	if s.Kind == KindDuration {
		k += "_ns"
	}
	return k
}

// MarshalJSON writes c as one key per setting (JSONKey), in the rows'
// order: a new setting is in the status API without anyone naming it twice.
func (c Config) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, s := range Settings {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, s.JSONKey())
		v, err := json.Marshal(s.field(&c))
		if err != nil {
			return nil, fmt.Errorf("scheduler: setting %s: %w", s.Name, err)
		}
		b = append(append(b, ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes. Keys it does not know (a
// newer daemon's settings) are ignored; a missing key leaves the value in
// c as it was. The values are not checked against the bounds: Validate does.
func (c *Config) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("scheduler config: %w", err)
	}
	for _, s := range Settings {
		raw, ok := m[s.JSONKey()]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, s.field(c)); err != nil {
			return fmt.Errorf("scheduler config: %s: %w", s.JSONKey(), err)
		}
	}
	return nil
}
