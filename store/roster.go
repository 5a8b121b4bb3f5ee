package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Known is one task a daemon had registered: what it registered as. A
// restarted daemon holds its place for a grace period (docs/operations.md
// "After an outage").
type Known struct {
	TaskKey  string `json:"task_key"`
	PID      uint32 `json:"pid"`
	Priority uint8  `json:"priority"`
	GPU      string `json:"gpu"` // device UUID
}

// RosterStore keeps the daemon's roster (the tasks registered) across
// restarts. Badger and Memory implement it.
type RosterStore interface {
	// Roster returns the roster last written (none: an empty slice).
	Roster() ([]Known, error)
	// PutRoster replaces it; when it returns nil it is durable.
	PutRoster([]Known) error
}

var (
	_ RosterStore = (*Badger)(nil)
	_ RosterStore = (*Memory)(nil)
)

// MaxRosterEntries bounds the roster: a write of more is refused.
const MaxRosterEntries = 1 << 12

// rosterKey holds the whole roster in one value: it is small (a task per
// service), written when a task registers or leaves, read once, at start.
var rosterKey = []byte("v1/roster")

// ErrInvalidRoster is returned for a roster that cannot be stored (too
// long, a priority past 9) or a stored value that cannot be read.
var ErrInvalidRoster = errors.New("invalid roster")

func checkRoster(ks []Known) error {
	if len(ks) > MaxRosterEntries {
		return fmt.Errorf("%w: %d tasks, at most %d", ErrInvalidRoster, len(ks), MaxRosterEntries)
	}
	for _, k := range ks {
		if k.Priority > 9 {
			return fmt.Errorf("%w: priority %d of %q", ErrInvalidRoster, k.Priority, k.TaskKey)
		}
	}
	return nil
}

func encodeRoster(ks []Known) ([]byte, error) {
	if err := checkRoster(ks); err != nil {
		return nil, err
	}
	if ks == nil {
		ks = []Known{}
	}
	return json.Marshal(ks)
}

func decodeRoster(v []byte) ([]Known, error) {
	var ks []Known
	if err := json.Unmarshal(v, &ks); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRoster, err)
	}
	if err := checkRoster(ks); err != nil {
		return nil, err
	}
	if ks == nil {
		ks = []Known{}
	}
	return ks, nil
}

// Roster implements RosterStore.
func (b *Badger) Roster() ([]Known, error) {
	v, err := b.get(rosterKey)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("roster: %w", err)
	}
	if v == nil {
		return []Known{}, nil
	}
	ks, err := decodeRoster(v)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	return ks, nil
}

// PutRoster implements RosterStore. The write is synced before it returns.
func (b *Badger) PutRoster(ks []Known) error {
	v, err := encodeRoster(ks)
	if err != nil {
		return err
	}
	if err := b.set(rosterKey, v); err != nil {
		return fmt.Errorf("put roster: %w", err)
	}
	return nil
}

// Roster implements RosterStore.
func (m *Memory) Roster() ([]Known, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.roster == nil {
		return []Known{}, nil
	}
	return decodeRoster(m.roster)
}

// PutRoster implements RosterStore.
func (m *Memory) PutRoster(ks []Known) error {
	v, err := encodeRoster(ks)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.roster = v
	return nil
}
