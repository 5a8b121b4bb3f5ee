/* sender.c — the one thread that talks to the scheduler: the I/O loop
 * around the hook's core (core.h, control.c). It drains the launch ring and
 * ships the launches at once (one LaunchBatch per task, sendmmsg batches),
 * turns event pairs into measurements (measure.c), and steps the core with
 * what it receives on its control socket, its timer (registrations,
 * heartbeats) and the runs that ended, sending the datagrams the core asks
 * for.
 *
 * Launching threads never make a syscall to wake it, so it polls: ppoll on
 * the control socket and an eventfd (woken only by registration, run starts
 * and credit launches while it dozes) with a short timeout right after
 * activity, doubling to POLL_MAX_NS when idle. Timer slack is 1 ns on this
 * thread so the short timeouts are kept. Each wake costs the service's
 * machine CPU whatever it sends, so the shortest interval is POLL_MIN_NS
 * (hook-bench measures the trade-off; hookclient/README.md): launches carry
 * their own times, so the daemon places them correctly however late their
 * report arrives. */
#include "hook.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define POLL_MIN_NS 100000     /* right after activity */
#define POLL_MAX_NS 1000000    /* idle */
#define POLL_MEASURE_NS 100000 /* events pending on the device */
#define FK_FLUSH_MS 1000       /* fikit_flush() waits at most this long */
#define FK_EXIT_FLUSH_MS 250   /* … and the exit handler */

fk_ring fk_q; /* launching threads → sender */
atomic_int fk_sender_dozing;

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static int started; /* the sender thread runs in this process */
/* Held by the sender while it works, released while it sleeps in ppoll:
 * fork takes it first, so the sender is never inside an allocator (or any
 * lock of ours) when the process forks. glibc's malloc locks itself around
 * fork; the sanitizers' allocators do not, and a child forked while the
 * sender was allocating inherited a locked allocator and hung at its
 * sender's first allocation (TSan and ASan both). */
static pthread_mutex_t work_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int exiting;
static unsigned flush_handled; /* the last flush request the sender served */
static uint64_t ring_dropped_reported;

/* The sender's share of the core's actions: datagrams. */
static fk_act acts[FK_ACTS_MAX];

/* The task's kernel durations from a KernelTimes (m, still in its
 * datagram): into its table, made at the first (kerneltimes.h). */
static void store_times(fk_task *t, const fk_msg_in *m)
{
	fk_ktab *k = atomic_load(&t->kt);
	if (!k) {
		k = calloc(1, sizeof *k);
		if (!k)
			return;
		atomic_store(&t->kt, k);
	}
	static fk_kernel_time e[FK_MAX_DATAGRAM / 3];
	static uint64_t ids[FK_MAX_DATAGRAM / 3];
	static uint32_t ns[FK_MAX_DATAGRAM / 3];
	size_t n = fk_decode_elems(m, e, sizeof e / sizeof e[0]);
	for (size_t i = 0; i < n; i++)
		ids[i] = e[i].kernel_id, ns[i] = e[i].duration_ns;
	fk_kt_put(k, m->bound_ns, m->default_ns, ids, ns, (uint32_t)n);
	fk_log(FK_LOG_DEBUG, "kernel times: %zu kernels, bound %u ns, default %u ns", n, m->bound_ns, m->default_ns);
}

static void send_acts(int n)
{
	for (int i = 0; i < n; i++)
		if (acts[i].type == FK_ACT_SEND) {
			if (acts[i].msg.type == FK_MSG_REGISTER)
				fk_log(FK_LOG_DEBUG, "Register seq %u key \"%.*s\" device %.*s priority %d weight %d",
				       acts[i].msg.seq, (int)acts[i].msg.task_key_len, acts[i].msg.task_key,
				       (int)acts[i].msg.device_name_len, acts[i].msg.device_name, fk_cfg.priority,
				       fk_cfg.weight);
			fk_link_put(&acts[i].msg);
		}
}

static void step(const fk_ev *ev) { send_acts(fk_ctl_step(ev, acts, FK_ACTS_MAX)); }

static void refused(const char *why)
{
	step(&(fk_ev){.type = FK_EV_REFUSED, .task = -1, .now = fk_now_ns(), .why = why});
}

static void flush(void)
{
	if (fk_link_pending())
		fk_link_flush();
	if (fk_link_refused())
		refused("connection refused on send");
	/* The runs processed are sent: a run end waiting for them goes on. */
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		if (atomic_load_explicit(&t->runs_shipped, memory_order_relaxed) == t->runs_processed)
			continue;
		atomic_store_explicit(&t->runs_shipped, t->runs_processed, memory_order_release);
		if (atomic_load_explicit(&t->ship_waiters, memory_order_relaxed))
			syscall(SYS_futex, &t->runs_shipped, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
	}
}

/* A profiling run's end that waits for this thread (sync.c) waits for the
 * runs ended before it: each iteration begun while it waits drains every
 * run end pushed by then, reads those runs and ships them, or says so: a
 * lapse (fikit_own_wait_lapses), the hook holding back what a service
 * waits for. */
static uint32_t waited_for[FK_MAX_TASKS]; /* runs_ended as the iteration began */
static uint8_t waiting[FK_MAX_TASKS];

static void note_waited_for(void)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		waiting[i] = atomic_load(&t->ship_waiters) > 0;
		if (waiting[i])
			waited_for[i] = atomic_load_explicit(&t->runs_ended, memory_order_acquire);
	}
}

static void check_waited_for(void)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++)
		if (waiting[i] && (int32_t)(atomic_load(&fk_tasks[i].runs_shipped) - waited_for[i]) < 0) {
			atomic_fetch_add_explicit(&fk_own_wait_lapses, 1, memory_order_relaxed);
			waiting[i] = 0;
		}
}

/* ---- the daemon's messages ---- */

/* The descriptor that came with the datagram being handled (-1: none). */
static int answer_fd = -1;

/* Map the board a RegisterAck names (board.h); NULL: gate by UDP alone. */
static fk_board_gpu *attach_board(fk_task *t, const fk_msg_in *m)
{
	fk_board *b = NULL;
	if (m->board_len == sizeof FK_BOARD_IN_ANSWER - 1 && !memcmp(m->board, FK_BOARD_IN_ANSWER, m->board_len)) {
		/* A daemon on a unix socket sends the board itself. */
		b = fk_board_map_fd(answer_fd, m->board_gen, m->board_gpu, t->uuid);
		answer_fd = -1;
	} else if (m->board_len) {
		b = fk_board_map(m->board, m->board_len, m->board_gen, m->board_gpu, t->uuid);
	}
	fk_board_gpu *g = b ? &b->gpu[m->board_gpu] : NULL;
	if (g && !atomic_load(&t->bgpu))
		fk_log(FK_LOG_INFO, "sharing the scheduler's board %.*s (GPU section %u)", (int)m->board_len, m->board,
		       m->board_gpu);
	atomic_store(&t->board, b);
	atomic_store(&t->bgpu, g);
	return g;
}

/* What the core needs to know about the task a message names, read here:
 * its launch counter, its board (a RegisterAck's), whether it can measure
 * (its events are made in its context, on this thread, when a phase of
 * profiling is announced). */
static void on_message(const fk_msg_in *m)
{
	fk_ev ev = {.type = FK_EV_MESSAGE, .msg = *m, .task = fk_ctl_target(m)};
	if (ev.task >= 0) {
		fk_task *t = &fk_tasks[ev.task];
		int phased = m->type == FK_MSG_REGISTER_ACK || m->type == FK_MSG_STATE;
		int measures = m->phase == FK_PHASE_PROFILING || m->sample > 0; /* every run, or sampled ones */
		if (phased && measures && !atomic_load(&t->pool) && fk_drv.cuCtxSetCurrent &&
		    fk_drv.cuCtxSetCurrent(t->ctx) == CUDA_SUCCESS)
			fk_pool_create(t);
		ev.pool = atomic_load(&t->pool) != NULL;
		if (m->type == FK_MSG_REGISTER_ACK) {
			/* A new registration: the durations come again (a new
			 * profile may have been made). */
			fk_ktab *k = atomic_load(&t->kt);
			if (k)
				fk_kt_clear(k);
			fk_board_gpu *g = attach_board(t, m);
			ev.board = g != NULL;
			ev.now = fk_now_ns();
			ev.above = g ? fk_board_above(atomic_load(&t->board), g, fk_cfg.priority, ev.now) : 0;
		}
		ev.seq_now = atomic_load_explicit(&t->seq, memory_order_relaxed);
		if (m->type == FK_MSG_WARM) {
			ev.in_run = fk_warm_in_run(t);
			ev.capturing = atomic_load(&fk_capturing) > 0;
			ev.ctx_gone = fk_probe_ctx_gone(t);
		}
	}
	if (!ev.now)
		ev.now = fk_now_ns();
	int n = fk_ctl_step(&ev, acts, FK_ACTS_MAX);
	send_acts(n);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[acts[i].task];
		if (acts[i].type == FK_ACT_KERNEL_TIMES)
			store_times(t, m);
		else if (acts[i].type == FK_ACT_CALIBRATE)
			fk_probe_calibrate(t, acts[i].seq, acts[i].ns);
		else if (acts[i].type == FK_ACT_WARM)
			fk_warm_launch(t, acts[i].ns);
	}
}

static int receive_all(void)
{
	uint8_t buf[2048];
	int n = 0;
	for (;;) {
		int rfd;
		ssize_t r = fk_link_recv_fd(fk_link_ctl(), buf, sizeof buf, &rfd);
		answer_fd = rfd;
		if (r < 0) {
			if (errno == ECONNREFUSED) {
				refused("connection refused on receive");
				continue; /* the error is reported once; keep reading */
			}
			return n;
		}
		fk_msg_in m;
		size_t len = fk_open(buf, (size_t)r);
		if (len && fk_decode(buf, len, &m))
			fk_log(FK_LOG_DEBUG, "ignoring a malformed datagram of %zu bytes", len);
		else if (len)
			on_message(&m);
		if (answer_fd >= 0)
			close(answer_fd); /* not taken: not a board answer, or mapped already */
		answer_fd = -1;
		n++;
	}
}

/* ---- launch reports ---- */

/* Launch reports of one task waiting to go out as one LaunchBatch: one
 * datagram for what the ring held, instead of one per launch (each costs
 * the sender a trip through the loopback stack). */
typedef struct batch {
	fk_who who;
	uint32_t seq, n;
	uint64_t base_ns;
	fk_launch l[FK_BATCH_MAX];
} batch;
static batch batches[FK_MAX_TASKS];

static void batch_flush(int ti)
{
	batch *b = &batches[ti];
	if (!b->n)
		return;
	fk_link_put(&(fk_msg_out){.type = FK_MSG_LAUNCH_BATCH, .task_id = b->who.id, .token = b->who.token, .seq = b->seq,
				   .base_ns = b->base_ns, .launches = b->l, .launches_n = b->n});
	b->n = 0;
}

static void batch_add(fk_task *t, const fk_rec *r)
{
	batch *b = &batches[t->index];
	fk_who who = fk_who_of(t);
	/* A batch holds consecutive seqs (threads may push out of order) whose
	 * times fit its 32-bit offsets. */
	if (b->n && (b->who.id != who.id || b->who.token != who.token || r->seq != b->seq + b->n || r->t_ns < b->base_ns ||
		     r->t_ns - b->base_ns > UINT32_MAX || b->n == FK_BATCH_MAX))
		batch_flush(t->index);
	if (!b->n) {
		b->who = who;
		b->seq = r->seq;
		b->base_ns = r->t_ns;
	}
	b->l[b->n++] = (fk_launch){r->kid, (uint32_t)(r->t_ns - b->base_ns)};
}

static int drain_ring(void)
{
	fk_rec r;
	int n = 0;
	while (fk_ring_pop(&fk_q, &r)) {
		n++;
		fk_task *t = &fk_tasks[r.task];
		if (r.kind == FK_REC_LAUNCH && (r.flags & FK_RF_NOTIFY) && atomic_load(&t->state) == FK_ST_ACTIVE)
			batch_add(t, &r);
		if ((r.kind == FK_REC_LAUNCH && (r.flags & (FK_RF_MEASURE | FK_RF_NOEV))) || r.kind == FK_REC_RUN_END) {
			/* Whatever this sends (a RunEnd) must not overtake the
			 * launches reported before it. */
			batch_flush(r.task);
			fk_measure_item(t, &r);
		}
	}
	for (int i = 0; i < FK_MAX_TASKS; i++)
		batch_flush(i);
	uint64_t d = atomic_load_explicit(&fk_q.dropped, memory_order_relaxed);
	if (d != ring_dropped_reported) {
		fk_log(FK_LOG_INFO, "launch ring full: %llu records dropped so far", (unsigned long long)d);
		ring_dropped_reported = d;
	}
	return n;
}

/* ---- runs ---- */

/* Measurements as far as the events allow, and each run that ended: the
 * core reports it (its records, then RunEnd) or not. force: read whatever
 * is left now (exit, fikit_flush()). */
static int measure_all(int *pending, int force)
{
	int activity = 0, n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		for (;;) {
			int p = 0;
			fk_run_done d = {0};
			activity += fk_measure_poll(t, force, &p, &d);
			*pending |= p;
			if (!d.ended)
				break;
			int k = fk_ctl_step(&(fk_ev){.type = FK_EV_RUN_END, .task = i, .now = fk_now_ns(), .kernels = d.kernels,
						     .run_ns = d.run_ns, .reason = (uint8_t)d.reason, .last_seq = d.last_seq,
						     .measured = d.measured, .unmeasured = d.unmeasured},
					    acts, FK_ACTS_MAX);
			for (int j = 0; j < k; j++) {
				if (acts[j].type == FK_ACT_RECORDS)
					fk_measure_ship(t, &acts[j]);
				else if (acts[j].type == FK_ACT_SEND) {
					if (acts[j].msg.type == FK_MSG_RUN_END && acts[j].msg.unmeasured)
						fk_log(FK_LOG_DEBUG, "run %u withheld (unmeasured %u)", acts[j].msg.run,
						       acts[j].msg.unmeasured);
					fk_link_put(&acts[j].msg);
				}
			}
			fk_measure_run_done(t);
			t->runs_processed++;
		}
	}
	return activity;
}

/* ---- the loop ---- */

static void *sender_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&work_mu); /* from its first instruction: it may allocate */
	prctl(PR_SET_NAME, "fikit-sender");
	prctl(PR_SET_TIMERSLACK, 1UL); /* ppoll's default 50 µs slack would dominate */
	if (fk_drv.cuThreadExchangeStreamCaptureMode) {
		/* A capture in global mode elsewhere must not forbid this thread's
		 * event queries (nor be invalidated by them). */
		CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		fk_drv.cuThreadExchangeStreamCaptureMode(&mode);
	}
	uint64_t timeout = POLL_MIN_NS;
	int readable = 1;
	for (;;) {
		int pending = 0;
		note_waited_for();
		unsigned req = atomic_load(&fk_flush_req);
		int activity = drain_ring();
		activity += measure_all(&pending, atomic_load(&exiting) || req != flush_handled);
		if (req != flush_handled && !pending && !fk_ring_maybe_nonempty(&fk_q)) {
			/* Everything measured is on its way: ask the daemon to say
			 * when it is durable (the core ends the flush). */
			flush_handled = req;
			fk_ctl_flush_serving(req);
			uint64_t now = fk_now_ns();
			step(&(fk_ev){.type = FK_EV_FLUSH, .now = now, .until = now + FK_FLUSH_MS * 1000000ull});
			activity++;
		}
		pending |= fk_probe_poll(); /* a calibration's probes: polled as events are */
		step(&(fk_ev){.type = FK_EV_TICK, .now = fk_now_ns()});
		flush();
		if (readable)
			activity += receive_all();
		flush();
		check_waited_for();
		timeout = activity ? POLL_MIN_NS : (timeout * 2 > POLL_MAX_NS ? POLL_MAX_NS : timeout * 2);
		uint64_t wait = pending && timeout > POLL_MEASURE_NS ? POLL_MEASURE_NS : timeout;
		struct pollfd pfd[2] = {{.fd = fk_link_ctl(), .events = POLLIN}, {.fd = fk_wake_fd, .events = POLLIN}};
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
		readable = 0;
		atomic_store_explicit(&fk_sender_dozing, wait > POLL_MIN_NS, memory_order_relaxed);
		pthread_mutex_unlock(&work_mu);
		int woke = ppoll(pfd, 2, &ts, NULL);
		pthread_mutex_lock(&work_mu);
		atomic_store_explicit(&fk_sender_dozing, 0, memory_order_relaxed);
		if (woke > 0) {
			readable = pfd[0].revents != 0; /* data, or an error (ECONNREFUSED) to collect */
			if (pfd[1].revents & POLLIN) {
				uint64_t v;
				ssize_t r = read(fk_wake_fd, &v, sizeof v);
				(void)r;
				timeout = POLL_MIN_NS;
			}
		}
	}
	return NULL;
}

/* ---- start, exit, fork ---- */

/* Step the core with ev and send what it says at once, without waiting
 * for the sender thread: exit, or a task leaving on a sticky error. */
static void step_now(const fk_ev *ev)
{
	fk_act out[FK_ACTS_MAX];
	int n = fk_ctl_step(ev, out, FK_ACTS_MAX);
	for (int i = 0; i < n; i++)
		if (out[i].type == FK_ACT_SEND)
			fk_link_send_now(&out[i].msg);
}

/* Task t leaves the scheduler: no more reports (its calls pass through),
 * and a Goodbye if it was registered. Returns 1 if it had not left yet. */
int fk_task_leave(fk_task *t)
{
	if (atomic_load(&t->state) == FK_ST_DISABLED)
		return 0;
	step_now(&(fk_ev){.type = FK_EV_LEAVE, .task = t->index, .now = fk_now_ns()});
	return 1;
}

/* Ask the sender to flush (ship what was measured, then the daemon says
 * when it is durable) and wait for it, at most ms: FK_FLUSH_*. */
static int flush_wait(unsigned ms)
{
	unsigned gen = atomic_fetch_add(&fk_flush_req, 1) + 1;
	fk_sender_wake();
	return fk_ctl_flush_wait(gen, ms);
}

/* Exported (hookclient/README.md "Flush"): a program that ends with _exit,
 * or a Go program (os.Exit runs no atexit handler), calls it before it
 * exits; found with dlsym(RTLD_DEFAULT, "fikit_flush"), so it runs the
 * same without the hook. 0: everything the runs that ended measured is
 * durable at the daemon (or nothing was registered); -1: not (the daemon
 * unreachable or slow: within FK_FLUSH_MS). */
FK_EXPORT int fikit_flush(void)
{
	if (!atomic_load_explicit(&fk_ready, memory_order_acquire) || fk_cfg.disabled)
		return 0;
	pthread_mutex_lock(&start_mu);
	int on = started;
	pthread_mutex_unlock(&start_mu);
	if (!on)
		return 0; /* nothing registered: nothing measured */
	return flush_wait(FK_FLUSH_MS) == FK_FLUSH_DURABLE ? 0 : -1;
}

static void at_exit(void)
{
	if (!started)
		return;
	/* Let the sender ship what the last run left, its events included,
	 * and the daemon make it durable (bounded: exit must not hang), then
	 * say goodbye without blocking. Programs that exit without running
	 * atexit handlers (Go's os.Exit, _exit) call fikit_flush() first, or
	 * lose what the sender had not shipped yet. */
	atomic_store(&exiting, 1);
	int r = flush_wait(FK_EXIT_FLUSH_MS);
	if (r == FK_FLUSH_NOT_SHIPPED)
		fk_log(FK_LOG_WARN, "exit: the sender did not ship the last measurements and launch reports within %d ms; "
				    "they are lost", FK_EXIT_FLUSH_MS);
	else if (r == FK_FLUSH_SHIPPED)
		fk_log(FK_LOG_DEBUG, "exit: the scheduler did not confirm the last measurements within %d ms",
		       FK_EXIT_FLUSH_MS);
	step_now(&(fk_ev){.type = FK_EV_EXIT, .now = fk_now_ns()});
	/* Every reply socket's name, not only the sender's: threads alive at
	 * exit run no destructor, the main thread's waiter socket included
	 * (a C service that asked for grants left it). */
	fk_link_unlink_all();
}

int fk_sender_start(void)
{
	static int atexit_done;
	int rc = 0;
	pthread_mutex_lock(&start_mu);
	if (started)
		goto out;
	rc = -1;
	if (fk_link_open())
		goto out;
	if (fk_wake_fd < 0 && (fk_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		fk_log(FK_LOG_WARN, "cannot create sockets (%s); running un-hooked", strerror(errno));
		goto out;
	}
	/* The sender must never take the service's signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	int err = pthread_create(&th, &attr, sender_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		fk_log(FK_LOG_WARN, "cannot start the sender thread (%s); running un-hooked", strerror(err));
		goto out;
	}
	started = 1;
	rc = 0;
	if (!atexit_done) {
		atexit(at_exit);
		atexit_done = 1;
	}
out:
	pthread_mutex_unlock(&start_mu);
	return rc;
}

void fk_sender_fork_prepare(void) { pthread_mutex_lock(&work_mu); }
void fk_sender_fork_parent(void) { pthread_mutex_unlock(&work_mu); }

void fk_sender_reset_child(void)
{
	/* The child has no sender thread; it starts one at its next launch. */
	pthread_mutex_unlock(&work_mu); /* this thread took it (fk_sender_fork_prepare) */
	pthread_mutex_init(&start_mu, NULL);
	flush_handled = 0;
	if (fk_wake_fd >= 0)
		close(fk_wake_fd);
	fk_wake_fd = -1;
	started = 0;
	memset(batches, 0, sizeof batches);
	atomic_store(&exiting, 0);
	fk_probe_reset_child();
}
