/*
 * dm_query.c — read-only questions about the model (done?, forecast, ring
 * occupancy) and the consistency check / repair used after a process died
 * while holding the driver's lock.
 */
#include "devmodel.h"
#include "devmodel_internal.h"

#include <string.h>

static const dm_context *open_ctx(const dm_device *d, int ci)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use)
		return NULL;
	return &d->ctx[ci];
}

int dm_op_done(const dm_device *d, int ci, uint64_t seq, int64_t *end_ns)
{
	const dm_context *c = open_ctx(d, ci);
	if (!c || seq == 0 || seq >= c->tail)
		return DM_EINVAL;
	if (seq < c->head) {
		if (end_ns)
			*end_ns = -1; /* retired: the owner took the end time at dm_retire */
		return 1;
	}
	const dm_slot *s = &c->ring[seq & (DM_RING - 1)];
	if (s->state != DM_S_DONE)
		return 0;
	if (end_ns)
		*end_ns = s->end_ns;
	return 1;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

int64_t dm_forecast(const dm_device *d, int ci, uint64_t seq, int64_t now)
{
	const dm_context *c = open_ctx(d, ci);
	if (!c || seq == 0 || seq >= c->tail)
		return DM_NEVER;
	/* The walk starts at model time: events between it and a later `now`
	 * have not been processed, and may well complete the op before now. */
	(void)now;
	int64_t t = d->t;
	if (seq < c->head)
		return t;
	const dm_slot *target = &c->ring[seq & (DM_RING - 1)];
	if (target->state == DM_S_DONE)
		return target->end_ns;
	/* Walk the op's stream from its head: every op before it must run first,
	 * each no earlier than its arrival. Other streams and other contexts can
	 * only delay it, except for what is certain now: a kernel cannot start
	 * before the engine's current segment or switch ends, and a kernel of a
	 * context that is not loaded pays a switch. */
	int64_t engine_free = t;
	if (d->run_ctx >= 0 && d->run_ctx != ci)
		engine_free = max64(engine_free, dm_seg_end(d) + d->cfg.switch_ns);
	else if (d->switching && d->cur != ci)
		engine_free = max64(engine_free, d->switch_until + d->cfg.switch_ns);
	else if (d->switching)
		engine_free = max64(engine_free, d->switch_until);
	uint64_t x = c->streams[target->stream].head;
	for (int guard = 0; x != 0 && guard <= DM_RING; guard++) {
		const dm_slot *s = &c->ring[x & (DM_RING - 1)];
		if (s->state == DM_S_RUNNING) {
			if (s->type == DM_OP_KERNEL)
				t = max64(t, d->run_start + s->remaining);
			else
				t = max64(t, d->copy_end);
		} else if (s->state == DM_S_QUEUED) {
			int64_t start = max64(t, s->arrival);
			if (s->type == DM_OP_KERNEL) {
				start = max64(start, engine_free);
				t = start + s->remaining;
			} else if (s->type == DM_OP_COPY) {
				t = start + s->remaining;
			} else {
				t = start;
			}
		}
		if (x == seq)
			return t;
		x = s->next;
	}
	return t; /* chain broken (never in a valid state): t is still a lower bound */
}

uint32_t dm_ctx_inflight(const dm_device *d, int ci)
{
	const dm_context *c = open_ctx(d, ci);
	return c ? (uint32_t)(c->tail - c->head) : 0;
}

int dm_stream_busy(const dm_device *d, int ci, uint32_t stream)
{
	const dm_context *c = open_ctx(d, ci);
	return c && stream < DM_MAX_STREAMS && c->streams[stream].head != 0;
}

uint64_t dm_ctx_last_seq(const dm_device *d, int ci)
{
	const dm_context *c = open_ctx(d, ci);
	return c && c->tail > 1 ? c->tail - 1 : 0;
}

uint64_t dm_stream_last_pending(const dm_device *d, int ci, uint32_t stream)
{
	const dm_context *c = open_ctx(d, ci);
	if (!c || stream >= DM_MAX_STREAMS || c->streams[stream].head == 0)
		return 0;
	return c->streams[stream].tail;
}

uint32_t dm_ctx_pending_tails(const dm_device *d, int ci, uint64_t *out, uint32_t max)
{
	const dm_context *c = open_ctx(d, ci);
	uint32_t n = 0;
	for (uint32_t i = 0; c && i < c->nactive && n < max; i++)
		out[n++] = c->streams[c->active[i]].tail;
	return n;
}

/* ---- validate --------------------------------------------------------- */

static int valid_slot(const dm_slot *s, uint64_t seq)
{
	return s->seq == seq && s->type >= DM_OP_KERNEL && s->type <= DM_OP_COPY &&
	       s->stream < DM_MAX_STREAMS &&
	       (s->state == DM_S_QUEUED || s->state == DM_S_RUNNING || s->state == DM_S_DONE);
}

int dm_validate(const dm_device *d)
{
	if (d->magic != DM_MAGIC || d->layout != DM_LAYOUT_VERSION)
		return -1;
	if (dm_config_check(&d->cfg) != DM_OK)
		return -2;
	if (d->cur < -1 || d->cur >= DM_MAX_CTX || d->run_ctx < -1 || d->run_ctx >= DM_MAX_CTX ||
	    d->copy_ctx < -1 || d->copy_ctx >= DM_MAX_CTX)
		return -3;
	int running = 0, copying = 0;
	for (int ci = 0; ci < DM_MAX_CTX; ci++) {
		const dm_context *c = &d->ctx[ci];
		int bit = (d->pending_mask >> ci) & 1;
		if (!c->in_use) {
			if (bit || d->run_ctx == ci || d->copy_ctx == ci)
				return -4;
			continue;
		}
		if (c->head > c->tail || c->tail - c->head > DM_RING || c->head == 0 ||
		    c->nactive > DM_MAX_STREAMS)
			return -5;
		uint64_t pending = 0;
		for (uint64_t seq = c->head; seq < c->tail; seq++) {
			const dm_slot *s = &c->ring[seq & (DM_RING - 1)];
			if (!valid_slot(s, seq))
				return -6;
			if (s->state == DM_S_DONE)
				continue;
			pending++;
			if (s->state == DM_S_RUNNING) {
				if (s->type == DM_OP_KERNEL && d->run_ctx == ci && d->run_seq == seq)
					running++;
				else if (s->type == DM_OP_COPY && d->copy_ctx == ci && d->copy_seq == seq)
					copying++;
				else
					return -7;
			}
		}
		if (pending != c->pending || (pending != 0) != bit)
			return -8;
		/* Each active stream's chain: pending ops of that stream in seq order. */
		uint64_t chained = 0;
		for (uint32_t i = 0; i < c->nactive; i++) {
			uint32_t sid = c->active[i];
			const dm_stream *st = &c->streams[sid];
			if (sid >= DM_MAX_STREAMS || st->head == 0 || st->active_pos != (int32_t)i)
				return -9;
			uint64_t prev = 0;
			for (uint64_t x = st->head; x != 0;) {
				if (x < c->head || x >= c->tail || x <= prev)
					return -10;
				const dm_slot *s = &c->ring[x & (DM_RING - 1)];
				if (s->stream != sid || s->state == DM_S_DONE)
					return -11;
				chained++;
				if (s->next == 0 && x != st->tail)
					return -12;
				prev = x;
				x = s->next;
			}
		}
		if (chained != pending)
			return -13;
	}
	if ((d->run_ctx >= 0) != (running == 1) || (d->copy_ctx >= 0) != (copying == 1))
		return -14;
	if (d->run_ctx >= 0 && d->preempt_at < d->run_start)
		return -15;
	return 0;
}

/* ---- repair ----------------------------------------------------------- */

int dm_repair(dm_device *d)
{
	int fixes = 0;
	if (d->cur < -1 || d->cur >= DM_MAX_CTX) {
		d->cur = -1;
		fixes++;
	}
	if (d->run_ctx < -1 || d->run_ctx >= DM_MAX_CTX) {
		d->run_ctx = -1;
		fixes++;
	}
	if (d->copy_ctx < -1 || d->copy_ctx >= DM_MAX_CTX) {
		d->copy_ctx = -1;
		fixes++;
	}
	if (d->rr < 0 || d->rr >= DM_MAX_CTX)
		d->rr = 0;
	/* The engines must point at a RUNNING op of the right type. */
	if (d->run_ctx >= 0) {
		dm_context *c = &d->ctx[d->run_ctx];
		dm_slot *s = slot_of(c, d->run_seq);
		if (!c->in_use || d->run_seq < c->head || d->run_seq >= c->tail || !valid_slot(s, d->run_seq) ||
		    s->type != DM_OP_KERNEL || s->state != DM_S_RUNNING) {
			d->run_ctx = -1;
			fixes++;
		} else if (d->preempt_at < d->run_start) {
			d->preempt_at = DM_NEVER;
			fixes++;
		}
	}
	if (d->copy_ctx >= 0) {
		dm_context *c = &d->ctx[d->copy_ctx];
		dm_slot *s = slot_of(c, d->copy_seq);
		if (!c->in_use || d->copy_seq < c->head || d->copy_seq >= c->tail ||
		    !valid_slot(s, d->copy_seq) || s->type != DM_OP_COPY || s->state != DM_S_RUNNING) {
			d->copy_ctx = -1;
			fixes++;
		}
	}
	d->pending_mask = 0;
	for (int ci = 0; ci < DM_MAX_CTX; ci++) {
		dm_context *c = &d->ctx[ci];
		if (!c->in_use)
			continue;
		if (c->head == 0 || c->head > c->tail || c->tail - c->head > DM_RING) {
			c->head = c->tail ? c->tail : 1;
			c->tail = c->head;
			fixes++;
		}
		/* Rebuild streams, active list and counts from the published slots. */
		memset(c->streams, 0, sizeof c->streams);
		c->nactive = 0;
		c->pending = 0;
		for (uint64_t seq = c->head; seq < c->tail; seq++) {
			dm_slot *s = slot_of(c, seq);
			if (!valid_slot(s, seq)) {
				s->seq = seq;
				s->type = DM_OP_EVENT;
				s->stream = 0;
				s->state = DM_S_DONE;
				s->end_ns = d->t;
				s->flags |= DM_F_DROPPED;
				fixes++;
			}
			if (s->state == DM_S_RUNNING &&
			    !((s->type == DM_OP_KERNEL && d->run_ctx == ci && d->run_seq == seq) ||
			      (s->type == DM_OP_COPY && d->copy_ctx == ci && d->copy_seq == seq))) {
				s->state = DM_S_QUEUED; /* a half-started op starts again */
				fixes++;
			}
			if (s->state == DM_S_DONE)
				continue;
			dm_stream *st = &c->streams[s->stream];
			s->next = 0;
			if (st->head == 0) {
				st->head = seq;
				st->active_pos = (int32_t)c->nactive;
				c->active[c->nactive++] = (uint16_t)s->stream;
			} else {
				slot_of(c, st->tail)->next = seq;
			}
			st->tail = seq;
			st->flags = s->flags & DM_OPF_NONBLOCKING;
			c->pending++;
		}
		if (c->pending)
			d->pending_mask |= 1ULL << ci;
	}
	if (d->run_ctx < 0)
		d->preempt_at = DM_NEVER;
	d->dirty = 1;
	return fixes;
}
