package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fikit/fikit/udp"
)

// A PriorityPolicy says which registrations may claim which priorities
// (docs/security.md, "Authorized priorities"): each rule names whom it is
// for and the best (lowest) priority they may have; the first rule that
// matches a registration decides. A claim better than allowed is registered
// at the allowed priority, and the hook is told so.
//
// The same rule bounds the weight a registration may claim among its equals
// (docs/scheduler.md "Equals"): an optional max-weight=N, 1 without it. A
// weight above it is registered at it.
//
// File format, one rule per line, '#' starts a comment:
//
//	uid:1000        3 max-weight=4  # a local user, by uid
//	user:alice      0               # … or by name (looked up when the file is read)
//	group:inference 1 max-weight=10 # users in a group (primary or supplementary), by name
//	gid:2000        1               # … or by gid
//	key:batch-*     7               # a task key, as a path.Match pattern
//	remote          5               # any hook whose uid the daemon cannot see
//	namespace:infer 0 board         # a pod's namespace (pods.go)
//	serviceaccount:infer/batch 4    # a pod's service account, NAMESPACE/NAME
//	*               5               # everyone else
//
// Pods (a unix-socket hook whose cgroup names a pod) are matched by the
// namespace:, serviceaccount:, key: and * rules only: a container's root is
// uid 0, so uid, user, gid, group and remote rules are for host services
// alone. A pod rule may say board: that pod gets the board's descriptor.
//
// Without a file the policy is DefaultPolicy: the daemon's own user and root
// may claim any priority and weight (as before there was a policy),
// everyone else at best 5 and weight 1, the hook's defaults.
type PriorityPolicy struct {
	Rules []PolicyRule
	// groupsOf gives the groups of a uid's user (nil: the system's, read
	// through os/user and kept for groupsTTL).
	groupsOf func(uid uint32) []uint32
	groups   map[uint32]cachedGroups
}

type cachedGroups struct {
	gids []uint32
	at   time.Time
}

// groupsTTL is how long a user's groups are kept: a change of membership
// counts for registrations after that.
const groupsTTL = time.Minute

// PolicyRule is one line of a PriorityPolicy.
type PolicyRule struct {
	Kind string // "uid", "gid", "key", "remote" or "*"
	UID  uint32 // Kind uid
	GID  uint32 // Kind gid
	Key  string // Kind key: a path.Match pattern
	// Kind namespace: the pod's namespace; serviceaccount: its namespace
	// and service account.
	Namespace, ServiceAccount string
	Best                      uint8 // the best priority allowed, 0–9
	// Board: a pod this rule matches gets the board (its descriptor, in
	// the registration's answer); without it pods are gated by messages.
	Board bool
	// MaxWeight is the largest weight allowed, 1–udp.MaxWeight (0 in a
	// rule made by hand: udp.DefaultWeight).
	MaxWeight uint32
	Line      int    // in the file (0: built in)
	Spell     string // as written, for the log
}

// ErrPolicy is a malformed policy file.
var ErrPolicy = errors.New("priority policy")

// DefaultPolicy is the policy without a file, for a daemon running as uid.
func DefaultPolicy(uid uint32) *PriorityPolicy {
	anyWeight := fmt.Sprintf(" max-weight=%d", udp.MaxWeight)
	rules := []PolicyRule{{Kind: "uid", UID: uid, Best: 0, MaxWeight: udp.MaxWeight, Spell: fmt.Sprintf("uid:%d 0", uid) + anyWeight}}
	if uid != 0 {
		rules = append(rules, PolicyRule{Kind: "uid", UID: 0, Best: 0, MaxWeight: udp.MaxWeight, Spell: "uid:0 0" + anyWeight})
	}
	rules = append(rules, PolicyRule{Kind: "*", Best: 5, MaxWeight: udp.DefaultWeight, Spell: "* 5"})
	return &PriorityPolicy{Rules: rules}
}

// LoadPolicy reads a policy file.
func LoadPolicy(file string) (*PriorityPolicy, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	defer f.Close()
	p, err := ParsePolicy(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// ParsePolicy parses the policy format.
func ParsePolicy(r io.Reader) (*PriorityPolicy, error) {
	p := &PriorityPolicy{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		if len(fs) < 2 || len(fs) > 4 {
			return nil, fmt.Errorf("%w: line %d: want \"<who> <best priority> [max-weight=N] [board]\", got %q", ErrPolicy, n, strings.TrimSpace(line))
		}
		best, err := strconv.ParseUint(fs[1], 10, 8)
		if err != nil || best > 9 {
			return nil, fmt.Errorf("%w: line %d: priority %q is not 0–9", ErrPolicy, n, fs[1])
		}
		rule := PolicyRule{Best: uint8(best), MaxWeight: udp.DefaultWeight, Line: n, Spell: strings.Join(fs, " ")}
		for _, opt := range fs[2:] {
			if opt == "board" && !rule.Board {
				rule.Board = true
				continue
			}
			v, ok := strings.CutPrefix(opt, "max-weight=")
			w, err := strconv.ParseUint(v, 10, 32)
			if !ok || err != nil || w < 1 || w > udp.MaxWeight {
				return nil, fmt.Errorf("%w: line %d: %q is not max-weight=N with N 1–%d, or board", ErrPolicy, n, opt, udp.MaxWeight)
			}
			rule.MaxWeight = uint32(w)
		}
		kind, arg, _ := strings.Cut(fs[0], ":")
		switch {
		case fs[0] == "*" || fs[0] == "remote":
			rule.Kind = fs[0]
		case kind == "uid" || kind == "user" || kind == "gid" || kind == "group":
			id, err := ruleID(kind, arg)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrPolicy, n, err)
			}
			if kind == "uid" || kind == "user" {
				rule.Kind, rule.UID = "uid", id
			} else {
				rule.Kind, rule.GID = "gid", id
			}
		case kind == "namespace" && validName(arg):
			rule.Kind, rule.Namespace = "namespace", arg
		case kind == "serviceaccount":
			ns, sa, ok := strings.Cut(arg, "/")
			if !ok || !validName(ns) || !validName(sa) {
				return nil, fmt.Errorf("%w: line %d: %q is not serviceaccount:NAMESPACE/NAME", ErrPolicy, n, fs[0])
			}
			rule.Kind, rule.Namespace, rule.ServiceAccount = "serviceaccount", ns, sa
		case kind == "key" && arg != "":
			if _, err := path.Match(arg, ""); err != nil {
				return nil, fmt.Errorf("%w: line %d: key pattern %q: %w", ErrPolicy, n, arg, err)
			}
			rule.Kind, rule.Key = "key", arg
		default:
			return nil, fmt.Errorf("%w: line %d: %q is not uid:N, user:NAME, gid:N, group:NAME, key:PATTERN, namespace:NAME, serviceaccount:NS/NAME, remote or *", ErrPolicy, n, fs[0])
		}
		p.Rules = append(p.Rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return p, nil
}

// ruleID is the number a uid:, user:, gid: or group: rule names: given, or
// looked up by name.
func ruleID(kind, arg string) (uint32, error) {
	num := arg
	switch kind {
	case "user":
		u, err := user.Lookup(arg)
		if err != nil {
			return 0, err
		}
		num = u.Uid
	case "group":
		g, err := user.LookupGroup(arg)
		if err != nil {
			return 0, err
		}
		num = g.Gid
	}
	id, err := strconv.ParseUint(num, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s:%s: id %q is not a number", kind, arg, num)
	}
	return uint32(id), nil
}

// Allowed is the best priority a registration may have: of the task key
// key, from a process of uid (known: the kernel told the daemon; false
// for a hook on another host or in another network namespace), and the
// rule that decided (nil: none matched, anything goes).
func (p *PriorityPolicy) Allowed(uid uint32, known bool, key string) (uint8, *PolicyRule) {
	for i := range p.Rules {
		r := &p.Rules[i]
		switch r.Kind {
		case "*":
		case "remote":
			if known {
				continue
			}
		case "uid":
			if !known || uid != r.UID {
				continue
			}
		case "gid":
			if !known || !slices.Contains(p.groupsOfUID(uid), r.GID) {
				continue
			}
		case "key":
			if ok, _ := path.Match(r.Key, key); !ok {
				continue
			}
		default: // namespace, serviceaccount: pods only (AllowedPod)
			continue
		}
		return r.Best, r
	}
	return 0, nil
}

// AllowedPod is the best priority a pod's registration may have: of
// namespace ns and service account sa, for task key key. Only namespace,
// serviceaccount, key and * rules match pods; nil: none matched, anything
// goes.
func (p *PriorityPolicy) AllowedPod(ns, sa, key string) (uint8, *PolicyRule) {
	for i := range p.Rules {
		r := &p.Rules[i]
		switch r.Kind {
		case "*":
		case "namespace":
			if r.Namespace != ns {
				continue
			}
		case "serviceaccount":
			if r.Namespace != ns || r.ServiceAccount != sa {
				continue
			}
		case "key":
			if ok, _ := path.Match(r.Key, key); !ok {
				continue
			}
		default:
			continue
		}
		return r.Best, r
	}
	return 0, nil
}

// unknownPodRule decides for a pod the daemon does not know yet (the
// informer has not seen it): the lowest priority, no board, until it does.
var unknownPodRule = PolicyRule{Kind: "pod", Best: 9, MaxWeight: udp.DefaultWeight, Spell: "pod not known yet: 9"}

// validName is a Kubernetes name as a namespace or service account has it
// (DNS-1123: lower case letters, digits, '-' and '.', 1–253 bytes).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// maxWeight is the largest weight r allows (nil: no rule matched, any).
func (r *PolicyRule) maxWeight() uint32 {
	switch {
	case r == nil:
		return udp.MaxWeight
	case r.MaxWeight == 0:
		return udp.DefaultWeight
	}
	return r.MaxWeight
}

// groupsOfUID is the groups of uid's user, cached for groupsTTL (none for
// a uid without a user: it matches no group rule).
func (p *PriorityPolicy) groupsOfUID(uid uint32) []uint32 {
	if p.groupsOf != nil {
		return p.groupsOf(uid)
	}
	if c, ok := p.groups[uid]; ok && time.Since(c.at) < groupsTTL {
		return c.gids
	}
	var gids []uint32
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil {
					gids = append(gids, uint32(g))
				}
			}
		}
	}
	if p.groups == nil || len(p.groups) > 1024 {
		p.groups = map[uint32]cachedGroups{}
	}
	p.groups[uid] = cachedGroups{gids: gids, at: time.Now()}
	return gids
}

// String is the policy as the daemon logs it at start-up.
func (p *PriorityPolicy) String() string {
	var s []string
	for _, r := range p.Rules {
		s = append(s, r.Spell)
	}
	if len(s) == 0 {
		return "(empty: any priority for anyone)"
	}
	return strings.Join(s, "; ")
}
