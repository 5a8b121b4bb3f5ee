/* inflight.c — the bounds on a task's work in flight (docs/design.md
 * "Board", docs/scheduler.md "The µs bound").
 *
 * The µs bound: a task of worse priority than one registered on its GPU
 * keeps its predicted GPU time queued or running within the daemon's bound
 * (KernelTimes), for granted, credited and holding launches alike, with
 * the other bounded tasks' on the GPU: what a returning better priority
 * meets is all of theirs. It is kept from predicted durations and the
 * clock (bound.h's cursors: the GPU's on the board, the task's own), so it
 * waits — sleeping until the time its launch fits — and never syncs: no
 * event, no completion wait on the launch path. A kernel longer than the
 * bound goes after the task's own work. Where the daemon publishes its
 * slack hint (board flag FK_BOARD_FLAG_SLACK), its rule (bound.h,
 * fk_slack_until): within bound_ns at all times, and, where a better
 * priority's arrivals are predictable, nothing that would still run at
 * fill_until_ns nor while its run is due (next_ns to the capped
 * next_late_ns); else the fixed rule: nothing that would still run when a
 * better priority is predicted back, or while it is due. A granted
 * launch's wait ends when a better priority launches (the grant is stale).
 *
 * The count bound, where the daemon gives no µs bound (an older daemon,
 * hook-bound off): a holder of worse priority than one registered on its
 * GPU (the better one idled past its TTL) keeps at most FIKIT_INFLIGHT of
 * its kernels queued or running: a launch beyond that waits, on this
 * thread, for the oldest to finish. A waiter's credit is sized by the
 * daemon to the gap it fills, and the gate stops it. The gate decides whether a kernel may
 * start now; this bounds what a better task that returns finds ahead of it
 * (a lower holder of a GPU whose better task idled past its TTL queued a
 * whole run: 33 ms ahead of the better task's first kernel).
 *
 * Completion is an event recorded after each bounded launch on the
 * launch's stream, waited for with cuEventSynchronize on a blocking-sync
 * event (the driver sleeps rather than spins: the better task's host
 * threads need the CPU). Waiters were bounded too at first: on a 2-core
 * host the waits took CPU from the better task's host thread (its host
 * part of the slowdown grew in the bench) for nothing the credit's sizing
 * did not already bound. Only
 * tasks with a better one registered pay for it; a task of the best
 * priority never does. */
#include "hook.h"

/* Pop the finished launches off the head; with mu held. */
static void reap(fk_task *t)
{
	while (t->infl_head != t->infl_tail &&
	       fk_drv.cuEventQuery(t->infl_ev[t->infl_head % FK_INFLIGHT_MAX]) != CUDA_ERROR_NOT_READY)
		t->infl_head++;
}

void fk_inflight_wait(fk_task *t)
{
	pthread_mutex_lock(&t->infl_mu);
	if (!t->infl_ready) {
		/* Made on the launching thread: its context is the task's. */
		int ok = fk_drv.cuEventCreate && fk_drv.cuEventQuery && fk_drv.cuEventSynchronize;
		for (int i = 0; ok && i < FK_INFLIGHT_MAX; i++)
			ok = fk_drv.cuEventCreate(&t->infl_ev[i], CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) ==
			     CUDA_SUCCESS;
		t->infl_ready = ok ? 1 : -1;
		if (!ok)
			fk_log(FK_LOG_WARN, "cannot create events for the in-flight bound; kernels go unbounded");
	}
	uint32_t bound = (uint32_t)fk_count_bound(t);
	if (t->infl_ready > 0 && bound) {
		reap(t);
		while (t->infl_tail - t->infl_head >= bound) {
			fk_drv.cuEventSynchronize(t->infl_ev[t->infl_head % FK_INFLIGHT_MAX]);
			t->infl_head++;
			reap(t);
		}
	}
	pthread_mutex_unlock(&t->infl_mu);
}

void fk_inflight_push(fk_task *t, CUstream s)
{
	pthread_mutex_lock(&t->infl_mu);
	if (t->infl_ready > 0 && t->infl_tail - t->infl_head < FK_INFLIGHT_MAX &&
	    fk_drv.cuEventRecord(t->infl_ev[t->infl_tail % FK_INFLIGHT_MAX], s) == CUDA_SUCCESS)
		t->infl_tail++;
	pthread_mutex_unlock(&t->infl_mu);
}

/* ---- the µs bound ---- */

int fk_us_wait(fk_task *t, fk_board_gpu *bg, uint64_t dur, uint64_t stale_after)
{
	uint64_t bound = fk_us_bound(t);
	if (!bound)
		return 0;
	fk_board *b = atomic_load_explicit(&t->board, memory_order_relaxed);
	for (int rounds = 0; rounds < 1000; rounds++) {
		uint64_t now = fk_now_ns();
		if (stale_after && b && fk_board_above(b, bg, fk_cfg.priority, now) > stale_after)
			return 1; /* a better priority launched since: the permission is stale */
		uint64_t next = atomic_load_explicit(&bg->next_ns, memory_order_relaxed);
		fk_bound_view v = {.gpu = atomic_load_explicit(&bg->cursor_ns, memory_order_relaxed),
				   .own = atomic_load_explicit(&t->cursor, memory_order_relaxed),
				   .next = next == FK_BOARD_NONE_EXPECTED ? FK_NEXT_NONE : next,
				   .late = atomic_load_explicit(&bg->next_late_ns, memory_order_relaxed),
				   .slack = (atomic_load_explicit(&bg->flags, memory_order_relaxed) & FK_BOARD_FLAG_SLACK) != 0,
				   .until = atomic_load_explicit(&bg->fill_until_ns, memory_order_relaxed),
				   .budget = atomic_load_explicit(&bg->bound_ns, memory_order_relaxed),
				   .in_run = fk_board_better_in_run(bg, fk_cfg.priority)};
		uint64_t until = fk_bound_until(&v, now, dur, bound);
		if (until <= now)
			return 0;
		/* Sleep until it fits; a wait for a predicted return is capped so
		 * that the board is looked at again (the prediction may move, a
		 * better priority may launch: the permission goes stale). */
		uint64_t cap = stale_after ? 200000 : 2000000;
		if (until - now > cap)
			until = now + cap;
		struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u), .tv_nsec = (long)(until % 1000000000u)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	return 0;
}

void fk_us_launched(fk_task *t, fk_board *b, fk_board_gpu *bg, uint64_t dur)
{
	uint64_t now = fk_now_ns();
	uint64_t sw = 0;
	if (bg && fk_board_above(b, bg, fk_cfg.priority, now) > atomic_load_explicit(&t->last_go_ns, memory_order_relaxed))
		sw = atomic_load_explicit(&bg->switch_ns, memory_order_relaxed);
	atomic_store_explicit(&t->last_go_ns, now, memory_order_relaxed);
	uint64_t cur = atomic_load_explicit(&t->cursor, memory_order_relaxed), nxt;
	do
		nxt = fk_cursor_after(cur, now, dur, sw);
	while (!atomic_compare_exchange_weak_explicit(&t->cursor, &cur, nxt, memory_order_relaxed, memory_order_relaxed));
	if (!bg)
		return;
	cur = atomic_load_explicit(&bg->cursor_ns, memory_order_relaxed);
	do
		nxt = fk_cursor_after(cur, now, dur, sw);
	while (!atomic_compare_exchange_weak_explicit(&bg->cursor_ns, &cur, nxt, memory_order_relaxed,
						      memory_order_relaxed));
}

void fk_us_done(fk_task *t, uint64_t now)
{
	uint64_t own = atomic_load_explicit(&t->cursor, memory_order_relaxed);
	if (own <= now || !atomic_compare_exchange_strong_explicit(&t->cursor, &own, now, memory_order_relaxed,
								   memory_order_relaxed))
		return;
	/* What the task was predicted to have left is done: the GPU's cursor
	 * is that much early (no earlier than now). */
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	if (!bg)
		return;
	uint64_t left = own - now, cur = atomic_load_explicit(&bg->cursor_ns, memory_order_relaxed), nxt;
	do {
		if (cur <= now)
			return;
		nxt = cur - now > left ? cur - left : now;
	} while (!atomic_compare_exchange_weak_explicit(&bg->cursor_ns, &cur, nxt, memory_order_relaxed,
							memory_order_relaxed));
}

/* ---- resuming on the board ---- */

void fk_resume_view_of(fk_task *t, fk_resume_view *v, uint64_t now)
{
	fk_board *b = atomic_load_explicit(&t->board, memory_order_relaxed);
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	*v = (fk_resume_view){0};
	if (!b || !bg || !fk_board_alive(b, now))
		return;
	v->on = (atomic_load_explicit(&bg->flags, memory_order_relaxed) & FK_BOARD_FLAG_RESUME) != 0;
	uint32_t id = atomic_load_explicit(&t->task_id, memory_order_relaxed);
	v->task_ok = id != 0 && atomic_load_explicit(&bg->resume_task, memory_order_relaxed) == id;
	v->better_in_run = fk_board_better_in_run(bg, fk_cfg.priority);
	uint64_t next = atomic_load_explicit(&bg->next_ns, memory_order_relaxed);
	v->next = next == FK_BOARD_NONE_EXPECTED ? FK_NEXT_NONE : next;
	v->sw = atomic_load_explicit(&bg->switch_ns, memory_order_relaxed);
}

int fk_resume_now(fk_task *t, uint64_t dur)
{
	fk_ktab *k = atomic_load_explicit(&t->kt, memory_order_acquire);
	if (!k || !atomic_load_explicit(&k->have, memory_order_acquire))
		return 0; /* no durations: a resume could not tell what fits */
	uint64_t now = fk_now_ns();
	fk_resume_view v;
	fk_resume_view_of(t, &v, now);
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	return bg && fk_resume_ok(&v, atomic_load_explicit(&bg->cursor_ns, memory_order_relaxed), now, dur);
}
