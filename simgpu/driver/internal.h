/*
 * internal.h — shared by the simulated driver's C files (not installed).
 *
 * Layout of the driver:
 *   entries.def  the one table of entry points (exports + cuGetProcAddress)
 *   shm.c        the machine-wide shared segment, its robust lock, dead-owner reaping
 *   env.c        configuration from the environment
 *   handles.c    process-local objects behind encoded CUxxx handles
 *   sched.c      enqueue / advance / retire glue to the device model, timeline log
 *   wait.c       precise host waits
 *   device.c     cuInit, versions, devices, errors
 *   context.c    contexts, primary contexts, the per-thread context stack
 *   module.c     modules, libraries, functions; ptx.c parses PTX and cubins
 *   launch.c     kernel launches;  stream.c streams and events
 *   graph.c      graphs and stream capture;  memory.c memory and copies
 *   procaddr.c   cuGetProcAddress;  stubs.c weak NOT_SUPPORTED stubs
 *   fault.c      injected faults (FIKIT_SIMGPU_FAULT)
 */
#ifndef FIKIT_SIMGPU_DRIVER_INTERNAL_H
#define FIKIT_SIMGPU_DRIVER_INTERNAL_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
/* Give every cu* declaration (and so our definitions) default visibility while
 * the library is built with -fvisibility=hidden: only the driver API is exported. */
#define __CUDA_API_PUSH_VISIBILITY_DEFAULT 1
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#include "../devmodel/devmodel.h"

#define SG_EXPORT __attribute__((visibility("default")))
#define SG_UNUSED __attribute__((unused))

#define SG_MAX_DEVICES 16
#define SG_SEGLOG 4096            /* finished-segment records kept per context for its owner */
#define SG_MAX_SPIN_NS 60000000000LL /* spin-kernel durations are capped at 60 s */
#define SG_NAME_MAX 256

/* ---- configuration (env.c) ------------------------------------------- */

typedef struct sg_params {
	dm_config model;
	int32_t devices;
	int32_t sms;
	int64_t mem_bytes;
	char name[SG_NAME_MAX];
} sg_params;

typedef struct sg_env {
	sg_params p;
	char shm_name[SG_NAME_MAX];
	char timeline[4096];
	int validate; /* FIKIT_SIMGPU_VALIDATE=1: check the model at every unlock (tests) */
} sg_env;

/* 0, or -1 when the environment is refused (an unknown FIKIT_SIMGPU_DEVICE). */
int sg_env_load(sg_env *e);
/* Print one warning line per differing field between what the environment asked and the segment has. */
void sg_env_compare(const sg_params *want, const sg_params *have, int explicit_mask);
extern int sg_env_explicit; /* bit per parameter set explicitly in the environment */

/* ---- shared segment (shm.c) ------------------------------------------ */

/* What one finished kernel segment leaves for the owner's timeline. */
typedef struct sg_segrec {
	uint64_t seq;
	uint64_t tag;
	int64_t start_ns, end_ns;
	uint32_t grid[3], block[3];
	uint32_t stream;
	uint32_t seg;
	uint32_t last;
	uint32_t pad;
	int64_t arrive_ns;
	int64_t blocked_ns;
} sg_segrec;

typedef struct sg_ctxlog {
	uint32_t want;      /* the owner writes a timeline: keep its segments */
	uint32_t pad;
	uint64_t head, tail; /* records [head, tail) are unread */
	uint64_t lost;       /* records dropped because the log was full */
} sg_ctxlog;

typedef struct sg_shdev {
	dm_device dm;
	sg_ctxlog log[DM_MAX_CTX];
	sg_segrec seg[DM_MAX_CTX][SG_SEGLOG];
} sg_shdev;

#define SG_SHM_MAGIC 0x31756770676d6973ULL /* "simgpgu1" */
#define SG_SHM_LAYOUT (0x200u + DM_LAYOUT_VERSION) /* bump when sg_shm/sg_shdev change */

typedef struct sg_shm {
	uint64_t magic;     /* written last by the creator */
	uint32_t layout;
	uint32_t ndev;
	uint64_t size;
	pthread_mutex_t lock; /* robust, process-shared: guards everything below */
	sg_params params;
	int64_t next_reap_ns;
	uint64_t repairs;     /* EOWNERDEAD recoveries */
	uint64_t reaped;      /* contexts of dead processes dropped */
	char pad[64];
	sg_shdev dev[];       /* ndev devices */
} sg_shm;

extern sg_shm *sg_shared;

int sg_shm_attach(const sg_env *e); /* 0 or a CUresult */
void sg_lock(void);
void sg_unlock(void);
int sg_lock_timed(int64_t timeout_ns); /* 0 locked, else error (exit paths) */
/* Called with the lock held: drop contexts whose owner is gone if it is time to look. */
void sg_reap_maybe(int64_t now, int force);

static inline int64_t sg_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- process state --------------------------------------------------- */

typedef struct sg_proc {
	int initialized;       /* cuInit succeeded */
	CUresult init_error;
	int ndev;
	uint32_t pid;
	sg_env env;
	int timeline_fd;       /* -1 when no timeline */
	pthread_mutex_t mu;    /* process-local: object creation, primary contexts */
} sg_proc;

extern sg_proc sg_p;

/* Quick check at the top of every entry point: initialized, and no sticky
 * fault (fault.c) in this process. */
extern int sg_fault_sticky;
#define SG_CHECK_INIT()                                                              \
	do {                                                                         \
		if (__builtin_expect(!sg_p.initialized, 0))                          \
			return CUDA_ERROR_NOT_INITIALIZED;                           \
		int fault_ = __atomic_load_n(&sg_fault_sticky, __ATOMIC_RELAXED);    \
		if (__builtin_expect(fault_ != 0, 0))                                \
			return (CUresult)fault_;                                     \
	} while (0)

/* ---- handles (handles.c) --------------------------------------------- */

enum sg_type {
	SG_T_CTX = 1, SG_T_MOD, SG_T_FUNC, SG_T_KERN, SG_T_STREAM, SG_T_EVENT,
	SG_T_GRAPH, SG_T_GNODE, SG_T_GEXEC, SG_T_LIB, SG_T_NTYPES
};

typedef struct sg_hdr {
	uint32_t gen;
	uint16_t type;
	uint16_t live;
	uint32_t idx;
	uint32_t published; /* built whole: sg_obj_each may visit it */
} sg_hdr;

void *sg_obj_new(int type);                 /* zeroed object with hdr set, live */
void sg_obj_free(void *obj);                /* handle becomes stale; memory is recycled */
uint64_t sg_handle(const void *obj);        /* encoded handle of a live object */
void *sg_lookup(uint64_t h, int type);      /* live object or NULL */
int sg_handle_type(uint64_t h);             /* type bits of a well-formed handle, else 0 */
/* An object is live (its handle resolves) from sg_obj_new, but other
 * threads iterating its type see it only once its constructor has set its
 * fields and published it: a flusher must not read a context half made. */
void sg_obj_publish(void *obj);
/* Iterate published objects of a type (snapshot; fn returns nonzero to stop). */
void sg_obj_each(int type, int (*fn)(void *obj, void *arg), void *arg);

/* ---- objects --------------------------------------------------------- */

/* The fikit hook's own kernel (hookclient/probe.c; simgpu/timeline's
 * HookProbe): its blocked time is left out of the context's totals. */
#define SG_HOOK_PROBE "fikit_hook_probe"
/* The kernel a cuMemsetD* becomes on the device (timeline name), and its
 * duration: a fixed start plus the bytes at device-memory speed. */
#define SG_MEMSET "[memset]"
#define SG_MEMSET_BASE_NS 2000
#define SG_MEMSET_BYTES_PER_NS 2000 /* 2 TB/s */

typedef struct sg_name {       /* interned, never freed: tags point at these */
	const char *name;
	const char *json;          /* JSON-escaped, quotes included */
	struct sg_name *next;
} sg_name;
const sg_name *sg_intern(const char *name);

typedef struct sg_ctx {
	sg_hdr h;
	int dev;
	int dmctx;
	uint32_t dmgen;
	unsigned flags;
	int primary;
	int destroyed;
	uint32_t owner;            /* pid that created it: a forked child cannot use it */
	struct sg_stream *legacy;
	uint64_t stream_ids[DM_MAX_STREAMS / 64]; /* allocated stream indices */
	size_t limits[16];
} sg_ctx;

typedef struct sg_param {      /* one kernel parameter from PTX */
	uint32_t size;
	uint32_t offset;
} sg_param;

typedef struct sg_entry {      /* a kernel entry of a module/library image */
	const sg_name *name;
	int spin;                  /* first parameter is the .u64 *_ns duration */
	int nparams;               /* -1: unknown (binary image) */
	sg_param *params;
	uint32_t param_bytes;
} sg_entry;

typedef struct sg_image {
	int nentries;
	sg_entry *entries;
} sg_image;

typedef struct sg_module {     /* also a CUlibrary */
	sg_hdr h;
	struct sg_ctx *ctx;        /* NULL for a library */
	sg_image img;
	struct sg_func **funcs;    /* CUfunction per entry, made on first use */
	struct sg_func **kerns;    /* CUkernel per entry (libraries) */
} sg_module;

typedef struct sg_func {       /* CUfunction and CUkernel share it */
	sg_hdr h;
	sg_module *mod;
	const sg_entry *e;
} sg_func;

typedef struct sg_graph sg_graph;

typedef struct sg_stream {
	sg_hdr h;
	sg_ctx *ctx;
	uint32_t sid;
	unsigned flags;
	int priority;
	int per_thread;
	sg_graph *capture;         /* non-NULL while capturing */
	uint64_t capture_id;
	int capture_mode;
} sg_stream;

/* An event's latest record: which op of which context it is. */
typedef struct sg_evrec {
	int dev, dmctx;
	uint32_t dmgen;
	uint64_t seq;
	int64_t end_ns;            /* from the retire callback once retired, else -1 */
} sg_evrec;

typedef struct sg_event {
	sg_hdr h;
	sg_ctx *ctx;
	unsigned flags;
	int recorded;
	/* Guards rec: a record may race a wait or query on another thread,
	 * which must see one record whole (ThreadSanitizer found them torn).
	 * Taken inside the shared lock, never around it. Zeroed = initialized. */
	pthread_mutex_t mu;
	sg_evrec rec;
} sg_event;

/* The event's latest record, read whole (stream.c). */
sg_evrec sg_event_rec(sg_event *e);

typedef struct sg_gnode {
	sg_hdr h;
	sg_graph *graph;
	uint64_t func;             /* the CUfunction/CUkernel handle given */
	const sg_name *name;
	uint32_t grid[3], block[3];
	unsigned shmem;
	int64_t duration_ns;       /* -1: default */
	void **kparams;            /* copies of the parameters, by value (NULL if unknown) */
	void *pbuf;
} sg_gnode;

struct sg_graph {
	sg_hdr h;
	int nnodes, cap;
	sg_gnode **nodes;
};

typedef struct sg_kop {            /* one kernel of an instantiated graph */
	const sg_name *name;
	uint32_t grid[3], block[3];
	int64_t duration_ns;
} sg_kop;

typedef struct sg_gexec {
	sg_hdr h;
	int n;
	sg_kop *ops;
} sg_gexec;

/* ---- contexts and streams (context.c, stream.c) ---------------------- */

CUresult sg_current_ctx(sg_ctx **out);          /* CUDA_ERROR_INVALID_CONTEXT if none */
CUresult sg_ctx_new(int dev, unsigned flags, int primary, sg_ctx **out);
void sg_ctx_teardown(sg_ctx *c);
/* Free c's model context now, dropping its queued work (no wait). */
void sg_ctx_close_model(sg_ctx *c);
/* Resolve a CUstream argument; per_thread: the call is a _ptsz/_ptds variant. */
CUresult sg_stream_resolve(CUstream hs, int per_thread, sg_stream **out);
CUresult sg_stream_alloc_id(sg_ctx *c, uint32_t *sid);
uint32_t sg_stream_op_flags(const sg_stream *s); /* DM_OPF_* for ops on s */
sg_stream *sg_stream_make(sg_ctx *c, unsigned flags, int priority, int per_thread);

/* ---- scheduling glue (sched.c) --------------------------------------- */

static inline dm_device *sg_dm(int dev)
{
	return &sg_shared->dev[dev].dm;
}
/* Lock, bring the device to now; returns now. */
int64_t sg_enter(int dev);
/* Retire this context's finished ops (and collect timeline records) then unlock. */
void sg_leave(sg_ctx *c);
/* Enqueue op on the stream's context, waiting while its ring is full. *seq gets the op. */
CUresult sg_submit(sg_stream *s, dm_op *op, uint64_t *seq);
/* The dm_sink used by every advance (writes the owner's segment log). */
void sg_sink(void *arg, const dm_segment *g);
void sg_retire_locked(sg_ctx *c);
/* Write this process's pending timeline records (call without the lock). */
void sg_timeline_flush(void);
/* Start the background flusher (cuInit, when a timeline is configured). */
void sg_timeline_start(void);
/* Ask the flusher to run now (a segment log is half full). */
void sg_timeline_kick(void);

/* ---- waits (wait.c) -------------------------------------------------- */

/* Block until op (dmctx gen, seq) of device dev is done; precise to a few us. */
void sg_wait_op(int dev, int dmctx, uint32_t gen, uint64_t seq);
/* The same, sleeping through: a CU_EVENT_BLOCKING_SYNC event's wait wakes
 * when the op is done plus the sleep's overshoot (an interrupt-driven wake
 * on a GPU), and spins on nothing. */
void sg_wait_op_blocking(int dev, int dmctx, uint32_t gen, uint64_t seq);
void sg_wait_stream(sg_stream *s);
void sg_wait_ctx(sg_ctx *c);

/* ---- modules (ptx.c) ------------------------------------------------- */

CUresult sg_image_parse(const void *image, size_t maxlen, sg_image *out);
void sg_image_free(sg_image *img);
int64_t sg_spin_duration(const sg_entry *e, void **kernelParams, void **extra);
CUresult sg_func_of(CUfunction f, sg_func **out); /* accepts a CUkernel too */
void sg_modules_unload_ctx(sg_ctx *c);            /* a destroyed context's modules go with it */

/* ---- launches (launch.c) --------------------------------------------- */

/* Enqueue one kernel (name for the timeline) on s. */
CUresult sg_launch(const sg_name *name, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
		   int64_t duration_ns);
/* The same, giving the op's seq. */
CUresult sg_launch_seq(const sg_name *name, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
		       int64_t duration_ns, uint64_t *seq);
/* fault.c: injected faults (FIKIT_SIMGPU_FAULT). sg_fault_launch enqueues
 * the launch itself when it is the one that faults (*handled set). */
CUresult sg_fault_launch(const sg_name *name, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
			 int64_t duration_ns, int *handled);
/* The sticky error once the device reached an injected fault (0: none). */
CUresult sg_fault_poll(void);
/* rc, unless a fault has become visible: what a synchronization returns. */
CUresult sg_fault_result(CUresult rc);
/* For a wait: true once a fault is visible (stop waiting); while one is
 * armed, *until is pulled in to when the device reaches it. */
int sg_fault_waiting(int64_t *until);
/* graph.c: append a kernel node to the graph a stream is capturing. */
CUresult sg_capture_kernel(sg_stream *s, sg_func *f, const uint32_t grid[3], const uint32_t block[3],
			   unsigned shmem, int64_t duration_ns, void **kernelParams, void **extra);

#endif
