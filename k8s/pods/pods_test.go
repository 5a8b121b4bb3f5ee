package pods

import (
	"errors"
	"testing"
)

func TestAskedPriority(t *testing.T) {
	for _, c := range []struct {
		v      string
		has    bool
		prio   uint8
		ok     bool
		badErr bool
	}{
		{has: false},
		{v: "0", has: true, prio: 0, ok: true},
		{v: " 7 ", has: true, prio: 7, ok: true},
		{v: "10", has: true, badErr: true},
		{v: "-1", has: true, badErr: true},
		{v: "high", has: true, badErr: true},
	} {
		p := Pod{Annotations: map[string]string{}}
		if c.has {
			p.Annotations[PriorityAnnotation] = c.v
		}
		prio, ok, err := p.AskedPriority()
		if prio != c.prio || ok != c.ok || (err != nil) != c.badErr || (err != nil && !errors.Is(err, ErrBadAnnotation)) {
			t.Errorf("%q: %d %v %v", c.v, prio, ok, err)
		}
	}
}

func TestStaticSignalsLearned(t *testing.T) {
	s := NewStatic(Pod{UID: "a", Namespace: "ns"})
	if p, ok := s.Pod("a"); !ok || p.Namespace != "ns" {
		t.Fatalf("Pod(a) = %+v, %v", p, ok)
	}
	select {
	case <-s.Learned():
		t.Fatal("signalled before any Set")
	default:
	}
	s.Set(Pod{UID: "b"})
	s.Set(Pod{UID: "c"}) // does not block: one signal pending stands for both
	<-s.Learned()
	select {
	case <-s.Learned():
		t.Fatal("two signals pending")
	default:
	}
	s.Delete("b")
	if _, ok := s.Pod("b"); ok {
		t.Fatal("deleted pod still known")
	}
}
