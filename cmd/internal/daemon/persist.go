package daemon

import (
	"log/slog"
	"sync"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/store"
)

// persister writes profiles off the receive loop: a Badger write with
// SyncWrites waits for the disk, which must not stall scheduling. Only the
// newest pending version of each profile is written.
type persister struct {
	st      store.Store
	log     *slog.Logger
	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string]*profiler.Profile
	order   []string
	closed  bool
	done    chan struct{}
}

func newPersister(st store.Store, log *slog.Logger) *persister {
	p := &persister{st: st, log: log, pending: map[string]*profiler.Profile{}, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.run()
	return p
}

// put queues a profile; it never blocks on the disk.
func (p *persister) put(prof *profiler.Profile) {
	k := prof.GPU + "\x00" + prof.TaskKey
	p.mu.Lock()
	if _, queued := p.pending[k]; !queued {
		p.order = append(p.order, k)
	}
	p.pending[k] = prof
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *persister) run() {
	defer close(p.done)
	p.mu.Lock()
	for {
		for len(p.order) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.order) == 0 && p.closed {
			p.mu.Unlock()
			return
		}
		k := p.order[0]
		p.order = p.order[1:]
		prof := p.pending[k]
		delete(p.pending, k)
		p.mu.Unlock()
		if err := p.st.Put(prof); err != nil {
			p.log.Error("saving profile", "key", prof.TaskKey, "gpu", prof.GPU, "err", err)
		} else {
			p.log.Debug("profile saved", "key", prof.TaskKey, "gpu", prof.GPU, "runs", prof.Runs)
		}
		p.mu.Lock()
	}
}

// close writes what is pending and stops.
func (p *persister) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Signal()
	<-p.done
}
