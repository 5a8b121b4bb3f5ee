package daemon

import (
	"log/slog"
	"sync"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
)

// Persisting profiles: timing and bounds.
const (
	// persistQueueMax bounds the versions waiting for a store that cannot
	// be written; past it, a version with a newer one of the same profile
	// queued is dropped first (the newer one carries everything it had).
	persistQueueMax = 1024
	// persistRetryMin and persistRetryMax bound the backoff between tries
	// while the store refuses writes (full disk, removed directory).
	persistRetryMin = 100 * time.Millisecond
	persistRetryMax = 5 * time.Second
	// persistRetryOnClose is how long a shutdown keeps retrying a store
	// that refuses writes; persistCloseMax bounds a shutdown's wait for a
	// write that does not return (a hung disk).
	persistRetryOnClose = 500 * time.Millisecond
	persistCloseMax     = 5 * time.Second
)

// persister writes profiles off the receive loop: a Badger write with
// SyncWrites waits for the disk, which must not stall scheduling. Every
// version is written, in the order the core produced them, and a profile is
// reported complete (log line, fikit_profiles_saved_total) only once its
// write has been synced. While the store refuses writes the versions wait
// in memory (the daemon schedules with its in-memory copy meanwhile) and
// are retried with backoff.
type persister struct {
	st   store.Store
	log  *slog.Logger
	mu   sync.Mutex
	cond *sync.Cond
	// queue holds the versions not yet written, oldest first.
	queue    []persistJob
	closing  bool
	giveUpAt time.Time // when closing: stop retrying a failing store
	wake     chan struct{}
	done     chan struct{}
	// retryOnClose and closeMax are persistRetryOnClose and
	// persistCloseMax (tests shorten them).
	retryOnClose, closeMax time.Duration
	// Counters, read by metrics.
	saved, completed, failures, dropped uint64
	failing                             bool
}

// persistJob is one profile version to write.
type persistJob struct {
	prof     *profiler.Profile
	complete bool
	task     scheduler.TaskID
}

func newPersister(st store.Store, log *slog.Logger) *persister {
	p := &persister{st: st, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}),
		retryOnClose: persistRetryOnClose, closeMax: persistCloseMax}
	p.cond = sync.NewCond(&p.mu)
	go p.run()
	return p
}

// put queues a profile version; it never blocks on the disk.
func (p *persister) put(u scheduler.ProfileUpdate) {
	p.mu.Lock()
	if len(p.queue) >= persistQueueMax {
		p.dropOne()
	}
	p.queue = append(p.queue, persistJob{prof: u.Profile, complete: u.Complete, task: u.Task})
	p.mu.Unlock()
	p.cond.Signal()
}

// dropOne makes room in a full queue: the oldest version superseded by a
// later one of the same profile, else the oldest. Called with mu held.
func (p *persister) dropOne() {
	drop := 0
	newest := map[string]int{}
	for i, j := range p.queue {
		newest[profileID(j.prof)] = i
	}
	for i, j := range p.queue {
		if newest[profileID(j.prof)] != i {
			drop = i
			break
		}
	}
	j := p.queue[drop]
	if j.complete && newest[profileID(j.prof)] != drop {
		// The newer version is complete too (a profile only grows).
		last := &p.queue[newest[profileID(j.prof)]]
		last.complete = true
	}
	p.queue = append(p.queue[:drop], p.queue[drop+1:]...)
	p.dropped++
}

func profileID(prof *profiler.Profile) string { return prof.GPU + "\x00" + prof.TaskKey }

func (p *persister) run() {
	defer close(p.done)
	backoff := persistRetryMin
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closing {
			p.cond.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		j := p.queue[0]
		p.mu.Unlock()

		err := p.st.Put(j.prof)

		p.mu.Lock()
		if err == nil {
			p.queue = p.queue[1:]
			p.saved++
			if p.failing {
				p.failing = false
				p.log.Info("profile store writable again", "pending", len(p.queue))
			}
			backoff = persistRetryMin
			if j.complete {
				p.completed++
				p.log.Info("profile complete", "task", j.task, "key", j.prof.TaskKey, "gpu", j.prof.GPU, "runs", j.prof.Runs)
			} else {
				p.log.Debug("profile saved", "key", j.prof.TaskKey, "gpu", j.prof.GPU, "runs", j.prof.Runs)
			}
			p.mu.Unlock()
			continue
		}
		p.failures++
		if !p.failing {
			// Once per failing spell: the store stays broken for a while.
			p.failing = true
			p.log.Error("saving profiles failed: kept in memory, retrying", "key", j.prof.TaskKey, "gpu", j.prof.GPU, "err", err)
		}
		if p.closing && time.Now().After(p.giveUpAt) {
			p.log.Error("profiles not saved", "versions", len(p.queue), "err", err)
			p.mu.Unlock()
			return
		}
		wait := backoff
		if p.closing {
			wait = min(wait, time.Until(p.giveUpAt))
		}
		p.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-p.wake:
		}
		backoff = min(2*backoff, persistRetryMax)
	}
}

// close writes what is pending and stops: at most persistRetryOnClose of
// retries if the store refuses writes, at most persistCloseMax in all.
func (p *persister) close() {
	p.mu.Lock()
	p.closing = true
	p.giveUpAt = time.Now().Add(p.retryOnClose)
	p.mu.Unlock()
	p.cond.Signal()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
	case <-time.After(p.closeMax):
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		p.log.Error("profile store write did not return: not waiting longer", "pending", n)
	}
}

// persistStats are the persister's counters.
type persistStats struct {
	saved, completed, failures, dropped uint64
	pending                             int
}

func (p *persister) stats() persistStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return persistStats{saved: p.saved, completed: p.completed, failures: p.failures, dropped: p.dropped, pending: len(p.queue)}
}
