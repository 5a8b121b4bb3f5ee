/*
 * fault.c — injected device faults (docs/simgpu.md "Fault injection"), so
 * tests can see what one service's CUDA error does to the others.
 *
 *   FIKIT_SIMGPU_FAULT=illegal-address@N[:NAME]
 *       The process's Nth kernel launch (of kernel NAME only, if given;
 *       counted from 1; never the hook's own probe) faults when it runs
 *       on the device, as a kernel dereferencing a bad pointer: the
 *       launch itself succeeds; once the device has reached it, the
 *       driver kills the process's contexts (their queued work leaves the device, other processes go on), the
 *       synchronization or query that observes it returns
 *       CUDA_ERROR_ILLEGAL_ADDRESS, and so does every later call of the
 *       process: the error is sticky, "the process must be terminated and
 *       relaunched" (CUDA driver API, CUDA_ERROR_ILLEGAL_ADDRESS).
 *   FIKIT_SIMGPU_FAULT=destroy-context@N
 *       At the process's Nth kernel launch its context is destroyed under it
 *       (as by another thread, or the driver after an Xid): its queued work
 *       is dropped, the launch and every later use of the context or its
 *       streams return CUDA_ERROR_CONTEXT_IS_DESTROYED; a new context works.
 *
 * Read once, at the first launch. A bad value is reported on stderr and
 * ignored. The setting is the process's own: only the service meant to fail
 * gets it.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_NONE, F_ILLEGAL_ADDRESS, F_DESTROY_CONTEXT };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int kind;
static uint64_t at;            /* the launch that faults (1-based) */
static char name[SG_NAME_MAX]; /* only launches of this kernel count ("" = all) */
static uint64_t launches;      /* counted so far (under mu) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* The armed fault: the faulting kernel's op, until the device reaches it. */
static int armed;
static int a_dev, a_dmctx;
static uint32_t a_gen;
static uint64_t a_seq;

int sg_fault_sticky; /* the process's sticky error (0: none); atomic */

static void parse(void)
{
	const char *v = getenv("FIKIT_SIMGPU_FAULT");
	if (!v || !*v)
		return;
	const char *atp = strchr(v, '@');
	char *end = NULL;
	unsigned long long n = atp ? strtoull(atp + 1, &end, 10) : 0;
	size_t klen = atp ? (size_t)(atp - v) : 0;
	int k = F_NONE;
	if (klen == 15 && !strncmp(v, "illegal-address", klen))
		k = F_ILLEGAL_ADDRESS;
	else if (klen == 15 && !strncmp(v, "destroy-context", klen))
		k = F_DESTROY_CONTEXT;
	if (k == F_NONE || !n || end == atp + 1 || (*end && *end != ':') ||
	    (*end == ':' && (k != F_ILLEGAL_ADDRESS || !end[1] || strlen(end + 1) >= sizeof name))) {
		fprintf(stderr,
			"simgpu: FIKIT_SIMGPU_FAULT=\"%s\": expected illegal-address@N[:KERNEL] or "
			"destroy-context@N (N >= 1); no fault injected\n",
			v);
		return;
	}
	kind = k;
	at = n;
	if (*end == ':')
		snprintf(name, sizeof name, "%s", end + 1);
}

/* The device reached the faulting kernel: every context of this process is
 * killed (its work dropped, as the driver tears the channel down), and the
 * process's error is sticky from now on. Called with mu held, not the
 * shared lock. */
static int kill_ctx(void *obj, void *arg)
{
	sg_ctx *c = obj;
	(void)arg;
	if (c->owner == sg_p.pid && !c->destroyed && c->dmctx >= 0)
		sg_ctx_close_model(c);
	return 0;
}

static void trip(void)
{
	__atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sg_fault_sticky, (int)CUDA_ERROR_ILLEGAL_ADDRESS, __ATOMIC_RELEASE);
	sg_timeline_flush(); /* the faulting kernel's segments are the timeline's */
	sg_obj_each(SG_T_CTX, kill_ctx, NULL);
}

/* Whether the armed kernel has run (or its context is gone). */
static int reached_locked(void)
{
	dm_device *dm = sg_dm(a_dev);
	sg_enter(a_dev);
	int done = dm_ctx_gen(dm, a_dmctx) != a_gen || dm_op_done(dm, a_dmctx, a_seq, NULL) != 0;
	sg_unlock();
	return done;
}

CUresult sg_fault_poll(void)
{
	CUresult sticky = (CUresult)__atomic_load_n(&sg_fault_sticky, __ATOMIC_ACQUIRE);
	if (sticky || !__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return sticky;
	pthread_mutex_lock(&mu);
	if (__atomic_load_n(&armed, __ATOMIC_ACQUIRE) && reached_locked())
		trip();
	pthread_mutex_unlock(&mu);
	return (CUresult)__atomic_load_n(&sg_fault_sticky, __ATOMIC_ACQUIRE);
}

int sg_fault_waiting(int64_t *until)
{
	if (sg_fault_poll())
		return 1;
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return 0;
	/* Cheap and rare (injected faults only): look again within 200 us. */
	int64_t soon = sg_now() + 200000;
	if (*until > soon)
		*until = soon;
	return 0;
}

CUresult sg_fault_result(CUresult rc)
{
	CUresult f = sg_fault_poll();
	return f ? f : rc;
}

/* Destroy c under the service: its work dropped without waiting, its
 * streams kept as handles of a destroyed context. */
static void destroy_under(sg_ctx *c)
{
	sg_ctx_close_model(c);
	c->destroyed = 1;
}

CUresult sg_fault_launch(const sg_name *kname, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
			 int64_t duration_ns, int *handled)
{
	*handled = 0;
	pthread_once(&once, parse);
	/* The count is the service's launches: the hook's probe, launched when
	 * the scheduler asks, would move the fault by a racy number. */
	if (kind == F_NONE || !strcmp(kname->name, SG_HOOK_PROBE))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mu);
	int hit = 0;
	if (!name[0] || !strcmp(name, kname->name))
		hit = ++launches == at;
	pthread_mutex_unlock(&mu);
	if (!hit)
		return CUDA_SUCCESS;
	*handled = 1;
	if (kind == F_DESTROY_CONTEXT) {
		destroy_under(s->ctx);
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	uint64_t seq;
	CUresult r = sg_launch_seq(kname, grid, block, s, duration_ns, &seq);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mu);
	a_dev = s->ctx->dev;
	a_dmctx = s->ctx->dmctx;
	a_gen = s->ctx->dmgen;
	a_seq = seq;
	__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS; /* launches are asynchronous: the fault shows later */
}
