/*
 * context.c — contexts: creation/destruction, the per-thread current-context
 * stack, primary contexts, and what happens at process exit.
 *
 * Every CUcontext is one context of the device model, so two contexts of
 * one process time-slice against each other just like two processes do.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define STACK_MAX 64

static __thread sg_ctx *stack[STACK_MAX];
static __thread int depth;

static sg_ctx *primary[SG_MAX_DEVICES];
static int prim_refs[SG_MAX_DEVICES];
static unsigned prim_flags[SG_MAX_DEVICES];

/* A context usable by this process (alive, not destroyed, not the parent's after fork). */
static inline int usable(const sg_ctx *c)
{
	return c && c->h.live && !c->destroyed && c->dmctx >= 0 && c->owner == sg_p.pid;
}

CUresult sg_current_ctx(sg_ctx **out)
{
	SG_CHECK_INIT();
	sg_ctx *c = depth > 0 ? stack[depth - 1] : NULL;
	if (c && c->h.live && c->destroyed && c->owner == sg_p.pid)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED; /* destroyed under the thread (fault.c) */
	if (!usable(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = c;
	return CUDA_SUCCESS;
}

static sg_ctx *ctx_of(CUcontext h)
{
	sg_ctx *c = sg_lookup((uint64_t)(uintptr_t)h, SG_T_CTX);
	return usable(c) ? c : NULL;
}

CUresult sg_ctx_new(int dev, unsigned flags, int prim, sg_ctx **out)
{
	sg_ctx *c = sg_obj_new(SG_T_CTX);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	c->flags = flags;
	c->primary = prim;
	c->owner = sg_p.pid;
	dm_device *dm = sg_dm(dev);
	sg_enter(dev);
	int ci = dm_ctx_open(dm, sg_p.pid);
	if (ci < 0) { /* full: look for dead owners now */
		sg_reap_maybe(sg_now(), 1);
		ci = dm_ctx_open(dm, sg_p.pid);
	}
	if (ci >= 0) {
		sg_ctxlog *l = &sg_shared->dev[dev].log[ci];
		l->head = l->tail;
		l->lost = 0;
		l->want = sg_p.timeline_fd >= 0;
		c->dmctx = ci;
		c->dmgen = dm_ctx_gen(dm, ci);
	}
	sg_unlock();
	if (ci < 0) {
		c->dmctx = -1;
		sg_obj_free(c);
		return CUDA_ERROR_OUT_OF_MEMORY; /* what the real driver says when it has no channel left */
	}
	sg_timeline_start(); /* no-op unless a timeline is on and (after fork) this process has no flusher */
	c->stream_ids[0] = 1; /* stream index 0 is the legacy stream */
	c->legacy = sg_stream_make(c, 0, 0, 0);
	if (!c->legacy) {
		sg_ctx_teardown(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->legacy->sid = DM_LEGACY_STREAM;
	sg_obj_publish(c->legacy);
	sg_obj_publish(c);
	*out = c;
	return CUDA_SUCCESS;
}

static int free_ctx_objects(void *obj, void *arg)
{
	sg_stream *s = obj;
	if (s->ctx == arg)
		sg_obj_free(s);
	return 0;
}

void sg_ctx_close_model(sg_ctx *c)
{
	sg_shdev *d = &sg_shared->dev[c->dev];
	int64_t now = sg_enter(c->dev);
	if (dm_ctx_gen(&d->dm, c->dmctx) == c->dmgen) {
		dm_ctx_close(&d->dm, c->dmctx, now, sg_sink, d);
		d->log[c->dmctx].want = 0;
	}
	sg_unlock();
}

void sg_ctx_teardown(sg_ctx *c)
{
	/* Destroying a context waits for its work (as cuCtxDestroy does), so
	 * the timeline is complete; then its model context is freed. */
	sg_wait_ctx(c);
	if (sg_p.timeline_fd >= 0) { /* its records go while the context is still listed */
		sg_enter(c->dev);
		sg_unlock();
		sg_timeline_flush();
	}
	sg_ctx_close_model(c);
	c->destroyed = 1;
	sg_obj_each(SG_T_STREAM, free_ctx_objects, c);
	sg_modules_unload_ctx(c);
	for (int i = 0; i < depth; i++)
		if (stack[i] == c)
			stack[i] = NULL;
	sg_obj_free(c);
}

/* ---- cuCtx* ----------------------------------------------------------- */

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	SG_CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= sg_p.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	sg_ctx *c;
	CUresult r = sg_ctx_new(dev, flags, 0, &c);
	if (r != CUDA_SUCCESS)
		return r;
	if (depth < STACK_MAX)
		stack[depth++] = c; /* a new context is pushed on the calling thread's stack */
	*pctx = (CUcontext)(uintptr_t)sg_handle(c);
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
			CUdevice dev)
{
	if (numParams < 0 || (numParams > 0 && !paramsArray))
		return CUDA_ERROR_INVALID_VALUE;
	if (numParams > 0)
		return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
	return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext h)
{
	SG_CHECK_INIT();
	sg_ctx *c = ctx_of(h);
	if (!c || c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	sg_ctx_teardown(c);
	return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
CUresult cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	SG_CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	sg_ctx *c = depth > 0 ? stack[depth - 1] : NULL;
	*pctx = usable(c) ? (CUcontext)(uintptr_t)sg_handle(c) : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext h)
{
	SG_CHECK_INIT();
	if (!h) {
		if (depth > 0)
			depth--;
		return CUDA_SUCCESS;
	}
	sg_ctx *c = ctx_of(h);
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth == 0)
		depth = 1;
	stack[depth - 1] = c;
	return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext h)
{
	SG_CHECK_INIT();
	sg_ctx *c = ctx_of(h);
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth >= STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	stack[depth++] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) { return ctx_push(ctx); }
CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return ctx_push(ctx); }

static CUresult ctx_pop(CUcontext *pctx)
{
	SG_CHECK_INIT();
	if (depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	sg_ctx *c = stack[--depth];
	if (pctx)
		*pctx = usable(c) ? (CUcontext)(uintptr_t)sg_handle(c) : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx) { return ctx_pop(pctx); }
CUresult cuCtxPopCurrent_v2(CUcontext *pctx) { return ctx_pop(pctx); }

CUresult cuCtxGetDevice(CUdevice *device)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	sg_wait_ctx(c);
	return sg_fault_result(CUDA_SUCCESS);
}

CUresult cuCtxGetApiVersion(CUcontext h, unsigned int *version)
{
	SG_CHECK_INIT();
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	sg_ctx *c;
	if (h) {
		if (!(c = ctx_of(h)))
			return CUDA_ERROR_INVALID_CONTEXT;
	} else if (sg_current_ctx(&c) != CUDA_SUCCESS) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	*version = 3020; /* what every context created through the v2 API reports */
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext h, unsigned long long *ctxId)
{
	SG_CHECK_INIT();
	sg_ctx *c;
	if (h) {
		if (!(c = ctx_of(h)))
			return CUDA_ERROR_INVALID_CONTEXT;
	} else if (sg_current_ctx(&c) != CUDA_SUCCESS) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	*ctxId = sg_handle(c);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pvalue || (int)limit < 0 || limit >= CU_LIMIT_MAX || (int)limit >= 16)
		return CUDA_ERROR_INVALID_VALUE;
	static const size_t dflt[16] = {1024, 1048576, 8388608, 2, 2048, 64, 0, 0};
	*pvalue = c->limits[limit] ? c->limits[limit] : dflt[limit];
	return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((int)limit < 0 || limit >= CU_LIMIT_MAX || (int)limit >= 16)
		return CUDA_ERROR_INVALID_VALUE;
	c->limits[limit] = value;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pconfig)
		return CUDA_ERROR_INVALID_VALUE;
	*pconfig = CU_FUNC_CACHE_PREFER_NONE;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	return (int)config < 0 || config > CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- primary contexts -------------------------------------------------- */

#define CHECK_PDEV(dev)                                        \
	do {                                                   \
		SG_CHECK_INIT();                               \
		if ((dev) < 0 || (dev) >= sg_p.ndev)           \
			return CUDA_ERROR_INVALID_DEVICE;      \
	} while (0)

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_PDEV(dev);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sg_p.mu);
	if (!usable(primary[dev])) {
		sg_ctx *c;
		CUresult r = sg_ctx_new(dev, prim_flags[dev], 1, &c);
		if (r != CUDA_SUCCESS) {
			pthread_mutex_unlock(&sg_p.mu);
			return r;
		}
		primary[dev] = c;
		prim_refs[dev] = 0;
	}
	prim_refs[dev]++;
	*pctx = (CUcontext)(uintptr_t)sg_handle(primary[dev]);
	pthread_mutex_unlock(&sg_p.mu);
	return CUDA_SUCCESS;
}

static CUresult prim_release(CUdevice dev)
{
	CHECK_PDEV(dev);
	pthread_mutex_lock(&sg_p.mu);
	if (!usable(primary[dev]) || prim_refs[dev] <= 0) {
		pthread_mutex_unlock(&sg_p.mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--prim_refs[dev] == 0) {
		sg_ctx *c = primary[dev];
		primary[dev] = NULL;
		sg_ctx_teardown(c);
	}
	pthread_mutex_unlock(&sg_p.mu);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return prim_release(dev); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return prim_release(dev); }

static CUresult prim_reset(CUdevice dev)
{
	CHECK_PDEV(dev);
	pthread_mutex_lock(&sg_p.mu);
	if (usable(primary[dev])) {
		sg_ctx *c = primary[dev];
		primary[dev] = NULL;
		prim_refs[dev] = 0;
		sg_ctx_teardown(c);
	}
	prim_flags[dev] = 0;
	pthread_mutex_unlock(&sg_p.mu);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return prim_reset(dev); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return prim_reset(dev); }

static CUresult prim_set_flags(CUdevice dev, unsigned int flags)
{
	CHECK_PDEV(dev);
	if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
				CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sg_p.mu);
	prim_flags[dev] = flags;
	if (usable(primary[dev]))
		primary[dev]->flags = flags;
	pthread_mutex_unlock(&sg_p.mu);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) { return prim_set_flags(dev, flags); }
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) { return prim_set_flags(dev, flags); }

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CHECK_PDEV(dev);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sg_p.mu);
	*flags = prim_flags[dev];
	*active = usable(primary[dev]) && prim_refs[dev] > 0;
	pthread_mutex_unlock(&sg_p.mu);
	return CUDA_SUCCESS;
}

/* ---- exit --------------------------------------------------------------- */

static int close_at_exit(void *obj, void *arg)
{
	sg_ctx *c = obj;
	(void)arg;
	if (c->owner != sg_p.pid || c->destroyed || c->dmctx < 0)
		return 0;
	sg_shdev *d = &sg_shared->dev[c->dev];
	/* Whatever this process left queued dies with it, as on a real GPU. */
	if (dm_ctx_gen(&d->dm, c->dmctx) == c->dmgen) {
		dm_ctx_close(&d->dm, c->dmctx, sg_now(), sg_sink, d);
		d->log[c->dmctx].want = 0;
	}
	return 0;
}

void sg_exit_cleanup(void)
{
	/* Write what finished, then free this process's contexts. Another thread
	 * may hold the lock forever (exit() while it waits): give up after 200 ms. */
	if (sg_lock_timed(200000000LL) != 0)
		return;
	int64_t now = sg_now();
	for (int i = 0; i < sg_p.ndev; i++) /* log what finished up to now */
		dm_advance(sg_dm(i), now, sg_sink, &sg_shared->dev[i]);
	sg_unlock();
	sg_timeline_flush();
	if (sg_lock_timed(200000000LL) != 0)
		return;
	sg_obj_each(SG_T_CTX, close_at_exit, NULL);
	sg_unlock();
}
