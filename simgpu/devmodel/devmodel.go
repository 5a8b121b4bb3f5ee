package devmodel

/*
#cgo CFLAGS: -std=gnu11 -O2
#include <stdlib.h>
#include <string.h>
#include "devmodel.h"

static const char *preset_default(void) { return DM_PRESET_DEFAULT; }

// Segments reported by one advance land in a C buffer owned by the Device,
// so no Go pointer is handed to C and no C code calls back into Go.
typedef struct segbuf {
	dm_segment *v;
	size_t n, cap;
	int oom;
} segbuf;

static void segbuf_sink(void *arg, const dm_segment *g)
{
	segbuf *b = arg;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		dm_segment *v = realloc(b->v, cap * sizeof *v);
		if (!v) {
			b->oom = 1;
			return;
		}
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = *g;
}

static void go_advance(dm_device *d, int64_t now, segbuf *b)
{
	b->n = 0;
	dm_advance(d, now, segbuf_sink, b);
}

static int go_drop(dm_device *d, int ctx, int64_t now, segbuf *b, int close)
{
	b->n = 0;
	return close ? dm_ctx_close(d, ctx, now, segbuf_sink, b) : dm_drop_context(d, ctx, now, segbuf_sink, b);
}

static dm_segment *segbuf_at(segbuf *b, size_t i) { return &b->v[i]; }
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"
)

// Never is the time of an event that will not happen.
const Never int64 = math.MaxInt64

// Capacities of the model (see devmodel.h).
const (
	MaxContexts = C.DM_MAX_CTX
	RingSize    = C.DM_RING
	MaxStreams  = C.DM_MAX_STREAMS
	// LegacyStream is the legacy default stream of every context.
	LegacyStream = 0
)

// Model selects how contexts share the kernel engine.
type Model int

// The scheduling models.
const (
	Timeslice Model = C.DM_TIMESLICE
	FIFO      Model = C.DM_FIFO
)

// ParseModel is the model named s ("timeslice" or "fifo").
func ParseModel(s string) (Model, error) {
	for _, m := range []Model{Timeslice, FIFO} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: model %q is not timeslice or fifo", ErrConfig, s)
}

func (m Model) String() string {
	switch m {
	case Timeslice:
		return "timeslice"
	case FIFO:
		return "fifo"
	}
	return fmt.Sprintf("Model(%d)", int(m))
}

// Config holds the model parameters. A preset (Preset) gives a whole
// Config; docs/simgpu.md "Presets" says which numbers are measured on a
// GPU, which are fitted and which are assumed.
type Config struct {
	Model           Model
	Timeslice       time.Duration // slice of a context while others wait
	Switch          time.Duration // context-switch cost
	LaunchLatency   time.Duration // enqueue to arrival at the device
	DefaultKernel   time.Duration // duration of a kernel enqueued with Duration < 0
	CopyBytesPerSec int64         // copy engine bandwidth
}

// DefaultPreset is the preset DefaultConfig returns (and simgpu's default
// FIKIT_SIMGPU_DEVICE).
var DefaultPreset = C.GoString(C.preset_default())

// DefaultConfig returns the default preset's configuration.
func DefaultConfig() Config {
	var c C.dm_config
	C.dm_config_default(&c)
	return fromC(&c)
}

// Preset returns the configuration of the device preset name ("h200",
// "legacy", …: PresetNames); ErrPreset if there is none.
func Preset(name string) (Config, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var c C.dm_config
	if C.dm_preset(cs, &c) != 0 {
		return Config{}, fmt.Errorf("%w %q (known: %s)", ErrPreset, name, strings.Join(PresetNames(), ", "))
	}
	return fromC(&c), nil
}

// PresetNames lists the device presets, the default first.
func PresetNames() []string {
	var names []string
	for i := 0; ; i++ {
		n := C.dm_preset_name(C.int(i))
		if n == nil {
			return names
		}
		names = append(names, C.GoString(n))
	}
}

func fromC(c *C.dm_config) Config {
	return Config{
		Model:           Model(c.model),
		Timeslice:       time.Duration(c.timeslice_ns),
		Switch:          time.Duration(c.switch_ns),
		LaunchLatency:   time.Duration(c.launch_latency_ns),
		DefaultKernel:   time.Duration(c.default_kernel_ns),
		CopyBytesPerSec: int64(c.copy_bytes_per_s),
	}
}

func (cfg Config) toC() C.dm_config {
	var c C.dm_config
	c.model = C.int32_t(cfg.Model)
	c.timeslice_ns = C.int64_t(cfg.Timeslice)
	c.switch_ns = C.int64_t(cfg.Switch)
	c.launch_latency_ns = C.int64_t(cfg.LaunchLatency)
	c.default_kernel_ns = C.int64_t(cfg.DefaultKernel)
	c.copy_bytes_per_s = C.int64_t(cfg.CopyBytesPerSec)
	return c
}

// OpType is the kind of an op.
type OpType int

// Op types.
const (
	Kernel OpType = C.DM_OP_KERNEL // runs on the kernel engine for Duration
	Event  OpType = C.DM_OP_EVENT  // completes when the stream's earlier work has (cuEventRecord)
	Wait   OpType = C.DM_OP_WAIT   // completes when op (WaitCtx, WaitSeq) has (cuStreamWaitEvent)
	Copy   OpType = C.DM_OP_COPY   // moves Bytes on the copy engine
)

// Op is one unit of stream work.
type Op struct {
	Type        OpType
	Stream      uint32 // < MaxStreams; 0 is the legacy stream
	NonBlocking bool   // the stream does not synchronize with the legacy stream
	Duration    time.Duration
	Bytes       uint64
	Tag         uint64 // opaque, returned in Segments
	Grid, Block [3]uint32
	WaitCtx     int
	WaitGen     uint32 // Device.ContextGen(WaitCtx) when the target was enqueued
	WaitSeq     uint64
}

// Segment is one uninterrupted stretch of a kernel on the device.
type Segment struct {
	Ctx         int
	Stream      uint32
	Seq         uint64
	Tag         uint64
	Start, End  int64
	Index       int  // 0 for the kernel's first segment
	Last        bool // the kernel finished (or was dropped) with this segment
	Dropped     bool // its context was dropped while it ran
	Grid, Block [3]uint32
	// Arrive is when the kernel arrived on the device (enqueue + launch latency).
	Arrive int64
	// Blocked is the time since the kernel's previous segment (or its
	// arrival) that it was ready while the device ran another context's
	// kernel or switched contexts; summed over a kernel's segments, its
	// interference from other contexts.
	Blocked time.Duration
}

// Totals is what one context got from the device since it opened.
type Totals struct {
	Kernels       uint64        // completed
	Busy, Blocked time.Duration // ran; ready but blocked by other contexts or switches
}

// Stats counts what the device did.
type Stats struct {
	Kernels, Segments, Switches, Preemptions uint64
	Busy, Switching                          time.Duration
}

// Device is one simulated GPU. It owns C memory: call Close.
type Device struct {
	d   *C.dm_device
	buf *C.segbuf
}

// New returns a device with cfg whose model time starts at now.
func New(cfg Config, now int64) (*Device, error) {
	c := cfg.toC()
	if C.dm_config_check(&c) != 0 {
		return nil, fmt.Errorf("%w: %+v", ErrConfig, cfg)
	}
	d := (*C.dm_device)(C.calloc(1, C.size_t(unsafe.Sizeof(C.dm_device{}))))
	buf := (*C.segbuf)(C.calloc(1, C.size_t(unsafe.Sizeof(C.segbuf{}))))
	if d == nil || buf == nil {
		C.free(unsafe.Pointer(d))
		C.free(unsafe.Pointer(buf))
		return nil, fmt.Errorf("devmodel: out of memory")
	}
	C.dm_init(d, &c, C.int64_t(now))
	return &Device{d: d, buf: buf}, nil
}

// Close frees the device.
func (dev *Device) Close() {
	if dev.d == nil {
		return
	}
	C.free(unsafe.Pointer(dev.buf.v))
	C.free(unsafe.Pointer(dev.buf))
	C.free(unsafe.Pointer(dev.d))
	dev.d, dev.buf = nil, nil
}

// Config returns the device's parameters.
func (dev *Device) Config() Config { return fromC(&dev.d.cfg) }

// Now is the model time: everything up to it has been processed.
func (dev *Device) Now() int64 { return int64(dev.d.t) }

// OpenContext opens a context owned by pid and returns its index.
func (dev *Device) OpenContext(pid uint32) (int, error) {
	ci := C.dm_ctx_open(dev.d, C.uint32_t(pid))
	if ci < 0 {
		return -1, ErrNoContext
	}
	return int(ci), nil
}

// ContextGen is the generation of an open context (0 if not open); Wait ops carry it.
func (dev *Device) ContextGen(ctx int) uint32 { return uint32(C.dm_ctx_gen(dev.d, C.int(ctx))) }

// CloseContext drops the context's work at now and frees it. It returns the
// segments the device finished up to now, the cut one of a running kernel included.
func (dev *Device) CloseContext(ctx int, now int64) ([]Segment, error) {
	if C.go_drop(dev.d, C.int(ctx), C.int64_t(now), dev.buf, 1) != 0 {
		return nil, ErrInvalid
	}
	return dev.segments(), nil
}

// DropContext discards the context's queued work at now (a dead process's).
func (dev *Device) DropContext(ctx int, now int64) ([]Segment, error) {
	if C.go_drop(dev.d, C.int(ctx), C.int64_t(now), dev.buf, 0) != 0 {
		return nil, ErrInvalid
	}
	return dev.segments(), nil
}

// Enqueue adds op to context ctx at now and returns its sequence number.
// Advance to now first so the op is judged against the current state. The op
// holds one of the context's RingSize slots until Retire frees it after it
// completed; ErrFull means none is free.
func (dev *Device) Enqueue(ctx int, op Op, now int64) (uint64, error) {
	var o C.dm_op
	o._type = C.int32_t(op.Type)
	o.stream = C.uint32_t(op.Stream)
	if op.NonBlocking {
		o.flags = C.DM_OPF_NONBLOCKING
	}
	o.duration_ns = C.int64_t(op.Duration)
	o.bytes = C.uint64_t(op.Bytes)
	o.tag = C.uint64_t(op.Tag)
	o.wait_ctx = C.int32_t(op.WaitCtx)
	o.wait_gen = C.uint32_t(op.WaitGen)
	o.wait_seq = C.uint64_t(op.WaitSeq)
	for i := 0; i < 3; i++ {
		o.grid[i] = C.uint32_t(op.Grid[i])
		o.block[i] = C.uint32_t(op.Block[i])
	}
	seq := int64(C.dm_enqueue(dev.d, C.int(ctx), &o, C.int64_t(now)))
	switch {
	case seq > 0:
		return uint64(seq), nil
	case seq == C.DM_EFULL:
		return 0, ErrFull
	}
	return 0, ErrInvalid
}

// Advance processes everything up to now and returns the kernel segments
// that finished, in the order they ended.
func (dev *Device) Advance(now int64) []Segment {
	C.go_advance(dev.d, C.int64_t(now), dev.buf)
	return dev.segments()
}

func (dev *Device) segments() []Segment {
	n := int(dev.buf.n)
	if n == 0 {
		return nil
	}
	if dev.buf.oom != 0 {
		panic("devmodel: out of memory collecting segments")
	}
	out := make([]Segment, n)
	for i := range out {
		g := C.segbuf_at(dev.buf, C.size_t(i))
		s := &out[i]
		s.Ctx = int(g.ctx)
		s.Stream = uint32(g.stream)
		s.Seq = uint64(g.seq)
		s.Tag = uint64(g.tag)
		s.Start = int64(g.start_ns)
		s.End = int64(g.end_ns)
		s.Index = int(g.seg)
		s.Last = g.last != 0
		s.Dropped = g.dropped != 0
		s.Arrive = int64(g.arrive_ns)
		s.Blocked = time.Duration(g.blocked_ns)
		for k := 0; k < 3; k++ {
			s.Grid[k] = uint32(g.grid[k])
			s.Block[k] = uint32(g.block[k])
		}
	}
	dev.buf.n = 0
	return out
}

// Done reports whether op (ctx, seq) has completed and when (-1 once retired).
func (dev *Device) Done(ctx int, seq uint64) (done bool, end int64, err error) {
	var e C.int64_t
	r := C.dm_op_done(dev.d, C.int(ctx), C.uint64_t(seq), &e)
	if r < 0 {
		return false, 0, ErrInvalid
	}
	if r == 0 {
		return false, 0, nil
	}
	return true, int64(e), nil
}

// NextEvent is the time of the device's next internal state change (Never if
// none): an event-driven caller advances to it.
func (dev *Device) NextEvent() int64 { return int64(C.dm_next_event(dev.d)) }

// Forecast is a lower bound of op (ctx, seq)'s completion assuming no new
// work arrives (its end time if done, Never if no such op).
func (dev *Device) Forecast(ctx int, seq uint64, now int64) int64 {
	return int64(C.dm_forecast(dev.d, C.int(ctx), C.uint64_t(seq), C.int64_t(now)))
}

// Retire frees the context's completed ops in order and returns how many.
func (dev *Device) Retire(ctx int) int {
	n := C.dm_retire(dev.d, C.int(ctx), nil, nil)
	if n < 0 {
		return 0
	}
	return int(n)
}

// InFlight is the number of ops enqueued and not yet retired (RingSize: full).
func (dev *Device) InFlight(ctx int) int { return int(C.dm_ctx_inflight(dev.d, C.int(ctx))) }

// Stats returns the device's counters.
func (dev *Device) Stats() Stats {
	s := dev.d.stats
	return Stats{
		Kernels:     uint64(s.kernels),
		Segments:    uint64(s.segments),
		Switches:    uint64(s.switches),
		Preemptions: uint64(s.preemptions),
		Busy:        time.Duration(s.busy_ns),
		Switching:   time.Duration(s.switch_ns),
	}
}

// ContextTotals returns an open context's totals up to the model's time.
func (dev *Device) ContextTotals(ctx int) (Totals, error) {
	var t C.dm_totals
	if r := C.dm_ctx_totals(dev.d, C.int(ctx), &t); r != 0 {
		return Totals{}, fmt.Errorf("devmodel: context %d: %w", ctx, ErrInvalid)
	}
	return Totals{Kernels: uint64(t.kernels), Busy: time.Duration(t.busy_ns), Blocked: time.Duration(t.blocked_ns)}, nil
}

// Validate checks the model's invariants (for tests).
func (dev *Device) Validate() error {
	if r := C.dm_validate(dev.d); r != 0 {
		return fmt.Errorf("devmodel: invariant %d violated", int(r))
	}
	return nil
}

// Repair rebuilds derived state from the op slots and returns the number of fixes.
func (dev *Device) Repair() int { return int(C.dm_repair(dev.d)) }

// String describes the configuration in one line, as results and reports
// name a device: "timeslice, 2ms slice, 140µs switch, 5µs launch latency".
func (cfg Config) String() string {
	return fmt.Sprintf("%s, %v slice, %v switch, %v launch latency", cfg.Model, cfg.Timeslice, cfg.Switch, cfg.LaunchLatency)
}
