/* launch.c — the launch paths (docs/design.md "Hook"):
 *   holder (or a waiter with credit): kernel ID from the per-handle cache,
 *     one record into the lock-free ring, the real launch. No syscall, no
 *     lock, no allocation on this thread;
 *   waiter without credit: LaunchRequest and wait for the grant (waiter.c);
 *   profiling (either role), or a sampled run in the sharing phase (one in
 *     the daemon's `sample`, picked at the run's first launch): the launch
 *     is bracketed by a pair of events from the task's pool, the start
 *     event recorded as the very last thing before the real launch; the
 *     sender turns them into measurements.
 * Anything unexpected (no context, no task, scheduler unreachable, stream
 * capture) falls back to calling the driver untouched. */
#include "handlers.h"


static fk_fn graph_unknown_fn;

typedef struct lstate {
	fk_task *t;
	const fk_fn *fn;
	uint64_t kid;
	uint32_t dims[6];
	uint32_t seq;
	uint32_t ev;
	unsigned flags; /* FK_RF_* */
	int bounded;    /* under the count bound: record its completion */
	uint64_t dur;   /* predicted duration (0: no table) */
	int us;         /* under the µs bound: the cursor moves on when it goes */
	CUstream evs;   /* the launch's stream, as the hook's own calls name it */
	uint64_t t_ev; /* host time before the start event was recorded */
	uint64_t t_launch; /* … and before the real launch */
} lstate;

static int push(const lstate *l, uint32_t spacing)
{
	fk_rec r = {.kind = FK_REC_LAUNCH,
		    .flags = (uint8_t)l->flags,
		    .task = (uint16_t)l->t->index,
		    .seq = l->seq,
		    .kid = l->kid,
		    .t_ns = l->t_launch,
		    .fn = l->fn,
		    .ev = l->ev,
		    .spacing = spacing};
	for (int i = 0; i < 6; i++)
		r.dims[i] = l->dims[i];
	return fk_ring_push(&fk_q, &r); /* full: dropped and counted, never waits */
}

/* Whether the permission t launches on has gone stale (docs/design.md
 * "Board"): its expiry passed, or a better priority launched after what the
 * daemon knew when it gave it. No clock read without an expiry or a board. */
static inline int gate_closed(fk_task *t, fk_board_gpu *bg)
{
	uint64_t exp = atomic_load_explicit(&t->gate_expires, memory_order_relaxed);
	if (!exp && !bg)
		return 0;
	uint64_t now = fk_now_ns();
	uint64_t above = bg ? fk_board_above(atomic_load_explicit(&t->board, memory_order_relaxed), bg, fk_cfg.priority, now) : 0;
	return fk_gate_stale(atomic_load_explicit(&t->gate_seen, memory_order_relaxed), exp, above, now);
}

/* The launching thread found the permission stale: the core takes the
 * credit back, and makes a lower-priority holder ask from now on, until the
 * daemon says again. */
static void gate_closed_step(fk_task *t)
{
	fk_act a[1];
	fk_ctl_step(&(fk_ev){.type = FK_EV_GATE_CLOSED, .task = t->index, .now = fk_now_ns(),
			     .seq_now = atomic_load_explicit(&t->seq, memory_order_relaxed)},
		    a, 1);
}

static int stream_capturing(CUstream s)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!fk_drv.cuStreamIsCapturing || fk_drv.cuStreamIsCapturing(s, &st) != CUDA_SUCCESS)
		return 0;
	return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Everything before the real launch. fn is the graph unit, or NULL for a
 * kernel handle (named from the cache). Returns 0 when the launch is not
 * ours to track (then the caller just calls the driver). */
static inline int before(lstate *l, int slot, const fk_fn *fn, uintptr_t handle, CUstream hs)
{
	if (FK_UNLIKELY(fk_cfg.disabled))
		return 0;
	fk_task *t = fk_task_current();
	if (FK_UNLIKELY(!t))
		return 0;
	unsigned mode = atomic_load_explicit(&t->mode, memory_order_acquire);
	if (FK_UNLIKELY(mode == FK_MODE_PASS)) {
		unsigned st = atomic_load_explicit(&t->state, memory_order_relaxed);
		if (st != FK_ST_NEW && st != FK_ST_REGISTERING)
			return 0;
		fk_register_wait(t); /* first launch on this device (or waits for it) */
		mode = atomic_load_explicit(&t->mode, memory_order_acquire);
		if (mode == FK_MODE_PASS)
			return 0;
	}
	l->evs = (hs == NULL && fk_slot_pt[slot]) ? CU_STREAM_PER_THREAD : hs;
	/* Kernels launched into a capturing stream are recorded, not run: the
	 * graph launch is the schedulable unit. One load unless someone captures. */
	if (FK_UNLIKELY(atomic_load_explicit(&fk_capturing, memory_order_relaxed) > 0) && stream_capturing(l->evs))
		return 0;
	if (!fn)
		fn = fk_name_of((CUfunction)handle); /* cached after the first launch */
	l->t = t;
	l->fn = fn;
	l->kid = fk_kid_finish(fn->state, l->dims);
	if (FK_UNLIKELY(fk_log_level >= FK_LOG_DEBUG))
		fk_name_log_first((fk_fn *)fn, handle, l->dims);
	l->flags = FK_RF_NOTIFY;
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	l->bounded = l->us = 0;
	l->dur = 0;
	if (FK_UNLIKELY(bg != NULL) && !(mode & FK_MODE_MEASURE) && fk_better_registered(bg)) {
		/* First: the gate below then sees the state after the wait. */
		if (fk_us_bound(t)) {
			l->dur = fk_kernel_ns(t, l->kid);
			fk_us_wait(t, bg, l->dur, 0);
			l->us = 1;
		} else if (!(mode & FK_MODE_WAITER) && fk_count_bound(t)) {
			fk_inflight_wait(t);
			l->bounded = 1;
		}
	}
	if (!(mode & FK_MODE_WAITER) && FK_UNLIKELY(bg != NULL) && fk_cfg.priority > 0 && gate_closed(t, bg)) {
		/* A holder of lower priority (the better one was idle past its TTL)
		 * sees the better one launch: it asks from now on, until the daemon
		 * makes it a holder again. Its queued work still runs, but no new
		 * kernel joins the better one's run unasked. */
		gate_closed_step(t);
		mode = atomic_load_explicit(&t->mode, memory_order_acquire);
	}
	if (mode & FK_MODE_WAITER) {
		uint32_t next = atomic_load_explicit(&t->seq, memory_order_relaxed) + 1;
		uint32_t lim = atomic_load_explicit(&t->credit_limit, memory_order_relaxed);
		if ((int32_t)(lim - next) >= 0 && FK_UNLIKELY(gate_closed(t, bg)))
			gate_closed_step(t), lim = next - 1; /* stale credit: ask */
		if ((int32_t)(lim - next) < 0) { /* no credit: resume on the board, or ask (or fail open) */
			uint64_t until = atomic_load_explicit(&t->backoff_until_ns, memory_order_relaxed);
			if (until && fk_now_ns() < until)
				return 0; /* failed open recently: pass straight through */
			if (bg && !l->dur)
				l->dur = fk_kernel_ns(t, l->kid);
			if (bg && fk_resume_now(t, l->dur)) {
				/* The better priorities are between runs and their
				 * next run leaves room: it goes, and its report tells
				 * the daemon (docs/scheduler.md "Resuming on the
				 * board"). Without a µs bound, a resume keeps to the
				 * count bound. */
				if (!l->us && fk_count_bound(t)) {
					fk_inflight_wait(t);
					l->bounded = 1;
				}
				if (FK_UNLIKELY(atomic_load_explicit(&fk_sender_dozing, memory_order_relaxed)))
					fk_sender_wake();
				goto launch;
			}
			l->seq = atomic_fetch_add_explicit(&t->seq, 1, memory_order_relaxed) + 1;
			if (bg) /* lower priorities see it before the daemon does */
				fk_board_note(bg, fk_cfg.priority, fk_now_ns());
			/* Asked again while the board shows the grant stale
			 * (core.c, on_granted); or, while it waits, the board
			 * lets it resume: then it is reported like any launch. */
			int r = fk_waiter_launch(t, l->seq, l->kid, l->dur);
			l->flags = r == FK_WAITER_RESUMED ? FK_RF_NOTIFY : 0; /* else the request announced it */
			mode = atomic_load_explicit(&t->mode, memory_order_acquire);
			if (mode == FK_MODE_PASS)
				return 0;
			goto counted;
		}
		/* Credit (a racing thread may take the last one: it then goes on
		 * credit too, a launch beyond the limit reported like the rest).
		 * Its report frees the GPU time the daemon reserved for it: a
		 * sender backing off must not sit on it (a waiter may make a
		 * syscall; only the first launch after idle finds it dozing). */
		if (FK_UNLIKELY(atomic_load_explicit(&fk_sender_dozing, memory_order_relaxed)))
			fk_sender_wake();
	}
launch:
	l->seq = atomic_fetch_add_explicit(&t->seq, 1, memory_order_relaxed) + 1;
counted:
	if (l->us)
		fk_us_launched(t, atomic_load_explicit(&t->board, memory_order_relaxed), bg, l->dur);
	if (atomic_fetch_add_explicit(&t->run_kernels, 1, memory_order_relaxed) == 0) {
		atomic_store_explicit(&t->run_start_ns, fk_now_ns(), memory_order_relaxed);
		/* Sharing: the daemon watches the profile for drift on one run in
		 * `sample`, measured like a profiling run (docs/scheduler.md). */
		uint32_t s = atomic_load_explicit(&t->sample, memory_order_relaxed);
		if (FK_UNLIKELY(s != 0))
			atomic_store_explicit(&t->sampling,
					      (atomic_fetch_add_explicit(&t->runs_started, 1, memory_order_relaxed) + 1) % s == 0,
					      memory_order_relaxed);
		/* A run starts: the scheduler must hear of it at once, to stop
		 * filling the gap before it (early stop). A sender backing off
		 * while the task was idle would sit on this report for up to
		 * POLL_MAX_NS: wake it, with one non-blocking write per run. Not
		 * while measuring: nothing fills around a profiling task, and a
		 * sender querying events beside the run's first, timed, launch
		 * would disturb its measurement. */
		if (FK_UNLIKELY(atomic_load_explicit(&fk_sender_dozing, memory_order_relaxed)) &&
		    !(mode & FK_MODE_MEASURE))
			fk_sender_wake();
	}
	l->ev = UINT32_MAX;
	if (FK_UNLIKELY((mode & FK_MODE_MEASURE) || atomic_load_explicit(&t->sampling, memory_order_relaxed))) {
		fk_evpool *p = atomic_load_explicit(&t->pool, memory_order_acquire);
		if (p && (l->ev = fk_pool_take(p)) != UINT32_MAX) {
			/* Host times taken before each call, not after: a call's delays
			 * before it enqueues shift both sides alike (measure.c). */
			uint64_t t0 = fk_now_ns();
			atomic_store_explicit(&t->last_launch_ns, t0, memory_order_relaxed); /* measure.c: quiet() */
			if (bg && !(mode & FK_MODE_WAITER))
				fk_board_note(bg, fk_cfg.priority, t0);
			if (fk_drv.cuEventRecord(p->start[l->ev], l->evs) == CUDA_SUCCESS) {
				l->flags |= FK_RF_MEASURE;
				l->t_ev = t0;
				p->host_ns[l->ev] = t0; /* published by the ring push */
				l->t_launch = fk_now_ns();
				return 1; /* the record goes into the ring after the end event */
			}
			fk_ring_u32_push(p->free_q, &l->ev);
			l->ev = UINT32_MAX;
		}
		l->flags |= FK_RF_NOEV; /* to be measured, but no event pair: the sender must know */
	}
	if (l->flags) {
		l->t_launch = fk_now_ns(); /* vDSO: no syscall */
		if (bg && !(mode & FK_MODE_WAITER))
			fk_board_note(bg, fk_cfg.priority, l->t_launch);
		push(l, 0);
	}
	return 1;
}

static inline void after(lstate *l, CUresult rc)
{
	if (FK_UNLIKELY(rc != CUDA_SUCCESS))
		fk_task_check_fatal(l->t, rc);
	if (l->bounded && rc == CUDA_SUCCESS)
		fk_inflight_push(l->t, l->evs);
	if (!(l->flags & FK_RF_MEASURE))
		return;
	uint64_t spacing = l->t_launch - l->t_ev;
	fk_evpool *p = atomic_load_explicit(&l->t->pool, memory_order_relaxed);
	uint64_t te = fk_now_ns();
	p->end_host_ns[l->ev] = te;
	if (rc != CUDA_SUCCESS || fk_drv.cuEventRecord(p->end[l->ev], l->evs) != CUDA_SUCCESS) {
		fk_ring_u32_push(p->free_q, &l->ev);
		l->ev = UINT32_MAX;
		l->flags = (l->flags & ~(unsigned)FK_RF_MEASURE) | FK_RF_NOEV;
	} else {
		uint64_t d = fk_now_ns() - te;
		p->end_call_ns[l->ev] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
	}
	if (!push(l, spacing > UINT32_MAX ? UINT32_MAX : (uint32_t)spacing) && (l->flags & FK_RF_MEASURE))
		fk_ring_u32_push(p->free_q, &l->ev); /* the sender never sees it: the pair comes back here */
}

#define SET_DIMS(l, a, b, c, d, e, f)                                                              \
	do {                                                                                       \
		(l).dims[0] = (a), (l).dims[1] = (b), (l).dims[2] = (c);                           \
		(l).dims[3] = (d), (l).dims[4] = (e), (l).dims[5] = (f);                           \
	} while (0)

CUresult fk_on_launch(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		      unsigned bz, unsigned shm, CUstream hs, void **kp, void **extra)
{
	__typeof__(&cuLaunchKernel) real = FK_REAL(slot, cuLaunchKernel);
	if (FK_UNLIKELY(!real))
		return CUDA_ERROR_NOT_FOUND;
	lstate l;
	SET_DIMS(l, gx, gy, gz, bx, by, bz);
	if (!before(&l, slot, NULL, (uintptr_t)f, hs))
		return real(f, gx, gy, gz, bx, by, bz, shm, hs, kp, extra);
	CUresult rc = real(f, gx, gy, gz, bx, by, bz, shm, hs, kp, extra);
	after(&l, rc);
	return rc;
}

CUresult fk_on_launch_ex(int slot, const CUlaunchConfig *cfg, CUfunction f, void **kp, void **extra)
{
	__typeof__(&cuLaunchKernelEx) real = FK_REAL(slot, cuLaunchKernelEx);
	if (FK_UNLIKELY(!real))
		return CUDA_ERROR_NOT_FOUND;
	if (!cfg)
		return real(cfg, f, kp, extra);
	lstate l;
	SET_DIMS(l, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ);
	if (!before(&l, slot, NULL, (uintptr_t)f, cfg->hStream))
		return real(cfg, f, kp, extra);
	CUresult rc = real(cfg, f, kp, extra);
	after(&l, rc);
	return rc;
}

CUresult fk_on_launch_coop(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			   unsigned by, unsigned bz, unsigned shm, CUstream hs, void **kp)
{
	__typeof__(&cuLaunchCooperativeKernel) real = FK_REAL(slot, cuLaunchCooperativeKernel);
	if (FK_UNLIKELY(!real))
		return CUDA_ERROR_NOT_FOUND;
	lstate l;
	SET_DIMS(l, gx, gy, gz, bx, by, bz);
	if (!before(&l, slot, NULL, (uintptr_t)f, hs))
		return real(f, gx, gy, gz, bx, by, bz, shm, hs, kp);
	CUresult rc = real(f, gx, gy, gz, bx, by, bz, shm, hs, kp);
	after(&l, rc);
	return rc;
}

CUresult fk_on_graph_launch(int slot, CUgraphExec ge, CUstream hs)
{
	__typeof__(&cuGraphLaunch) real = FK_REAL(slot, cuGraphLaunch);
	if (FK_UNLIKELY(!real))
		return CUDA_ERROR_NOT_FOUND;
	if (fk_cfg.disabled)
		return real(ge, hs);
	const fk_fn *fn = fk_htab_get(&fk_graphs, (uintptr_t)ge);
	if (!fn) {
		/* Instantiated through a path we do not see: one shared ID. */
		if (!graph_unknown_fn.name) {
			graph_unknown_fn.state = fk_kid_name_state("fikit.graph:", 12);
			graph_unknown_fn.len = 12;
			graph_unknown_fn.path = FK_NAME_UNKNOWN;
			graph_unknown_fn.name = "fikit.graph:";
		}
		fn = &graph_unknown_fn;
	}
	lstate l;
	SET_DIMS(l, 0, 0, 0, 0, 0, 0);
	if (!before(&l, slot, fn, (uintptr_t)ge, hs))
		return real(ge, hs);
	CUresult rc = real(ge, hs);
	after(&l, rc);
	return rc;
}
