/* task.c — one task per (process, device), registered with the scheduler at
 * its first launch (synchronously, bounded by FIKIT_CONNECT_TIMEOUT_MS). A
 * process that sees one device (the common case: one GPU, or
 * CUDA_VISIBLE_DEVICES in a container) maps every launch to that device's
 * task with one load; otherwise the current context picks the task. */
#include "hook.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

fk_task fk_tasks[FK_MAX_TASKS];
atomic_int fk_ntasks;
fk_task *_Atomic fk_single_task;
atomic_int fk_multi_device = -1; /* -1 unknown, 0 one device, 1 several */

static pthread_mutex_t tasks_mu = PTHREAD_MUTEX_INITIALIZER;

/* Contexts seen, each with its device's task (few; linear scan). */
#define FK_MAX_CTX 64
static struct {
	_Atomic(CUcontext) ctx;
	fk_task *task;
} ctx_map[FK_MAX_CTX];
static atomic_int nctx;
static __thread CUcontext tl_ctx;
static __thread fk_task *tl_task;
static __thread unsigned tl_gen;

/* The registration wait has a CLOCK_MONOTONIC deadline (wall-clock jumps
 * must not stretch it). */
static void task_sync_init(fk_task *t)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_init(&t->infl_mu, NULL);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
}

__attribute__((constructor)) static void tasks_mu_init(void)
{
	for (int i = 0; i < FK_MAX_TASKS; i++)
		task_sync_init(&fk_tasks[i]);
}

static fk_task *task_for_device(CUdevice dev, CUcontext ctx)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++)
		if (fk_tasks[i].dev == dev)
			return &fk_tasks[i];
	if (n == FK_MAX_TASKS)
		return NULL;
	fk_task *t = &fk_tasks[n];
	t->index = n;
	t->dev = dev;
	t->ctx = ctx;
	memset(t->uuid, 0, sizeof t->uuid);
	CUuuid u;
	if ((fk_drv.cuDeviceGetUuid_v2 && fk_drv.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) ||
	    (fk_drv.cuDeviceGetUuid && fk_drv.cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS))
		memcpy(t->uuid, u.bytes, 16);
	if (!fk_drv.cuDeviceGetName || fk_drv.cuDeviceGetName(t->dev_name, sizeof t->dev_name, dev) != CUDA_SUCCESS)
		strcpy(t->dev_name, "unknown");
	atomic_store(&t->state, FK_ST_NEW);
	atomic_store(&fk_ntasks, n + 1);
	return t;
}

/* Slow path: first launch of the process, or a process with several
 * devices (every launch: one driver call and a thread-local compare). */
fk_task *fk_task_slow(void)
{
	if (fk_cfg.disabled || !fk_drv.cuCtxGetCurrent)
		return NULL;
	CUcontext ctx = NULL;
	if (fk_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
		return NULL;
	unsigned gen = atomic_load_explicit(&fk_generation, memory_order_relaxed);
	if (ctx == tl_ctx && tl_task && tl_gen == gen)
		return tl_task;
	fk_task *t = NULL;
	int n = atomic_load_explicit(&nctx, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (atomic_load_explicit(&ctx_map[i].ctx, memory_order_acquire) == ctx) {
			t = ctx_map[i].task;
			break;
		}
	if (!t) {
		CUdevice dev;
		if (!fk_drv.cuCtxGetDevice || fk_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
			return NULL;
		pthread_mutex_lock(&tasks_mu);
		if (atomic_load(&fk_multi_device) < 0) {
			int count = 0;
			int multi = !fk_drv.cuDeviceGetCount || fk_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS ||
				    count != 1;
			atomic_store(&fk_multi_device, multi);
		}
		t = task_for_device(dev, ctx);
		n = atomic_load(&nctx);
		if (t && n < FK_MAX_CTX) {
			ctx_map[n].task = t;
			atomic_store_explicit(&ctx_map[n].ctx, ctx, memory_order_release);
			atomic_store_explicit(&nctx, n + 1, memory_order_release);
		}
		if (t && !atomic_load(&fk_multi_device))
			atomic_store_explicit(&fk_single_task, t, memory_order_release);
		pthread_mutex_unlock(&tasks_mu);
		if (!t)
			return NULL;
	}
	tl_ctx = ctx;
	tl_task = t;
	tl_gen = gen;
	return t;
}

/* Credit is a limit on the launch seq (docs/design.md). */
/* A gate's expiry on the local clock: the wire's is absolute for a daemon on
 * this host (it shares CLOCK_MONOTONIC), else relative to its receipt. */
static void gate_set(fk_task *t, uint64_t seen, uint64_t expires)
{
	if (expires && !fk_cfg.local)
		expires += fk_now_ns();
	atomic_store_explicit(&t->gate_seen, seen, memory_order_relaxed);
	atomic_store_explicit(&t->gate_expires, expires, memory_order_relaxed);
}

void fk_credit_grant(fk_task *t, uint32_t seq, uint32_t credit, uint64_t seen, uint64_t expires)
{
	/* A grant for a launch older than the last revocation must not bring
	 * credit back. The grant of the launch waiting at the revocation (seq
	 * equal) was decided after it and counts; renewals travel with the
	 * revocations on the control socket, in order. */
	uint32_t rev = atomic_load_explicit(&t->revoked_seq, memory_order_relaxed);
	if (rev && (int32_t)(seq - rev) < 0)
		return;
	gate_set(t, seen, expires);
	uint32_t lim = seq + credit, cur = atomic_load_explicit(&t->credit_limit, memory_order_relaxed);
	while ((int32_t)(lim - cur) > 0 &&
	       !atomic_compare_exchange_weak_explicit(&t->credit_limit, &cur, lim, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static void credit_set(fk_task *t, uint32_t credit)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);
	/* Before any launch no grant can be older than this: nothing to mark. */
	if (credit == 0 && s)
		atomic_store_explicit(&t->revoked_seq, s, memory_order_relaxed);
	atomic_store_explicit(&t->credit_limit, s + credit, memory_order_relaxed);
}

/* Apply a role/phase/credit from RegisterAck or State (sender thread). */
void fk_gate_closed(fk_task *t)
{
	credit_set(t, 0);
	unsigned mode = atomic_load_explicit(&t->mode, memory_order_relaxed);
	if (mode & FK_MODE_HOLDER)
		atomic_store_explicit(&t->mode, (mode & ~(unsigned)FK_MODE_HOLDER) | FK_MODE_WAITER,
				      memory_order_release);
}

void fk_task_board(fk_task *t, const fk_msg_in *m)
{
	fk_board *b = m->board_len ? fk_board_map(m->board, m->board_len, m->board_gen, m->board_gpu, t->uuid) : NULL;
	fk_board_gpu *g = b ? &b->gpu[m->board_gpu] : NULL;
	if (g && !atomic_load(&t->bgpu))
		fk_log(FK_LOG_INFO, "sharing the scheduler's board %.*s (GPU section %u)", (int)m->board_len, m->board,
		       m->board_gpu);
	atomic_store(&t->board, b);
	atomic_store(&t->bgpu, g);
}

void fk_task_apply(fk_task *t, int role, int phase, uint32_t credit, uint64_t seen, uint64_t expires)
{
	unsigned mode = role == FK_ROLE_WAITER ? FK_MODE_WAITER : FK_MODE_HOLDER;
	if (phase == FK_PHASE_PROFILING) {
		/* Events are created in the task's context, here on the sender
		 * thread (the registering thread has the context current too, but
		 * a State can switch to profiling at any time). */
		if (!atomic_load(&t->pool) && fk_drv.cuCtxSetCurrent && fk_drv.cuCtxSetCurrent(t->ctx) == CUDA_SUCCESS)
			fk_pool_create(t);
		if (atomic_load(&t->pool))
			mode |= FK_MODE_MEASURE;
	}
	gate_set(t, seen, expires);
	credit_set(t, credit);
	atomic_store_explicit(&t->mode, mode, memory_order_release);
}

void fk_task_set_unreachable(fk_task *t)
{
	atomic_store(&t->state, FK_ST_UNREACHABLE);
	fk_task_set_pass(t);
}

void fk_task_set_pass(fk_task *t)
{
	atomic_store_explicit(&t->mode, FK_MODE_PASS, memory_order_release);
	pthread_mutex_lock(&t->mu);
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void deadline_in(struct timespec *dl, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	uint64_t ns = (uint64_t)dl->tv_nsec + (uint64_t)ms * 1000000u;
	dl->tv_sec += (time_t)(ns / 1000000000u);
	dl->tv_nsec = (long)(ns % 1000000000u);
}

/* Wait (bounded) while the task's first registration is under way, so that
 * every thread's launches after it are seen, not only the registering
 * thread's. */
static void wait_registered(fk_task *t, const struct timespec *dl)
{
	pthread_mutex_lock(&t->mu);
	while (atomic_load(&t->state) == FK_ST_REGISTERING)
		if (pthread_cond_timedwait(&t->cv, &t->mu, dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->mu);
}

void fk_task_register_sync(fk_task *t)
{
	struct timespec dl;
	deadline_in(&dl, fk_cfg.connect_timeout_ms);
	unsigned expected = FK_ST_NEW;
	if (!atomic_compare_exchange_strong(&t->state, &expected, FK_ST_REGISTERING)) {
		if (expected == FK_ST_REGISTERING)
			wait_registered(t, &dl); /* another thread registers it */
		return;
	}
	if (fk_sender_start() != 0) {
		fk_task_set_unreachable(t);
		return;
	}
	fk_sender_wake(); /* reg_next_ns is 0: the sender sends the first Register at once */
	wait_registered(t, &dl);
	if (atomic_load(&t->state) == FK_ST_REGISTERING) {
		/* No answer in time: run un-hooked, the sender keeps trying. */
		unsigned st = FK_ST_REGISTERING;
		if (atomic_compare_exchange_strong(&t->state, &st, FK_ST_UNREACHABLE)) {
			pthread_mutex_lock(&t->mu);
			pthread_cond_broadcast(&t->cv);
			pthread_mutex_unlock(&t->mu);
			fk_sched_lost("no answer to Register");
		}
	}
}

void fk_tasks_reset_child(void)
{
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_task *t = &fk_tasks[i];
		task_sync_init(t);
		atomic_store(&t->mode, FK_MODE_PASS);
		atomic_store(&t->state, FK_ST_NEW);
		atomic_store(&t->credit_limit, 0);
		atomic_store(&t->revoked_seq, 0);
		atomic_store(&t->task_id, 0);
		atomic_store(&t->token, 0);
		atomic_store(&t->seq, 0);
		atomic_store(&t->run_kernels, 0);
		atomic_store(&t->backoff_until_ns, 0);
		atomic_store(&t->backoff_ms, 0);
		atomic_store(&t->pool, NULL); /* the parent's events */
		t->infl_ready = 0;
		t->infl_head = t->infl_tail = 0;
		atomic_store(&t->board, NULL);
		atomic_store(&t->bgpu, NULL);
		t->reg_seq = 0;
		t->reg_next_ns = 0;
		t->reg_backoff_ms = 0;
		t->run = 0;
		fk_measure_reset_task(t);
	}
	/* Contexts do not carry over into a child (CUDA's rule), so the task
	 * list starts over; the single-device shortcut is found again. */
	atomic_store(&fk_ntasks, 0);
	atomic_store(&nctx, 0);
	atomic_store(&fk_single_task, NULL);
	atomic_store(&fk_multi_device, -1);
	pthread_mutex_init(&tasks_mu, NULL);
}
