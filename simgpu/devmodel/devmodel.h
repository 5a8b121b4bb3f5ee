/*
 * devmodel.h — the pure state machine of ONE simulated GPU.
 *
 * The model has no clock and makes no system calls: every entry point takes
 * the current time (`now`, nanoseconds on any monotonic time base) and all
 * state lives in one flat struct that holds no pointers, only sequence
 * numbers and indices. That is what lets the same struct live in POSIX shared
 * memory for the simulated driver (many processes map it at different
 * addresses) and in ordinary memory for the Go discrete-event simulator.
 *
 * Vocabulary
 *   context  a CUDA context: one scheduling entity on the device (64 at most).
 *   op       one unit of stream work: KERNEL, EVENT (a cuEventRecord), WAIT
 *            (a cuStreamWaitEvent: until op (ctx, seq) is done) or COPY.
 *   seq      per-context sequence number of an op, starting at 1.
 *   stream   per-context stream index < DM_MAX_STREAMS; 0 is the legacy
 *            default stream (DM_LEGACY_STREAM).
 *   segment  one uninterrupted stretch of a kernel on the device; a kernel
 *            preempted at a time-slice expiry runs in several segments.
 *
 * Rules common to both models (docs/simgpu.md explains why):
 *   - one kernel at a time per device; a stream's ops in order;
 *   - an op arrives at enqueue time + launch latency and cannot start before;
 *   - the legacy stream waits for all earlier ops of the context's blocking
 *     streams, and ops of blocking streams wait for earlier legacy ops
 *     (DM_OPF_NONBLOCKING marks an op of a CU_STREAM_NON_BLOCKING stream);
 *   - EVENT and WAIT ops take no device time: they complete as soon as they
 *     are at the head of their stream, arrived and (WAIT) their target is done;
 *   - COPY ops run on one copy engine, one at a time in arrival order,
 *     concurrently with kernels and with no context-switch cost;
 *   - moving the kernel engine from one context's kernel to another context's
 *     costs switch_ns of idle device time (loading a context onto a device
 *     that has none loaded is free).
 *
 * DM_TIMESLICE (default): the loaded context runs its ready kernels (earliest
 *   arrival first) until it has none ready, or until its time slice expires
 *   while another context has a ready kernel; then the device switches
 *   round-robin to the next context with a ready kernel. An expired slice
 *   preempts the running kernel, which keeps its remaining time. With no
 *   competitor a slice renews itself; a slice starts when a context starts
 *   running after a switch or after the device was idle.
 * DM_FIFO: ready kernels run in arrival order across all contexts; no slices.
 *
 * Not thread-safe: the caller serializes access (the driver holds a robust
 * process-shared mutex around every call).
 */
#ifndef FIKIT_SIMGPU_DEVMODEL_H
#define FIKIT_SIMGPU_DEVMODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DM_MAX_CTX 64         /* contexts per device (one bit each in a u64 mask) */
#define DM_RING 2048          /* op slots per context; power of two */
#define DM_MAX_STREAMS 1024   /* stream indices per context */
#define DM_LEGACY_STREAM 0u
#define DM_NEVER INT64_MAX    /* "no such time" */
/* Durations are clamped to this (1000 s) so that time arithmetic cannot overflow. */
#define DM_MAX_DURATION_NS 1000000000000LL

#define DM_LAYOUT_VERSION 2u  /* bump whenever struct dm_device changes */

enum dm_model { DM_TIMESLICE = 0, DM_FIFO = 1 };
enum dm_op_type { DM_OP_KERNEL = 1, DM_OP_EVENT = 2, DM_OP_WAIT = 3, DM_OP_COPY = 4 };
enum dm_op_flag {
	DM_OPF_NONBLOCKING = 1u, /* the op's stream does not synchronize with the legacy stream */
	/* A kernel that is not the context's work (the fikit hook's own
	 * probe and warm-up): its blocked time stays out of dm_ctx_totals. */
	DM_OPF_UNCOUNTED = 2u,
};
enum dm_status {
	DM_OK = 0,
	DM_EFULL = -1,    /* the context's op ring is full: retire, wait for the device, retry */
	DM_EINVAL = -2,   /* bad argument (stream, type, wait target, context) */
	DM_ENOCTX = -3,   /* no free context slot */
};

typedef struct dm_config {
	int32_t model;             /* enum dm_model */
	int32_t reserved;
	int64_t timeslice_ns;      /* time slice while others wait (h200: 2 ms) */
	int64_t switch_ns;         /* context-switch cost (h200: 140 us) */
	int64_t launch_latency_ns; /* enqueue → arrival (h200: 5 us) */
	int64_t default_kernel_ns; /* duration of a KERNEL op given duration_ns < 0, default 10 us */
	int64_t copy_bytes_per_s;  /* copy engine bandwidth, default 25e9 */
} dm_config;

/* What a caller enqueues. Zero-initialise and set what the type needs. */
typedef struct dm_op {
	int32_t type;          /* enum dm_op_type */
	uint32_t stream;       /* < DM_MAX_STREAMS */
	uint32_t flags;        /* enum dm_op_flag */
	uint32_t wait_gen;     /* WAIT: generation of wait_ctx (dm_ctx_gen) */
	int64_t duration_ns;   /* KERNEL: device time; < 0 means cfg.default_kernel_ns */
	uint64_t bytes;        /* COPY: bytes moved at cfg.copy_bytes_per_s */
	uint64_t tag;          /* opaque, for the owner (the driver names kernels by it) */
	uint64_t wait_seq;     /* WAIT: the op waited for */
	int32_t wait_ctx;      /* WAIT: context of that op (any context of the device) */
	uint32_t grid[3];
	uint32_t block[3];
} dm_op;

/* One executed kernel segment, as reported to a dm_sink. */
typedef struct dm_segment {
	int32_t ctx;
	uint32_t stream;
	uint64_t seq;
	uint64_t tag;
	int64_t start_ns, end_ns;
	uint32_t seg;     /* 0 for the first segment of the kernel */
	uint8_t last;     /* the kernel completed (or was dropped) with this segment */
	uint8_t dropped;  /* the kernel's context was dropped while it ran */
	uint32_t grid[3];
	uint32_t block[3];
	int64_t arrive_ns;  /* the kernel arrived on the device (enqueue + launch latency) */
	/* Time, since the kernel's previous segment (or its arrival), that the
	 * kernel was ready (arrived, stream order and events satisfied) while the
	 * engine ran another context's kernel or switched contexts: interference
	 * from other contexts, ground truth. Summed over a kernel's segments it
	 * is the kernel's whole blocked time. */
	int64_t blocked_ns;
} dm_segment;

typedef void (*dm_sink)(void *arg, const dm_segment *seg);

/* What dm_retire reports for each freed op. */
typedef struct dm_retired {
	uint64_t seq;
	uint64_t tag;
	int64_t start_ns, end_ns;
	uint32_t stream;
	int32_t type;
	uint8_t dropped;
} dm_retired;

typedef void (*dm_retire_cb)(void *arg, const dm_retired *r);

/* Internal state; exposed only so that its size is known. Do not touch. */
typedef struct dm_slot {
	uint64_t seq;       /* the op's seq while the slot holds it */
	uint64_t next;      /* next op of the same stream, 0 = none yet */
	uint64_t tag;
	uint64_t wait_seq;
	int64_t arrival;
	int64_t remaining;  /* device time still to run (KERNEL, COPY) */
	int64_t start_ns;   /* start of the first segment, -1 before */
	int64_t end_ns;     /* completion, -1 before */
	uint32_t grid[3], block[3];
	uint32_t stream;
	uint32_t wait_gen;
	uint32_t nseg;
	int16_t wait_ctx;
	uint8_t type;
	uint8_t state;      /* DM_S_* in devmodel.c */
	uint32_t flags;
	uint32_t pad;
	int64_t blocked;    /* blocked time (see dm_segment) not yet reported */
} dm_slot;

typedef struct dm_stream {
	uint64_t head;      /* first not-done op, 0 = stream has nothing pending */
	uint64_t tail;      /* last enqueued op (meaningful while head != 0) */
	uint32_t flags;     /* DM_OPF_NONBLOCKING of its latest op */
	int32_t active_pos; /* index in dm_context.active, -1 if not there */
} dm_stream;

typedef struct dm_context {
	uint32_t in_use;
	uint32_t gen;       /* bumped at open and close: stale WAIT targets count as done */
	uint32_t owner_pid;
	uint32_t nactive;   /* streams with pending ops, listed in active[] */
	uint64_t head;      /* oldest not-retired seq */
	uint64_t tail;      /* next seq to hand out */
	uint64_t pending;   /* ops not done */
	int64_t blocked_ns; /* totals since the context opened: see dm_ctx_totals */
	int64_t busy_ns;
	uint64_t kernels;
	uint16_t active[DM_MAX_STREAMS];
	dm_stream streams[DM_MAX_STREAMS];
	dm_slot ring[DM_RING];
} dm_context;

typedef struct dm_stats {
	uint64_t kernels;      /* kernels completed */
	uint64_t segments;     /* kernel segments executed */
	uint64_t switches;     /* context switches paid */
	uint64_t preemptions;  /* kernels cut at a slice expiry */
	int64_t busy_ns;       /* kernel engine busy time */
	int64_t switch_ns;     /* time spent switching */
} dm_stats;

typedef struct dm_device {
	uint64_t magic;
	uint32_t layout;
	uint32_t dirty;        /* state changed at time t: settle before the next event */
	dm_config cfg;
	int64_t t;             /* every event at or before t has been processed */
	uint64_t pending_mask; /* bit i: context i has ops not done */
	int32_t cur;           /* loaded context, -1 none */
	int32_t rr;            /* round-robin cursor when no context is loaded */
	/* kernel engine */
	int32_t run_ctx;       /* -1 idle */
	int32_t switching;     /* a context switch occupies the engine until switch_until */
	uint64_t run_seq;
	int64_t run_start;     /* start of the running segment */
	int64_t preempt_at;    /* slice expiry that preempts the running context, DM_NEVER none */
	int64_t slice_start;
	int64_t switch_until;
	int32_t slice_fresh;   /* the next kernel of cur starts a new slice */
	int32_t just_switched;
	/* copy engine */
	int32_t copy_ctx;      /* -1 idle */
	int32_t pad;
	uint64_t copy_seq;
	int64_t copy_end;
	dm_stats stats;
	dm_context ctx[DM_MAX_CTX];
} dm_device;

/* Device presets: named, complete configurations (docs/simgpu.md
 * "Presets" says where each number comes from). DM_PRESET_DEFAULT is the
 * calibrated H200; "legacy" is the model before calibration (devmodel.c's
 * table has both). */
#define DM_PRESET_DEFAULT "h200"
/* Fill cfg with preset `name`; DM_EINVAL (cfg untouched) if there is none. */
int dm_preset(const char *name, dm_config *cfg);
/* Name of preset i from 0, NULL past the last (for listing them). */
const char *dm_preset_name(int i);

/* The default preset's configuration (DM_PRESET_DEFAULT). */
void dm_config_default(dm_config *cfg);
/* 0 if every field is in range; else DM_EINVAL. */
int dm_config_check(const dm_config *cfg);

/* Initialise a zeroed or used device with cfg (NULL: defaults). Model time starts at now. */
int dm_init(dm_device *d, const dm_config *cfg, int64_t now);

/* Open a context for owner_pid; returns its index or DM_ENOCTX. */
int dm_ctx_open(dm_device *d, uint32_t owner_pid);
/* Drop the context's work (see dm_drop_context) and free its slot. */
int dm_ctx_close(dm_device *d, int ctx, int64_t now, dm_sink sink, void *arg);
/* Generation of an open context (for WAIT ops), 0 if ctx is not open. */
uint32_t dm_ctx_gen(const dm_device *d, int ctx);
/* Owner pid of an open context, 0 if not open. */
uint32_t dm_ctx_owner(const dm_device *d, int ctx);
/* Discard a context's queued work: pending ops complete at now as dropped;
 * a running kernel is cut at now (reported as its last, dropped segment). */
int dm_drop_context(dm_device *d, int ctx, int64_t now, dm_sink sink, void *arg);

/* Enqueue op at now; returns its seq (> 0) or DM_EFULL / DM_EINVAL.
 * Call dm_advance(now) first so that the op is judged against current state. */
int64_t dm_enqueue(dm_device *d, int ctx, const dm_op *op, int64_t now);

/* Process every state change up to now, reporting each finished kernel segment
 * to sink (may be NULL). Time never runs backwards: now < model time is ignored. */
void dm_advance(dm_device *d, int64_t now, dm_sink sink, void *arg);

/* 1 if op (ctx, seq) is done (end time in *end_ns, or -1 once retired),
 * 0 if not, DM_EINVAL if no such op was ever enqueued. */
int dm_op_done(const dm_device *d, int ctx, uint64_t seq, int64_t *end_ns);

/* A lower bound of the completion time of op (ctx, seq) assuming no new work
 * arrives; its end time if done; DM_NEVER if no such op. It is computed from
 * the state at model time: call dm_advance(now) first for a bound >= now. */
int64_t dm_forecast(const dm_device *d, int ctx, uint64_t seq, int64_t now);

/* Time of the next internal state change (>= model time), DM_NEVER if none. */
int64_t dm_next_event(const dm_device *d);

/* Free the context's completed ops in order from the oldest, calling cb for
 * each (cb may be NULL); returns how many were freed. */
int dm_retire(dm_device *d, int ctx, dm_retire_cb cb, void *arg);

/* What one context got from the device since it opened. */
typedef struct dm_totals {
	uint64_t kernels;   /* kernels completed (dropped ones excluded) */
	int64_t busy_ns;    /* kernel engine time its kernels ran */
	int64_t blocked_ns; /* time its kernels were ready but blocked by other
	                     * contexts' kernels or context switches (dm_segment) */
} dm_totals;

/* Totals of an open context, counted up to model time; DM_EINVAL if not open. */
int dm_ctx_totals(const dm_device *d, int ctx, dm_totals *out);

/* Ops enqueued and not yet retired (DM_RING means the ring is full). */
uint32_t dm_ctx_inflight(const dm_device *d, int ctx);
/* 1 if the stream of the context has pending ops. */
int dm_stream_busy(const dm_device *d, int ctx, uint32_t stream);
/* Seq of the context's latest enqueued op (0 if none). */
uint64_t dm_ctx_last_seq(const dm_device *d, int ctx);
/* Latest enqueued op of a stream if it is still pending, else 0. */
uint64_t dm_stream_last_pending(const dm_device *d, int ctx, uint32_t stream);
/* The latest enqueued op of every stream of the context with pending work
 * (at most max of them, in out[]); returns how many. Waiting for all of them
 * is waiting for everything the context has been given so far. */
uint32_t dm_ctx_pending_tails(const dm_device *d, int ctx, uint64_t *out, uint32_t max);

/* Check every invariant; 0 if consistent, else a negative code naming the
 * first violation (for tests and after a robust-mutex EOWNERDEAD). */
int dm_validate(const dm_device *d);
/* Rebuild derived state (stream chains, active lists, masks, engine) from the
 * op slots after a writer died mid-update; returns the number of repairs. */
int dm_repair(dm_device *d);

#ifdef __cplusplus
}
#endif
#endif
