package scheduler

import (
	"fmt"
	"strings"
)

// Variant is a named set of settings that switches the mechanisms of
// switch-aware, time-bounded gating (docs/scheduler.md "Switches, bounds and
// arrivals") on or off over DefaultConfig, so that `fikit bench` and `fikit
// sim` can run them side by side as rows: an ablation is one more row here.
type Variant struct {
	Name  string
	Title string // as reports name it
	// Settings are `name=value` pairs (Settings' names), applied in order
	// over DefaultConfig.
	Settings []string
	// Core sets what is not a user setting (Config fields the bench and
	// the tests switch, such as FixedBound), after Settings.
	Core func(*Config)
}

// todaysGate is the gate before these mechanisms: the switch priced at
// simgpu's old 25 µs and charged per window, holders bounded by kernel
// count (FIKIT_INFLIGHT), a fixed holder TTL, the LP resumed by a grant
// after the holder's run end arrives by UDP, no pre-switch.
var todaysGate = []string{"switch-cost=25us", "switch-aware=false", "hook-bound=false", "holder-ttl-alpha=0",
	"board-resume=false", "pre-switch=false"}

// fixedBound is the µs bound before it followed the slack: InflightBudget
// at all times, nothing into a better priority's predicted run or while it
// is due.
func fixedBound(c *Config) { c.FixedBound = true }

func plus(extra ...string) []string {
	return append(append([]string(nil), todaysGate...), extra...)
}

// Variants are the gate's ablations, in the order reports show them: today's
// gate, each mechanism alone on top of it, and all of them together.
var Variants = []Variant{
	{Name: "today", Title: "today's gate", Settings: plus(), Core: fixedBound},
	{Name: "switch-aware", Title: "+ switch-aware fills", Settings: plus("switch-cost=auto", "switch-aware=true"), Core: fixedBound},
	{Name: "us-bound", Title: "+ µs bound", Settings: plus("hook-bound=true"), Core: fixedBound},
	{Name: "ttl", Title: "+ α×IAT TTL", Settings: plus("holder-ttl-alpha=2"), Core: fixedBound},
	{Name: "board-resume", Title: "+ board resume", Settings: plus("board-resume=true"), Core: fixedBound},
	{Name: "pre-switch", Title: "+ pre-switch", Settings: plus("pre-switch=true"), Core: fixedBound},
	{Name: "fixed-bound", Title: "fixed µs bound", Core: fixedBound},
	{Name: VariantAll, Title: "all together", Settings: []string{"switch-cost=auto", "switch-aware=true", "hook-bound=true",
		"holder-ttl-alpha=2", "board-resume=true"}},
}

// VariantAll is the variant with every mechanism on: DefaultConfig's.
const VariantAll = "all"

// LookupVariant finds a variant by name.
func LookupVariant(name string) (Variant, bool) {
	for _, v := range Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Apply sets the variant's settings in c.
func (v Variant) Apply(c *Config) error {
	for _, kv := range v.Settings {
		k, val, _ := strings.Cut(kv, "=")
		s, ok := LookupSetting(k)
		if !ok {
			return fmt.Errorf("%w: variant %s: no setting %q", ErrConfig, v.Name, k)
		}
		if err := s.Set(c, val); err != nil {
			return fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}
	if v.Core != nil {
		v.Core(c)
	}
	return nil
}
