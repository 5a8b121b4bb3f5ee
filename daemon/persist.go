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
// SyncWrites waits for the disk, which must not stall scheduling. Versions
// are written in the order the core produced them; of several queued
// versions of one profile only the newest is written (it holds everything
// the older ones had: a task profiling fast makes a version per run). A
// profile is reported complete (log line, fikit_profiles_saved_total) only
// once its write has been synced. Every version has a sequence number, and
// durable says up to which one all are written or superseded by a written
// one: a hook's Flush is answered once the versions queued before it are
// durable. While the store refuses writes the versions wait in memory (the
// daemon schedules with its in-memory copy meanwhile) and are retried with
// backoff.
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
	// enq numbers the versions queued; every version numbered durable or
	// less is written (or superseded by one written). onDurable is told
	// when durable moves (the daemon answers flushes then).
	enq, durable uint64
	onDurable    func()
}

// persistJob is one profile version to write.
type persistJob struct {
	prof     *profiler.Profile
	complete bool
	task     scheduler.TaskID
	seq      uint64
}

func newPersister(st store.Store, log *slog.Logger, onDurable func()) *persister {
	p := &persister{st: st, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}),
		retryOnClose: persistRetryOnClose, closeMax: persistCloseMax, onDurable: onDurable}
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
	p.enq++
	p.queue = append(p.queue, persistJob{prof: u.Profile, complete: u.Complete, task: u.Task, seq: p.enq})
	p.mu.Unlock()
	p.cond.Signal()
}

// marks returns the number of the last version queued and the durable mark.
func (p *persister) marks() (enqueued, durable uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enq, p.durable
}

// newest is the index of the newest queued version of the profile of
// queue[0], and whether any version of it up to there is complete. Called
// with mu held.
func (p *persister) newest() (int, bool) {
	id := profileID(p.queue[0].prof)
	last, complete := 0, false
	for i, j := range p.queue {
		if profileID(j.prof) == id {
			last = i
			complete = complete || j.complete
		}
	}
	return last, complete
}

// written removes the versions of the profile written, up to index last,
// and moves the durable mark. Called with mu held; reports whether it moved.
func (p *persister) written(last int) bool {
	id := profileID(p.queue[last].prof)
	kept := p.queue[:0]
	for i, j := range p.queue {
		if i <= last && profileID(j.prof) == id {
			continue
		}
		kept = append(kept, j)
	}
	p.queue = kept
	d := p.enq
	if len(p.queue) > 0 {
		d = p.queue[0].seq - 1
		for _, j := range p.queue {
			d = min(d, j.seq-1)
		}
	}
	if d > p.durable {
		p.durable = d
		return true
	}
	return false
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
		last, complete := p.newest()
		j := p.queue[last]
		j.complete = complete
		p.mu.Unlock()

		err := p.st.Put(j.prof)

		p.mu.Lock()
		if err == nil {
			moved := p.written(last)
			p.saved++
			if moved && p.onDurable != nil {
				p.mu.Unlock()
				p.onDurable()
				p.mu.Lock()
			}
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
