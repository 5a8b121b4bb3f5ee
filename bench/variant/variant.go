// Package variant names the ablations of fikit's scheduling core: sets of
// its configuration (scheduler.Settings and scheduler.Ablations) that
// switch the mechanisms of switch-aware, time-bounded gating
// (docs/scheduler.md "Switches, bounds and arrivals") on or off over
// scheduler.DefaultConfig, so that `fikit bench` and `fikit sim` can run
// them side by side as rows, and tests and tests/gpu/ can start a daemon
// under one (`fikit serve --variant NAME`, a hidden flag for them only).
// An ablation is one more row here. The scheduler itself knows no
// variant: it has a configuration.
package variant

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fikit/fikit/scheduler"
)

// Variant is a named set of the core's configuration.
type Variant struct {
	Name  string
	Title string // as reports name it
	// Settings are `name=value` pairs (scheduler.Settings' or
	// scheduler.Ablations' names), applied in order over DefaultConfig.
	Settings []string
}

// todaysGate is the gate before these mechanisms: the switch priced at
// simgpu's old legacy preset and charged per window, holders bounded by
// kernel count (FIKIT_INFLIGHT), a fixed holder TTL, the LP resumed by a
// grant after the holder's run end arrives by UDP, no pre-switch.
var todaysGate = []string{"switch-cost=25us", "switch-aware=false", "hook-bound=false", "holder-ttl-alpha=0",
	"board-resume=false", "pre-switch=false"}

func plus(extra ...string) []string {
	return append(append([]string(nil), todaysGate...), extra...)
}

// Variants are the gate's ablations, in the order reports show them: today's
// gate, each mechanism alone on top of it, and all of them together.
var Variants = []Variant{
	{Name: "today", Title: "today's gate", Settings: plus()},
	{Name: "switch-aware", Title: "+ switch-aware fills", Settings: plus("switch-cost=auto", "switch-aware=true")},
	{Name: "us-bound", Title: "+ µs bound", Settings: plus("hook-bound=true")},
	{Name: "ttl", Title: "+ α×IAT TTL", Settings: plus("holder-ttl-alpha=2")},
	{Name: "board-resume", Title: "+ board resume", Settings: plus("board-resume=true")},
	{Name: "pre-switch", Title: "+ pre-switch", Settings: plus("pre-switch=true")},
	{Name: All, Title: "all together", Settings: []string{"switch-cost=auto", "switch-aware=true", "hook-bound=true",
		"holder-ttl-alpha=2", "board-resume=true"}},
	{Name: FixedBound, Title: "fixed µs bound", Settings: []string{"fixed-bound=true"}},
}

// Others are variants that are no ablation row (the bench and fikit sim do
// not run them side by side): configurations tests and tests/gpu/ start a
// daemon under.
var Others = []Variant{
	// The defaults and the pre-switch (off by default: docs/scheduler.md
	// "The pre-switch").
	{Name: PreSwitchOn, Title: "fikit + pre-switch", Settings: []string{"pre-switch=true"}},
}

// PreSwitchOn is the defaults with the pre-switch on.
const PreSwitchOn = "fikit+pre-switch"

// FixedBound is the defaults with the µs bound before it followed the slack
// (docs/scheduler.md "The bound follows the slack"): the before of issue
// 34's before/after.
const FixedBound = "fixed-bound"

// All is the variant with every mechanism on: DefaultConfig's.
const All = "all"

// ErrVariant: no such variant, or a setting it names is wrong.
var ErrVariant = errors.New("variant")

// Lookup finds a variant by name (Variants, then Others).
func Lookup(name string) (Variant, bool) {
	for _, v := range append(Variants[:len(Variants):len(Variants)], Others...) {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Names are the ablation rows' names (Variants), in their order.
func Names() []string {
	out := make([]string, len(Variants))
	for i, v := range Variants {
		out[i] = v.Name
	}
	return out
}

// Apply sets the variant's settings in c.
func (v Variant) Apply(c *scheduler.Config) error {
	return set(c, v.Name, v.Settings)
}

// set applies `name=value` pairs of settings or ablations to c.
func set(c *scheduler.Config, who string, kvs []string) error {
	for _, kv := range kvs {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%w %s: %q is not name=value", ErrVariant, who, kv)
		}
		s, found := scheduler.LookupAblation(k)
		if !found {
			s, found = scheduler.LookupSetting(k)
		}
		if !found {
			return fmt.Errorf("%w %s: no setting %q", ErrVariant, who, k)
		}
		if err := s.Set(c, val); err != nil {
			return fmt.Errorf("%w %s: %w", ErrVariant, who, err)
		}
	}
	return nil
}

// Parse reads a `--variant` value: a variant's name, optionally followed by
// `,name=value` pairs of the core's configuration applied after it
// (`pre-switch,pre-switch-margin=500us`); the name may be empty
// (`,hook-bound=false`: the defaults but that). It returns what to apply
// over DefaultConfig.
func Parse(spec string) (func(*scheduler.Config) error, error) {
	name, rest, _ := strings.Cut(spec, ",")
	var base []string
	if name = strings.TrimSpace(name); name != "" {
		v, ok := Lookup(name)
		if !ok {
			var all []string
			for _, v := range Others {
				all = append(all, v.Name)
			}
			return nil, fmt.Errorf("%w: no variant %q (%s)", ErrVariant, name, strings.Join(append(Names(), all...), ", "))
		}
		base = v.Settings
	}
	var extra []string
	for _, kv := range strings.Split(rest, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			extra = append(extra, kv)
		}
	}
	apply := func(c *scheduler.Config) error {
		if err := set(c, spec, base); err != nil {
			return err
		}
		return set(c, spec, extra)
	}
	// Check it now, over the defaults: a bad flag is a usage error at once.
	probe := scheduler.DefaultConfig()
	if err := apply(&probe); err != nil {
		return nil, err
	}
	return apply, nil
}
