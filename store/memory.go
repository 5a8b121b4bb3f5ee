package store

import (
	"fmt"
	"sync"

	"github.com/fikit/fikit/profiler"
)

// Memory is a Store in memory, for tests and for a daemon run without a data
// directory. It keeps profiles encoded, as Badger does, so that it accepts
// and returns exactly what Badger would.
type Memory struct {
	mu       sync.RWMutex
	profiles map[string][]byte // by profileKey
	usage    []byte            // the accounts, encoded (UsageStore)
	roster   []byte            // the roster, encoded (RosterStore)
	closed   bool
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{profiles: make(map[string][]byte)}
}

// Get implements Store.
func (m *Memory) Get(model, taskKey string) (*profiler.Profile, error) {
	if err := checkKey(model, taskKey); err != nil {
		return nil, err
	}
	m.mu.RLock()
	v, ok := m.profiles[string(profileKey(model, taskKey))]
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case !ok:
		return nil, fmt.Errorf("%q on %q: %w", taskKey, model, ErrNotFound)
	}
	return profiler.DecodeBinary(v)
}

// Put implements Store.
func (m *Memory) Put(p *profiler.Profile) error {
	v, err := encodeProfile(p)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.profiles[string(profileKey(p.GPU, p.TaskKey))] = v
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(model, taskKey string) error {
	if err := checkKey(model, taskKey); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	k := string(profileKey(model, taskKey))
	if _, ok := m.profiles[k]; !ok {
		return fmt.Errorf("%q on %q: %w", taskKey, model, ErrNotFound)
	}
	delete(m.profiles, k)
	return nil
}

// List implements Store.
func (m *Memory) List() ([]Summary, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Summary, 0, len(m.profiles))
	for k, v := range m.profiles {
		p, err := profiler.DecodeBinary(v)
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", k, err)
		}
		out = append(out, Summarize(p))
	}
	sortSummaries(out)
	return out, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.profiles = nil
	return nil
}
