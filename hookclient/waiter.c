/* waiter.c — the waiter's launch path: LaunchRequest from a per-thread
 * socket, then wait for its Grant (launch) or a Hold (keep waiting, the
 * timeout starts again). The socket is per thread so that concurrent
 * waiters each receive their own answers without a shared dispatcher; it
 * is created at the thread's first request and closed by a key destructor.
 * Where the task owns a waiter slot on the daemon's board (board.h), one
 * thread at a time waits there instead: the daemon writes the answer into
 * the slot and wakes it with a futex, no datagram either way back.
 *
 * Fail-open: no message within FIKIT_GRANT_TIMEOUT_MS → launch anyway,
 * re-register, and let this task's launches pass straight through for a
 * back-off (1 s, doubling to 30 s, reset by the next grant). A refused
 * connection means the scheduler is gone: everything passes through and the
 * sender retries in the background. */
#include "hook.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000

static pthread_key_t sock_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread int tl_fd = -1;
static __thread unsigned tl_gen;
static atomic_int timeout_warned;

static void close_sock(void *p)
{
	(void)p;
	if (tl_fd >= 0)
		close(tl_fd);
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
	tl_fd = fk_sched_socket();
	tl_gen = gen;
	if (tl_fd >= 0)
		pthread_setspecific(sock_key, (void *)1); /* non-NULL: run the destructor */
	return tl_fd;
}

static void fail_open(fk_task *t, unsigned gen, const char *why)
{
	if (atomic_load(&t->reg_gen) != gen) {
		/* The task registered anew while this request waited: it went to
		 * a daemon that is gone. This launch goes ahead, the next asks the
		 * new daemon; no back-off (after a restart it let the task's
		 * launches run ungated for a second beside the holder). */
		fk_log(FK_LOG_DEBUG, "%s (the request was to a previous registration)", why);
		return;
	}
	if (atomic_load(&t->state) != FK_ST_ACTIVE) {
		/* The scheduler was found gone meanwhile: that outage was warned
		 * about, and the sender re-registers when it is back. */
		fk_log(FK_LOG_INFO, "%s (scheduler unreachable)", why);
		return;
	}
	unsigned b = atomic_load(&t->backoff_ms);
	b = b ? (b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2) : BACKOFF_MIN_MS;
	atomic_store(&t->backoff_ms, b);
	atomic_store(&t->backoff_until_ns, fk_now_ns() + (uint64_t)b * 1000000u);
	if (!atomic_exchange(&timeout_warned, 1))
		fk_log(FK_LOG_WARN, "%s; launching anyway and passing launches through for %u ms (logged once)", why,
		       b);
	else
		fk_log(FK_LOG_INFO, "%s; passing launches through for %u ms", why, b);
	/* A daemon that forgot the task says so (Error: unknown task). One that
	 * is slow (waiting for a CPU) has not forgotten it: registering anew
	 * would throw away its profiling progress, and under 64 clients it
	 * re-registered tasks every second. Only a second timeout in a row
	 * (no grant since the last) re-registers. */
	if (b > BACKOFF_MIN_MS)
		fk_task_reregister(t);
}

/* lost reports the scheduler gone, as a request under registration gen found
 * it (connection refused), unless the task has registered anew since: the
 * refusal then came from the daemon that was gone, and marking the new
 * registration lost would run the task un-hooked until its next one. */
static void lost(fk_task *t, unsigned gen)
{
	if (atomic_load(&t->reg_gen) == gen)
		fk_sched_lost("connection refused to a launch request");
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

enum { REPLY_NONE, REPLY_HOLD, REPLY_DONE, REPLY_GRANTED };

/* One datagram on the request's socket: a Grant for seq (launch), a Hold
 * (keep waiting) or an Error (stop waiting). */
static int on_reply(fk_task *t, uint32_t id, uint32_t seq, uint8_t *buf, size_t len)
{
	fk_msg_in m;
	size_t mlen = fk_open(buf, len);
	if (!mlen || fk_decode(buf, mlen, &m) || m.task_id != id)
		return REPLY_NONE;
	if (m.type == FK_MSG_GRANT && m.seq == seq) {
		fk_credit_grant(t, m.seq, m.credit, m.seen_ns, m.expires_ns);
		atomic_store(&t->backoff_ms, 0);
		return REPLY_GRANTED;
	}
	if (m.type == FK_MSG_HOLD && m.seq == seq)
		return REPLY_HOLD;
	if (m.type == FK_MSG_ERROR) {
		if (m.code == FK_ERR_UNKNOWN_TASK)
			fk_task_reregister(t);
		return REPLY_DONE; /* whatever it is, do not wait for an answer that will not come */
	}
	return REPLY_NONE;
}

/* The slot's answer to seq, if it has come: the grant is taken. */
static int slot_granted(fk_task *t, fk_board_slot *sl, uint32_t seq)
{
	if (atomic_load_explicit(&sl->grant_seq, memory_order_acquire) != seq)
		return 0;
	uint32_t credit = atomic_load_explicit(&sl->credit, memory_order_relaxed);
	uint64_t seen = atomic_load_explicit(&sl->seen_ns, memory_order_relaxed);
	uint64_t expires = atomic_load_explicit(&sl->expires_ns, memory_order_relaxed);
	fk_credit_grant(t, seq, credit, seen, expires);
	atomic_store(&t->backoff_ms, 0);
	return 1;
}

int fk_waiter_request(fk_task *t, uint32_t seq, uint64_t kid, int use_slot)
{
	int fd = thread_socket();
	if (fd < 0)
		return 0;
	uint8_t buf[2048];
	ssize_t r;
	while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
		; /* late answers to requests that already failed open */
	unsigned gen = atomic_load(&t->reg_gen);
	fk_who who = fk_who_of(t);
	uint32_t id = who.id;
	/* Before the request goes: the daemon looks for it when it answers. */
	fk_board_slot *sl = use_slot ? claim_slot(t, id, seq) : NULL;
	uint64_t hold_seen = sl ? atomic_load_explicit(&sl->hold_ns, memory_order_relaxed) : 0;
	size_t len = fk_enc_launch(buf, sizeof buf - FK_MAC_TRAILER, FK_MSG_LAUNCH_REQUEST, who, seq, kid);
	len = fk_seal(buf, len, sizeof buf);
	if (send(fd, buf, len, 0) < 0) {
		release_slot(sl, seq);
		if (errno == ECONNREFUSED)
			lost(t, gen);
		return 0;
	}
	const uint64_t wait_ns = (uint64_t)fk_cfg.grant_timeout_ms * 1000000u;
	uint64_t deadline = fk_now_ns() + wait_ns;
	for (;;) {
		uint64_t now = fk_now_ns();
		uint32_t slot_gen = 0;
		if (sl) {
			/* The generation before the look: a change after it ends the
			 * futex wait at once. */
			slot_gen = atomic_load_explicit(&sl->gen, memory_order_acquire);
			if (slot_granted(t, sl, seq)) {
				release_slot(sl, seq);
				return 1;
			}
			uint64_t h = atomic_load_explicit(&sl->hold_ns, memory_order_relaxed);
			if (h != hold_seen) {
				hold_seen = h;
				deadline = now + wait_ns;
			}
			if (atomic_load_explicit(&sl->task, memory_order_relaxed) != id)
				sl = NULL; /* the daemon let the task go: what it says comes by UDP */
		}
		if (now >= deadline) {
			release_slot(sl, seq);
			fail_open(t, gen, "no grant from the scheduler in time");
			return 0;
		}
		uint64_t wait = deadline - now;
		if (sl) {
			/* Sleep on the slot, looking at the socket now and then. */
			for (;;) {
				r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
				if (r < 0)
					break;
				int a = on_reply(t, id, seq, buf, (size_t)r);
				if (a >= REPLY_DONE) {
					release_slot(sl, seq);
					return a == REPLY_GRANTED;
				}
				if (a == REPLY_HOLD)
					deadline = fk_now_ns() + wait_ns;
			}
			if (errno == ECONNREFUSED) {
				release_slot(sl, seq);
				lost(t, gen);
				return 0;
			}
			if (wait > SLOT_POLL_NS)
				wait = SLOT_POLL_NS;
			struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
			syscall(SYS_futex, &sl->gen, FUTEX_WAIT, slot_gen, &ts, NULL, 0);
			continue;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u)};
		if (ppoll(&pfd, 1, &ts, NULL) <= 0)
			continue;
		r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (r < 0) {
			if (errno == ECONNREFUSED) {
				lost(t, gen);
				return 0;
			}
			continue;
		}
		int a = on_reply(t, id, seq, buf, (size_t)r);
		if (a >= REPLY_DONE)
			return a == REPLY_GRANTED;
		if (a == REPLY_HOLD)
			deadline = fk_now_ns() + wait_ns;
	}
}
