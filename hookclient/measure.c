/* measure.c — the profiling phase (paper §3.2), and the sharing phase's
 * sampled runs (drift, docs/scheduler.md): per kernel its duration and the
 * idle gap to the task's next kernel, from the event pair the launching
 * thread recorded around it. Everything here runs on the sender thread.
 *
 * Each task keeps its measured launches and run ends in launch order; a
 * run's kernels are read when it has ended and settled together. A gap
 * after the last kernel of a run spans the run end: it is sent as 0 with
 * GapSpansRunEnd (the profiler excludes it). A negative gap means the two
 * kernels overlapped (several streams): 0 and Overlapped.
 *
 * Launch latency inside the event pair. The start event is recorded just
 * before the real launch, so it can fire before the kernel could start: the
 * kernel arrives on the device one "spacing" later (measured on the host
 * between the two calls, each time read before its call, so that a call's
 * delay before it enqueues shifts both sides alike). The kernel starts at
 * max(start event, its arrival). The arrival is placed on the device's time
 * line by the start events themselves: a start event fires at the earliest
 * at its own arrival, so over a run
 *     u_k = start_k − host_k  (device time − host time of start event k)
 * is smallest for a start event that found the device idle, where it is
 * the host→device offset; slack_k = u_k − min u is how long start event k
 * waited for earlier work. The kernel then started
 *     late_k = max(0, spacing_k + e_k − slack_k)
 * after its start event (e_k: see settle, a slow launch call): idle device
 * → the whole spacing; busy → 0; the previous kernel ending between the two
 * arrivals → the part after it. late_k moves from the kernel's duration to
 * the gap before it. Event times are read against the run's first start
 * event (two calls per kernel; float milliseconds keep ~10 ns over a 100 ms
 * run), and a run is settled at its end, when min u over the whole run is
 * known. A kernel shorter than the time to record the end event after its
 * * launch still reads long; nothing on the host can see
 * that. */
#include "hook.h"

#include <stdlib.h>
#include <string.h>

#define MEAS_PER_DGRAM ((FK_MAX_DATAGRAM - FK_MAC_TRAILER - FK_MEAS_HEAD_MAX) / FK_MEAS_REC_MAX)
#define FK_SLOW_LAUNCH_NS 5000 /* a launch call this much slower than the run's fastest: a stall */
#define FK_IDLE_READ_NS 1000000 /* no launch for this long: the service is between requests */
#define FK_GAP_ERR_NS 2000      /* a run that may move a gap's profile mean this much is not reported … */
#define FK_AMBIGUOUS_SKIP 8     /* … unless this many runs in a row were not reported for it */
#define FK_DEFAULT_RUNS 100     /* T, if the daemon did not say */

/* The run being shipped, as the core reports it (FK_ACT_RECORDS). */
typedef struct ship {
	fk_who who;
	uint32_t run, reg_gen;
} ship;

typedef struct mitem {
	uint8_t kind;
	uint8_t noev; /* a launch to be measured that had no event pair */
	uint32_t ev, spacing, kernels, reason;
	uint32_t last_seq; /* run end: seq of its last launch */
	uint64_t kid; /* run end: run_ns */
	const fk_fn *fn;
	uint32_t dims[6];
} mitem;

/* What the sender knows of a kernel ID. */
typedef struct kstat {
	uint64_t kid;      /* 0: empty slot */
	uint32_t info_reg; /* KernelInfo sent in this registration (its reg_gen) */
	uint32_t n;        /* durations observed whole */
	uint64_t sum;
	uint32_t run_mark; /* the run run_n counts launches of (its number + 1) */
	uint32_t run_n;
} kstat;

/* A kernel of the current run, measured, waiting for the run's end. */
typedef struct rkernel {
	uint64_t kid;
	const fk_fn *fn;
	uint32_t dims[6];
	int64_t dur, gap; /* from the events: start → end, end → next start */
	int64_t end;      /* end event, against the run's first start event */
	int64_t u;        /* start event − host time (see above) */
	int64_t post;     /* host: launch called → end event recorded */
	int64_t endcall;  /* host: recording the end event */
	int first;        /* the run's first kernel */
	uint32_t spacing;
	uint8_t flags;
} rkernel;

typedef struct mstate {
	mitem *q;
	size_t head, tail, cap; /* q[head % cap … tail % cap) */
	uint32_t anchor;        /* the run's first start event: times are read against it */
	uint64_t anchor_host;   /* … and its host time */
	int has_anchor;
	int run_bad;            /* a kernel of this run could not be read (FK_UNMEASURED_NO_EVENTS) */
	int noev;               /* a launch of this run had no event pair */
	uint32_t runs_seen;     /* runs settled: marks kstat.run_mark */
	unsigned ambiguous_runs; /* consecutive runs not reported as too uncertain */
	int64_t cold_sp[8], cold_ex[8]; /* recent first launches' spacing and excess */
	size_t ncold;
	size_t ends;            /* run ends queued */
	rkernel *run;           /* this run's kernels */
	size_t nrun, caprun;
	struct kstat *ks; /* per kernel ID: KernelInfo sent, durations seen */
	size_t ks_mask, nks;
} mstate;

static CUcontext current_ctx; /* what the sender thread has made current */

static mstate *ms_of(fk_task *t)
{
	if (!t->meas)
		t->meas = calloc(1, sizeof(mstate));
	return t->meas;
}

int fk_pool_create(fk_task *t)
{
	fk_evpool *p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	p->ctx = t->ctx;
	p->start = calloc(FK_EV_PAIRS, sizeof(CUevent));
	p->end = calloc(FK_EV_PAIRS, sizeof(CUevent));
	p->host_ns = calloc(FK_EV_PAIRS, sizeof(uint64_t));
	p->end_host_ns = calloc(FK_EV_PAIRS, sizeof(uint64_t));
	p->end_call_ns = calloc(FK_EV_PAIRS, sizeof(uint32_t));
	p->free_q = malloc(sizeof *p->free_q);
	if (!p->start || !p->end || !p->host_ns || !p->end_host_ns || !p->end_call_ns || !p->free_q || fk_ring_u32_init(p->free_q, FK_EV_PAIRS))
		goto fail;
	for (uint32_t i = 0; i < FK_EV_PAIRS; i++) {
		if (fk_drv.cuEventCreate(&p->start[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
		    fk_drv.cuEventCreate(&p->end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
			goto fail; /* the events made so far are leaked: rare, bounded */
		fk_ring_u32_push(p->free_q, &i);
	}
	current_ctx = t->ctx;
	atomic_store_explicit(&t->pool, p, memory_order_release);
	return 0;
fail:
	fk_log(FK_LOG_WARN, "cannot create measurement events; this task is not measured");
	free(p->start);
	free(p->end);
	free(p->host_ns);
	free(p->end_host_ns);
	free(p->end_call_ns);
	free(p->free_q);
	free(p);
	return -1;
}

uint32_t fk_pool_take(fk_evpool *p)
{
	uint32_t i;
	return fk_ring_u32_pop(p->free_q, &i) ? i : UINT32_MAX;
}

static void release(fk_task *t, uint32_t ev)
{
	fk_evpool *p = atomic_load(&t->pool);
	if (p && ev != UINT32_MAX)
		fk_ring_u32_push(p->free_q, &ev);
}

void fk_measure_item(fk_task *t, const fk_rec *r)
{
	mstate *m = ms_of(t);
	if (!m)
		return;
	if (m->tail - m->head == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		mitem *q = malloc(cap * sizeof *q);
		if (!q) {
			if (r->kind == FK_REC_LAUNCH)
				release(t, r->ev);
			return;
		}
		for (size_t i = m->head; i < m->tail; i++)
			q[i - m->head] = m->q[i % m->cap];
		free(m->q);
		m->q = q;
		m->tail -= m->head;
		m->head = 0;
		m->cap = cap;
	}
	mitem *it = &m->q[m->tail++ % m->cap];
	memset(it, 0, sizeof *it);
	it->kind = r->kind;
	m->ends += r->kind == FK_REC_RUN_END;
	if (r->kind == FK_REC_LAUNCH && !(r->flags & FK_RF_MEASURE)) {
		it->noev = 1;
		it->ev = UINT32_MAX;
	} else if (r->kind == FK_REC_LAUNCH) {
		it->ev = r->ev;
		it->spacing = r->spacing;
		it->kid = r->kid;
		it->fn = r->fn;
		memcpy(it->dims, r->dims, sizeof it->dims);
	} else {
		it->reason = r->seq;
		it->kid = r->kid;
		it->kernels = r->ev;
		it->last_seq = (uint32_t)r->t_ns;
	}
}

static int64_t ns_of(float ms)
{
	double v = (double)ms * 1e6; /* no libm: the hook needs nothing but libc */
	return (int64_t)(v >= 0 ? v + 0.5 : v - 0.5);
}

/* The kernel ID's entry, created on first sight (NULL if out of memory). */
static kstat *kstat_of(mstate *m, uint64_t kid)
{
	uint64_t key = kid ? kid : 1; /* 0 marks an empty slot; the ID 0 shares 1's entry */
	if (m->nks * 2 >= m->ks_mask) {
		size_t cap = m->ks_mask ? (m->ks_mask + 1) * 2 : 1024;
		kstat *n = calloc(cap, sizeof *n);
		if (!n)
			return NULL;
		for (size_t i = 0; m->ks && i <= m->ks_mask; i++)
			if (m->ks[i].kid)
				for (size_t j = fk_hash_ptr(m->ks[i].kid) & (cap - 1);; j = (j + 1) & (cap - 1))
					if (!n[j].kid) {
						n[j] = m->ks[i];
						break;
					}
		free(m->ks);
		m->ks = n;
		m->ks_mask = cap - 1;
	}
	size_t j = fk_hash_ptr(key) & m->ks_mask;
	for (; m->ks[j].kid; j = (j + 1) & m->ks_mask)
		if (m->ks[j].kid == key)
			return &m->ks[j];
	m->ks[j].kid = key;
	m->nks++;
	return &m->ks[j];
}

/* KernelInfo once per kernel ID per registration, before its first
 * Measurements (they are sent later, in the same outgoing order). */
static void kernel_info(const ship *sh, kstat *st, const rkernel *k)
{
	if (!st || st->info_reg == sh->reg_gen)
		return;
	st->info_reg = sh->reg_gen;
	fk_msg_out m = {.type = FK_MSG_KERNEL_INFO, .task_id = sh->who.id, .token = sh->who.token, .kernel_id = k->kid,
			.name = k->fn->name, .name_len = k->fn->len};
	memcpy(m.grid, k->dims, sizeof m.grid);
	memcpy(m.block, k->dims + 3, sizeof m.block);
	fk_link_put(&m);
}

static void drop_anchor(fk_task *t, mstate *m)
{
	if (m->has_anchor)
		release(t, m->anchor);
	m->has_anchor = 0;
}

static int64_t median8(const int64_t *v, size_t n)
{
	int64_t s[8];
	memcpy(s, v, n * sizeof *s);
	for (size_t i = 1; i < n; i++) /* insertion sort: n ≤ 8 */
		for (size_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
			int64_t x = s[j];
			s[j] = s[j - 1];
			s[j - 1] = x;
		}
	return s[n / 2];
}

/* The usual cold path of the task's first launches in a run (median over
 * the last 8 runs, this one included), as spacing and excess. */
static void cold_path(mstate *m, int64_t sp, int64_t ex, int64_t *cold_sp, int64_t *cold_ex)
{
	m->cold_sp[m->ncold % 8] = sp;
	m->cold_ex[m->ncold % 8] = ex;
	m->ncold++;
	size_t n = m->ncold < 8 ? m->ncold : 8;
	*cold_sp = median8(m->cold_sp, n);
	*cold_ex = median8(m->cold_ex, n);
}

/* How late a kernel started after its start event, within [0, its duration]. */
static int64_t clamp_late(int64_t late, int64_t dur)
{
	return late < 0 ? 0 : late > dur ? (dur > 0 ? dur : 0) : late;
}

/* Settle a run's kernels (launch latency, stalled calls; see above) into
 * durations and gaps ready to ship, or say why they cannot be shipped
 * (FK_UNMEASURED_*; 0: they can). runs is T, the runs a profile averages. */
static uint8_t settle(mstate *m, uint32_t runs_T)
{
	int64_t umin = m->run[0].u, pmin = m->run[0].post, emin = m->run[0].endcall;
	for (size_t i = 1; i < m->nrun; i++) {
		umin = m->run[i].u < umin ? m->run[i].u : umin;
		pmin = m->run[i].post < pmin ? m->run[i].post : pmin;
		emin = m->run[i].endcall < emin ? m->run[i].endcall : emin;
	}
	/* How often each kernel ID occurs in this run: one kernel's error is
	 * spread over all of its ID's occurrences in the T runs. */
	m->runs_seen++;
	for (size_t i = 0; i < m->nrun; i++) {
		kstat *st = kstat_of(m, m->run[i].kid);
		if (st && st->run_mark != m->runs_seen) {
			st->run_mark = m->runs_seen;
			st->run_n = 0;
		}
		if (st)
			st->run_n++;
	}
	int64_t runs = runs_T ? runs_T : FK_DEFAULT_RUNS;
	int stalled = 0;
	int64_t late_next = 0, mean_err = 0, worst_off = 0;
	for (size_t i = m->nrun; i-- > 0;) { /* backwards: a gap needs the next kernel's late */
		rkernel *k = &m->run[i];
		/* How much slower than the run's fastest the launch call was. The
		 * run's first launch, after the service idled, is slow because
		 * the driver's path is cold, before it enqueues: the kernel
		 * arrived that much later. For the others, where in the call the
		 * time went is unknown: half is the unbiased guess (the error is
		 * at most half the excess). */
		int64_t excess = k->post - pmin, slack = k->u - umin;
		int64_t late = clamp_late((int64_t)k->spacing + (k->first ? excess : excess / 2) - slack, k->dur);
		{
			/* How far off the guess may be: half the range the true value
			 * lies in. A run's first launch comes after idle time, with
			 * nothing earlier in the run to tell whether its start event
			 * fired when recorded: all of its excess and spacing are taken
			 * to delay the kernel, which is right as far as they are the
			 * usual cold path of the task's first launches; beyond that,
			 * the thread may as well have stalled in recording the event,
			 * and the guess may be off by all of the rest. */
			int64_t lo, hi = clamp_late((int64_t)k->spacing + excess - slack, k->dur), off;
			if (k->first) {
				int64_t sp = (int64_t)k->spacing, cold_sp, cold_ex;
				cold_path(m, sp, excess, &cold_sp, &cold_ex);
				lo = clamp_late((sp < cold_sp ? sp : cold_sp) + (excess < cold_ex ? excess : cold_ex) - slack,
						k->dur);
				off = hi - lo;
			} else {
				lo = clamp_late((int64_t)k->spacing - slack, k->dur);
				off = (hi - lo) / 2;
			}
			/* The error moves time between this kernel's duration (for a
			 * stalled call: the gap after it) and the previous kernel's
			 * gap. A gap is averaged per position in the run (the
			 * profile's sequence) over the T runs: its mean moves by
			 * off / T, whatever the kernel's ID. */
			int64_t err = off / runs;
			mean_err = err > mean_err ? err : mean_err;
			worst_off = off > worst_off ? off : worst_off;
		}
		/* A call slower by much more (the thread preempted, a driver
		 * stall) leaves where the kernel, or the end event, was enqueued
		 * unknown, unless the device was busy past it: the start event
		 * fired after the launch call ended, the end event after its
		 * latest arrival. Such a kernel's duration is then the mean of
		 * the whole observations of its kernel ID, the rest of the time
		 * moved to the gap after it (the device was idle then, as far as
		 * the service's kernels go); with none yet, the run is reported
		 * without records (the daemon discards it). */
		int64_t ue = k->u + k->dur - (int64_t)k->spacing - k->post; /* end event − host, as u */
		int whole = (excess <= FK_SLOW_LAUNCH_NS || slack >= (int64_t)k->spacing + k->post) &&
			    (k->endcall - emin <= FK_SLOW_LAUNCH_NS || ue - umin >= k->endcall);
		int64_t dur = k->dur - late > 0 ? k->dur - late : 0, gap = k->gap + late_next;
		kstat *st = kstat_of(m, k->kid);
		if (st && whole) {
			st->n++;
			st->sum += (uint64_t)dur;
		} else if (st && st->n) {
			int64_t mean = (int64_t)(st->sum / st->n);
			gap += dur - mean;
			dur = mean;
			fk_log(FK_LOG_DEBUG, "%s: launch call stalled (%lld ns): duration %lld ns from earlier runs",
			       k->fn->name, (long long)k->post, (long long)dur);
		} else {
			stalled = 1;
		}
		if (i + 1 == m->nrun) {
			gap = 0;
			k->flags |= FK_MEAS_GAP_SPANS_RUN_END;
		} else if (gap < 0) {
			gap = 0;
			k->flags |= FK_MEAS_OVERLAPPED;
		}
		k->dur = dur;
		k->gap = gap;
		late_next = late;
	}
	if (stalled) {
		fk_log(FK_LOG_DEBUG, "a run not measured whole (a stalled launch before its kernel's first whole measurement)");
		return FK_UNMEASURED_STALLED;
	}
	/* A launch call stalled long (the thread preempted, on a loaded
	 * machine typically) while the device idled: the kernel's duration is
	 * its ID's mean (above), but whether the gap before it or the gap
	 * after it took the rest is a guess off by up to half the stall. Where
	 * that could move a gap's mean over the T profiled runs by more than
	 * FK_GAP_ERR_NS (a fifth of the 10 µs the profile's gaps are held to:
	 * a stall of 2·T µs or more), the run is reported without records (the
	 * daemon discards it), unless the service has such stalls in every
	 * run: then they go, rather than never. (The bound was a fraction of
	 * a kernel ID's mean, when a stalled kernel's duration was a guess too:
	 * on a busy host it withheld too many of a waiter's runs, docs/design.md
	 * "Profiles".) */
	if (mean_err > FK_GAP_ERR_NS && m->ambiguous_runs < FK_AMBIGUOUS_SKIP) {
		m->ambiguous_runs++;
		fk_log(FK_LOG_DEBUG, "a run's kernel start uncertain by %lld ns: not reported", (long long)worst_off);
		return FK_UNMEASURED_UNCERTAIN;
	}
	m->ambiguous_runs = 0;
	return 0;
}

/* Send a settled run: KernelInfo for new IDs, then the records in
 * datagrams of at most 1400 bytes. */
static void ship_run(const ship *sh, mstate *m)
{
	fk_meas_rec out[MEAS_PER_DGRAM];
	size_t n = 0;
	for (size_t i = 0; i < m->nrun; i++) {
		rkernel *k = &m->run[i];
		kernel_info(sh, kstat_of(m, k->kid), k);
		out[n++] = (fk_meas_rec){k->kid, (uint64_t)k->dur, (uint64_t)k->gap, k->flags};
		if (n == MEAS_PER_DGRAM || i + 1 == m->nrun) {
			fk_link_put(&(fk_msg_out){.type = FK_MSG_MEASUREMENTS, .task_id = sh->who.id, .token = sh->who.token,
						   .run = sh->run, .records = out, .records_n = n});
			n = 0;
		}
	}
}

/* The run the core reports as measured (FK_ACT_RECORDS): its settled
 * records go, KernelInfo first for new IDs; the core's RunEnd follows. */
void fk_measure_ship(fk_task *t, const fk_act *a)
{
	mstate *m = t->meas;
	ship sh = {a->who, a->run, a->reg_gen};
	if (m && m->nrun)
		ship_run(&sh, m);
}

/* The run is over, reported or not (a run joined mid-run is not). */
void fk_measure_run_done(fk_task *t)
{
	mstate *m = t->meas;
	if (m) {
		m->nrun = 0;
		m->run_bad = 0;
		m->noev = 0;
	}
}

/* Whether a run that ended measured (kernels launched) can be shipped, and
 * if not why; its kernels are settled. */
static void run_verdict(fk_task *t, mstate *m, uint32_t kernels, fk_run_done *d)
{
	if (!m->nrun && !m->noev && !m->run_bad)
		return; /* not measured (a sharing run not sampled) */
	uint8_t why;
	if (m->noev || m->run_bad)
		why = FK_UNMEASURED_NO_EVENTS;
	else if (m->nrun != kernels)
		why = FK_UNMEASURED_STOPPED; /* measured from or up to mid-run (the phase or sampling changed) */
	else
		why = settle(m, atomic_load_explicit(&t->profile_runs, memory_order_relaxed));
	d->measured = why == 0;
	d->unmeasured = why;
}

/* The service blocks in a host-blocking call, has not launched for a while,
 * or the process exits: a good time to read events. Checked per record, so
 * that reading stops as soon as the service launches again. */
static int quiet(fk_task *t, int exiting)
{
	return atomic_load_explicit(&fk_blocked, memory_order_relaxed) > 0 || exiting ||
	       fk_now_ns() - atomic_load_explicit(&t->last_launch_ns, memory_order_relaxed) > FK_IDLE_READ_NS;
}

static rkernel *run_add(mstate *m)
{
	if (m->nrun == m->caprun) {
		size_t cap = m->caprun ? m->caprun * 2 : 1024;
		rkernel *r = realloc(m->run, cap * sizeof *r);
		if (!r)
			return NULL;
		m->run = r;
		m->caprun = cap;
	}
	return &m->run[m->nrun++];
}

int fk_measure_poll(fk_task *t, int exiting, int *pending, fk_run_done *done)
{
	mstate *m = t->meas;
	int produced = 0;
	*pending = 0;
	if (!m)
		return 0;
	fk_evpool *p = atomic_load(&t->pool);
	/* A run's events are read after it ended, while the service blocks in
	 * a host-blocking call (usually the next run's sync) or has not
	 * launched for 1 ms: the driver's event calls would otherwise compete
	 * with the service's launches (on simgpu for its lock, on a real
	 * driver for the context's), and a launch delayed before it enqueues
	 * is the one delay the correction above cannot see. A service that
	 * never pauses long enough is read while it runs once it is two runs
	 * behind, as is a run long enough to drain the event pool, and a
	 * profiling run as soon as it ended (below). */
	if (m->head == m->tail)
		return 0;
	int low = p && (size_t)(atomic_load_explicit(&p->free_q->head, memory_order_relaxed) -
				atomic_load_explicit(&p->free_q->tail, memory_order_relaxed)) <= FK_EV_PAIRS / 4;
	/* A profiling run's end waits for the run before it to be shipped
	 * (sync.c): a run that ended is read at once, while the service
	 * launches the next one, as a run two behind always was. Waiting for a
	 * quiet moment instead left the reading to that wait whenever the next
	 * run's synchronization was short (a service that launches as fast as
	 * the device runs): the service then waited for its own measurements. */
	int next_waits = (atomic_load_explicit(&t->mode, memory_order_relaxed) & FK_MODE_MEASURE) != 0;
	while (m->head != m->tail) {
		mitem *it = &m->q[m->head % m->cap];
		if (it->kind == FK_REC_RUN_END) { /* its kernels are read: the core decides at once */
			drop_anchor(t, m);
			*done = (fk_run_done){.ended = 1, .kernels = it->kernels, .reason = it->reason,
					      .last_seq = it->last_seq, .run_ns = it->kid};
			run_verdict(t, m, it->kernels, done);
			m->ends--;
			m->head++;
			produced++;
			break;
		}
		if (it->noev) { /* nothing to read: the run cannot be shipped */
			m->noev = 1;
			m->head++;
			produced++;
			continue;
		}
		/* Checked before every driver call: the service may resume at any
		 * moment, and each call could hold the driver's lock against it. */
		if (!low && !(m->ends > 1 || (m->ends > 0 && (next_waits || quiet(t, exiting)))))
			break;
		if (p->ctx != current_ctx && fk_drv.cuCtxSetCurrent(p->ctx) == CUDA_SUCCESS)
			current_ctx = p->ctx;
		if (!m->has_anchor) {
			m->anchor = it->ev;
			m->anchor_host = p->host_ns[it->ev];
			m->has_anchor = 1;
		}
		/* Two calls per kernel: its start and end against the run's first
		 * start event (float milliseconds: ~10 ns over a 100 ms run). */
		float ems, sms = 0;
		CUresult q = fk_drv.cuEventElapsedTime(&ems, p->start[m->anchor], p->end[it->ev]);
		if (q == CUDA_ERROR_NOT_READY) {
			*pending = 1;
			break;
		}
		if (q == CUDA_SUCCESS && it->ev != m->anchor) {
			if (!low && !(m->ends > 1 || (m->ends > 0 && (next_waits || quiet(t, exiting)))))
				break; /* the end time is read again next time */
			q = fk_drv.cuEventElapsedTime(&sms, p->start[m->anchor], p->start[it->ev]);
		}
		rkernel *k = q == CUDA_SUCCESS ? run_add(m) : NULL;
		if (!k) {
			m->run_bad = 1; /* unmeasurable: this run cannot be reported whole */
			if (it->ev != m->anchor)
				release(t, it->ev);
			m->head++;
			continue;
		}
		int64_t a = ns_of(sms), e = ns_of(ems);
		*k = (rkernel){.kid = it->kid, .fn = it->fn, .dur = e - a, .end = e, .spacing = it->spacing,
			       .u = a - (int64_t)(p->host_ns[it->ev] - m->anchor_host),
			       .post = (int64_t)(p->end_host_ns[it->ev] - p->host_ns[it->ev]) - it->spacing,
			       .endcall = p->end_call_ns[it->ev], .first = m->nrun == 1};
		memcpy(k->dims, it->dims, sizeof k->dims);
		if (m->nrun > 1)
			k[-1].gap = a - k[-1].end;
		if (it->ev != m->anchor)
			release(t, it->ev);
		m->head++;
		produced++;
	}
	if (m->head != m->tail)
		*pending = 1; /* look again soon: the service may block or go idle */
	return produced;
}

void fk_measure_reset_task(fk_task *t)
{
	/* Forked child: the parent's events and queue mean nothing here. */
	mstate *m = t->meas;
	if (m) {
		free(m->q);
		free(m->ks);
		free(m->run);
	}
	free(m);
	t->meas = NULL;
	current_ctx = NULL;
}
