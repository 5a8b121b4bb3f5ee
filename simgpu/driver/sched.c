/*
 * sched.c — glue between driver calls and the shared device model: entering
 * (lock + advance to now), submitting ops, retiring finished ones, and the
 * ground-truth timeline.
 *
 * Timeline: the model reports each finished kernel segment to sg_sink in
 * whichever process advances the device; sg_sink files it in the owning
 * context's segment log in shared memory, and only the owner, which knows the
 * kernel's name, turns it into a JSON line. It does so in a background thread
 * (every 20 ms, or at once when a log is half full), at context destruction
 * and at exit, never in a launch or a synchronize: formatting hundreds of
 * lines there would make the host timing it simulates wrong.
 */
#include "internal.h"
#include "simgpu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int64_t sg_enter(int dev)
{
	sg_lock();
	int64_t now = sg_now();
	dm_advance(sg_dm(dev), now, sg_sink, &sg_shared->dev[dev]);
	sg_reap_maybe(now, 0);
	return now;
}

void sg_sink(void *arg, const dm_segment *g)
{
	sg_shdev *d = arg;
	if (!d)
		return;
	sg_ctxlog *l = &d->log[g->ctx];
	if (!l->want)
		return;
	if (l->tail - l->head >= SG_SEGLOG) {
		l->lost++;
		return;
	}
	sg_segrec *r = &d->seg[g->ctx][l->tail % SG_SEGLOG];
	r->seq = g->seq;
	r->tag = g->tag;
	r->start_ns = g->start_ns;
	r->end_ns = g->end_ns;
	memcpy(r->grid, g->grid, sizeof r->grid);
	memcpy(r->block, g->block, sizeof r->block);
	r->stream = g->stream;
	r->seg = g->seg;
	r->last = (uint32_t)g->last | ((uint32_t)g->dropped << 1);
	r->arrive_ns = g->arrive_ns;
	r->blocked_ns = g->blocked_ns;
	l->tail++;
}

static void retire_cb(void *arg, const dm_retired *r)
{
	(void)arg;
	if (r->type != DM_OP_EVENT)
		return;
	sg_event *ev = sg_lookup(r->tag, SG_T_EVENT);
	if (!ev || !__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&ev->mu);
	if (ev->rec.seq == r->seq)
		ev->rec.end_ns = r->end_ns;
	pthread_mutex_unlock(&ev->mu);
}

void sg_retire_locked(sg_ctx *c)
{
	dm_device *dm = sg_dm(c->dev);
	if (dm_ctx_gen(dm, c->dmctx) == c->dmgen)
		dm_retire(dm, c->dmctx, retire_cb, c);
}

void sg_leave(sg_ctx *c)
{
	int kick = 0;
	if (c) {
		sg_retire_locked(c);
		const sg_ctxlog *l = &sg_shared->dev[c->dev].log[c->dmctx];
		kick = l->want && l->tail - l->head > SG_SEGLOG / 2;
	}
	sg_unlock();
	if (kick)
		sg_timeline_kick();
}

CUresult sg_submit(sg_stream *s, dm_op *op, uint64_t *seq)
{
	sg_ctx *c = s->ctx;
	dm_device *dm = sg_dm(c->dev);
	for (;;) {
		int64_t now = sg_enter(c->dev);
		if (dm_ctx_gen(dm, c->dmctx) != c->dmgen) {
			sg_unlock();
			return CUDA_ERROR_CONTEXT_IS_DESTROYED;
		}
		sg_retire_locked(c);
		int64_t r = dm_enqueue(dm, c->dmctx, op, now);
		if (r > 0) {
			if (seq)
				*seq = (uint64_t)r;
			const sg_ctxlog *l = &sg_shared->dev[c->dev].log[c->dmctx];
			uint64_t used = l->want ? l->tail - l->head : 0;
			sg_unlock();
			/* Backpressure: a process finishing kernels faster than its flusher
			 * writes them pays for the writing itself, rather than lose lines. */
			if (used > SG_SEGLOG * 3 / 4)
				sg_timeline_flush();
			else if (used > SG_SEGLOG / 2)
				sg_timeline_kick();
			return CUDA_SUCCESS;
		}
		if (r != DM_EFULL) {
			sg_unlock();
			return CUDA_ERROR_INVALID_VALUE;
		}
		/* Ring full, like a full pushbuffer: block until the oldest op is done. */
		uint64_t oldest = dm_ctx_last_seq(dm, c->dmctx) - dm_ctx_inflight(dm, c->dmctx) + 1;
		uint32_t gen = c->dmgen;
		sg_unlock();
		sg_wait_op(c->dev, c->dmctx, gen, oldest);
	}
}

/* ---- timeline --------------------------------------------------------- */

typedef struct flush_ctx {
	int dev, dmctx;
} flush_ctx;

typedef struct flush_list {
	int n, cap;
	flush_ctx *v;
} flush_list;

static int collect_ctx(void *obj, void *arg)
{
	sg_ctx *c = obj;
	flush_list *fl = arg;
	if (c->dmctx < 0)
		return 0;
	if (fl->n == fl->cap) {
		int cap = fl->cap ? fl->cap * 2 : 8;
		flush_ctx *v = realloc(fl->v, sizeof *v * (size_t)cap);
		if (!v)
			return 1;
		fl->v = v;
		fl->cap = cap;
	}
	fl->v[fl->n].dev = c->dev;
	fl->v[fl->n].dmctx = c->dmctx;
	fl->n++;
	return 0;
}

static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;

/* Hand-rolled formatting: snprintf with 16 conversions costs about a
 * microsecond per record, which would show up in launch-heavy timelines. */
static char *put_str(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return put_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

static char *put_triple(char *p, const char *key, const uint32_t v[3])
{
	p = put_str(p, key);
	*p++ = '[';
	p = put_u64(p, v[0]);
	*p++ = ',';
	p = put_u64(p, v[1]);
	*p++ = ',';
	p = put_u64(p, v[2]);
	*p++ = ']';
	return p;
}

/* One timeline line (with its newline) into line, which has room for
 * strlen(json) + 400 bytes; returns its length. */
static size_t format_record(char *line, uint32_t pid, int dev, int ctx, const sg_segrec *r, const char *json)
{
	char *p = line;
	p = put_str(p, "{\"pid\":");
	p = put_u64(p, pid);
	p = put_str(p, ",\"dev\":");
	p = put_i64(p, dev);
	p = put_str(p, ",\"ctx\":");
	p = put_i64(p, ctx);
	p = put_str(p, ",\"stream\":");
	p = put_u64(p, r->stream);
	p = put_str(p, ",\"seq\":");
	p = put_u64(p, r->seq);
	p = put_str(p, ",\"name\":");
	p = put_str(p, json);
	p = put_triple(p, ",\"grid\":", r->grid);
	p = put_triple(p, ",\"block\":", r->block);
	p = put_str(p, ",\"start_ns\":");
	p = put_i64(p, r->start_ns);
	p = put_str(p, ",\"end_ns\":");
	p = put_i64(p, r->end_ns);
	p = put_str(p, ",\"arrive_ns\":");
	p = put_i64(p, r->arrive_ns);
	p = put_str(p, ",\"blocked_ns\":");
	p = put_i64(p, r->blocked_ns);
	p = put_str(p, ",\"seg\":");
	p = put_u64(p, r->seg);
	p = put_str(p, (r->last & 1) ? ",\"last\":true" : ",\"last\":false");
	if (r->last & 2)
		p = put_str(p, ",\"dropped\":true");
	p = put_str(p, "}\n");
	return (size_t)(p - line);
}

static void write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
	}
}

void sg_timeline_flush(void)
{
	if (sg_p.timeline_fd < 0 || !sg_shared)
		return;
	/* One flusher at a time keeps this process's lines in log order. */
	pthread_mutex_lock(&flush_mu);
	flush_list fl = {0, 0, NULL};
	sg_obj_each(SG_T_CTX, collect_ctx, &fl);
	static sg_segrec *buf;
	static size_t bufcap;
	uint64_t lost = 0;
	for (int i = 0; i < fl.n; i++) {
		sg_shdev *d = &sg_shared->dev[fl.v[i].dev];
		sg_ctxlog *l = &d->log[fl.v[i].dmctx];
		sg_lock();
		size_t n = (size_t)(l->tail - l->head);
		if (n > bufcap) {
			sg_segrec *nb = realloc(buf, n * sizeof *nb);
			if (!nb) {
				sg_unlock();
				continue;
			}
			buf = nb;
			bufcap = n;
		}
		for (size_t k = 0; k < n; k++)
			buf[k] = d->seg[fl.v[i].dmctx][(l->head + k) % SG_SEGLOG];
		l->head = l->tail;
		lost += l->lost;
		l->lost = 0;
		sg_unlock();
		/* Whole lines, at most 4096 bytes per write(): each write to an
		 * O_APPEND file (or pipe, up to PIPE_BUF) lands in one piece, so
		 * processes sharing the file never interleave within a line. */
		char out[4096];
		size_t used = 0;
		for (size_t k = 0; k < n; k++) {
			const sg_segrec *r = &buf[k];
			const sg_name *nm = (const sg_name *)(uintptr_t)r->tag;
			const char *json = nm ? nm->json : "\"?\"";
			size_t cap = strlen(json) + 400;
			char stackline[1024];
			char *line = cap <= sizeof stackline ? stackline : malloc(cap);
			if (!line)
				continue;
			size_t len = format_record(line, sg_p.pid, fl.v[i].dev, fl.v[i].dmctx, r, json);
			if (used + len > sizeof out) {
				write_all(sg_p.timeline_fd, out, used);
				used = 0;
			}
			if (len > sizeof out) { /* one huge line: on its own */
				write_all(sg_p.timeline_fd, line, len);
			} else {
				memcpy(out + used, line, len);
				used += len;
			}
			if (line != stackline)
				free(line);
		}
		if (used)
			write_all(sg_p.timeline_fd, out, used);
	}
	free(fl.v);
	pthread_mutex_unlock(&flush_mu);
	if (lost) {
		static int warned;
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "simgpu: timeline: %llu kernel segments lost (segment log full)\n",
				(unsigned long long)lost);
	}
}

/* ---- the flusher thread ------------------------------------------------ */

#define FLUSH_PERIOD_NS 20000000LL

static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_cv;
static int fl_kicked;
static uint32_t fl_pid; /* the process whose thread runs: a forked child starts its own */

static void *flusher(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&fl_mu);
		if (!fl_kicked) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + FLUSH_PERIOD_NS;
			ts.tv_sec = t / 1000000000LL;
			ts.tv_nsec = t % 1000000000LL;
			pthread_cond_timedwait(&fl_cv, &fl_mu, &ts);
		}
		fl_kicked = 0;
		pthread_mutex_unlock(&fl_mu);
		/* Advance too, so that kernels finish onto the timeline even while
		 * no process calls the driver. */
		int64_t now = sg_now();
		sg_lock();
		for (uint32_t i = 0; i < sg_shared->ndev; i++)
			dm_advance(sg_dm((int)i), now, sg_sink, &sg_shared->dev[i]);
		sg_unlock();
		sg_timeline_flush();
	}
	return NULL;
}

void sg_timeline_start(void)
{
	if (sg_p.timeline_fd < 0)
		return;
	pthread_mutex_lock(&fl_mu);
	if (fl_pid != sg_p.pid) {
		pthread_condattr_t a;
		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&fl_cv, &a);
		pthread_condattr_destroy(&a);
		pthread_attr_t ta;
		pthread_attr_init(&ta);
		pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
		pthread_t th;
		if (pthread_create(&th, &ta, flusher, NULL) == 0)
			fl_pid = sg_p.pid;
		pthread_attr_destroy(&ta);
	}
	pthread_mutex_unlock(&fl_mu);
}

void sg_timeline_kick(void)
{
	if (fl_pid != sg_p.pid) /* after fork() */
		sg_timeline_start();
	pthread_mutex_lock(&fl_mu);
	fl_kicked = 1;
	pthread_cond_signal(&fl_cv);
	pthread_mutex_unlock(&fl_mu);
}

/* simgpu.h extension: everything finished up to now is in the file on return. */
SG_EXPORT int fikit_simgpu_timeline_flush(void)
{
	if (!sg_p.initialized)
		return -1;
	int64_t now = sg_now();
	sg_lock();
	for (uint32_t i = 0; i < sg_shared->ndev; i++)
		dm_advance(sg_dm((int)i), now, sg_sink, &sg_shared->dev[i]);
	sg_unlock();
	sg_timeline_flush();
	return 0;
}
