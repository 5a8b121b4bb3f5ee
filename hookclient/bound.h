/* bound.h — the µs bound and the board resume as pure predicates
 * (docs/scheduler.md "The µs bound", "Resuming on the board"), which the
 * launch path (launch.c, waiter.c) applies to what it reads: the device-time
 * cursors, its kernel's predicted duration (the daemon's KernelTimes,
 * kerneltimes.c) and the board. No clock, no atomics: the values come in;
 * test/test_bound.c drives them.
 *
 * A cursor is the predicted end of work on the device: in flight ≈
 * max(0, cursor − now). Each launch moves it on by the kernel's predicted
 * duration from when the kernel can start — after the work already in
 * flight, or, where a better priority launched since the task's last
 * launch, after the switch to its context. Two are kept: the GPU's, on the
 * board (gpu.cursor_ns), which every bounded task on the GPU moves on — what
 * a returning better priority meets is all of theirs together — and the
 * task's own, which says how much of the GPU's is the task's. A host
 * sync's return (all the task's work done: the one completion seen without
 * waiting for it) sets the task's back to now and takes what it had left
 * off the GPU's. */
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

/* What the µs bound looks at, read once. */
typedef struct fk_bound_view {
	uint64_t gpu;  /* board gpu.cursor_ns: the bounded tasks' work on the GPU */
	uint64_t own;  /* the task's own cursor */
	uint64_t next; /* board next_ns: a better priority's next run (0 unknown, FK_NEXT_NONE none) */
	uint64_t late; /* board next_late_ns: the latest it is expected */
	/* The bound that follows the slack (board flags FK_BOARD_FLAG_SLACK,
	 * docs/scheduler.md "The bound follows the slack"): the daemon's, in
	 * place of the task's own bound and the fixed rule. */
	int slack;
	uint64_t until;  /* board fill_until_ns: work may be queued to end by this (0: none predicted) */
	uint64_t budget; /* board bound_ns: what a better priority's arrival may meet */
	int in_run;      /* a better priority is inside a run (fk_board_better_in_run) */
} fk_bound_view;

/* The later of two times. */
static inline uint64_t fk_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* When a launch of predicted duration dur may go while the GPU's bounded
 * work in flight and it stay within bound (at once when the result is ≤
 * now): a kernel longer than bound after the task's own work, the others'
 * within the bound (alone as far as the task goes: waiting for the GPU's
 * cursor to empty, it would starve behind another task's short kernels). */
static inline uint64_t fk_within_bound(const fk_bound_view *v, uint64_t now, uint64_t dur, uint64_t bound)
{
	uint64_t in = v->gpu > now ? v->gpu - now : 0;
	if (dur > bound) {
		if (v->own > now || in > bound)
			return fk_max_u64(v->own, v->gpu > bound ? v->gpu - bound : 0);
	} else if (in + dur > bound) {
		return v->gpu - (bound - dur);
	}
	return now;
}

/* The bound with the daemon's slack hint (scheduler/slack.go publishes
 * until and budget): the GPU's work in flight and the kernel within the
 * budget (a longer kernel alone), always. Where a better priority's
 * arrivals are predictable (until set) and it is not inside its run:
 * nothing that would still run at until (its predicted run less a margin)
 * — it waits for next, then nothing while that run is due (next to late,
 * which the daemon caps at a share of the interval: a busy host's late
 * starts widened the window to milliseconds, and the low priority lost it
 * in every gap). Past late (a late arrival), inside its run, and where its
 * arrivals are not predictable: the budget alone, so an arrival meets at
 * most that (the fixed rule gated on the run-gap predictor's window there
 * too, which such arrivals do not keep). */
static inline uint64_t fk_slack_until(const fk_bound_view *v, uint64_t now, uint64_t dur)
{
	uint64_t at = fk_within_bound(v, now, dur, v->budget);
	if (at > now)
		return at;
	if (v->until && !v->in_run && v->next && v->next != FK_NEXT_NONE) {
		uint64_t in = v->gpu > now ? v->gpu - now : 0;
		if (now < v->next && now + in + dur > v->until)
			return v->next; /* no room before it: then its window */
		if (now >= v->next && now <= v->late)
			return v->late + 1; /* due */
	}
	return now;
}

/* When a launch of predicted duration dur may go under the bound (at once
 * when the result is ≤ now). With the daemon's slack bound, fk_slack_until;
 * else (a daemon before it, or its fixed-bound variant) the fixed rule:
 * the GPU's work in flight and it within bound;
 * a kernel longer than bound after the task's own work, the others' within
 * the bound (alone as far as the task goes: waiting for the GPU's cursor to
 * empty, it would starve behind another task's short kernels); and none of
 * it predicted to run when a better priority is predicted back, nor while
 * that is due (between next and late). An unknown prediction, or one whose
 * window passed, limits nothing beyond the bound. */
static inline uint64_t fk_bound_until(const fk_bound_view *v, uint64_t now, uint64_t dur, uint64_t bound)
{
	if (v->slack && v->budget)
		return fk_slack_until(v, now, dur);
	uint64_t in = v->gpu > now ? v->gpu - now : 0;
	uint64_t at = fk_within_bound(v, now, dur, bound);
	if (at > now)
		return at;
	if (v->next == FK_NEXT_NONE || v->next == 0)
		return now;
	if (v->next > now && in + dur > v->next - now)
		return fk_max_u64(v->next, v->late) + 1; /* not before it is back, or its window passed */
	if (v->next <= now && now <= v->late)
		return v->late + 1; /* it is due */
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
 * the best waiting priority, whose fair turn it is), every better priority
 * is between runs, and their predicted next run leaves room for the kernel
 * after the GPU's bounded work in flight — and, with nothing in flight,
 * for the switch to it and the one back as well
 * (a gap that does not pay for both is not worth taking). An unknown or
 * passed prediction allows nothing; none expected, anything (the bound
 * still holds). */
static inline int fk_resume_ok(const fk_resume_view *v, uint64_t gpu_cursor, uint64_t now, uint64_t dur)
{
	if (!v->on || !v->task_ok || v->better_in_run)
		return 0;
	if (v->next == FK_NEXT_NONE)
		return 1;
	if (v->next <= now)
		return 0;
	uint64_t in = gpu_cursor > now ? gpu_cursor - now : 0, need = in + dur;
	if (in == 0)
		need += 2 * v->sw;
	return v->next - now >= need;
}

#endif
