/*
 * wait.c — precise host waits (stream/context/event synchronize, synchronous
 * copies, a full op ring).
 *
 * The model can say, for an op, a lower bound of its completion (dm_forecast)
 * and the time of the next internal state change (dm_next_event); nothing can
 * complete before either. A waiter sleeps until that time minus a margin, then
 * spins on the clock for the last stretch and re-checks under the lock; other
 * processes' work may have delayed the op, so it loops: advance, done?, new
 * forecast. nanosleep overshoots by tens of microseconds even with a 1 ns
 * timer slack, so the margin follows the overshoots this process observes
 * (mean + 4 mean deviations, 10 us .. 1 ms).
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>

#define SG_WAIT_RECHECK_NS 50000000LL /* = the reaper's period (shm.c) */

static __thread int slack_set;
static int64_t over_mean = 30000;  /* ns, EWMA of nanosleep overshoot */
static int64_t over_dev = 15000;   /* ns, EWMA of its absolute deviation */

static int64_t margin(void)
{
	int64_t m = __atomic_load_n(&over_mean, __ATOMIC_RELAXED) +
		    4 * __atomic_load_n(&over_dev, __ATOMIC_RELAXED);
	if (m < 10000)
		m = 10000;
	if (m > 1000000)
		m = 1000000;
	return m;
}

static void sleep_until(int64_t t)
{
	if (!slack_set) {
		/* Per thread: the default 50 us slack alone would ruin precision. */
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		slack_set = 1;
	}
	struct timespec ts = {.tv_sec = t / 1000000000LL, .tv_nsec = t % 1000000000LL};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	int64_t over = sg_now() - t;
	if (over < 0)
		over = 0;
	/* Racy read-modify-write between threads is fine for an estimate. */
	int64_t m = __atomic_load_n(&over_mean, __ATOMIC_RELAXED);
	int64_t dv = __atomic_load_n(&over_dev, __ATOMIC_RELAXED);
	int64_t dev = llabs(over - m);
	__atomic_store_n(&over_mean, m + (over - m) / 8, __ATOMIC_RELAXED);
	__atomic_store_n(&over_dev, dv + (dev - dv) / 8, __ATOMIC_RELAXED);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Whether op seq of context dmctx (generation gen) is done; if not, *until
 * is the earliest it can be (its forecast, or the model's next event). */
static int op_done_or_until(int dev, int dmctx, uint32_t gen, uint64_t seq, int64_t *until)
{
	dm_device *dm = sg_dm(dev);
	int64_t now = sg_enter(dev);
	int done = dm_ctx_gen(dm, dmctx) != gen || dm_op_done(dm, dmctx, seq, NULL) != 0;
	if (!done) {
		*until = dm_forecast(dm, dmctx, seq, now);
		int64_t ne = dm_next_event(dm);
		if (ne > *until)
			*until = ne;
	}
	sg_unlock();
	return done;
}

void sg_wait_op(int dev, int dmctx, uint32_t gen, uint64_t seq)
{
	int64_t until;
	while (!op_done_or_until(dev, dmctx, gen, seq, &until)) {
		if (sg_fault_waiting(&until))
			return; /* an injected fault killed the work waited for */
		if (until == DM_NEVER) {
			/* Cannot happen with finite work; poll gently rather than hang hard. */
			sleep_until(sg_now() + 1000000);
			continue;
		}
		int64_t now = sg_now();
		int64_t m = margin();
		/* Wake at least every SG_WAIT_RECHECK_NS: a dead process's work may be
		 * what we wait behind, and reaping it happens on some process's call. */
		if (until - now > m + SG_WAIT_RECHECK_NS) {
			sleep_until(now + SG_WAIT_RECHECK_NS);
			continue;
		}
		if (until - now > m)
			sleep_until(until - m);
		while (sg_now() < until)
			cpu_relax();
	}
}

void sg_wait_op_blocking(int dev, int dmctx, uint32_t gen, uint64_t seq)
{
	int64_t until;
	while (!op_done_or_until(dev, dmctx, gen, seq, &until)) {
		if (sg_fault_waiting(&until))
			return;
		int64_t now = sg_now();
		if (until == DM_NEVER || until - now > SG_WAIT_RECHECK_NS)
			until = now + SG_WAIT_RECHECK_NS;
		sleep_until(until);
	}
}

void sg_wait_stream(sg_stream *s)
{
	sg_ctx *c = s->ctx;
	dm_device *dm = sg_dm(c->dev);
	sg_enter(c->dev);
	uint64_t last = dm_ctx_gen(dm, c->dmctx) == c->dmgen ? dm_stream_last_pending(dm, c->dmctx, s->sid) : 0;
	sg_leave(c);
	if (last)
		sg_wait_op(c->dev, c->dmctx, c->dmgen, last);
}

void sg_wait_ctx(sg_ctx *c)
{
	dm_device *dm = sg_dm(c->dev);
	uint64_t *tails = malloc(sizeof(uint64_t) * DM_MAX_STREAMS);
	if (!tails)
		return;
	sg_enter(c->dev);
	uint32_t n = dm_ctx_gen(dm, c->dmctx) == c->dmgen ? dm_ctx_pending_tails(dm, c->dmctx, tails, DM_MAX_STREAMS)
							     : 0;
	sg_leave(c);
	for (uint32_t i = 0; i < n; i++)
		sg_wait_op(c->dev, c->dmctx, c->dmgen, tails[i]);
	free(tails);
}
