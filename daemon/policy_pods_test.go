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

// FuzzParsePolicy: no policy file panics the parser; one it accepts is
// accepted again as the daemon logs it (rule by rule), with the same rules.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		"uid:1000 3 max-weight=4\nkey:batch-* 7\nremote 5\n* 5\n",
		"namespace:infer 0 board\nserviceaccount:infer/sa 2 max-weight=8 board\n* 9 # comment\n",
		"namespace:Bad 0", "serviceaccount:a/b 1 board board", "gid:x 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(strings.NewReader(s))
		if err != nil {
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("error %v is not ErrPolicy", err)
			}
			return
		}
		var lines []string
		for _, r := range p.Rules {
			lines = append(lines, r.Spell)
		}
		q, err := ParsePolicy(strings.NewReader(strings.Join(lines, "\n")))
		if err != nil || len(q.Rules) != len(p.Rules) {
			t.Fatalf("re-parsing %q: %v, %d rules, want %d", lines, err, len(q.Rules), len(p.Rules))
		}
		for i := range p.Rules {
			a, b := p.Rules[i], q.Rules[i]
			a.Line, b.Line = 0, 0
			if a != b {
				t.Fatalf("rule %d: %+v, again %+v", i, a, b)
			}
		}
	})
}
