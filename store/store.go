package store

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/fikit/fikit/profiler"
)

// Store holds profiles by (GPU model, task key). Implementations are safe
// for concurrent use. Get returns a profile the caller owns; Put stores a
// copy.
type Store interface {
	// Get returns the profile of a task on a GPU model, or ErrNotFound.
	Get(model, taskKey string) (*profiler.Profile, error)
	// Put stores p under (p.GPU, p.TaskKey), replacing any previous one.
	// When Put returns nil the profile is durable.
	Put(p *profiler.Profile) error
	// Delete removes a profile, or returns ErrNotFound.
	Delete(model, taskKey string) error
	// List summarises every profile, ordered by task key, then GPU model.
	List() ([]Summary, error)
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// Summary describes one stored profile. Its JSON form is the element of
// `fikit profile ls --json` and of GET /v1/profiles.
type Summary struct {
	TaskKey string         `json:"task_key"`
	GPU     string         `json:"gpu"`
	Phase   profiler.Phase `json:"phase"`
	Runs    uint32         `json:"runs"`
	Kernels int            `json:"kernels"`
}

// Summarize returns the summary of a profile.
func Summarize(p *profiler.Profile) Summary {
	return Summary{TaskKey: p.TaskKey, GPU: p.GPU, Phase: p.Phase, Runs: p.Runs, Kernels: len(p.Kernels)}
}

func sortSummaries(s []Summary) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].TaskKey != s[j].TaskKey {
			return s[i].TaskKey < s[j].TaskKey
		}
		return s[i].GPU < s[j].GPU
	})
}

// keyPrefix starts every profile key; the version is the key layout's.
const keyPrefix = "v1/profile/"

// maxKeyLen bounds a stored key (Badger's limit is 65000 bytes).
const maxKeyLen = 16 << 10

// checkKey validates a (GPU model, task key) pair.
func checkKey(model, taskKey string) error {
	switch {
	case model == "":
		return fmt.Errorf("empty gpu model: %w", ErrInvalidKey)
	case taskKey == "":
		return fmt.Errorf("empty task key: %w", ErrInvalidKey)
	case strings.IndexByte(model, 0) >= 0:
		return fmt.Errorf("gpu model %q contains a NUL byte: %w", model, ErrInvalidKey)
	case len(keyPrefix)+len(model)+1+len(taskKey) > maxKeyLen:
		return fmt.Errorf("key of %d bytes: %w", len(model)+len(taskKey), ErrInvalidKey)
	}
	return nil
}

// checkProfile validates a profile before it is stored.
func checkProfile(p *profiler.Profile) error {
	if p == nil {
		return fmt.Errorf("nil profile: %w", profiler.ErrInvalid)
	}
	if err := checkKey(p.GPU, p.TaskKey); err != nil {
		return err
	}
	return profiler.ValidateProfile(p)
}

// encodeProfile checks p and encodes it for storage.
func encodeProfile(p *profiler.Profile) ([]byte, error) {
	if err := checkProfile(p); err != nil {
		return nil, err
	}
	v, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if len(v) > MaxProfileBytes {
		return nil, fmt.Errorf("put %q on %q: encoded profile of %d bytes exceeds %d: %w",
			p.TaskKey, p.GPU, len(v), MaxProfileBytes, profiler.ErrInvalid)
	}
	return v, nil
}

// profileKey is the storage key of a profile: v1/profile/<model>\x00<task key>.
func profileKey(model, taskKey string) []byte {
	k := make([]byte, 0, len(keyPrefix)+len(model)+1+len(taskKey))
	k = append(k, keyPrefix...)
	k = append(k, model...)
	k = append(k, 0)
	return append(k, taskKey...)
}

// parseProfileKey splits a storage key at its first NUL.
func parseProfileKey(k []byte) (model, taskKey string, ok bool) {
	if !bytes.HasPrefix(k, []byte(keyPrefix)) {
		return "", "", false
	}
	rest := k[len(keyPrefix):]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return "", "", false
	}
	return string(rest[:i]), string(rest[i+1:]), true
}
