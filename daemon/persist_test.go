package daemon

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/scheduler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/store/storetest"
)

// flakyStore refuses the first `fail` writes, then stores; block makes
// every Put wait on it. It remembers what it stored, in order, and the log
// length at each write (to check what had been logged before it).
type flakyStore struct {
	store.Store
	mu     sync.Mutex
	fail   int
	block  chan struct{}
	puts   []string
	logLen []int
	log    *syncBuffer
}

func (f *flakyStore) Put(p *profiler.Profile) error {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return fmt.Errorf("put: %w", store.ErrNoSpace)
	}
	f.puts = append(f.puts, fmt.Sprintf("%s/%d", p.TaskKey, p.Runs))
	f.logLen = append(f.logLen, f.log.Len())
	return nil
}

func (b *syncBuffer) Len() int       { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.Len() }
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }

func version(key string, runs uint32, complete bool) scheduler.ProfileUpdate {
	p := storetest.Profile(key, "GPU", uint64(runs), 2)
	p.Runs = runs
	return scheduler.ProfileUpdate{Task: 1, Key: key, Model: "GPU", Runs: int(runs), Complete: complete, Profile: p}
}

// Through a spell of refused writes the newest version of each profile is
// written, in the order the profiles came; "profile complete" is logged
// only after the complete version's write.
func TestPersisterWritesNewestInOrder(t *testing.T) {
	logs := &syncBuffer{}
	st := &flakyStore{Store: store.NewMemory(), fail: 3, log: logs}
	p := newPersister(st, slog.New(slog.NewTextHandler(logs, nil)), nil)
	p.put(version("a", 10, false))
	p.put(version("b", 10, false))
	p.put(version("a", 20, true))
	p.put(version("b", 20, true))
	deadline := time.Now().Add(10 * time.Second)
	for p.stats().pending > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	p.close()
	if got, want := strings.Join(st.puts, " "), "a/20 b/20"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	out := logs.String()
	if n := strings.Count(out, "saving profiles failed"); n != 1 {
		t.Errorf("%d failure lines for one failing spell:\n%s", n, out)
	}
	for i, put := range st.puts {
		before := out[:st.logLen[i]]
		key := strings.Split(put, "/")[0]
		if regexp.MustCompile(`profile complete.* key=` + key + ` `).MatchString(before) {
			t.Errorf("profile %s reported complete before it was written:\n%s", key, before)
		}
	}
	if n := strings.Count(out, "profile complete"); n != 2 {
		t.Errorf("%d completions logged, want 2:\n%s", n, out)
	}
	if s := p.stats(); s.saved != 2 || s.completed != 2 || s.failures != 3 || s.pending != 0 {
		t.Errorf("stats %+v", s)
	}
	if enq, durable := p.marks(); enq != 4 || durable != 4 {
		t.Errorf("marks %d queued, %d durable; want 4, 4", enq, durable)
	}
}

// The durable mark says up to which version everything is written: a
// version of another profile queued earlier holds it back; a newer version
// of the same profile written supersedes the older ones.
func TestPersisterDurableMark(t *testing.T) {
	logs := &syncBuffer{}
	st := &flakyStore{Store: store.NewMemory(), block: make(chan struct{}), log: logs}
	moved := make(chan struct{}, 16)
	p := newPersister(st, slog.New(slog.NewTextHandler(logs, nil)), func() { moved <- struct{}{} })
	defer p.close()
	wait := func(want uint64) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			if _, d := p.marks(); d == want {
				return
			}
			select {
			case <-moved:
			case <-deadline:
				_, d := p.marks()
				t.Fatalf("durable %d, want %d", d, want)
			}
		}
	}
	p.put(version("a", 1, false)) // 1: being written (blocked)
	time.Sleep(50 * time.Millisecond)
	p.put(version("b", 1, false)) // 2
	p.put(version("a", 2, false)) // 3: supersedes 1
	st.block <- struct{}{}        // a/1 written
	wait(1)
	st.block <- struct{}{} // b/1 written: 2 durable; a/2 (3) next
	wait(2)
	st.block <- struct{}{} // a/2
	wait(3)
	close(st.block)
	if got := strings.Join(st.puts, " "); got != "a/1 b/1 a/2" {
		t.Errorf("written %q", got)
	}
}

// A store that refuses every write: close gives up after retryOnClose.
func TestPersisterCloseBoundedWhenStoreRefuses(t *testing.T) {
	logs := &syncBuffer{}
	st := &flakyStore{Store: store.NewMemory(), fail: 1 << 30, log: logs}
	p := newPersister(st, slog.New(slog.NewTextHandler(logs, nil)), nil)
	p.put(version("a", 10, true))
	time.Sleep(300 * time.Millisecond) // let it back off
	start := time.Now()
	p.close()
	if took := time.Since(start); took > p.retryOnClose+time.Second {
		t.Errorf("close took %v", took)
	}
	if !strings.Contains(logs.String(), "profiles not saved") {
		t.Errorf("no word of the unsaved profile:\n%s", logs)
	}
}

// A write that never returns (a hung disk): close gives up after closeMax.
func TestPersisterCloseBoundedWhenWriteHangs(t *testing.T) {
	logs := &syncBuffer{}
	st := &flakyStore{Store: store.NewMemory(), block: make(chan struct{}), log: logs}
	defer close(st.block)
	p := newPersister(st, slog.New(slog.NewTextHandler(logs, nil)), nil)
	p.closeMax = 200 * time.Millisecond
	p.put(version("a", 10, true))
	start := time.Now()
	p.close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("close took %v", took)
	}
	if !strings.Contains(logs.String(), "did not return") {
		t.Errorf("no word of the hung write:\n%s", logs)
	}
}

// A full queue drops superseded versions first and keeps the newest of
// each profile, complete if any dropped one was.
func TestPersisterQueueBound(t *testing.T) {
	p := &persister{}
	for i := 0; i < persistQueueMax; i++ {
		p.queue = append(p.queue, persistJob{prof: version(fmt.Sprint("k", i%2), uint32(i), false).Profile})
	}
	p.dropOne()
	if len(p.queue) != persistQueueMax-1 || p.queue[0].prof.Runs != 1 {
		t.Fatalf("dropped the wrong version: first left has %d runs", p.queue[0].prof.Runs)
	}
}
