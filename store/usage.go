package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Usage is the GPU time accounted to one task key of one tenant (the
// daemon's accounting; docs/operations.md "Accounting"), in ns.
type Usage struct {
	Tenant     string `json:"tenant"`
	TaskKey    string `json:"task_key"`
	UsedNs     int64  `json:"gpu_time_used_ns"`
	MeasuredNs int64  `json:"gpu_time_measured_ns"`
	GrantedNs  int64  `json:"gpu_time_granted_ns"`
}

// UsageStore keeps the daemon's GPU-time accounts across restarts. Badger
// and Memory implement it.
type UsageStore interface {
	// Usage returns the accounts last written (none: an empty slice).
	Usage() ([]Usage, error)
	// PutUsage replaces them; when it returns nil they are durable.
	PutUsage([]Usage) error
}

var (
	_ UsageStore = (*Badger)(nil)
	_ UsageStore = (*Memory)(nil)
)

// MaxUsageEntries bounds the accounts kept: a write of more is refused.
const MaxUsageEntries = 1 << 14

// usageKey holds every account in one value: they are few (a task key per
// service), written every few seconds, and read once, at start.
var usageKey = []byte("v1/usage")

// ErrInvalidUsage is returned for accounts that cannot be stored (too many,
// negative times) or a stored value that cannot be read.
var ErrInvalidUsage = errors.New("invalid GPU-time accounts")

func encodeUsage(us []Usage) ([]byte, error) {
	if len(us) > MaxUsageEntries {
		return nil, fmt.Errorf("%w: %d accounts, at most %d", ErrInvalidUsage, len(us), MaxUsageEntries)
	}
	for _, u := range us {
		if u.UsedNs < 0 || u.MeasuredNs < 0 || u.GrantedNs < 0 {
			return nil, fmt.Errorf("%w: negative time for %q of %q", ErrInvalidUsage, u.TaskKey, u.Tenant)
		}
	}
	if us == nil {
		us = []Usage{}
	}
	return json.Marshal(us)
}

func decodeUsage(v []byte) ([]Usage, error) {
	var us []Usage
	if err := json.Unmarshal(v, &us); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidUsage, err)
	}
	if len(us) > MaxUsageEntries {
		return nil, fmt.Errorf("%w: %d accounts stored", ErrInvalidUsage, len(us))
	}
	sort.Slice(us, func(i, j int) bool {
		if us[i].Tenant != us[j].Tenant {
			return us[i].Tenant < us[j].Tenant
		}
		return us[i].TaskKey < us[j].TaskKey
	})
	return us, nil
}

// Usage implements UsageStore.
func (b *Badger) Usage() ([]Usage, error) {
	v, err := b.get(usageKey)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("usage: %w", err)
	}
	if v == nil {
		return []Usage{}, nil
	}
	us, err := decodeUsage(v)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return us, nil
}

// PutUsage implements UsageStore. The write is synced before it returns.
func (b *Badger) PutUsage(us []Usage) error {
	v, err := encodeUsage(us)
	if err != nil {
		return err
	}
	if err := b.set(usageKey, v); err != nil {
		return fmt.Errorf("put usage: %w", err)
	}
	return nil
}

// Usage implements UsageStore.
func (m *Memory) Usage() ([]Usage, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.usage == nil {
		return []Usage{}, nil
	}
	return decodeUsage(m.usage)
}

// PutUsage implements UsageStore.
func (m *Memory) PutUsage(us []Usage) error {
	v, err := encodeUsage(us)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.usage = v
	return nil
}
