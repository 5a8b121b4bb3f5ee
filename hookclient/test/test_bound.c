/* test_bound.c — the µs bound's and the board resume's predicates
 * (bound.h), and the kernel-time table (kerneltimes.h). */
#include "bound.h"
#include "check.h"
#include "kerneltimes.h"

#include <stdlib.h>

#define US 1000ull

int main(int argc, char **argv)
{
	check_init(argc, argv);

	/* The cursor: from the launch (plus its latency and a switch to the
	 * task's context, if due) or after the task's work in flight. */
	CHECK(fk_cursor_after(0, 1000 * US, 100 * US, 0) == 1000 * US + FK_LAUNCH_LATENCY_NS + 100 * US, "idle");
	CHECK(fk_cursor_after(0, 1000 * US, 100 * US, 140 * US) == 1000 * US + FK_LAUNCH_LATENCY_NS + 240 * US,
	      "after a switch");
	CHECK(fk_cursor_after(1500 * US, 1000 * US, 100 * US, 140 * US) == 1600 * US, "after its own work");

	/* The bound: 200us; 150us in flight on the GPU, all the task's. */
	uint64_t now = 1000 * US, cur = now + 150 * US;
	fk_bound_view bv = {.gpu = cur, .own = cur};
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now, "50us fits");
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == cur - 100 * US, "100us waits until 100us are left");
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == cur, "a kernel longer than the bound waits for its own work");
	bv.gpu = bv.own = now;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "… and goes alone");
	/* Another task's work: bounded together; a long kernel goes after the
	 * task's own, behind the others' bounded work. */
	bv.gpu = now + 150 * US, bv.own = 0;
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now + 50 * US, "another's 150us count against the bound");
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "a long kernel behind another's 150us");
	bv.gpu = now + 250 * US;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now + 50 * US, "… not behind more than the bound");
	bv.own = now + 100 * US;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now + 100 * US, "… nor before its own work");
	bv.gpu = 0, bv.own = now + 10 * US;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now + 10 * US, "a GPU cursor of 0");
	/* A better priority predicted back: nothing that would still run. */
	bv = (fk_bound_view){.gpu = cur, .own = cur, .next = now + 180 * US, .late = now + 180 * US};
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now + 180 * US + 1, "200us of work would still run 180us on");
	bv.next = bv.late = now + 250 * US;
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now, "ends before the return");
	bv.next = now + 180 * US, bv.late = now + 300 * US;
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now + 300 * US + 1, "not before its window passed");
	bv = (fk_bound_view){.gpu = now, .own = now, .next = now + 250 * US, .late = now + 250 * US};
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now + 250 * US + 1,
	      "a long kernel does not go within its time of a return");
	/* Due: from next to late nothing goes; after, the bound alone. */
	bv.next = now - 10 * US, bv.late = now + 90 * US;
	CHECK(fk_bound_until(&bv, now, 1, 200 * US) == now + 90 * US + 1, "due: nothing goes until its window passed");
	bv.late = now - 1;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "a passed window limits nothing");
	bv.next = 0, bv.late = 0;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "unknown");
	bv.next = FK_NEXT_NONE;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "none expected");

	/* With the daemon's slack hint (fill_until, budget on the board).
	 * Before a predicted run: within the budget, and nothing that would
	 * still run at fill_until; no room: it waits for the predicted start
	 * (then the due window), not past the window's end at once. */
	now = 1000 * US;
	bv = (fk_bound_view){.gpu = now + 100 * US, .own = now + 100 * US, .next = now + 3000 * US,
			     .late = now + 3500 * US, .slack = 1, .until = now + 2950 * US, .budget = 200 * US};
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now, "far: within the budget it goes");
	CHECK(fk_bound_until(&bv, now, 150 * US, 200 * US) == now + 50 * US, "far: the budget, not the slack");
	bv = (fk_bound_view){.gpu = now, .own = now, .next = now + 250 * US, .late = now + 900 * US, .slack = 1,
			     .until = now + 200 * US, .budget = 400 * US};
	CHECK(fk_bound_until(&bv, now, 300 * US, 400 * US) == now + 250 * US, "near: no room before it, waits until next");
	bv.slack = 0;
	CHECK(fk_bound_until(&bv, now, 300 * US, 400 * US) == now + 900 * US + 1, "(the fixed rule: until late)");
	bv.slack = 1;
	CHECK(fk_bound_until(&bv, now, 150 * US, 400 * US) == now, "near: what ends by fill_until goes");
	/* Due (next passed, before late): nothing until late (the daemon caps
	 * it); past it, a late arrival: the budget. */
	bv = (fk_bound_view){.gpu = now + 50 * US, .own = now + 50 * US, .next = now - 100 * US, .late = now + 400 * US,
			     .slack = 1, .until = now - 150 * US, .budget = 200 * US};
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now + 400 * US + 1, "due: nothing until late");
	bv.late = now - 1;
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now, "late: within the budget it goes");
	CHECK(fk_bound_until(&bv, now, 180 * US, 200 * US) == now + 30 * US, "late: waits for room in the budget");
	bv.gpu = bv.own = now;
	CHECK(fk_bound_until(&bv, now, 300 * US, 200 * US) == now, "late: a kernel longer than the budget alone");
	/* Unpredictable arrivals (no fill_until) and a better priority inside
	 * its run: the budget alone, whatever next says (the fixed rule gated
	 * on it). */
	bv = (fk_bound_view){.gpu = now + 50 * US, .own = now + 50 * US, .next = now + 100 * US, .late = now + 500 * US,
			     .slack = 1, .until = 0, .budget = 200 * US};
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now, "unpredictable: the budget alone");
	bv.slack = 0;
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now + 500 * US + 1, "(the fixed rule: until late)");
	bv.slack = 1, bv.gpu = bv.own = now + 150 * US;
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now + 50 * US, "unpredictable: waits for room");
	bv.until = now + 2000 * US, bv.next = now + 120 * US, bv.in_run = 1;
	CHECK(fk_bound_until(&bv, now, 100 * US, 200 * US) == now + 50 * US, "in its run: the budget, not next");
	/* The daemon's budget, not the task's own bound. */
	bv = (fk_bound_view){.gpu = now + 150 * US, .own = now + 150 * US, .slack = 1, .budget = 100 * US};
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now + 100 * US, "the board's budget rules");
	bv.budget = 0;
	CHECK(fk_bound_until(&bv, now, 50 * US, 200 * US) == now, "a budget of 0: none published, the fixed rule");

	/* Resume: on, the priority's turn, the better ones between runs. */
	fk_resume_view v = {.on = 1, .task_ok = 1, .next = now + 2000 * US, .sw = 140 * US};
	CHECK(fk_resume_ok(&v, 0, now, 100 * US), "a 2 ms gap pays for two switches and 100us");
	v.next = now + 350 * US;
	CHECK(!fk_resume_ok(&v, 0, now, 100 * US), "350us does not pay for 2 × 140us and 100us");
	CHECK(fk_resume_ok(&v, now + 200 * US, now, 100 * US), "with 200us in flight the switch is paid: 300us fit");
	CHECK(!fk_resume_ok(&v, now + 300 * US, now, 100 * US), "… 400us do not");
	v.next = now;
	CHECK(!fk_resume_ok(&v, 0, now, 1), "a passed prediction allows nothing");
	v.next = FK_NEXT_NONE;
	CHECK(fk_resume_ok(&v, 0, now, 100 * US), "none expected");
	v.better_in_run = 1;
	CHECK(!fk_resume_ok(&v, 0, now, 100 * US), "a better priority inside a run");
	v.better_in_run = 0, v.task_ok = 0;
	CHECK(!fk_resume_ok(&v, 0, now, 100 * US), "not its priority's turn");
	v.task_ok = 1, v.on = 0;
	CHECK(!fk_resume_ok(&v, 0, now, 100 * US), "resume off");

	/* The table: what was put, the default for the rest; cleared at a new
	 * registration; an ID of all ones takes the default. */
	fk_ktab *k = calloc(1, sizeof *k);
	uint64_t ids[] = {7, 8, UINT64_MAX, 7 + FK_KT_SLOTS};
	uint32_t ns[] = {120000, 479000, 5, 33};
	fk_kt_put(k, 200000, 50000, ids, ns, 4);
	CHECK(k->have && k->bound_ns == 200000 && k->n == 3, "bound %llu, %u entries", (unsigned long long)k->bound_ns,
	      k->n);
	CHECK(fk_kt_get(k, 7) == 120000 && fk_kt_get(k, 8) == 479000 && fk_kt_get(k, 7 + FK_KT_SLOTS) == 33,
	      "entries (two in one bucket)");
	CHECK(fk_kt_get(k, 9) == 50000 && fk_kt_get(k, UINT64_MAX) == 50000, "the default");
	uint32_t ns2[] = {130000};
	fk_kt_put(k, 200000, 50000, ids, ns2, 1);
	CHECK(fk_kt_get(k, 7) == 130000 && k->n == 3, "an ID again replaces its duration");
	fk_kt_clear(k);
	CHECK(!k->have && !k->bound_ns && fk_kt_get(k, 7) == 50000, "cleared");
	/* Full: a quarter stays free; the rest take the default. */
	static uint64_t many[FK_KT_SLOTS];
	static uint32_t mns[FK_KT_SLOTS];
	for (uint32_t i = 0; i < FK_KT_SLOTS; i++)
		many[i] = i * 2654435761u, mns[i] = 1000 + i;
	fk_kt_put(k, 1, 2, many, mns, FK_KT_SLOTS);
	CHECK(k->n == FK_KT_SLOTS / 4 * 3, "%u entries", k->n);
	CHECK(fk_kt_get(k, many[0]) == 1000 && fk_kt_get(k, many[FK_KT_SLOTS - 1]) == 2, "kept and dropped");
	free(k);
	return check_done("test_bound");
}
