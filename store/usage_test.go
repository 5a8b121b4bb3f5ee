package store_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/fikit/fikit/store"
)

func usageConformance(t *testing.T, s interface {
	store.Store
	store.UsageStore
}) {
	t.Helper()
	if us, err := s.Usage(); err != nil || us == nil || len(us) != 0 {
		t.Fatalf("empty store: %v, %v; want [] and no error", us, err)
	}
	want := []store.Usage{
		{Tenant: "uid:1000", TaskKey: "b", UsedNs: 5, MeasuredNs: 1, GrantedNs: 7},
		{Tenant: "remote", TaskKey: "a", UsedNs: 3},
	}
	if err := s.PutUsage(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	sorted := []store.Usage{want[1], want[0]} // by tenant, then task key
	if !reflect.DeepEqual(got, sorted) {
		t.Errorf("Usage() = %+v, want %+v", got, sorted)
	}
	// Accounts are not profiles.
	if sums, err := s.List(); err != nil || len(sums) != 0 {
		t.Errorf("List() = %v, %v after PutUsage", sums, err)
	}
	for _, bad := range [][]store.Usage{{{Tenant: "x", TaskKey: "y", UsedNs: -1}}, make([]store.Usage, store.MaxUsageEntries+1)} {
		if err := s.PutUsage(bad); !errors.Is(err, store.ErrInvalidUsage) {
			t.Errorf("PutUsage of %d bad accounts: %v, want ErrInvalidUsage", len(bad), err)
		}
	}
	if got, _ := s.Usage(); !reflect.DeepEqual(got, sorted) {
		t.Errorf("a refused write changed the accounts: %+v", got)
	}
}

func TestUsageMemory(t *testing.T) {
	m := store.NewMemory()
	usageConformance(t, m)
	m.Close()
	if _, err := m.Usage(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if err := m.PutUsage(nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// Accounts outlive the daemon: a reopened store has them.
func TestUsageBadger(t *testing.T) {
	dir := t.TempDir()
	b, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	usageConformance(t, b)
	want, _ := b.Usage()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Usage(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	b, err = store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.Usage(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("reopened: %+v, %v; want %+v", got, err, want)
	}
}
