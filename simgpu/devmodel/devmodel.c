/*
 * devmodel.c — the device model's state changes from outside.
 * See devmodel.h for the rules; docs/simgpu.md for why they are what they are.
 *
 * This file: configuration, contexts, enqueue, drop/close and retire. The
 * engines (readiness, the two scheduling models, event processing) are in
 * dm_engine.c; queries, validation and repair in dm_query.c.
 */
#include "devmodel.h"
#include "devmodel_internal.h"

#include <string.h>

/*
 * The presets. One row per device; docs/simgpu.md "Presets" gives each
 * number's source (a measurement with its date and device, a fit, or an
 * assumption) and what a GPU run would confirm or refute.
 *
 * h200: NVIDIA H200, from tests/gpu/: the switch and the launch latency
 *       measured, the time slice fitted to default sharing's slowdown.
 * legacy: the assumptions simgpu made before any GPU was measured.
 */
static const struct {
	const char *name;
	dm_config cfg;
} presets[] = {
	{DM_PRESET_DEFAULT, {.model = DM_TIMESLICE, .timeslice_ns = 2000000, .switch_ns = 140000,
			     .launch_latency_ns = 5000, .default_kernel_ns = 10000,
			     .copy_bytes_per_s = 25000000000LL}},
	{"legacy", {.model = DM_TIMESLICE, .timeslice_ns = 2000000, .switch_ns = 25000,
		    .launch_latency_ns = 4000, .default_kernel_ns = 10000,
		    .copy_bytes_per_s = 25000000000LL}},
};

int dm_preset(const char *name, dm_config *cfg)
{
	for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++) {
		if (!strcmp(presets[i].name, name)) {
			*cfg = presets[i].cfg;
			return DM_OK;
		}
	}
	return DM_EINVAL;
}

const char *dm_preset_name(int i)
{
	if (i < 0 || (size_t)i >= sizeof presets / sizeof presets[0])
		return NULL;
	return presets[i].name;
}

void dm_config_default(dm_config *cfg)
{
	dm_preset(DM_PRESET_DEFAULT, cfg);
}

int dm_config_check(const dm_config *c)
{
	if (c->model != DM_TIMESLICE && c->model != DM_FIFO)
		return DM_EINVAL;
	/* A slice shorter than 1 us would make the simulation crawl through slice boundaries. */
	if (c->timeslice_ns < 1000 || c->timeslice_ns > 10000000000LL)
		return DM_EINVAL;
	if (c->switch_ns < 0 || c->switch_ns > 1000000000LL)
		return DM_EINVAL;
	if (c->launch_latency_ns < 0 || c->launch_latency_ns > 1000000000LL)
		return DM_EINVAL;
	if (c->default_kernel_ns < 0 || c->default_kernel_ns > DM_MAX_DURATION_NS)
		return DM_EINVAL;
	if (c->copy_bytes_per_s < 1)
		return DM_EINVAL;
	return DM_OK;
}

int dm_init(dm_device *d, const dm_config *cfg, int64_t now)
{
	dm_config def;
	if (!cfg) {
		dm_config_default(&def);
		cfg = &def;
	}
	if (dm_config_check(cfg) != DM_OK)
		return DM_EINVAL;
	/* Only the header and per-context flags are written: op slots and stream
	 * tables are meaningful only for open contexts and are reset on open, so a
	 * fresh shared-memory segment does not get all its pages touched. */
	d->magic = DM_MAGIC;
	d->layout = DM_LAYOUT_VERSION;
	d->dirty = 0;
	d->cfg = *cfg;
	d->t = now;
	d->pending_mask = 0;
	d->cur = -1;
	d->rr = 0;
	d->run_ctx = -1;
	d->switching = 0;
	d->run_seq = 0;
	d->run_start = 0;
	d->preempt_at = DM_NEVER;
	d->slice_start = now;
	d->switch_until = 0;
	d->slice_fresh = 1;
	d->just_switched = 0;
	d->copy_ctx = -1;
	d->copy_seq = 0;
	d->copy_end = 0;
	memset(&d->stats, 0, sizeof d->stats);
	for (int i = 0; i < DM_MAX_CTX; i++) {
		d->ctx[i].in_use = 0;
		d->ctx[i].pending = 0;
		d->ctx[i].nactive = 0;
		d->ctx[i].head = d->ctx[i].tail = 1;
	}
	return DM_OK;
}

int dm_ctx_open(dm_device *d, uint32_t owner_pid)
{
	for (int i = 0; i < DM_MAX_CTX; i++) {
		dm_context *c = &d->ctx[i];
		if (c->in_use)
			continue;
		c->gen++;
		if (c->gen == 0) /* 0 means "not open" to dm_ctx_gen */
			c->gen = 1;
		c->owner_pid = owner_pid;
		c->nactive = 0;
		c->head = c->tail = 1;
		c->pending = 0;
		c->blocked_ns = c->busy_ns = 0;
		c->kernels = 0;
		memset(c->streams, 0, sizeof c->streams);
		c->in_use = 1;
		return i;
	}
	return DM_ENOCTX;
}

int dm_ctx_totals(const dm_device *d, int ci, dm_totals *out)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use || !out)
		return DM_EINVAL;
	const dm_context *c = &d->ctx[ci];
	out->kernels = c->kernels;
	out->busy_ns = c->busy_ns;
	out->blocked_ns = c->blocked_ns;
	return DM_OK;
}

uint32_t dm_ctx_gen(const dm_device *d, int ci)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use)
		return 0;
	return d->ctx[ci].gen;
}

uint32_t dm_ctx_owner(const dm_device *d, int ci)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use)
		return 0;
	return d->ctx[ci].owner_pid;
}

int64_t dm_enqueue(dm_device *d, int ci, const dm_op *op, int64_t now)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use || !op)
		return DM_EINVAL;
	dm_context *c = &d->ctx[ci];
	if (op->stream >= DM_MAX_STREAMS || op->type < DM_OP_KERNEL || op->type > DM_OP_COPY)
		return DM_EINVAL;
	if (op->type == DM_OP_WAIT) {
		if (op->wait_ctx < 0 || op->wait_ctx >= DM_MAX_CTX)
			return DM_EINVAL;
		const dm_context *tc = &d->ctx[op->wait_ctx];
		/* A target in a context that has since closed counts as done; a
		 * target that was never enqueued is a caller bug. */
		if (tc->in_use && tc->gen == op->wait_gen && (op->wait_seq == 0 || op->wait_seq >= tc->tail))
			return DM_EINVAL;
	}
	if (c->tail - c->head >= DM_RING)
		return DM_EFULL;

	int64_t base = now > d->t ? now : d->t;
	uint64_t seq = c->tail;
	dm_slot *s = slot_of(c, seq);
	s->seq = seq;
	s->next = 0;
	s->tag = op->tag;
	s->wait_seq = op->wait_seq;
	s->arrival = base + d->cfg.launch_latency_ns;
	s->remaining = 0;
	if (op->type == DM_OP_KERNEL) {
		int64_t dur = op->duration_ns < 0 ? d->cfg.default_kernel_ns : op->duration_ns;
		s->remaining = dur > DM_MAX_DURATION_NS ? DM_MAX_DURATION_NS : dur;
	} else if (op->type == DM_OP_COPY) {
		unsigned __int128 ns = (unsigned __int128)op->bytes * 1000000000u /
				       (uint64_t)d->cfg.copy_bytes_per_s;
		s->remaining = ns > (unsigned __int128)DM_MAX_DURATION_NS ? DM_MAX_DURATION_NS : (int64_t)ns;
	}
	s->start_ns = -1;
	s->end_ns = -1;
	memcpy(s->grid, op->grid, sizeof s->grid);
	memcpy(s->block, op->block, sizeof s->block);
	s->stream = op->stream;
	s->wait_gen = op->wait_gen;
	s->nseg = 0;
	s->blocked = 0;
	s->wait_ctx = (int16_t)(op->type == DM_OP_WAIT ? op->wait_ctx : -1);
	s->type = (uint8_t)op->type;
	s->flags = op->flags & (DM_OPF_NONBLOCKING | DM_OPF_UNCOUNTED);
	s->state = DM_S_QUEUED;
	/* Publish, then link: dm_repair rebuilds the links from published slots. */
	c->tail = seq + 1;
	dm_stream *st = &c->streams[op->stream];
	if (st->head == 0) {
		st->head = seq;
		st->active_pos = (int32_t)c->nactive;
		c->active[c->nactive++] = (uint16_t)op->stream;
	} else {
		slot_of(c, st->tail)->next = seq;
	}
	st->tail = seq;
	st->flags = s->flags & DM_OPF_NONBLOCKING;
	c->pending++;
	d->pending_mask |= 1ULL << ci;
	if (s->arrival <= d->t)
		d->dirty = 1;
	return (int64_t)seq;
}

int dm_drop_context(dm_device *d, int ci, int64_t now, dm_sink sink, void *arg)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use)
		return DM_EINVAL;
	dm_advance(d, now, sink, arg);
	int64_t t = d->t;
	dm_context *c = &d->ctx[ci];
	if (d->run_ctx == ci) {
		dm_slot *s = slot_of(c, d->run_seq);
		d->stats.busy_ns += t - d->run_start;
		d->stats.segments++;
		c->busy_ns += t - d->run_start;
		dm_report(sink, arg, ci, s, d->run_start, t, 1, 1);
		s->nseg++;
		d->run_ctx = -1;
		d->preempt_at = DM_NEVER;
	}
	if (d->copy_ctx == ci)
		d->copy_ctx = -1;
	for (uint64_t seq = c->head; seq < c->tail; seq++) {
		dm_slot *s = slot_of(c, seq);
		if (s->state != DM_S_DONE) {
			s->state = DM_S_DONE;
			s->end_ns = t;
			s->remaining = 0;
			s->flags |= DM_F_DROPPED;
		}
	}
	for (uint32_t i = 0; i < c->nactive; i++)
		c->streams[c->active[i]].head = 0;
	c->nactive = 0;
	c->pending = 0;
	d->pending_mask &= ~(1ULL << ci);
	d->dirty = 1; /* the engines may be free and waits on this context satisfied */
	return DM_OK;
}

int dm_ctx_close(dm_device *d, int ci, int64_t now, dm_sink sink, void *arg)
{
	int rc = dm_drop_context(d, ci, now, sink, arg);
	if (rc != DM_OK)
		return rc;
	dm_context *c = &d->ctx[ci];
	c->head = c->tail;
	c->in_use = 0;
	c->gen++;
	if (d->cur == ci)
		d->cur = -1;
	return DM_OK;
}

int dm_retire(dm_device *d, int ci, dm_retire_cb cb, void *arg)
{
	if (ci < 0 || ci >= DM_MAX_CTX || !d->ctx[ci].in_use)
		return DM_EINVAL;
	dm_context *c = &d->ctx[ci];
	int n = 0;
	while (c->head < c->tail) {
		dm_slot *s = slot_of(c, c->head);
		if (s->state != DM_S_DONE)
			break;
		if (cb) {
			dm_retired r;
			r.seq = s->seq;
			r.tag = s->tag;
			r.start_ns = s->start_ns;
			r.end_ns = s->end_ns;
			r.stream = s->stream;
			r.type = s->type;
			r.dropped = (s->flags & DM_F_DROPPED) != 0;
			cb(arg, &r);
		}
		s->state = DM_S_FREE;
		c->head++;
		n++;
	}
	return n;
}
