/*
 * dm_repair_test.c — the device model's consistency check and repair, used
 * by the driver after a process died holding the lock (EOWNERDEAD). The
 * states a writer can leave behind are made by hand here: an op published
 * but not linked into its stream, an op marked done whose stream head did not
 * move, a half-written slot, a torn engine, bad counters. After dm_repair
 * every state validates and the remaining work still runs to completion.
 * Links the model directly (no driver).
 */
#include "testutil.h"
#include "devmodel/devmodel.h"
#include "devmodel/devmodel_internal.h"

#include <stdlib.h>
#include <string.h>

static dm_device *fresh(int *a, int *b)
{
	dm_device *d = calloc(1, sizeof *d);
	CHECK(dm_init(d, NULL, 0) == DM_OK);
	*a = dm_ctx_open(d, 1);
	*b = dm_ctx_open(d, 2);
	dm_op k;
	memset(&k, 0, sizeof k);
	k.type = DM_OP_KERNEL;
	for (int i = 0; i < 6; i++) {
		k.stream = (uint32_t)(i % 3);
		k.duration_ns = 100000;
		CHECK(dm_enqueue(d, *a, &k, 0) > 0);
		CHECK(dm_enqueue(d, *b, &k, 0) > 0);
	}
	dm_advance(d, 150000, NULL, NULL); /* something running, something done */
	CHECK(dm_validate(d) == 0, "fresh state invalid: %d", dm_validate(d));
	return d;
}

/* Repair, validate, run dry: every op of both contexts completes. */
static void repaired_runs(dm_device *d, int a, int b, const char *what)
{
	int v = dm_validate(d);
	CHECK(v != 0, "%s: corruption not detected", what);
	int fixes = dm_repair(d);
	CHECK(dm_validate(d) == 0, "%s: still invalid after %d fixes: %d", what, fixes, dm_validate(d));
	dm_advance(d, 1LL << 40, NULL, NULL);
	CHECK(dm_validate(d) == 0, "%s: invalid after running: %d", what, dm_validate(d));
	for (int c = 0; c < 2; c++) {
		int ci = c ? b : a;
		uint64_t last = dm_ctx_last_seq(d, ci);
		for (uint64_t s = 1; s <= last; s++)
			CHECK(dm_op_done(d, ci, s, NULL) == 1, "%s: ctx %d op %llu never completed", what, ci,
			      (unsigned long long)s);
	}
	free(d);
}

int main(void)
{
	int a, b;
	dm_device *d;

	/* a writer died after publishing an op (tail moved) but before linking it */
	d = fresh(&a, &b);
	dm_context *c = &d->ctx[a];
	dm_slot *s = slot_of(c, c->tail);
	memset(s, 0, sizeof *s);
	s->seq = c->tail;
	s->type = DM_OP_KERNEL;
	s->stream = 1;
	s->state = DM_S_QUEUED;
	s->remaining = 5000;
	s->arrival = 200000;
	s->start_ns = s->end_ns = -1;
	c->tail++;
	repaired_runs(d, a, b, "published, not linked");

	/* a writer died after marking an op done but before moving its stream head */
	d = fresh(&a, &b);
	c = &d->ctx[b];
	s = slot_of(c, c->streams[2].head);
	s->state = DM_S_DONE;
	s->end_ns = 150000;
	repaired_runs(d, a, b, "done, head not moved");

	/* a slot inside [head, tail) overwritten with garbage */
	d = fresh(&a, &b);
	c = &d->ctx[a];
	s = slot_of(c, c->tail - 1);
	memset(s, 0xA5, sizeof *s);
	repaired_runs(d, a, b, "garbage slot");

	/* the engine points at an op that is not running; counters off */
	d = fresh(&a, &b);
	d->run_ctx = b;
	d->run_seq = dm_ctx_last_seq(d, b);
	d->ctx[a].pending += 3;
	d->pending_mask = 0;
	repaired_runs(d, a, b, "torn engine and counters");

	/* stream chain and active list scrambled */
	d = fresh(&a, &b);
	c = &d->ctx[a];
	slot_of(c, c->streams[1].head)->next = 12345;
	c->nactive = 1;
	c->active[0] = 999;
	repaired_runs(d, a, b, "scrambled chains");

	/* ring indices out of range */
	d = fresh(&a, &b);
	d->ctx[b].head = d->ctx[b].tail + 10;
	d->cur = 77;
	d->copy_ctx = 99;
	repaired_runs(d, a, b, "indices out of range");

	return t_done("dm_repair_test");
}
