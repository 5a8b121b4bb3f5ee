/* waiter.c — an application thread's waits, the I/O around the core's
 * decisions (core.h): its first launch's registration, and a waiter's
 * launch without credit.
 *
 * Registration: the first launch on a device registers it and waits, at
 * most FIKIT_CONNECT_TIMEOUT_MS, for the answer; other threads' launches
 * wait for it too. A waiter's launch: a LaunchRequest from a per-thread
 * socket, then its Grant (launch), a Hold (keep waiting) or an Error (stop).
 * The socket is per thread so that concurrent waiters each receive their
 * own answers without a shared dispatcher; it is made at the thread's first
 * request and closed by a key destructor. Where the task owns a waiter slot
 * on the daemon's board (board.h), one thread at a time waits there
 * instead: the daemon writes the answer into the slot and wakes it with a
 * futex, no datagram either way back.
 *
 * While it waits, a thread that may resume on the board (docs/scheduler.md
 * "Resuming on the board": the task the daemon lets resume)
 * goes without the answer as soon as the board shows the better
 * priorities' runs ended with room before their next: it sleeps on its
 * GPU's wake word, which their hooks bump at a run end when someone
 * sleeps there, and the daemon at every answer in a slot.
 *
 * Every answer, and the end of every wait, is an event for the core, which
 * says how long to wait, when the launch goes, whether a stale grant is
 * asked for again, and what a timeout (fail open) or a refused connection
 * means. */
#include "hook.h"

#include <errno.h>
#include <string.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- registration ---- */

static void deadline_in(struct timespec *dl, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	uint64_t ns = (uint64_t)dl->tv_nsec + (uint64_t)ms * 1000000u;
	dl->tv_sec += (time_t)(ns / 1000000000u);
	dl->tv_nsec = (long)(ns % 1000000000u);
}

/* Wait (bounded) while the task's first registration is under way, so that
 * every thread's launches after it are seen, not only the registering
 * thread's. The cv has a CLOCK_MONOTONIC deadline (task.c): wall-clock
 * jumps must not stretch it. */
static void wait_registered(fk_task *t, const struct timespec *dl)
{
	pthread_mutex_lock(&t->mu);
	while (atomic_load(&t->state) == FK_ST_REGISTERING)
		if (pthread_cond_timedwait(&t->cv, &t->mu, dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->mu);
}

void fk_register_wait(fk_task *t)
{
	struct timespec dl;
	deadline_in(&dl, fk_cfg.connect_timeout_ms);
	fk_ev ev = {.type = FK_EV_REGISTER, .task = t->index, .now = fk_now_ns(), .dev_name = t->dev_name,
		    .dev_name_len = strlen(t->dev_name)};
	memcpy(ev.uuid, t->uuid, 16);
	fk_act a[2];
	int starts = fk_ctl_step(&ev, a, 2) > 0 && a[0].type == FK_ACT_START;
	if (starts) {
		if (fk_sender_start() != 0) {
			fk_ctl_step(&(fk_ev){.type = FK_EV_START_FAILED, .task = t->index, .now = fk_now_ns()}, a, 2);
			return;
		}
		fk_sender_wake(); /* a running sender sends the Register at once */
	}
	wait_registered(t, &dl);
	if (starts && atomic_load(&t->state) == FK_ST_REGISTERING)
		fk_ctl_step(&(fk_ev){.type = FK_EV_REGISTER_TIMEOUT, .task = t->index, .now = fk_now_ns()}, a, 2);
}

/* ---- a waiter's launch ---- */

static pthread_key_t sock_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread int tl_fd = -1;
static __thread unsigned tl_gen;

static void close_sock(void *p)
{
	(void)p;
	if (tl_fd >= 0) {
		fk_link_unlink_own(tl_fd);
		close(tl_fd);
	}
	tl_fd = -1;
}

static void make_key(void) { pthread_key_create(&sock_key, close_sock); }

static int thread_socket(void)
{
	unsigned gen = atomic_load_explicit(&fk_generation, memory_order_relaxed);
	if (tl_fd >= 0 && tl_gen == gen)
		return tl_fd;
	if (tl_fd >= 0)
		close(tl_fd); /* inherited from the parent across fork */
	pthread_once(&key_once, make_key);
	tl_fd = fk_link_socket();
	tl_gen = gen;
	if (tl_fd >= 0)
		pthread_setspecific(sock_key, (void *)1); /* non-NULL: run the destructor */
	return tl_fd;
}

/* The task's waiter slot on the board (board.h), claimed for request seq:
 * the daemon answers it there and wakes us with a futex. NULL when the
 * task has none, or another of its threads waits in it. */
static fk_board_slot *claim_slot(fk_task *t, uint32_t id, uint32_t seq)
{
	fk_board *b = atomic_load_explicit(&t->board, memory_order_acquire);
	if (!b || !id)
		return NULL;
	fk_board_slot *sl = &b->slot[id % FK_BOARD_SLOTS];
	uint32_t free_seq = 0;
	if (atomic_load_explicit(&sl->task, memory_order_acquire) != id ||
	    !atomic_compare_exchange_strong(&sl->wait_seq, &free_seq, seq))
		return NULL;
	return sl;
}

static void release_slot(fk_board_slot *sl, uint32_t seq)
{
	if (sl)
		atomic_compare_exchange_strong(&sl->wait_seq, &seq, 0);
}

/* Longest futex sleep between looks at the socket: errors (and a refused
 * connection) still come by UDP. */
#define SLOT_POLL_NS 2000000u
/* A thread that may resume but waits on its socket (another of its task's
 * threads has the slot) looks at the board this often. */
#define RESUME_POLL_NS 200000u

/* One wait: what the core says to an event about it. */
typedef struct wait {
	fk_task *t;
	uint32_t seq, id, gen;
	uint64_t until; /* the core's deadline */
	int done, granted;
} wait;

static void step(wait *w, fk_ev *ev)
{
	fk_act a[4];
	ev->task = w->t->index;
	ev->wait_task = w->t->index;
	ev->now = fk_now_ns();
	int n = fk_ctl_step(ev, a, 4);
	for (int i = 0; i < n; i++) {
		if (a[i].type == FK_ACT_WAIT && a[i].seq == w->seq)
			w->until = a[i].until;
		if (a[i].type == FK_ACT_GO && a[i].seq == w->seq)
			w->done = 1, w->granted = a[i].granted;
	}
}

static void on_datagram(wait *w, uint8_t *buf, size_t len)
{
	fk_ev ev = {.type = FK_EV_MESSAGE, .wait_seq = w->seq, .wait_id = w->id};
	size_t mlen = fk_open(buf, len);
	if (mlen && !fk_decode(buf, mlen, &ev.msg))
		step(w, &ev);
}

static void on_refused(wait *w)
{
	step(w, &(fk_ev){.type = FK_EV_REFUSED, .seq = w->seq, .gen = w->gen,
			 .why = "connection refused to a launch request"});
	w->done = 1;
	w->granted = 0;
}

/* The slot's answer to seq, if it has come, as the datagram would say it. */
static void look_at_slot(wait *w, fk_board_slot *sl, uint64_t *hold_seen)
{
	if (atomic_load_explicit(&sl->grant_seq, memory_order_acquire) == w->seq) {
		fk_ev ev = {.type = FK_EV_MESSAGE, .wait_seq = w->seq, .wait_id = w->id};
		ev.msg = (fk_msg_in){.type = FK_MSG_GRANT,
				     .task_id = w->id,
				     .seq = w->seq,
				     .credit = atomic_load_explicit(&sl->credit, memory_order_relaxed),
				     .seen_ns = atomic_load_explicit(&sl->seen_ns, memory_order_relaxed),
				     .expires_ns = atomic_load_explicit(&sl->expires_ns, memory_order_relaxed)};
		step(w, &ev);
		return;
	}
	uint64_t h = atomic_load_explicit(&sl->hold_ns, memory_order_relaxed);
	if (h != *hold_seen) {
		*hold_seen = h;
		fk_ev ev = {.type = FK_EV_MESSAGE, .wait_seq = w->seq, .wait_id = w->id};
		ev.msg = (fk_msg_in){.type = FK_MSG_HOLD, .task_id = w->id, .seq = w->seq};
		step(w, &ev);
	}
}

/* Ask for launch seq and wait for the answer; use_slot: the answer may come
 * in the task's board slot (a request asked again for the same seq goes by
 * UDP: the slot still shows the first grant). Returns 1 granted, 0 failed
 * open (or told to stop), FK_WAITER_RESUMED when the board let it go (dur:
 * its predicted duration). */
static int request(fk_task *t, uint32_t seq, uint64_t kid, int use_slot, uint64_t dur)
{
	int fd = thread_socket();
	if (fd < 0)
		return 0;
	uint8_t buf[2048];
	ssize_t r;
	while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
		; /* late answers to requests that already failed open */
	fk_who who = fk_who_of(t);
	wait w = {.t = t, .seq = seq, .id = who.id, .gen = atomic_load(&t->reg_gen)};
	/* Before the request goes: the daemon looks for it when it answers. */
	fk_board_slot *sl = use_slot ? claim_slot(t, who.id, seq) : NULL;
	uint64_t hold_seen = sl ? atomic_load_explicit(&sl->hold_ns, memory_order_relaxed) : 0;
	fk_msg_out m = {.type = FK_MSG_LAUNCH_REQUEST, .task_id = who.id, .token = who.token, .seq = seq, .kernel_id = kid};
	size_t len = fk_seal(buf, fk_encode(buf, sizeof buf - FK_MAC_TRAILER, &m), sizeof buf);
	if (fk_link_send(fd, buf, len, 0) < 0) {
		release_slot(sl, seq);
		if (errno == ECONNREFUSED)
			on_refused(&w);
		return 0;
	}
	step(&w, &(fk_ev){.type = FK_EV_REQUEST, .seq = seq});
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	int resumed = 0, sleeper = 0;
	while (!w.done) {
		uint32_t wake_gen = 0;
		if (bg) {
			/* The wake word before the looks: a change after them ends
			 * the futex wait at once. A thread that may resume counts
			 * itself a sleeper first, so that a run end after its look
			 * wakes it (board.c). */
			fk_resume_view v;
			fk_resume_view_of(t, &v, fk_now_ns());
			int may = v.on && v.task_ok;
			if (may != sleeper) {
				atomic_fetch_add_explicit(&bg->sleepers, may ? 1u : (uint32_t)-1, memory_order_seq_cst);
				sleeper = may;
			}
			wake_gen = atomic_load_explicit(&bg->wake, memory_order_seq_cst);
			if (may && fk_resume_now(t, dur)) {
				resumed = 1;
				break;
			}
		}
		if (sl) {
			look_at_slot(&w, sl, &hold_seen);
			if (w.done)
				break;
			if (atomic_load_explicit(&sl->task, memory_order_relaxed) != w.id)
				sl = NULL; /* the daemon let the task go (and freed the slot): what it says comes by UDP */
		}
		uint64_t now = fk_now_ns();
		if (now >= w.until) {
			step(&w, &(fk_ev){.type = FK_EV_WAIT_EXPIRED, .seq = seq, .gen = w.gen});
			break;
		}
		uint64_t left = w.until - now;
		if (sl) {
			/* Sleep on the slot, looking at the socket now and then. */
			while (!w.done && (r = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) >= 0)
				on_datagram(&w, buf, (size_t)r);
			if (w.done)
				break;
			if (errno == ECONNREFUSED) {
				on_refused(&w);
				break;
			}
			if (left > SLOT_POLL_NS)
				left = SLOT_POLL_NS;
			struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left};
			syscall(SYS_futex, &bg->wake, FUTEX_WAIT, wake_gen, &ts, NULL, 0);
			continue;
		}
		if (sleeper && left > RESUME_POLL_NS)
			left = RESUME_POLL_NS; /* no slot to be woken in: look at the board now and then */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
		if (ppoll(&pfd, 1, &ts, NULL) <= 0)
			continue;
		r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (r >= 0)
			on_datagram(&w, buf, (size_t)r);
		else if (errno == ECONNREFUSED)
			on_refused(&w);
	}
	if (sleeper)
		atomic_fetch_sub_explicit(&bg->sleepers, 1, memory_order_seq_cst);
	release_slot(sl, seq);
	if (resumed)
		return FK_WAITER_RESUMED;
	return w.granted;
}

int fk_waiter_launch(fk_task *t, uint32_t seq, uint64_t kid, uint64_t dur)
{
	int granted = request(t, seq, kid, 1, dur);
	for (uint32_t asks = 1; granted; asks++) {
		if (granted == FK_WAITER_RESUMED)
			return granted;
		fk_board *b = atomic_load_explicit(&t->board, memory_order_relaxed);
		fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
		/* A granted launch keeps to the µs bound too; the board after the
		 * wait decides whether the grant is still good (core:
		 * on_granted). The wait ends when a better priority launches:
		 * the grant is stale then, and a thread that slept on through
		 * the better priority's run woke to ask again only after it,
		 * missing the gap the grant was for. */
		int stale = 0;
		if (bg && fk_better_registered(bg))
			stale = fk_us_wait(t, bg, dur, fk_now_ns());
		uint64_t now = fk_now_ns();
		fk_act a[4];
		int n = fk_ctl_step(&(fk_ev){.type = FK_EV_GRANTED, .task = t->index, .now = now, .seq = seq, .asks = asks,
					     .above = bg ? fk_board_above(b, bg, fk_cfg.priority, now) : 0},
				    a, 4);
		int reask = 0;
		for (int i = 0; i < n; i++)
			reask |= a[i].type == FK_ACT_REASK;
		if (!reask) {
			if (stale) /* it goes all the same (asked enough): within the bound */
				fk_us_wait(t, bg, dur, 0);
			break;
		}
		granted = request(t, seq, kid, 0, dur);
	}
	return granted;
}
