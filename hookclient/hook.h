/* hook.h — what the parts of libfikit_hook.so share (docs/design.md "Hook";
 * hookclient/README.md has the picture). Everything here is internal: the
 * library is built with -fvisibility=hidden and exports only the wrappers
 * generated from hooks.def, dlsym, fikit_run_end and fikit_flush. */
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
#include "bound.h"
#include "kerneltimes.h"
#include "auth.h"
#include "config.h"
#include "core.h"
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

/* ---- the real driver: process-wide state (process.c), found and filled
 * once by intercept.c's init, which every wrapper runs first ---- */

extern _Atomic(void *) fk_real[FK_NSLOTS];
extern atomic_int fk_ready; /* the init has run */
extern fk_config fk_cfg;
extern atomic_uint fk_generation; /* bumped in a forked child */
extern atomic_int fk_blocked;     /* threads inside a host-blocking call (sync.c) */
extern atomic_ullong fk_own_wait_ns; /* application threads' waits for the hook's own work (sync.c) */
extern atomic_ullong fk_own_wait_lapses; /* sender iterations that left a waited-for run unshipped (sender.c) */

/* The real entry point of a slot; the wrapper that called the handler has
 * run the init. */
#define FK_REAL(slot, sym) ((__typeof__(&sym))atomic_load_explicit(&fk_real[slot], memory_order_acquire))

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
	X(cuThreadExchangeStreamCaptureMode)                                                       \
	X(cuModuleLoadData)                                                                        \
	X(cuStreamCreate)                                                                          \
	X(cuDeviceGetAttribute)

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

#define FK_EV_PAIRS 8192 /* event pairs per task: a run's kernels, read at its end */

typedef struct fk_evpool fk_evpool;

/* A task as the process's threads see it. Its state machine is the core's
 * (core.h, control.c); what a launch reads of it is published here as
 * atomics (fk_view) after every step that changes it. */
typedef struct fk_task {
	/* read on every launch: the published view */
	_Alignas(64) atomic_uint mode;
	/* Credit is a limit on seq (wire protocol): launch s goes without
	 * asking while s ≤ credit_limit (serial order). */
	atomic_uint credit_limit;
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
	_Atomic uint64_t token;            /* the registration's, on every message about the task */
	_Atomic uint64_t backoff_until_ns; /* waiter: pass through until then (failed open) */
	atomic_uint reg_gen;               /* acks received: tells a registration from the one before */
	atomic_uint sample;                /* sharing: one run in this many measured (0: none) */
	atomic_uint profile_runs;          /* T (measure.c's uncertainty bound) */
	_Alignas(64) atomic_uint seq;      /* per-task launch counter (design) */
	_Alignas(64) atomic_uint run_kernels;
	atomic_uint sampling;     /* this run is measured though the task shares (its first launch decided) */
	atomic_uint runs_started; /* runs begun: which are sampled */
	/* Run ends pushed to the sender, and those it has shipped (sent with
	 * their measurements): a profiling run's end waits for the one before
	 * (sync.c), ship_waiters threads do (futex on runs_shipped). */
	atomic_uint runs_ended, runs_shipped, ship_waiters;
	uint32_t runs_processed; /* sender thread only */
	_Atomic uint64_t run_start_ns;
	_Atomic(fk_evpool *) pool;
	/* The µs bound (bound.h): the kernel durations the daemon sent
	 * (NULL: none yet; kept once made), the predicted end of the task's
	 * work on the device, and its latest launch (a better priority's
	 * launch after it means a switch before its next kernel). */
	_Atomic(fk_ktab *) kt;
	_Atomic uint64_t cursor;
	_Atomic uint64_t last_go_ns;
	/* Kernels in flight under the count bound (inflight.c): events
	 * recorded after them, oldest at head. */
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
	/* the first registration's wait (waiter.c), woken by control.c */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void *meas; /* measurement state (measure.c), sender thread only */
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
void fk_tasks_reset_child(void);

/* The bounds on work in flight (inflight.c; docs/design.md "Board"). A
 * task is bounded while a better priority is registered on its GPU. */
static inline int fk_better_registered(const fk_board_gpu *bg)
{
	return bg && (atomic_load_explicit(&bg->registered, memory_order_relaxed) & ((1ull << fk_cfg.priority) - 1));
}
/* The daemon's µs bound for t (0: none: no table, or it bounds nothing). */
static inline uint64_t fk_us_bound(fk_task *t)
{
	fk_ktab *k = atomic_load_explicit(&t->kt, memory_order_acquire);
	return k ? atomic_load_explicit(&k->bound_ns, memory_order_acquire) : 0;
}
/* The count bound applies where no µs bound does: FIKIT_INFLIGHT kernels,
 * by default (auto) FK_DEFAULT_INFLIGHT. */
static inline int fk_count_bound(fk_task *t)
{
	if (fk_cfg.inflight >= 0)
		return fk_cfg.inflight;
	return fk_us_bound(t) ? 0 : FK_DEFAULT_INFLIGHT;
}
void fk_inflight_wait(fk_task *t);
void fk_inflight_push(fk_task *t, CUstream s);
/* Predicted duration of t's kernel kid (0: no table). */
static inline uint64_t fk_kernel_ns(fk_task *t, uint64_t kid)
{
	fk_ktab *k = atomic_load_explicit(&t->kt, memory_order_acquire);
	return k && atomic_load_explicit(&k->have, memory_order_acquire) ? fk_kt_get(k, kid) : 0;
}
/* Wait (sleeping, on this thread) until a launch of t's kernel of predicted
 * duration dur fits the µs bound (bound.h), where t has one. */
int fk_us_wait(fk_task *t, fk_board_gpu *bg, uint64_t dur, uint64_t stale_after);
/* The launch of predicted duration dur goes now: the cursors move on. */
void fk_us_launched(fk_task *t, fk_board *b, fk_board_gpu *bg, uint64_t dur);
/* t's host sync returned at now: its work is done (the cursors' correction). */
void fk_us_done(fk_task *t, uint64_t now);
/* What a resume looks at on t's board, now. */
void fk_resume_view_of(fk_task *t, fk_resume_view *v, uint64_t now);
/* Whether t, a waiter, may launch kid now without asking (board resume). */
int fk_resume_now(fk_task *t, uint64_t dur);

/* ---- the hook's own kernel (probe.c) ---- */

/* Its name: timelines, CUPTI readers and launch probes leave it out. */
#define FK_PROBE_NAME "fikit_hook_probe"
/* Sender thread: time the probe for calibration seq (Calibrate). */
void fk_probe_calibrate(fk_task *t, uint32_t seq, uint64_t probe_ns);
/* Sender thread: move calibrations on; whether one is under way. */
int fk_probe_poll(void);
/* Sender thread: one launch of the probe, ns long (issue 27's warm-up):
 * 1 if it went. */
int fk_probe_launch(fk_task *t, uint64_t ns);
void fk_probe_reset_child(void);

/* ---- the pre-switch's warm-up (warm.c) ---- */

/* Sender thread: the warm-up, if nothing forbids it now: 1 if it went. */
int fk_warm_launch(fk_task *t, uint64_t ns);
/* What the core's warm_ok looks at: a run of t under way. */
int fk_warm_in_run(fk_task *t);
/* t's context was destroyed or reset: no probe from then on (probe.c). */
int fk_probe_ctx_gone(const fk_task *t);
/* The context ctx (by_dev: every context of device dev) is going. */
void fk_probe_forget(CUcontext ctx, CUdevice dev, int by_dev);

/* ---- the core of the process (control.c) ---- */

/* Step ev through the process's core (under its lock): views it changes are
 * published into fk_tasks, registration waits woken, the sender woken, lines
 * logged; the actions only the caller can carry out (SEND, START, WAIT, GO,
 * REASK, RECORDS) are copied into out (at most cap) and counted. */
int fk_ctl_step(const fk_ev *ev, fk_act *out, int cap);
/* The task a daemon's message is about (fk_core_target), or -1. */
int fk_ctl_target(const fk_msg_in *m);
/* Wake the sender (an eventfd write; it polls otherwise). */
void fk_sender_wake(void);
extern int fk_wake_fd; /* the sender's eventfd, -1 before it starts */
/* fikit_flush(): the flushes requested (the sender serves the latest),
 * and waiting for the one numbered gen to be over, at most ms: everything
 * it covered durable at the daemon, shipped but not confirmed (the daemon
 * slow, gone, or a task not registered), or not even shipped (the sender
 * did not get to it: it is lost if the process ends now). */
enum { FK_FLUSH_NOT_SHIPPED = -1, FK_FLUSH_SHIPPED = 0, FK_FLUSH_DURABLE = 1 };
extern atomic_uint fk_flush_req;
int fk_ctl_flush_wait(unsigned gen, unsigned ms);
/* The sender: the flush it is asking the daemon about now (FLUSHED ends it). */
void fk_ctl_flush_serving(unsigned gen);
/* Fork: the lock is held across fork; the child starts over. */
void fk_ctl_lock(void);
void fk_ctl_unlock(void);
void fk_ctl_reset_child(void);

/* ---- the ring between launching threads and the sender ---- */

enum { FK_REC_LAUNCH = 1, FK_REC_RUN_END = 2 };
/* NOEV: the launch was to be measured but had no event pair. */
enum { FK_RF_NOTIFY = 1, FK_RF_MEASURE = 2, FK_RF_NOEV = 4 };

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

/* ---- the connection to the scheduler (link.c) ---- */

/* Resolve the scheduler's address, set up MACs, open the control socket;
 * -1 (warned) if the hook cannot talk to it. */
int fk_link_open(void);
/* A socket connected to the scheduler (waiter.c makes its own per thread). */
int fk_link_socket(void);
int fk_link_ctl(void); /* the control socket */
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
/* Sender thread: queue m on the control socket; datagrams leave in order,
 * batched by sendmmsg, at fk_link_flush (or when the batch is full). */
void fk_link_put(const fk_msg_out *m);
int fk_link_pending(void);
void fk_link_flush(void);
/* Whether a send was refused (ECONNREFUSED) since the last call. */
int fk_link_refused(void);
/* Send m at once, without blocking (Goodbye at exit). */
void fk_link_send_now(const fk_msg_out *m);
void fk_link_reset_child(void);
/* send(2) to the scheduler on fd; on a unix socket whose daemon went away
 * (a restart: ECONNREFUSED, then ENOTCONN), connect again to its path and
 * retry once, so a restarted daemon hears the hook (it then says "unknown
 * task" and the hook registers again). errno as send's. */
ssize_t fk_link_send(int fd, const void *buf, size_t len, int flags);
/* recv(2) on the control socket, taking a descriptor that came with the
 * datagram (SCM_RIGHTS: the board, for a hook on a unix socket) into
 * *fd_out (-1: none; the caller closes it). */
ssize_t fk_link_recv_fd(int fd, void *buf, size_t len, int *fd_out);
/* Remove the name of a reply socket this process bound (a unix link): at
 * a thread's end and at exit, so that the reply directory does not keep
 * it. A socket inherited across fork keeps its name (its binder's pid is
 * in it). */
void fk_link_unlink_own(int fd);
/* At exit: remove the names of every reply socket this process bound
 * (fk-PID-TAG-0 … N-1), whichever thread's. */
void fk_link_unlink_all(void);

/* ---- the sender thread (sender.c) ---- */

int fk_sender_start(void); /* once per process (and per child) */
/* The sender sleeps longer than right after activity (it backs off while
 * idle): a waiter launching on credit wakes it, since its reservations
 * are freed only when its launches are reported. */
extern atomic_int fk_sender_dozing;
void fk_sender_reset_child(void);
/* Fork: the sender is parked (between iterations) across it. */
void fk_sender_fork_prepare(void);
void fk_sender_fork_parent(void);

/* ---- an application thread's waits (waiter.c) ---- */

/* The first launch on t: register, waiting (connect timeout) for the
 * answer; other threads' first launches wait for it too. */
void fk_register_wait(fk_task *t);
/* A waiter's launch without credit: ask for seq and wait for the grant,
 * asking again while the board shows a grant stale (core: FK_REASK_MAX).
 * Returns 1 granted, 0 failed open or told to stop waiting. */
int fk_waiter_launch(fk_task *t, uint32_t seq, uint64_t kid, uint64_t dur);
/* fk_waiter_launch's answer beside 1 (granted) and 0 (failed open): the
 * launch went on the board's word (resumed), and is to be reported. */
#define FK_WAITER_RESUMED 2

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
/* Sender thread: queue a measured launch or a run end in the task's order.
 * Poll turns finished event pairs into kernel timings, and stops at a run
 * end (done->ended), which the core then decides to report or not:
 * fk_measure_ship sends the run's KernelInfo and Measurements for the
 * core's RECORDS action; fk_measure_run_done forgets the run either way.
 * Poll returns the items it handled; *pending gets whether items wait for
 * their events. exiting: read whatever is left. */
typedef struct fk_run_done {
	int ended;
	uint32_t kernels, reason, last_seq;
	uint64_t run_ns;
	int measured;       /* its records are settled and ready to ship */
	uint8_t unmeasured; /* measured but not shippable: why (FK_UNMEASURED_*) */
} fk_run_done;
void fk_measure_item(fk_task *t, const fk_rec *r);
int fk_measure_poll(fk_task *t, int exiting, int *pending, fk_run_done *done);
void fk_measure_ship(fk_task *t, const fk_act *records);
void fk_measure_run_done(fk_task *t);
void fk_measure_reset_task(fk_task *t);

/* ---- launches, runs (launch.c, sync.c) ---- */

extern atomic_int fk_capturing; /* streams capturing right now (process-wide) */
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
