package daemon

import (
	"errors"
	"strings"
	"testing"
)

func TestPolicyPodRules(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader(`
serviceaccount:infer/trusted 0 max-weight=8 board
namespace:infer  2 board
uid:0            0
key:batch-*      7
*                5
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns, sa, key string
		best        uint8
		board       bool
		weight      uint32
	}{
		{"infer", "trusted", "svc", 0, true, 8},
		{"infer", "default", "svc", 2, true, 1},
		// uid rules are for host services: a pod's root is not uid:0.
		{"other", "default", "svc", 5, false, 1},
		{"other", "default", "batch-x", 7, false, 1},
	} {
		best, r := p.AllowedPod(c.ns, c.sa, c.key)
		if best != c.best || r == nil || r.Board != c.board || r.maxWeight() != c.weight {
			t.Errorf("%s/%s %s: %d %+v, want %d board %v weight %d", c.ns, c.sa, c.key, best, r, c.best, c.board, c.weight)
		}
	}
	// Pod rules never match host services.
	if best, r := p.Allowed(1000, true, "svc"); best != 5 || r.Kind != "*" {
		t.Errorf("host uid 1000: %d %+v", best, r)
	}
	for _, bad := range []string{
		"namespace:Bad_Name 0", "namespace: 0", "serviceaccount:infer 0", "serviceaccount:infer/ 0",
		"namespace:infer 0 board board", "namespace:infer 0 max-weight=0", "namespace:infer 0 board max-weight=2 extra",
	} {
		if _, err := ParsePolicy(strings.NewReader(bad)); !errors.Is(err, ErrPolicy) {
			t.Errorf("%q: %v, want ErrPolicy", bad, err)
		}
	}
}
