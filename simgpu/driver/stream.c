/*
 * stream.c — streams (legacy, per-thread default, created) and events.
 *
 * A stream is an index into its context's stream table in the device model.
 * An index is reused only once the model has no pending work on it, so a new
 * stream never inherits an old one's ordering.
 */
#include "internal.h"
#include "simgpu.h"

#include <stdlib.h>
#include <string.h>

/* ---- stream indices ---------------------------------------------------- */

CUresult sg_stream_alloc_id(sg_ctx *c, uint32_t *sid)
{
	pthread_mutex_lock(&sg_p.mu);
	sg_enter(c->dev);
	dm_device *dm = sg_dm(c->dev);
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 1; i < DM_MAX_STREAMS; i++) {
		if (c->stream_ids[i / 64] & (1ULL << (i % 64)))
			continue;
		if (dm_stream_busy(dm, c->dmctx, i))
			continue;
		c->stream_ids[i / 64] |= 1ULL << (i % 64);
		*sid = i;
		r = CUDA_SUCCESS;
		break;
	}
	sg_unlock();
	pthread_mutex_unlock(&sg_p.mu);
	return r;
}

static void release_id(sg_ctx *c, uint32_t sid)
{
	if (sid == DM_LEGACY_STREAM)
		return;
	pthread_mutex_lock(&sg_p.mu);
	c->stream_ids[sid / 64] &= ~(1ULL << (sid % 64));
	pthread_mutex_unlock(&sg_p.mu);
}

sg_stream *sg_stream_make(sg_ctx *c, unsigned flags, int priority, int per_thread)
{
	sg_stream *s = sg_obj_new(SG_T_STREAM);
	if (!s)
		return NULL;
	s->ctx = c;
	s->flags = flags;
	s->priority = priority;
	s->per_thread = per_thread;
	return s;
}

static CUresult stream_new(sg_ctx *c, unsigned flags, int priority, int per_thread, sg_stream **out)
{
	uint32_t sid;
	CUresult r = sg_stream_alloc_id(c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	sg_stream *s = sg_stream_make(c, flags, priority, per_thread);
	if (!s) {
		release_id(c, sid);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	s->sid = sid;
	sg_obj_publish(s);
	*out = s;
	return CUDA_SUCCESS;
}

static void stream_free(sg_stream *s)
{
	if (s->sid != DM_LEGACY_STREAM && s->ctx && s->ctx->h.live && !s->ctx->destroyed)
		release_id(s->ctx, s->sid);
	sg_obj_free(s);
}

/* ---- per-thread default streams ----------------------------------------- */

#define PTDS_MAX 16

typedef struct ptds_ent {
	sg_ctx *ctx;
	uint32_t ctx_gen;
	sg_stream *s;
} ptds_ent;

static __thread ptds_ent ptds[PTDS_MAX];
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

static void ptds_thread_exit(void *unused)
{
	(void)unused;
	for (int i = 0; i < PTDS_MAX; i++) {
		ptds_ent *e = &ptds[i];
		if (e->s && e->ctx->h.live && e->ctx->h.gen == e->ctx_gen && e->s->h.live)
			stream_free(e->s);
		e->s = NULL;
	}
}

static void ptds_init(void)
{
	pthread_key_create(&ptds_key, ptds_thread_exit);
}

static CUresult per_thread_stream(sg_ctx *c, sg_stream **out)
{
	int freeslot = -1;
	for (int i = 0; i < PTDS_MAX; i++) {
		ptds_ent *e = &ptds[i];
		if (e->s && e->ctx == c && e->ctx_gen == c->h.gen && e->s->h.live) {
			*out = e->s;
			return CUDA_SUCCESS;
		}
		if (freeslot < 0 && (!e->s || !e->s->h.live || !e->ctx->h.live || e->ctx->h.gen != e->ctx_gen))
			freeslot = i;
	}
	if (freeslot < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* The per-thread stream is a blocking stream: it synchronizes with the legacy one. */
	sg_stream *s;
	CUresult r = stream_new(c, 0, 0, 1, &s);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_once(&ptds_once, ptds_init);
	pthread_setspecific(ptds_key, (void *)1);
	ptds[freeslot] = (ptds_ent){c, c->h.gen, s};
	*out = s;
	return CUDA_SUCCESS;
}

CUresult sg_stream_resolve(CUstream hs, int per_thread, sg_stream **out)
{
	uintptr_t v = (uintptr_t)hs;
	if (v == 0 || v == (uintptr_t)CU_STREAM_LEGACY || v == (uintptr_t)CU_STREAM_PER_THREAD) {
		sg_ctx *c;
		CUresult r = sg_current_ctx(&c);
		if (r != CUDA_SUCCESS)
			return r;
		int pt = v == (uintptr_t)CU_STREAM_PER_THREAD || (v == 0 && per_thread);
		if (pt)
			return per_thread_stream(c, out);
		*out = c->legacy;
		return CUDA_SUCCESS;
	}
	sg_stream *s = sg_lookup(v, SG_T_STREAM);
	if (s && s->ctx->h.live && s->ctx->destroyed && s->ctx->owner == sg_p.pid)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED; /* destroyed under it (fault.c) */
	if (!s || !s->ctx->h.live || s->ctx->destroyed || s->ctx->owner != sg_p.pid)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = s;
	return CUDA_SUCCESS;
}

static inline uint32_t op_flags(const sg_stream *s)
{
	return (s->flags & CU_STREAM_NON_BLOCKING) ? DM_OPF_NONBLOCKING : 0;
}

/* ---- cuStream* ----------------------------------------------------------- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	if ((r = stream_new(c, Flags, 0, 0, &s)) != CUDA_SUCCESS)
		return r;
	*phStream = (CUstream)(uintptr_t)sg_handle(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	/* Out-of-range priorities are clamped, as the real driver does. */
	if (priority > 0)
		priority = 0;
	if (priority < -5)
		priority = -5;
	sg_stream *s;
	if ((r = stream_new(c, flags, priority, 0, &s)) != CUDA_SUCCESS)
		return r;
	*phStream = (CUstream)(uintptr_t)sg_handle(s);
	return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream hs)
{
	SG_CHECK_INIT();
	sg_stream *s = sg_lookup((uintptr_t)hs, SG_T_STREAM);
	if (!s || s->sid == DM_LEGACY_STREAM || s->per_thread)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Work already queued still runs: the index is reused only once idle. */
	stream_free(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) { return stream_destroy(hStream); }
CUresult cuStreamDestroy_v2(CUstream hStream) { return stream_destroy(hStream); }

static CUresult stream_query(CUstream hs, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->capture)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	sg_ctx *c = s->ctx;
	sg_enter(c->dev);
	uint64_t last = dm_stream_last_pending(sg_dm(c->dev), c->dmctx, s->sid);
	sg_leave(c);
	return sg_fault_result(last ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

CUresult cuStreamQuery(CUstream hStream) { return stream_query(hStream, 0); }
CUresult cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream, 1); }

static CUresult stream_sync(CUstream hs, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->capture)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	sg_wait_stream(s);
	return sg_fault_result(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream, 0); }
CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, 1); }

static CUresult stream_get_ctx(CUstream hs, CUcontext *pctx, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)(uintptr_t)sg_handle(s->ctx);
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx) { return stream_get_ctx(hStream, pctx, 0); }
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx) { return stream_get_ctx(hStream, pctx, 1); }

static CUresult stream_get_priority(CUstream hs, int *priority, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	*priority = s->priority;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority) { return stream_get_priority(hStream, priority, 0); }
CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
	return stream_get_priority(hStream, priority, 1);
}

static CUresult stream_get_flags(CUstream hs, unsigned int *flags, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = s->flags;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, flags, 0); }
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, flags, 1); }

static CUresult stream_get_id(CUstream hs, unsigned long long *id, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	*id = ((unsigned long long)s->ctx->h.idx << 16) | s->sid;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId) { return stream_get_id(hStream, streamId, 0); }
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
	return stream_get_id(hStream, streamId, 1);
}

/* ---- events -------------------------------------------------------------- */

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	sg_event *e = sg_obj_new(SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ctx = c;
	e->flags = Flags;
	e->rec.end_ns = -1;
	*phEvent = (CUevent)(uintptr_t)sg_handle(e);
	return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h)
{
	SG_CHECK_INIT();
	sg_event *e = sg_lookup((uintptr_t)h, SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	sg_obj_free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent) { return event_destroy(hEvent); }
CUresult cuEventDestroy_v2(CUevent hEvent) { return event_destroy(hEvent); }

static CUresult event_record(CUevent h, CUstream hs, int pt)
{
	SG_CHECK_INIT();
	sg_event *e = sg_lookup((uintptr_t)h, SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->capture) /* inside a capture an event is only an ordering marker: nothing to run */
		return CUDA_SUCCESS;
	dm_op op;
	memset(&op, 0, sizeof op);
	op.type = DM_OP_EVENT;
	op.stream = s->sid;
	op.flags = op_flags(s);
	op.tag = sg_handle(e);
	uint64_t seq;
	if ((r = sg_submit(s, &op, &seq)) != CUDA_SUCCESS)
		return r;
	sg_evrec rec = {s->ctx->dev, s->ctx->dmctx, s->ctx->dmgen, seq, -1};
	pthread_mutex_lock(&e->mu);
	e->rec = rec;
	pthread_mutex_unlock(&e->mu);
	__atomic_store_n(&e->recorded, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

sg_evrec sg_event_rec(sg_event *e)
{
	pthread_mutex_lock(&e->mu);
	sg_evrec r = e->rec;
	pthread_mutex_unlock(&e->mu);
	return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, 0); }
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, 1); }

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return event_record(hEvent, hStream, 0);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return event_record(hEvent, hStream, 1);
}

/* Done state and end time of a record; call with its device's lock held.
 * The end time is re-read: the retire callback may have set it since. */
static int event_done_locked(sg_event *e, const sg_evrec *r, int64_t *end)
{
	dm_device *dm = sg_dm(r->dev);
	if (dm_ctx_gen(dm, r->dmctx) != r->dmgen) {
		sg_evrec now = sg_event_rec(e);
		*end = now.seq == r->seq ? now.end_ns : -1;
		return 1;
	}
	int64_t t = -1;
	int d = dm_op_done(dm, r->dmctx, r->seq, &t);
	if (t < 0) {
		sg_evrec now = sg_event_rec(e);
		t = now.seq == r->seq ? now.end_ns : -1;
	}
	*end = t;
	return d != 0;
}

CUresult cuEventQuery(CUevent hEvent)
{
	SG_CHECK_INIT();
	sg_event *e = sg_lookup((uintptr_t)hEvent, SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE))
		return CUDA_SUCCESS;
	int64_t end;
	sg_evrec r = sg_event_rec(e);
	sg_enter(r.dev);
	int done = event_done_locked(e, &r, &end);
	sg_unlock();
	return sg_fault_result(done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	SG_CHECK_INIT();
	sg_event *e = sg_lookup((uintptr_t)hEvent, SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE))
		return CUDA_SUCCESS;
	sg_evrec r = sg_event_rec(e);
	if (e->flags & CU_EVENT_BLOCKING_SYNC)
		sg_wait_op_blocking(r.dev, r.dmctx, r.dmgen, r.seq);
	else
		sg_wait_op(r.dev, r.dmctx, r.dmgen, r.seq);
	return sg_fault_result(CUDA_SUCCESS);
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	SG_CHECK_INIT();
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	sg_event *a = sg_lookup((uintptr_t)hStart, SG_T_EVENT);
	sg_event *b = sg_lookup((uintptr_t)hEnd, SG_T_EVENT);
	if (!a || !b)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!__atomic_load_n(&a->recorded, __ATOMIC_ACQUIRE) || !__atomic_load_n(&b->recorded, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_INVALID_HANDLE;
	int64_t ta, tb;
	sg_evrec ra = sg_event_rec(a), rb = sg_event_rec(b);
	if (rb.dev != ra.dev)
		return CUDA_ERROR_INVALID_HANDLE;
	sg_enter(ra.dev);
	int da = event_done_locked(a, &ra, &ta), db = event_done_locked(b, &rb, &tb);
	sg_unlock();
	if (!da || !db)
		return CUDA_ERROR_NOT_READY;
	if (ta < 0 || tb < 0) /* dropped with a dead context: no time to report */
		return CUDA_ERROR_INVALID_HANDLE;
	*pMilliseconds = (float)((double)(tb - ta) / 1e6);
	return CUDA_SUCCESS;
}

static CUresult stream_wait_event(CUstream hs, CUevent he, unsigned int flags, int pt)
{
	SG_CHECK_INIT();
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	sg_event *e = sg_lookup((uintptr_t)he, SG_T_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	if (!__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE) || s->capture)
		return CUDA_SUCCESS;
	sg_evrec rec = sg_event_rec(e); /* the record at the time of the call */
	if (rec.dev != s->ctx->dev) {
		/* Devices are modelled independently: wait for it on the host instead. */
		sg_wait_op(rec.dev, rec.dmctx, rec.dmgen, rec.seq);
		return CUDA_SUCCESS;
	}
	dm_op op;
	memset(&op, 0, sizeof op);
	op.type = DM_OP_WAIT;
	op.stream = s->sid;
	op.flags = op_flags(s);
	op.wait_ctx = rec.dmctx;
	op.wait_gen = rec.dmgen;
	op.wait_seq = rec.seq;
	return sg_submit(s, &op, NULL);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 0);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 1);
}

uint32_t sg_stream_op_flags(const sg_stream *s)
{
	return op_flags(s);
}

/* simgpu.h extension: when did a recorded event complete? */
SG_EXPORT int fikit_simgpu_event_time_ns(CUevent hEvent, int64_t *ns)
{
	if (!sg_p.initialized || !ns)
		return -1;
	sg_event *e = sg_lookup((uintptr_t)hEvent, SG_T_EVENT);
	if (!e || !__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE))
		return -1;
	int64_t end;
	sg_evrec r = sg_event_rec(e);
	sg_enter(r.dev);
	int done = event_done_locked(e, &r, &end);
	sg_unlock();
	if (!done)
		return 1;
	if (end < 0)
		return -1;
	*ns = end;
	return 0;
}
