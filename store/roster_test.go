package store_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/fikit/fikit/store"
)

func rosterConformance(t *testing.T, s interface {
	store.Store
	store.RosterStore
}) {
	t.Helper()
	if ks, err := s.Roster(); err != nil || ks == nil || len(ks) != 0 {
		t.Fatalf("empty store: %v, %v; want [] and no error", ks, err)
	}
	want := []store.Known{
		{TaskKey: "hp", PID: 10, Priority: 0, GPU: "aa"},
		{TaskKey: "lp", PID: 11, Priority: 5, GPU: "aa"},
	}
	if err := s.PutRoster(want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Roster(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Roster() = %+v, %v; want %+v", got, err, want)
	}
	// The roster is not a profile.
	if sums, err := s.List(); err != nil || len(sums) != 0 {
		t.Errorf("List() = %v, %v after PutRoster", sums, err)
	}
	for _, bad := range [][]store.Known{{{TaskKey: "x", Priority: 10}}, make([]store.Known, store.MaxRosterEntries+1)} {
		if err := s.PutRoster(bad); !errors.Is(err, store.ErrInvalidRoster) {
			t.Errorf("PutRoster of %d bad entries: %v, want ErrInvalidRoster", len(bad), err)
		}
	}
	if got, _ := s.Roster(); !reflect.DeepEqual(got, want) {
		t.Errorf("a refused write changed the roster: %+v", got)
	}
}

func TestRosterMemory(t *testing.T) {
	m := store.NewMemory()
	rosterConformance(t, m)
	m.Close()
	if _, err := m.Roster(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if err := m.PutRoster(nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// The roster outlives the daemon: a reopened store has it.
func TestRosterBadger(t *testing.T) {
	dir := t.TempDir()
	b, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rosterConformance(t, b)
	want, _ := b.Roster()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.Roster(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("reopened: %+v, %v; want %+v", got, err, want)
	}
}
