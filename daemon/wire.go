package daemon

import (
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/udp"
)

// The core's role and phase and the wire's are separate types on purpose
// (the wire is a versioned protocol, the core may grow states); these are
// their only mappings, checked value by value in wire_test.go.

// wireRole is r on the wire; RoleNone has no wire value (0, which no
// decoder accepts).
func wireRole(r scheduler.Role) udp.Role {
	switch r {
	case scheduler.RoleHolder:
		return udp.RoleHolder
	case scheduler.RoleWaiter:
		return udp.RoleWaiter
	}
	return 0
}

// wirePhase is p on the wire (0 for no phase).
func wirePhase(p scheduler.Phase) udp.Phase {
	switch p {
	case scheduler.PhaseProfiling:
		return udp.PhaseProfiling
	case scheduler.PhaseSharing:
		return udp.PhaseSharing
	}
	return 0
}
