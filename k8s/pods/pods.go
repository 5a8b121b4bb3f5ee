package pods

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PriorityAnnotation is the annotation a pod asks its priority with
// (0–9); the policy's rule for its namespace caps what it gets.
const PriorityAnnotation = "fikit.io/priority"

// ErrBadAnnotation is an annotation whose value is not what it must be.
var ErrBadAnnotation = errors.New("bad fikit annotation")

// Pod is what the daemon knows of a pod.
type Pod struct {
	UID            string
	Namespace      string
	Name           string
	ServiceAccount string
	Node           string
	Annotations    map[string]string
	// Running: the pod's phase is Running, since RunningSince (its start
	// time as the kubelet reported it).
	Running      bool
	RunningSince time.Time
}

// InjectedAnnotation is what the webhook writes on a pod: "true" where it
// put the pod's GPU containers under the hook.
const InjectedAnnotation = "fikit.io/injected"

// AskedPriority is the priority the pod's fikit.io/priority annotation
// asks (ok false: none, or not a number 0–9: then err says why).
func (p Pod) AskedPriority() (prio uint8, ok bool, err error) {
	v, has := p.Annotations[PriorityAnnotation]
	if !has {
		return 0, false, nil
	}
	n, perr := strconv.ParseUint(strings.TrimSpace(v), 10, 8)
	if perr != nil || n > 9 {
		return 0, false, errors.Join(ErrBadAnnotation, errors.New(PriorityAnnotation+"="+strconv.Quote(v)+" is not 0–9"))
	}
	return uint8(n), true, nil
}

// Lookup tells the daemon about pods by UID. Implementations are safe for
// concurrent use.
type Lookup interface {
	// Pod is the pod with the UID (ok false: not known, yet or any more).
	Pod(uid string) (Pod, bool)
	// List is every pod known.
	List() []Pod
	// Learned is signalled (without blocking: a pending signal is not
	// repeated) each time a pod is added or changed, so that the daemon
	// may raise tasks of pods it did not know at registration.
	Learned() <-chan struct{}
}

// Static is a Lookup over pods set by hand.
type Static struct {
	mu      sync.RWMutex
	pods    map[string]Pod
	learned chan struct{}
}

// NewStatic returns a Static holding pods.
func NewStatic(pods ...Pod) *Static {
	s := &Static{pods: map[string]Pod{}, learned: make(chan struct{}, 1)}
	for _, p := range pods {
		s.pods[p.UID] = p
	}
	return s
}

// Pod implements Lookup.
func (s *Static) Pod(uid string) (Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[uid]
	return p, ok
}

// Learned implements Lookup.
func (s *Static) Learned() <-chan struct{} { return s.learned }

// List implements Lookup.
func (s *Static) List() []Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	return out
}

// Set adds or replaces a pod and signals Learned.
func (s *Static) Set(p Pod) {
	s.mu.Lock()
	s.pods[p.UID] = p
	s.mu.Unlock()
	Signal(s.learned)
}

// Delete forgets a pod.
func (s *Static) Delete(uid string) {
	s.mu.Lock()
	delete(s.pods, uid)
	s.mu.Unlock()
}

// Signal sends on a channel of capacity 1 without blocking: a signal
// already pending stands for this one too.
func Signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
