package daemon

import (
	"testing"

	"github.com/fikit/fikit/scheduler"
)

// Every role and phase the core can hand out has a wire value of the same
// name, and nothing else maps onto one.
func TestWireMappings(t *testing.T) {
	for r := scheduler.Role(0); r < 16; r++ {
		w := wireRole(r)
		switch r {
		case scheduler.RoleHolder, scheduler.RoleWaiter:
			if w == 0 || w.String() != r.String() {
				t.Errorf("role %v → wire %v", r, w)
			}
		default:
			if w != 0 {
				t.Errorf("role %d (%v) has wire value %v", r, r, w)
			}
		}
	}
	for p := scheduler.Phase(0); p < 16; p++ {
		w := wirePhase(p)
		if p.Valid() != (w != 0) || (w != 0 && w.String() != p.String()) {
			t.Errorf("phase %d (%v) → wire %v", p, p, w)
		}
	}
}
