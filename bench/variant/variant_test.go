package variant

import (
	"errors"
	"reflect"
	"testing"

	"github.com/fikit/fikit/scheduler"
)

// Every variant applies over the defaults and validates; "all" is the
// defaults themselves (the bench runs it as plain fikit); every other
// variant changes something of today's gate.
func TestVariants(t *testing.T) {
	today, ok := Lookup("today")
	if !ok {
		t.Fatal("no variant today")
	}
	base := scheduler.DefaultConfig()
	if err := today.Apply(&base); err != nil {
		t.Fatal(err)
	}
	for _, v := range Variants {
		c := scheduler.DefaultConfig()
		if err := v.Apply(&c); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		switch {
		case v.Name == All && !reflect.DeepEqual(c, scheduler.DefaultConfig()):
			t.Errorf("all: %+v, want the defaults", c)
		case v.Name != today.Name && reflect.DeepEqual(c, base):
			t.Errorf("%s: the same as today's gate", v.Name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("found a variant that does not exist")
	}
}

// --variant takes a variant and settings over it, or settings alone; a
// bad name or value is refused before anything runs.
func TestParse(t *testing.T) {
	apply, err := Parse("pre-switch,pre-switch-margin=500us")
	if err != nil {
		t.Fatal(err)
	}
	c := scheduler.DefaultConfig()
	if err := apply(&c); err != nil {
		t.Fatal(err)
	}
	if !c.PreSwitch || c.PreSwitchMargin != 500_000 || c.HookBound {
		t.Errorf("pre-switch with a 500us margin over today's gate: %+v", c)
	}
	apply, err = Parse(",hook-bound=false")
	if err != nil {
		t.Fatal(err)
	}
	c = scheduler.DefaultConfig()
	if err := apply(&c); err != nil {
		t.Fatal(err)
	}
	want := scheduler.DefaultConfig()
	want.HookBound = false
	if !reflect.DeepEqual(c, want) {
		t.Errorf("the defaults but hook-bound: %+v", c)
	}
	for _, bad := range []string{"nope", "today,nope=1", "today,pre-switch-margin=x", "today,hook-bound"} {
		if _, err := Parse(bad); !errors.Is(err, ErrVariant) {
			t.Errorf("%q: %v, want ErrVariant", bad, err)
		}
	}
}
