package scheduler

import (
	"reflect"
	"testing"
)

// Every variant applies over the defaults and validates; "all" is the
// defaults themselves (the bench runs it as plain fikit); every other
// variant changes something of today's gate.
func TestVariants(t *testing.T) {
	today, ok := LookupVariant("today")
	if !ok {
		t.Fatal("no variant today")
	}
	base := DefaultConfig()
	if err := today.Apply(&base); err != nil {
		t.Fatal(err)
	}
	for _, v := range Variants {
		c := DefaultConfig()
		if err := v.Apply(&c); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		switch {
		case v.Name == VariantAll && !reflect.DeepEqual(c, DefaultConfig()):
			t.Errorf("all: %+v, want the defaults", c)
		case v.Name != today.Name && reflect.DeepEqual(c, base):
			t.Errorf("%s: the same as today's gate", v.Name)
		}
	}
	if _, ok := LookupVariant("nope"); ok {
		t.Error("found a variant that does not exist")
	}
}
