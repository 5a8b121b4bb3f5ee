package scheduler

import "slices"

// Ablations are the core's configuration that is no user's setting: the
// mechanisms' on/off switches and their parameters that an ablation
// changes, and internals fixed at their defaults. No flag, no status key,
// no scenario config line of a default file sets them: variants do
// (bench/variant, `fikit serve --variant` for tests and the bench), and
// scenario files about a variant, which say so. docs/scheduler.md
// "Settings that went" says what became of each.
var Ablations = []Setting{
	{Name: "switch-aware", Kind: KindBool,
		Help:  "a fill inside a holder's run must leave room for both switches; the switch back before its next run and an idle period's bounded backlog are not charged to the delay budget",
		field: func(c *Config) any { return &c.SwitchAware }},
	{Name: "hook-bound", Kind: KindBool,
		Help:  "hooks of a worse priority than one registered keep their predicted GPU time in flight within inflight-budget (kernel durations from their profiles), granted and holding launches alike; false: a holder's kernels by count (FIKIT_INFLIGHT)",
		field: func(c *Config) any { return &c.HookBound }},
	{Name: "fixed-bound", Kind: KindBool,
		Help:  "the rule before the bound followed the slack: hooks keep inflight-budget at all times and let nothing go into a better priority's predicted run or while it is due (no fill_until_ns, bound_ns on the board)",
		field: func(c *Config) any { return &c.FixedBound }},
	{Name: "board-resume", Kind: KindBool,
		Help:  "a waiter resumes without asking when the board shows the better priorities' runs ended and their predicted next run leaves a switch and its kernel",
		field: func(c *Config) any { return &c.BoardResume }},
	{Name: "pre-switch", Kind: KindBool,
		Help:  "ahead of the best priority's predicted request (periodic arrivals) the low priorities stop early and its hook makes its context resident, so that the request pays no context switch (off: the gain is shown on an H200, a defect beside the hooks' bound is open, docs/scheduler.md)",
		field: func(c *Config) any { return &c.PreSwitch }},
	{Name: "pre-switch-guard", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "pre-switch: how long past the predicted request the low priorities wait for it", field: func(c *Config) any { return &c.PreSwitchGuard }},
	{Name: "pre-switch-margin", Kind: KindDuration, Max: maxDuration,
		Help: "pre-switch: time for the warm-up to reach the hook and the GPU, on top of the switch", field: func(c *Config) any { return &c.PreSwitchMargin }},
	{Name: "run-end-by-position", Kind: KindBool,
		Help:  "a run's last kernel (by its profile's sequence) opens the window to the next run, before the run end is reported",
		field: func(c *Config) any { return &c.RunEndByPosition }},
	{Name: "positional", Kind: KindBool,
		Help:  "predict from a kernel's position in its run (the profile's sequence), not its kernel ID alone",
		field: func(c *Config) any { return &c.Positional }},
	{Name: "gap-ewma", Kind: KindFloat, Min: 0, Max: 1,
		Help: "weight of the online gap correction (a gap shorter than predicted weighs at least 1/2; 0 = off)", field: func(c *Config) any { return &c.GapEWMA }},
	{Name: "holder-ttl-alpha", Kind: KindFloat, Min: 0, Max: 1000,
		Help: "a task whose arrivals are known holds for this many times its mean interval between run starts (0: holder-ttl always)", field: func(c *Config) any { return &c.HolderTTLAlpha }},
	{Name: "holder-ttl-min", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "shortest holder TTL from arrivals", field: func(c *Config) any { return &c.HolderTTLMin }},
	{Name: "holder-ttl-max", Kind: KindDuration, Min: 0, MinOpen: true, Max: maxDuration,
		Help: "longest holder TTL from arrivals", field: func(c *Config) any { return &c.HolderTTLMax }},
	{Name: "grant-lead", Kind: KindDuration, Max: maxDuration,
		Help:  "how long before the holders' launched work is predicted to end a window's first kernels are granted",
		field: func(c *Config) any { return &c.GrantLead }},
	{Name: "idle-floor", Kind: KindDuration, Max: maxDuration,
		Help: "shortest silence that makes a holder idle", field: func(c *Config) any { return &c.IdleFloor }},
}

// LookupAblation finds an ablation's row by name.
func LookupAblation(name string) (Setting, bool) {
	i := slices.IndexFunc(Ablations, func(s Setting) bool { return s.Name == name })
	if i < 0 {
		return Setting{}, false
	}
	return Ablations[i], true
}
