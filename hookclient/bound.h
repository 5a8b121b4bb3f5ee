/* bound.h — the µs bound and the board resume as pure predicates
 * (docs/scheduler.md "The µs bound", "Resuming on the board"), which the
 * launch path (launch.c, waiter.c) applies to what it reads: the task's
 * device-time cursor, its kernel's predicted duration (the daemon's
 * KernelTimes, kerneltimes.c) and the board. No clock, no atomics: the
 * values come in; test/test_bound.c drives them.
 *
 * The cursor is the predicted end of the task's work on the device:
 * in flight ≈ max(0, cursor − now). Each launch moves it on by the
 * kernel's predicted duration from when the kernel can start — after the
 * task's own work, or, where a better priority launched since the task's
 * last launch, after the switch to its context — and a host sync's return
 * (all its work done) sets it back to now: the one completion seen without
 * waiting for it. */
#ifndef FIKIT_BOUND_H
#define FIKIT_BOUND_H

#include <stdint.h>

/* What the cursor allows for a launch to reach the device (a real GPU's
 * launch-to-start is a few µs). */
#define FK_LAUNCH_LATENCY_NS 5000ull

/* board.next_ns: no better task expected back. */
#define FK_NEXT_NONE UINT64_MAX

/* The cursor after a launch of predicted duration dur at now; switch_in:
 * the switch to the task's context it pays first (0 if its context ran
 * last). */
static inline uint64_t fk_cursor_after(uint64_t cursor, uint64_t now, uint64_t dur, uint64_t switch_in)
{
	uint64_t start = now + FK_LAUNCH_LATENCY_NS + switch_in;
	return (cursor > start ? cursor : start) + dur;
}

/* When a launch of predicted duration dur may go under the bound (> 0: at
 * once, when the result is ≤ now): its work and the task's in flight
 * within bound, a kernel longer than bound alone; and none of it predicted
 * to run when a better priority is predicted back (next: board.next_ns;
 * 0 or past: unknown, no limit). */
static inline uint64_t fk_bound_until(uint64_t cursor, uint64_t now, uint64_t dur, uint64_t bound, uint64_t next)
{
	uint64_t in = cursor > now ? cursor - now : 0;
	if (dur > bound) {
		if (in > 0)
			return cursor; /* alone: after the task's work in flight */
	} else if (in + dur > bound) {
		return cursor - (bound - dur);
	}
	if (next != FK_NEXT_NONE && next > now && in + dur > next - now)
		return next + 1; /* not before the better priority is back, or its prediction passed */
	return now;
}

/* What a resume looks at on the board, read once. */
typedef struct fk_resume_view {
	int on;            /* board.flags has FK_BOARD_FLAG_RESUME, the daemon alive */
	int task_ok;       /* board.resume_task is the task */
	int better_in_run; /* a better priority launched since its latest run end */
	uint64_t next;     /* board.next_ns */
	uint64_t sw;       /* board.switch_ns */
} fk_resume_view;

/* Whether a waiter may launch a kernel of predicted duration dur without
 * asking, on the board's word: it is the task the daemon lets resume (of
 * the best waiting priority, whose fair turn it is), every better priority is between runs, and their predicted next
 * run leaves room for the kernel after the task's work in flight — and,
 * with nothing in flight, for the switch to it and the one back as well
 * (a gap that does not pay for both is not worth taking). An unknown or
 * passed prediction allows nothing; none expected, anything (the bound
 * still holds). */
static inline int fk_resume_ok(const fk_resume_view *v, uint64_t cursor, uint64_t now, uint64_t dur)
{
	if (!v->on || !v->task_ok || v->better_in_run)
		return 0;
	if (v->next == FK_NEXT_NONE)
		return 1;
	if (v->next <= now)
		return 0;
	uint64_t in = cursor > now ? cursor - now : 0, need = in + dur;
	if (in == 0)
		need += 2 * v->sw;
	return v->next - now >= need;
}

#endif
