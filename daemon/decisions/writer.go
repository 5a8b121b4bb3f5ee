package decisions

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Writer appends records to an io.Writer without ever making its caller
// wait: Add collects records in memory, Flush hands them to a goroutine that
// encodes and writes them. When that goroutine falls behind (a slow disk),
// Flush drops the batch and the next one starts with a KindLost record
// counting what was dropped. The first write error stops the recording:
// onError is called once and later records are discarded.
//
// Add and Flush are for one goroutine (the daemon's loop, under its lock);
// Close may be called from any goroutine, once.
type Writer struct {
	ch      chan []Record
	free    chan []Record
	done    chan struct{}
	batch   []Record
	lost    uint64
	failed  chan struct{} // closed by the writing goroutine on error
	onError func(error)
	once    sync.Once
}

// Queue sizing: batches waiting for the writing goroutine. A daemon flushes
// once per datagram batch, so this is several milliseconds of decisions
// even on a busy daemon; beyond that the disk is slower than the decisions.
const (
	queueBatches = 256
	// idleFlush is how long written records may wait in the buffer when no
	// new ones come, so a file being followed (tail -f) stays current.
	idleFlush = 100 * time.Millisecond
)

// closeWait bounds Close: a writer that blocks (a full pipe) must not keep
// the daemon from shutting down. A variable for the tests.
var closeWait = 2 * time.Second

// NewWriter starts writing records to w. onError (nil: ignored) receives the
// first write error, from the writing goroutine.
func NewWriter(w io.Writer, onError func(error)) *Writer {
	if onError == nil {
		onError = func(error) {}
	}
	x := &Writer{
		ch: make(chan []Record, queueBatches), free: make(chan []Record, queueBatches),
		done: make(chan struct{}), failed: make(chan struct{}), onError: onError,
	}
	go x.run(w)
	return x
}

// Add queues r for the next Flush.
func (x *Writer) Add(r Record) {
	select {
	case <-x.failed:
		return
	default:
	}
	if x.lost > 0 {
		x.batch = append(x.batch, Record{T: r.T, Kind: KindLost, Count: x.lost})
		x.lost = 0
	}
	x.batch = append(x.batch, r)
}

// Flush hands the queued records to the writing goroutine; it never blocks.
func (x *Writer) Flush() {
	if len(x.batch) == 0 {
		return
	}
	select {
	case x.ch <- x.batch:
		x.batch = nil
		select {
		case x.batch = <-x.free:
		default:
		}
	default:
		for _, r := range x.batch {
			if r.Kind == KindLost {
				x.lost += r.Count
			} else {
				x.lost++
			}
		}
		x.batch = x.batch[:0]
	}
}

// Close flushes what is queued and waits (a bounded time) for it to be
// written. It does not close the underlying writer.
func (x *Writer) Close() error {
	var err error
	x.once.Do(func() {
		x.Flush()
		close(x.ch)
		select {
		case <-x.done:
		case <-time.After(closeWait):
			err = fmt.Errorf("decisions: writer still blocked after %s; records lost", closeWait)
		}
	})
	return err
}

func (x *Writer) run(w io.Writer) {
	defer close(x.done)
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	fail := func(err error) {
		close(x.failed)
		x.onError(err)
		for range x.ch { // discard the rest without blocking Flush
		}
	}
	timer := time.NewTimer(idleFlush)
	defer timer.Stop()
	dirty := false
	for {
		select {
		case b, ok := <-x.ch:
			if !ok {
				if err := bw.Flush(); err != nil {
					fail(err)
				}
				return
			}
			for i := range b {
				if err := enc.Encode(&b[i]); err != nil {
					fail(err)
					return
				}
			}
			dirty = true
			select {
			case x.free <- b[:0]:
			default:
			}
			timer.Reset(idleFlush)
		case <-timer.C:
			if dirty {
				if err := bw.Flush(); err != nil {
					fail(err)
					return
				}
				dirty = false
			}
			timer.Reset(idleFlush)
		}
	}
}
