package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/fikit/fikit/profiler"
)

// Badger tuning for a small daemon holding at most a few thousand profiles
// of up to a few megabytes. Badger's defaults (64 MiB memtables ×5, 1 GiB
// value-log files mapped twice, a 256 MiB block cache) reserve some 4 GB of
// address space and are meant for databases many orders larger.
const (
	badgerMemTableSize    = 8 << 20  // also bounds a write batch to 15 %: 1.2 MiB
	badgerNumMemtables    = 2        // one being written, one being flushed
	badgerValueThreshold  = 1 << 20  // values up to 1 MiB live in the LSM tree
	badgerValueLogFile    = 32 << 20 // larger values go to 32 MiB value-log files
	badgerBlockCacheSize  = 4 << 20
	badgerIndexCacheSize  = 2 << 20
	badgerNumCompactors   = 2 // Badger's minimum
	badgerLevelZeroTables = 2
	badgerLevelZeroStall  = 8
)

// reserveBytes is the free space a write needs besides twice its value:
// the rest of the memtable's write-ahead log (2 × memtable, mapped sparse)
// and the level-0 table its flush writes. Badger writes all of them through
// mmap, where running out of space is a SIGBUS that kills the process, so
// the store checks before writing (a race with other writers to the same
// file system remains; docs/operations.md).
const reserveBytes = 4 * badgerMemTableSize

// DefaultCloseTimeout bounds Close: Badger retries a failed memtable flush
// every second forever (a removed or read-only directory), which must not
// keep a daemon from exiting. What Put wrote is in the synced write-ahead
// log either way.
const DefaultCloseTimeout = 1500 * time.Millisecond

// MaxProfileBytes bounds the encoded size of a stored profile (a value must
// fit one value-log file).
const MaxProfileBytes = badgerValueLogFile / 2

// BadgerOptions tunes OpenBadger. The zero value is valid.
type BadgerOptions struct {
	// Logger receives Badger's warnings and errors; its informational
	// messages are dropped. nil means slog.Default().
	Logger *slog.Logger
	// CloseTimeout bounds Close (0: DefaultCloseTimeout).
	CloseTimeout time.Duration
}

// Badger is a Store in a Badger v4 database directory. Keys are
// v1/profile/<GPU model>\x00<task key>; values are profiles in the msgpack
// layout of profiler.Profile.MarshalBinary. Every Put is synced to disk
// before it returns.
type Badger struct {
	dir          string
	dirInfo      os.FileInfo // the directory opened: writes check it is still there
	closeTimeout time.Duration
	mu           sync.RWMutex // write-held only by Close
	db           *badger.DB
	closed       bool
}

var _ Store = (*Badger)(nil)

// OpenBadger opens (creating if need be) the profile store in dir. If another
// process holds the directory, the error wraps ErrLocked; if this process
// may not use it, os.ErrPermission; if other users may write to it,
// ErrInsecureDir.
func OpenBadger(dir string, opts *BadgerOptions) (*Badger, error) {
	logger := slog.Default()
	closeTimeout := DefaultCloseTimeout
	if opts != nil && opts.Logger != nil {
		logger = opts.Logger
	}
	if opts != nil && opts.CloseTimeout > 0 {
		closeTimeout = opts.CloseTimeout
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("open %s: %w (mode %v): use a directory of its own, e.g. chmod 700", dir, ErrInsecureDir, fi.Mode().Perm())
	}
	// Full: Badger would map its files and die of SIGBUS. (A store another
	// process holds is answered below with ErrLocked, whatever the space.)
	if err := checkWritable(dir, nil, reserveBytes); errors.Is(err, ErrNoSpace) && !lockedByOther(dir) {
		return nil, fmt.Errorf("open %w", err)
	}
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{logger.With("component", "badger")}).
		WithSyncWrites(true).
		WithMetricsEnabled(false).
		WithMemTableSize(badgerMemTableSize).
		WithNumMemtables(badgerNumMemtables).
		WithValueThreshold(badgerValueThreshold).
		WithValueLogFileSize(badgerValueLogFile).
		WithBlockCacheSize(badgerBlockCacheSize).
		WithIndexCacheSize(badgerIndexCacheSize).
		WithNumCompactors(badgerNumCompactors).
		WithNumLevelZeroTables(badgerLevelZeroTables).
		WithNumLevelZeroTablesStall(badgerLevelZeroStall).
		WithNumGoroutines(2)
	db, err := badger.Open(bo)
	if err != nil {
		if lockedByOther(dir) {
			return nil, fmt.Errorf("open %s: %w: %w", dir, ErrLocked, err)
		}
		// Badger's errors do not unwrap; say os.ErrPermission ourselves.
		if aerr := checkAccess(dir); aerr != nil {
			return nil, fmt.Errorf("open %s: %w (%v)", dir, aerr, err)
		}
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &Badger{dir: dir, dirInfo: fi, db: db, closeTimeout: closeTimeout}, nil
}

// Dir is the database directory.
func (b *Badger) Dir() string { return b.dir }

// Get implements Store.
func (b *Badger) Get(model, taskKey string) (*profiler.Profile, error) {
	if err := checkKey(model, taskKey); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	var p *profiler.Profile
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(profileKey(model, taskKey))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			p, err = profiler.DecodeBinary(v)
			return err
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("%q on %q: %w", taskKey, model, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %q on %q: %w", taskKey, model, err)
	}
	return p, nil
}

// Put implements Store. The write is synced before Put returns.
func (b *Badger) Put(p *profiler.Profile) error {
	v, err := encodeProfile(p)
	if err != nil {
		return err
	}
	if err := b.set(profileKey(p.GPU, p.TaskKey), v); err != nil {
		return fmt.Errorf("put %q on %q: %w", p.TaskKey, p.GPU, err)
	}
	return nil
}

// set writes key's value, synced, where the disk leaves room for it (the
// one write path of profiles and usage).
func (b *Badger) set(key, v []byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	if err := checkWritable(b.dir, b.dirInfo, reserveBytes+2*int64(len(v))); err != nil {
		return err
	}
	return b.db.Update(func(txn *badger.Txn) error { return txn.Set(key, v) })
}

// get reads key's value (a copy), nil where there is none: the one read
// path of the single-key records (usage, roster).
func (b *Badger) get(key []byte) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	var v []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	return v, err
}

// Delete implements Store.
func (b *Badger) Delete(model, taskKey string) error {
	if err := checkKey(model, taskKey); err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	if err := checkWritable(b.dir, b.dirInfo, reserveBytes); err != nil {
		return fmt.Errorf("delete %q on %q: %w", taskKey, model, err)
	}
	k := profileKey(model, taskKey)
	err := b.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(k); err != nil {
			return err
		}
		return txn.Delete(k)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("%q on %q: %w", taskKey, model, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete %q on %q: %w", taskKey, model, err)
	}
	return nil
}

// List implements Store.
func (b *Badger) List() ([]Summary, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	var out []Summary
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(keyPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			model, key, ok := parseProfileKey(item.Key())
			if !ok {
				continue
			}
			err := item.Value(func(v []byte) error {
				p, err := profiler.DecodeBinary(v)
				if err != nil {
					return fmt.Errorf("%q on %q: %w", key, model, err)
				}
				out = append(out, Summarize(p))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if out == nil {
		out = []Summary{}
	}
	sortSummaries(out)
	return out, nil
}

// SizeBytes is the space the database's files take on disk (allocated
// blocks): the daemon's fikit_store_bytes metric. Badger's own Size() is
// always zero with its metrics off, as they are here. 0 once closed.
func (b *Badger) SizeBytes() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0
	}
	return diskUsage(b.dir)
}

// Close implements Store. It waits for calls in progress, and for Badger
// at most CloseTimeout: past it, Close returns an error and leaves Badger's
// goroutines to end with the process (the directory stays locked until
// then; what Put wrote is in the synced write-ahead log).
func (b *Badger) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	done := make(chan error, 1)
	go func() { done <- b.db.Close() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("close %s: %w", b.dir, err)
		}
		return nil
	case <-time.After(b.closeTimeout):
		return fmt.Errorf("close %s: Badger did not finish within %v (%v)", b.dir, b.closeTimeout,
			checkWritable(b.dir, b.dirInfo, 0))
	}
}

// badgerLogger passes Badger's warnings and errors to slog and drops the
// rest (Badger logs every compaction and value-log replay at INFO).
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(format string, args ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
