/* task.c — one task per (process, device): the table of tasks, and which
 * task a launch is for. A process that sees one device (the common case:
 * one GPU, or CUDA_VISIBLE_DEVICES in a container) maps every launch to that
 * device's task with one load; otherwise the current context picks the
 * task. What a task may do is its core's (control.c) to say. */
#include "hook.h"

#include <string.h>

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

void fk_tasks_reset_child(void)
{
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_task *t = &fk_tasks[i];
		task_sync_init(t);
		atomic_store(&t->mode, FK_MODE_PASS);
		atomic_store(&t->state, FK_ST_NEW);
		atomic_store(&t->credit_limit, 0);
		atomic_store(&t->task_id, 0);
		atomic_store(&t->token, 0);
		atomic_store(&t->reg_gen, 0);
		atomic_store(&t->gate_seen, 0);
		atomic_store(&t->gate_expires, 0);
		atomic_store(&t->backoff_until_ns, 0);
		atomic_store(&t->seq, 0);
		atomic_store(&t->run_kernels, 0);
		atomic_store(&t->sample, 0);
		atomic_store(&t->profile_runs, 0);
		atomic_store(&t->sampling, 0);
		atomic_store(&t->runs_started, 0);
		atomic_store(&t->runs_ended, 0);
		atomic_store(&t->runs_shipped, 0);
		atomic_store(&t->ship_waiters, 0);
		t->runs_processed = 0;
		atomic_store(&t->pool, NULL); /* the parent's events */
		t->infl_ready = 0;
		t->infl_head = t->infl_tail = 0;
		atomic_store(&t->board, NULL);
		atomic_store(&t->bgpu, NULL);
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
