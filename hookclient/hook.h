/* hook.h — what the parts of libfikit_hook.so share (docs/design.md "Hook";
 * hookclient/README.md has the picture). Everything here is internal: the
 * library is built with -fvisibility=hidden and exports only the wrappers
 * generated from hooks.def, dlsym and fikit_run_end. */
#ifndef FIKIT_HOOK_H
#define FIKIT_HOOK_H

/* Declares every versioned driver name (cuLaunchKernel_ptsz, cuMemcpyDtoH_v2,
 * the old cuGraphInstantiate …) without cuda.h's remapping macros, as
 * NVIDIA's own sources do, so the wrappers can define each one. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "board.h"
#include "auth.h"
#include "config.h"
#include "htab.h"
#include "kernelid.h"
#include "log.h"
#include "ring.h"
#include "table.h"
#include "wire.h"

#define FK_HIDDEN __attribute__((visibility("hidden")))
#define FK_EXPORT __attribute__((visibility("default")))
#define FK_LIKELY(x) __builtin_expect(!!(x), 1)
#define FK_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint64_t fk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the real driver (intercept.c) ---- */

extern _Atomic(void *) fk_real[FK_NSLOTS];
extern void *const fk_wrapper[FK_NSLOTS];
extern atomic_int fk_ready; /* fk_init has run */
extern fk_config fk_cfg;

void fk_init_slow(void);
static inline void fk_init(void)
{
	if (FK_UNLIKELY(!atomic_load_explicit(&fk_ready, memory_order_acquire)))
		fk_init_slow();
}
static inline void *fk_real_get(int slot)
{
	fk_init();
	return atomic_load_explicit(&fk_real[slot], memory_order_acquire);
}
/* Remember p as the real entry point of slot unless one is known (or p is
 * our own wrapper: that would make the hook call itself). */
void fk_real_offer(int slot, void *p);
#define FK_REAL(slot, sym) ((__typeof__(&sym))fk_real_get(slot))

/* Driver functions the hook calls but does not intercept; NULL where the
 * driver lacks one (cuFuncGetName before 12.3 …). */
#define FK_DRIVER_FUNCS(X)                                                                         \
	X(cuDriverGetVersion)                                                                      \
	X(cuCtxGetCurrent)                                                                         \
	X(cuCtxSetCurrent)                                                                         \
	X(cuCtxGetDevice)                                                                          \
	X(cuDeviceGet)                                                                             \
	X(cuDeviceGetCount)                                                                        \
	X(cuDeviceGetUuid)                                                                         \
	X(cuDeviceGetUuid_v2)                                                                      \
	X(cuDeviceGetName)                                                                         \
	X(cuEventCreate)                                                                           \
	X(cuEventRecord)                                                                           \
	X(cuEventQuery)                                                                            \
	X(cuEventSynchronize)                                                                      \
	X(cuEventElapsedTime)                                                                      \
	X(cuFuncGetName)                                                                           \
	X(cuKernelGetName)                                                                         \
	X(cuGraphGetNodes)                                                                         \
	X(cuGraphNodeGetType)                                                                      \
	X(cuGraphKernelNodeGetParams_v2)                                                           \
	X(cuGraphChildGraphNodeGetGraph)                                                           \
	X(cuStreamIsCapturing)                                                                     \
	X(cuPointerGetAttribute)                                                                   \
	X(cuThreadExchangeStreamCaptureMode)

typedef struct fk_driver {
#define X(name) __typeof__(&name) name;
	FK_DRIVER_FUNCS(X)
#undef X
} fk_driver;
extern fk_driver fk_drv;

/* ---- kernel names (naming.c) ---- */

enum fk_name_path {
	FK_NAME_MODULE = 1,  /* cuModuleGetFunction */
	FK_NAME_LIBRARY,     /* cuLibraryGetKernel */
	FK_NAME_KERNEL_FUNC, /* cuKernelGetFunction of a named CUkernel */
	FK_NAME_FUNC_GET,    /* cuFuncGetName */
	FK_NAME_KERNEL_GET,  /* cuKernelGetName (a CUkernel passed as CUfunction) */
	FK_NAME_GRAPH,       /* a graph unit (graph.c) */
	FK_NAME_UNKNOWN,     /* nothing worked: "fikit.unnamed" */
};
extern const char *const fk_name_path_str[];

extern fk_htab fk_funcs;  /* CUfunction / CUkernel → kernel */
extern fk_htab fk_graphs; /* CUgraphExec → graph unit */

/* The kernel behind a launched handle, named on first sight. */
fk_fn *fk_name_slow(CUfunction f);
static inline fk_fn *fk_name_of(CUfunction f)
{
	fk_fn *fn = fk_htab_get(&fk_funcs, (uintptr_t)f);
	return FK_LIKELY(fn != NULL) ? fn : fk_name_slow(f);
}
void fk_name_log_first(fk_fn *fn, uintptr_t handle, const uint32_t dims[6]);

/* ---- tasks: one per (process, device) (task.c) ---- */

enum fk_state { FK_ST_NEW, FK_ST_REGISTERING, FK_ST_ACTIVE, FK_ST_UNREACHABLE, FK_ST_DISABLED };
/* mode: what a launch does, one load on the hot path. */
enum { FK_MODE_PASS = 0, FK_MODE_HOLDER = 1, FK_MODE_WAITER = 2, FK_MODE_MEASURE = 4 };

#define FK_MAX_TASKS 16
#define FK_EV_PAIRS 8192 /* event pairs per task: a run's kernels, read at its end */

typedef struct fk_evpool fk_evpool;

typedef struct fk_task {
	/* read on every launch */
	_Alignas(64) atomic_uint mode;
	/* Credit is a limit on seq (wire protocol): launch s goes without
	 * asking while s ≤ credit_limit (serial order). A grant older than the
	 * last revocation (its seq < revoked_seq) renews nothing. */
	atomic_uint credit_limit;
	atomic_uint revoked_seq;
	atomic_uint task_id;
	atomic_uint state;
	/* The board section of the task's GPU (NULL: none) and the gate of the
	 * current permission (docs/design.md "Board"): a waiter's credit, or a
	 * lower-priority holder's role, holds while no better priority launched
	 * after gate_seen, and until gate_expires (0: none; local clock). */
	_Atomic(fk_board_gpu *) bgpu;
	_Atomic(fk_board *) board;
	_Atomic uint64_t gate_seen;
	_Atomic uint64_t gate_expires;
	_Atomic uint64_t token; /* the registration's, on every message about the task */
	_Alignas(64) atomic_uint seq; /* per-task launch counter (design) */
	_Alignas(64) atomic_uint run_kernels;
	_Atomic uint64_t run_start_ns;
	_Atomic uint64_t backoff_until_ns; /* waiter: pass through until then */
	atomic_uint backoff_ms;
	_Atomic(fk_evpool *) pool;
	/* Kernels in flight under the bound (inflight.c): events recorded after
	 * them, oldest at head. */
	pthread_mutex_t infl_mu;
	CUevent infl_ev[FK_INFLIGHT_MAX];
	uint32_t infl_head, infl_tail;
	int infl_ready; /* 1: events made; -1: could not */
	_Atomic uint64_t last_launch_ns; /* profiling: the last measured launch */
	/* fixed at creation */
	int index;
	CUdevice dev;
	CUcontext ctx;
	uint8_t uuid[16];
	char dev_name[256];
	/* registration handshake (task.c ↔ sender.c) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t reg_seq;         /* last Register sent */
	uint64_t reg_sent_ns;     /* … and when, while unanswered (sender) */
	uint64_t reg_next_ns;     /* sender: next background attempt */
	uint32_t reg_backoff_ms;  /* sender: background retry interval */
	atomic_int partial_run;   /* activated mid-run: do not report that run */
	atomic_uint reg_gen;      /* acks received: tells a registration from the one before
				   * (task IDs restart at 1 with each daemon) */
	atomic_int rereg;         /* register again (waiter timeout, Error unknown task) */
	/* sender-only */
	uint32_t heartbeat_ms;
	uint32_t profile_runs;    /* T, from the RegisterAck */
	uint64_t next_heartbeat_ns;
	uint32_t run;            /* runs ended since registration */
	void *meas;              /* measurement state (measure.c) */
} fk_task;

extern fk_task fk_tasks[FK_MAX_TASKS];
extern atomic_int fk_ntasks;
extern fk_task *_Atomic fk_single_task; /* set when the process sees one device */
extern atomic_int fk_multi_device;

/* Whom a message about t is about: its ID and its registration's token. */
static inline fk_who fk_who_of(fk_task *t)
{
	return (fk_who){atomic_load_explicit(&t->task_id, memory_order_relaxed),
			atomic_load_explicit(&t->token, memory_order_relaxed)};
}

fk_task *fk_task_slow(void);
/* The task of the current context, registering it at its first launch. */
static inline fk_task *fk_task_current(void)
{
	fk_task *t = atomic_load_explicit(&fk_single_task, memory_order_acquire);
	return FK_LIKELY(t != NULL) ? t : fk_task_slow();
}
/* Send Register and wait (connect timeout) for the sender to see the ack. */
void fk_task_register_sync(fk_task *t);
/* RegisterAck or State (sender); seen and expires as the wire carries them. */
void fk_task_apply(fk_task *t, int role, int phase, uint32_t credit, uint64_t seen, uint64_t expires);
/* Grant{seq, credit, seen, expires} */
void fk_credit_grant(fk_task *t, uint32_t seq, uint32_t credit, uint64_t seen, uint64_t expires);
/* The launching thread found the permission stale (board.h): no credit, and
 * a lower-priority holder asks from now on, until the daemon says again. */
void fk_gate_closed(fk_task *t);
/* The in-flight bound (inflight.c): whether it applies now (a better
 * priority is registered on its GPU); wait until a launch fits under it;
 * record a bounded launch on stream s. */
static inline int fk_inflight_bounded(const fk_board_gpu *bg)
{
	return bg && fk_cfg.inflight > 0 &&
	       (atomic_load_explicit(&bg->registered, memory_order_relaxed) & ((1ull << fk_cfg.priority) - 1));
}
void fk_inflight_wait(fk_task *t);
void fk_inflight_push(fk_task *t, CUstream s);
/* Attach the board a RegisterAck names (sender). */
void fk_task_board(fk_task *t, const fk_msg_in *ack);
void fk_task_set_unreachable(fk_task *t);
/* Launches pass through un-hooked from now on; threads waiting to register wake. */
void fk_task_set_pass(fk_task *t);
void fk_tasks_reset_child(void);

/* ---- the ring between launching threads and the sender ---- */

enum { FK_REC_LAUNCH = 1, FK_REC_RUN_END = 2 };
enum { FK_RF_NOTIFY = 1, FK_RF_MEASURE = 2 };

/* One fixed-size record per launch. */
typedef struct fk_rec {
	uint8_t kind, flags;
	uint16_t task;
	uint32_t seq;     /* launch seq; RunEnd: reason */
	uint64_t kid;     /* kernel ID; RunEnd: run_ns */
	uint64_t t_ns;    /* CLOCK_MONOTONIC of the launch (LaunchBatch); RunEnd: its last launch's seq */
	const fk_fn *fn;  /* for KernelInfo */
	uint32_t dims[6];
	uint32_t ev;      /* event pair; RunEnd: kernels */
	uint32_t spacing; /* ns from start-event record returned to launch returned */
} fk_rec;

FK_RING_DEFINE(fk_ring, fk_rec)
FK_RING_DEFINE(fk_ring_u32, uint32_t)
extern fk_ring fk_q;

/* ---- scheduler connection (sender.c, waiter.c) ---- */

extern atomic_uint fk_generation; /* bumped in a forked child */
int fk_sender_start(void);        /* once per process (and per child) */
void fk_sender_wake(void);        /* eventfd: for run ends and registration only */
/* The sender sleeps longer than right after activity (it backs off while
 * idle): a waiter launching on credit wakes it, since its reservations
 * are freed only when its launches are reported. */
extern atomic_int fk_sender_dozing;
/* The scheduler is unreachable: every task passes through until a Register
 * is answered again; one warning per outage. */
void fk_sched_lost(const char *why);
void fk_task_reregister(fk_task *t); /* any thread */
/* A socket connected to the scheduler (waiter.c makes its own per thread). */
int fk_sched_socket(void);
void fk_sender_reset_child(void);
int fk_sender_exiting(void); /* the process is exiting: flush everything */
/* Sender thread: the next outgoing datagram buffer (FK_MAX_DATAGRAM bytes)
 * and its commit; datagrams leave in commit order, batched by sendmmsg. */
uint8_t *fk_out_slot(void);
/* Room for a message in a datagram to the scheduler: FK_MAX_DATAGRAM, less
 * the MAC's trailer when datagrams carry one (docs/security.md "Remote
 * hooks"). */
size_t fk_out_cap(void);
/* Datagrams to and from a scheduler on another host carry a MAC when
 * FIKIT_AUTH_KEY_FILE names a key (auth.h). fk_seal appends it to the
 * message buf[0:len] (cap bytes of room) and returns the datagram's length
 * (len itself when no MAC is due; 0 if it does not fit); fk_open returns the
 * length of the message in a received datagram, 0 if its MAC is missing or
 * wrong. */
size_t fk_seal(uint8_t *buf, size_t len, size_t cap);
size_t fk_open(const uint8_t *buf, size_t len);
void fk_out_commit(size_t len);

/* Waiter path: ask and wait for the grant; returns when the launch may go:
 * 1 granted (the grant's gate is the task's), 0 failed open or told to stop
 * waiting. use_slot: the answer may come in the task's board slot (a
 * request asked again for the same seq goes by UDP: the slot still shows
 * the first grant). */
int fk_waiter_request(fk_task *t, uint32_t seq, uint64_t kid, int use_slot);
/* How often a launch asks again after a grant the board shows stale. */
#define FK_REASK_MAX 4

/* ---- measurement (measure.c) ---- */

struct fk_evpool {
	CUcontext ctx;
	CUevent *start, *end;
	uint64_t *host_ns;     /* per pair: host time before its start event was recorded */
	uint64_t *end_host_ns; /* … and before its end event was recorded */
	uint32_t *end_call_ns; /* how long recording the end event took */
	fk_ring_u32 *free_q;
};
int fk_pool_create(fk_task *t); /* in t->ctx, which must be current */
uint32_t fk_pool_take(fk_evpool *p); /* UINT32_MAX if exhausted */
/* Sender thread: queue a measured launch or a run end in the task's order;
 * poll turns finished event pairs into KernelInfo, Measurements, RunEnd.
 * Returns the number of messages produced; *pending gets whether items wait
 * for their events. */
void fk_measure_item(fk_task *t, const fk_rec *r);
int fk_measure_poll(fk_task *t, int *pending);
void fk_measure_registered(fk_task *t); /* a new registration: KernelInfo again */
void fk_measure_reset_task(fk_task *t);

/* ---- launches, runs (launch.c, sync.c) ---- */

extern atomic_int fk_capturing; /* streams capturing right now (process-wide) */
extern atomic_int fk_blocked;   /* threads inside a host-blocking call (sync.c) */
void fk_run_end(fk_task *t, int reason);
/* A launch or synchronization of task t returned rc: after an error the
 * driver keeps returning for the whole process (a device exception: the
 * process "must be terminated and relaunched"), t leaves the scheduler
 * (Goodbye) and its calls pass through; the daemon no longer counts on a
 * task whose GPU work has stopped (sync.c). */
void fk_task_check_fatal(fk_task *t, CUresult rc);
/* t leaves the scheduler: Goodbye if registered, pass-through from now on;
 * 1 if it had not left yet (sender.c). */
int fk_task_leave(fk_task *t);
void fk_run_end_all(int reason);

#endif
