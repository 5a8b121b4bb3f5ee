/*
 * dm_engine.c — the device model's engines: when an op is ready, what the
 * kernel engine runs next under each model, the copy engine, and event
 * processing. See devmodel.h for the rules.
 *
 * The model is a discrete-event simulation driven from outside: dm_advance(now)
 * repeatedly finds the earliest internal event (segment end, copy end, switch
 * end, an op arriving at the head of its stream) and settles the state at that
 * exact time, so results never depend on when, or how often, callers advance.
 */
#include "devmodel.h"
#include "devmodel_internal.h"

#include <string.h>

/* ---- stream bookkeeping ---------------------------------------------- */

static void remove_active(dm_context *c, uint32_t sid)
{
	dm_stream *st = &c->streams[sid];
	uint32_t pos = (uint32_t)st->active_pos;
	uint16_t last = c->active[--c->nactive];
	c->active[pos] = last;
	c->streams[last].active_pos = (int32_t)pos;
	st->active_pos = -1;
}

/* Complete op s (the head of its stream) at time t. */
static void complete(dm_device *d, int ci, dm_slot *s, int64_t t)
{
	dm_context *c = &d->ctx[ci];
	dm_stream *st = &c->streams[s->stream];
	s->state = DM_S_DONE;
	s->end_ns = t;
	s->remaining = 0;
	st->head = s->next;
	if (st->head == 0)
		remove_active(c, s->stream);
	if (--c->pending == 0)
		d->pending_mask &= ~(1ULL << ci);
}

/* ---- readiness -------------------------------------------------------- */

int dm_target_done(const dm_device *d, int tci, uint32_t gen, uint64_t seq)
{
	const dm_context *tc = &d->ctx[tci];
	if (!tc->in_use || tc->gen != gen)
		return 1;
	if (seq < tc->head)
		return 1;
	if (seq >= tc->tail)
		return 1;
	const dm_slot *t = &tc->ring[seq & (DM_RING - 1)];
	return t->seq != seq || t->state == DM_S_DONE;
}

/* Is op s, the head of its stream in context c, ready to start at time t? */
static int head_ready(const dm_device *d, const dm_context *c, const dm_slot *s, int64_t t)
{
	if (s->arrival > t)
		return 0;
	if (s->stream == DM_LEGACY_STREAM) {
		/* The legacy stream waits for all earlier work of blocking streams. */
		for (uint32_t i = 0; i < c->nactive; i++) {
			const dm_stream *b = &c->streams[c->active[i]];
			if (c->active[i] != DM_LEGACY_STREAM && !(b->flags & DM_OPF_NONBLOCKING) &&
			    b->head < s->seq)
				return 0;
		}
	} else if (!(s->flags & DM_OPF_NONBLOCKING)) {
		uint64_t lh = c->streams[DM_LEGACY_STREAM].head;
		if (lh != 0 && lh < s->seq)
			return 0;
	}
	if (s->type == DM_OP_WAIT)
		return dm_target_done(d, s->wait_ctx, s->wait_gen, s->wait_seq);
	return 1;
}

/* Earliest-arrival ready queued op of type `type` in context ci at t; 0 if none. */
static uint64_t ready_head(const dm_device *d, int ci, int type, int64_t t, int64_t *arrival)
{
	const dm_context *c = &d->ctx[ci];
	uint64_t best = 0;
	int64_t best_arr = DM_NEVER;
	for (uint32_t i = 0; i < c->nactive; i++) {
		const dm_slot *s = &c->ring[c->streams[c->active[i]].head & (DM_RING - 1)];
		if (s->type != type || s->state != DM_S_QUEUED || !head_ready(d, c, s, t))
			continue;
		if (s->arrival < best_arr || (s->arrival == best_arr && s->seq < best)) {
			best = s->seq;
			best_arr = s->arrival;
		}
	}
	if (arrival)
		*arrival = best_arr;
	return best;
}

/* Does a context other than `except` have a ready kernel at t? */
static int other_ready(const dm_device *d, int except, int64_t t)
{
	uint64_t m = d->pending_mask;
	if (except >= 0)
		m &= ~(1ULL << except);
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		if (ready_head(d, ci, DM_OP_KERNEL, t, NULL))
			return 1;
	}
	return 0;
}

/* ---- the kernel engine ------------------------------------------------ */

int64_t dm_seg_end(const dm_device *d)
{
	const dm_slot *r = slot_of((dm_context *)&d->ctx[d->run_ctx], d->run_seq);
	int64_t end = d->run_start + r->remaining;
	return d->preempt_at < end ? d->preempt_at : end;
}

void dm_report(dm_sink sink, void *arg, int ci, dm_slot *s, int64_t start, int64_t end, int last,
	       int dropped)
{
	int64_t blocked = s->blocked;
	s->blocked = 0;
	if (!sink)
		return;
	dm_segment g;
	g.ctx = ci;
	g.stream = s->stream;
	g.seq = s->seq;
	g.tag = s->tag;
	g.start_ns = start;
	g.end_ns = end;
	g.seg = s->nseg;
	g.last = (uint8_t)last;
	g.dropped = (uint8_t)dropped;
	memcpy(g.grid, s->grid, sizeof g.grid);
	memcpy(g.block, s->block, sizeof g.block);
	g.arrive_ns = s->arrival;
	g.blocked_ns = blocked;
	sink(arg, &g);
}

/* The running segment ends at `end`: the kernel completes or is preempted. */
static void finish_segment(dm_device *d, int64_t end, dm_sink sink, void *arg)
{
	int ci = d->run_ctx;
	dm_slot *s = slot_of(&d->ctx[ci], d->run_seq);
	int64_t ran = end - d->run_start;
	s->remaining -= ran;
	d->stats.busy_ns += ran;
	d->stats.segments++;
	d->ctx[ci].busy_ns += ran;
	int last = s->remaining <= 0;
	dm_report(sink, arg, ci, s, d->run_start, end, last, 0);
	s->nseg++;
	d->run_ctx = -1;
	if (last) {
		d->stats.kernels++;
		d->ctx[ci].kernels++;
		complete(d, ci, s, end);
	} else {
		d->stats.preemptions++;
		s->state = DM_S_QUEUED; /* still its stream's head, resumes later */
	}
}

static void start_kernel(dm_device *d, int ci, uint64_t seq, int64_t t)
{
	dm_slot *s = slot_of(&d->ctx[ci], seq);
	s->state = DM_S_RUNNING;
	if (s->start_ns < 0)
		s->start_ns = t;
	d->run_ctx = ci;
	d->run_seq = seq;
	d->run_start = t;
}

/* Next context after the loaded one, round-robin, with a ready kernel; -1 if none. */
static int next_rr(dm_device *d, int64_t t)
{
	int from = d->cur >= 0 ? d->cur : d->rr - 1;
	for (int i = 1; i <= DM_MAX_CTX; i++) {
		int ci = (from + i + DM_MAX_CTX) % DM_MAX_CTX;
		if (ci == d->cur || !(d->pending_mask & (1ULL << ci)))
			continue;
		if (ready_head(d, ci, DM_OP_KERNEL, t, NULL))
			return ci;
	}
	return -1;
}

/* Load context ci. Returns 1 if the engine is free to run it now (nothing was
 * loaded), 0 if a context switch now occupies it until switch_until. */
static int switch_to(dm_device *d, int ci, int64_t t)
{
	d->preempt_at = DM_NEVER;
	d->slice_fresh = 1;
	d->rr = (ci + 1) % DM_MAX_CTX;
	if (d->cur < 0) {
		d->cur = ci;
		return 1;
	}
	d->cur = ci;
	d->switching = 1;
	d->switch_until = t + d->cfg.switch_ns;
	d->stats.switches++;
	d->stats.switch_ns += d->cfg.switch_ns;
	return 0;
}

/* First slice boundary at or after t (slices renew while nobody else waits). */
static int64_t slice_boundary(const dm_device *d, int64_t t)
{
	int64_t ts = d->cfg.timeslice_ns;
	int64_t k = (t - d->slice_start + ts - 1) / ts;
	if (k < 1)
		k = 1;
	return d->slice_start + k * ts;
}

static void decide_timeslice(dm_device *d, int64_t t)
{
	for (int round = 0; round < 2; round++) {
		int cur = d->cur;
		uint64_t seq = 0;
		if (cur >= 0 && (d->pending_mask & (1ULL << cur)))
			seq = ready_head(d, cur, DM_OP_KERNEL, t, NULL);
		int comp = other_ready(d, cur, t);
		if (seq) {
			if (d->slice_fresh) {
				d->slice_start = t;
				d->slice_fresh = 0;
				d->preempt_at = DM_NEVER;
			}
			if (comp) {
				if (d->preempt_at == DM_NEVER)
					d->preempt_at = slice_boundary(d, t);
				if (t >= d->preempt_at) { /* slice over: hand the device on */
					int next = next_rr(d, t);
					if (!switch_to(d, next, t))
						return;
					continue;
				}
			} else {
				d->preempt_at = DM_NEVER;
			}
			start_kernel(d, cur, seq, t);
			return;
		}
		if (comp) {
			int next = next_rr(d, t);
			if (!switch_to(d, next, t))
				return;
			continue; /* nothing was loaded: run `next` right away */
		}
		/* Idle: the context stays loaded; its next kernel starts a new slice. */
		d->slice_fresh = 1;
		d->preempt_at = DM_NEVER;
		return;
	}
}

static void decide_fifo(dm_device *d, int64_t t)
{
	if (d->just_switched && d->cur >= 0) {
		/* Run what the switch was made for (the loaded context's earliest). */
		uint64_t seq = ready_head(d, d->cur, DM_OP_KERNEL, t, NULL);
		if (seq) {
			start_kernel(d, d->cur, seq, t);
			return;
		}
	}
	int best_ci = -1;
	uint64_t best = 0;
	int64_t best_arr = DM_NEVER;
	uint64_t m = d->pending_mask;
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		int64_t arr;
		uint64_t seq = ready_head(d, ci, DM_OP_KERNEL, t, &arr);
		if (seq && arr < best_arr) { /* ties: lowest context index, by scan order */
			best_arr = arr;
			best = seq;
			best_ci = ci;
		}
	}
	if (best_ci < 0)
		return;
	if (d->cur == best_ci || switch_to(d, best_ci, t))
		start_kernel(d, best_ci, best, t);
}

/* ---- the copy engine -------------------------------------------------- */

static int start_copy(dm_device *d, int64_t t)
{
	int best_ci = -1;
	uint64_t best = 0;
	int64_t best_arr = DM_NEVER;
	uint64_t m = d->pending_mask;
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		int64_t arr;
		uint64_t seq = ready_head(d, ci, DM_OP_COPY, t, &arr);
		if (seq && arr < best_arr) {
			best_arr = arr;
			best = seq;
			best_ci = ci;
		}
	}
	if (best_ci < 0)
		return 0;
	dm_slot *s = slot_of(&d->ctx[best_ci], best);
	s->state = DM_S_RUNNING;
	s->start_ns = t;
	d->copy_ctx = best_ci;
	d->copy_seq = best;
	d->copy_end = t + s->remaining;
	return 1;
}

static void finish_copy(dm_device *d)
{
	dm_slot *s = slot_of(&d->ctx[d->copy_ctx], d->copy_seq);
	s->nseg = 1;
	int ci = d->copy_ctx;
	d->copy_ctx = -1;
	complete(d, ci, s, d->copy_end);
}

/* ---- settling one instant --------------------------------------------- */

/* Complete every EVENT/WAIT op that is ready at t; 1 if any. */
static int complete_instant(dm_device *d, int64_t t)
{
	int any = 0;
	uint64_t m = d->pending_mask;
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		dm_context *c = &d->ctx[ci];
		for (uint32_t i = 0; i < c->nactive;) {
			dm_slot *s = slot_of(c, c->streams[c->active[i]].head);
			if ((s->type == DM_OP_EVENT || s->type == DM_OP_WAIT) && head_ready(d, c, s, t)) {
				complete(d, ci, s, t);
				any = 1;
				continue; /* same index: the stream's next op, or another stream */
			}
			i++;
		}
	}
	return any;
}

static void settle(dm_device *d, int64_t t, dm_sink sink, void *arg)
{
	if (d->run_ctx >= 0) {
		int64_t end = dm_seg_end(d);
		if (end <= t)
			finish_segment(d, end, sink, arg);
	}
	if (d->copy_ctx >= 0 && d->copy_end <= t)
		finish_copy(d);
	if (d->switching && d->switch_until <= t) {
		d->switching = 0;
		d->just_switched = 1;
	}
	for (;;) {
		int progress = complete_instant(d, t);
		if (d->copy_ctx < 0)
			progress |= start_copy(d, t);
		if (d->copy_ctx >= 0 && d->copy_end <= t) {
			finish_copy(d);
			progress = 1;
		}
		if (!progress)
			break;
	}
	if (d->run_ctx < 0 && !d->switching) {
		if (d->cfg.model == DM_FIFO)
			decide_fifo(d, t);
		else
			decide_timeslice(d, t);
		d->just_switched = 0;
	}
	if (d->cfg.model == DM_TIMESLICE && d->run_ctx >= 0 && d->preempt_at == DM_NEVER &&
	    other_ready(d, d->run_ctx, t))
		d->preempt_at = slice_boundary(d, t);
}

static int64_t next_event(const dm_device *d)
{
	int64_t te = DM_NEVER;
	if (d->run_ctx >= 0)
		te = dm_seg_end(d);
	if (d->copy_ctx >= 0 && d->copy_end < te)
		te = d->copy_end;
	if (d->switching && d->switch_until < te)
		te = d->switch_until;
	uint64_t m = d->pending_mask;
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		const dm_context *c = &d->ctx[ci];
		for (uint32_t i = 0; i < c->nactive; i++) {
			const dm_slot *s = &c->ring[c->streams[c->active[i]].head & (DM_RING - 1)];
			if (s->state == DM_S_QUEUED && s->arrival > d->t && s->arrival < te)
				te = s->arrival;
		}
	}
	return te;
}

int64_t dm_next_event(const dm_device *d)
{
	return d->dirty ? d->t : next_event(d);
}

/* The state is constant between events: over [t0, t1), every ready queued
 * kernel of a context other than the one running is blocked by it, and while
 * the engine switches contexts every ready kernel is blocked by the switch.
 * (Kernels of the running context wait for their own context: not counted.) */
static void account_blocked(dm_device *d, int64_t t0, int64_t t1)
{
	if (t1 <= t0)
		return;
	uint64_t m = d->pending_mask;
	if (!d->switching) {
		if (d->run_ctx < 0)
			return; /* the engine is idle only when nothing is ready */
		m &= ~(1ULL << d->run_ctx);
	}
	int64_t dt = t1 - t0;
	while (m) {
		int ci = __builtin_ctzll(m);
		m &= m - 1;
		dm_context *c = &d->ctx[ci];
		for (uint32_t i = 0; i < c->nactive; i++) {
			dm_slot *s = slot_of(c, c->streams[c->active[i]].head);
			if (s->type == DM_OP_KERNEL && s->state == DM_S_QUEUED && head_ready(d, c, s, t0)) {
				s->blocked += dt;
				if (!(s->flags & DM_OPF_UNCOUNTED))
					c->blocked_ns += dt;
			}
		}
	}
}

void dm_advance(dm_device *d, int64_t now, dm_sink sink, void *arg)
{
	if (now < d->t)
		now = d->t;
	if (d->dirty) {
		d->dirty = 0;
		settle(d, d->t, sink, arg);
	}
	/* Every settle makes progress (an op completes or starts, a switch ends),
	 * so this terminates; the guard only keeps a shared driver from hanging
	 * forever should that ever be violated. */
	for (long guard = 0; guard < 100000000L; guard++) {
		int64_t te = next_event(d);
		if (te > now)
			break;
		account_blocked(d, d->t, te);
		d->t = te;
		settle(d, te, sink, arg);
	}
	account_blocked(d, d->t, now);
	d->t = now;
}

