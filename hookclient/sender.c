/* sender.c — the one thread that talks to the scheduler. It drains the
 * launch ring and ships notifications at once (sendmmsg batches), turns
 * event pairs into measurements (measure.c), registers tasks (and keeps
 * retrying in the background while the scheduler is unreachable), sends
 * heartbeats, and receives RegisterAck / State / Grant-credit / Error on its
 * control socket.
 *
 * Launching threads never make a syscall to wake it, so it polls: ppoll on
 * the control socket and an eventfd (woken only by registration and run
 * ends) with a short timeout right after activity, doubling to 1 ms when
 * idle. Timer slack is 1 ns on this thread so the short timeouts are kept.
 * Each wake costs the service's machine CPU whatever it sends, so the
 * shortest interval is POLL_MIN_NS (hook-bench measures the trade-off;
 * figures in hookclient/README.md): launches carry their own times, so the
 * daemon places them correctly however late their report arrives. */
#include "hook.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define POLL_MIN_NS 100000     /* right after activity */
#define POLL_MAX_NS 1000000    /* idle */
#define POLL_MEASURE_NS 100000 /* events pending on the device */
#define BATCH 64
#define REG_RETRY_MIN_MS 1000
/* After losing the scheduler, the first retry goes this soon, then the
 * wait doubles up to REG_RETRY_MAX_MS: a restarted daemon is back within
 * a few hundred milliseconds, and every second un-hooked is a second the
 * high-priority service is unprotected. */
#define REG_RETRY_LOST_MS 100
#define REG_RETRY_MAX_MS 30000

fk_ring fk_q; /* launching threads → sender */
atomic_uint fk_generation;

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static int started;  /* the sender thread runs in this process */
static int ctl = -1; /* control socket, connected to the scheduler */
static int efd = -1; /* wakes the sender */
static struct sockaddr_storage sched_sa;
static socklen_t sched_salen;
static atomic_uint reg_counter;  /* Register seq: unique across tasks */
static atomic_int outage_warned; /* one warning per outage */
static atomic_int exiting;
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cv = PTHREAD_COND_INITIALIZER;
static int exit_drained;
static int auth_on; /* datagrams carry a MAC (set before the sender starts) */
static fk_hmac auth_key;

/* ---- outgoing batch (sender thread only) ---- */

static uint8_t out_buf[BATCH][FK_MAX_DATAGRAM];
static struct mmsghdr out_msg[BATCH];
static struct iovec out_iov[BATCH];
static int out_n;
static uint64_t ring_dropped_reported;

static void out_flush(void)
{
	int off = 0;
	while (off < out_n) {
		int r = sendmmsg(ctl, out_msg + off, (unsigned)(out_n - off), MSG_DONTWAIT);
		if (r > 0) {
			off += r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == ECONNREFUSED)
			fk_sched_lost("connection refused on send");
		/* EAGAIN (socket buffer full) or an error: drop the rest, the
		 * daemon sees the gap in seq. Never block here. */
		break;
	}
	out_n = 0;
}

int fk_sender_exiting(void) { return atomic_load_explicit(&exiting, memory_order_relaxed); }

size_t fk_out_cap(void) { return FK_MAX_DATAGRAM - (auth_on ? FK_MAC_TRAILER : 0); }

size_t fk_seal(uint8_t *buf, size_t len, size_t cap)
{
	return auth_on && len ? fk_auth_seal(&auth_key, FK_TO_DAEMON, buf, len, cap) : len;
}

size_t fk_open(const uint8_t *buf, size_t len)
{
	if (!auth_on)
		return len;
	size_t n = fk_auth_open(&auth_key, FK_TO_HOOK, buf, len);
	if (!n)
		fk_log(FK_LOG_DEBUG, "a datagram of %zu bytes without the scheduler's MAC: dropped", len);
	return n;
}

uint8_t *fk_out_slot(void)
{
	if (out_n == BATCH)
		out_flush();
	return out_buf[out_n];
}

void fk_out_commit(size_t len)
{
	if ((len = fk_seal(out_buf[out_n], len, FK_MAX_DATAGRAM)) == 0)
		return;
	out_iov[out_n].iov_base = out_buf[out_n];
	out_iov[out_n].iov_len = len;
	memset(&out_msg[out_n], 0, sizeof out_msg[out_n]);
	out_msg[out_n].msg_hdr.msg_iov = &out_iov[out_n];
	out_msg[out_n].msg_hdr.msg_iovlen = 1;
	out_n++;
}

/* ---- scheduler address and sockets ---- */

static int resolve(void)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&sched_sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sched_sa;
	memset(&sched_sa, 0, sizeof sched_sa);
	if (inet_pton(AF_INET, fk_cfg.host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)fk_cfg.port);
		sched_salen = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, fk_cfg.host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)fk_cfg.port);
		sched_salen = sizeof *in6;
		return 0;
	}
	/* A name: resolved once, here, on the first launch's thread. */
	char port[8];
	snprintf(port, sizeof port, "%d", fk_cfg.port);
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
	if (getaddrinfo(fk_cfg.host, port, &hints, &res) != 0 || !res)
		return -1;
	memcpy(&sched_sa, res->ai_addr, res->ai_addrlen);
	sched_salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* The scheduler's address is loopback: the kernel tells it who we are, and
 * no MAC is due (the daemon decides the same from our address). */
static int sched_loopback(void)
{
	if (sched_sa.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&sched_sa)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *a = &((struct sockaddr_in6 *)&sched_sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a))
		return a->s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(a);
}

/* auth_setup reads FIKIT_AUTH_KEY_FILE for a scheduler on another host. A
 * key that cannot be read leaves the hook un-hooked: its datagrams would be
 * dropped by a daemon that wants them signed. */
static int auth_setup(void)
{
	auth_on = 0;
	if (!fk_cfg.auth_key_file[0] || sched_loopback())
		return 0;
	static uint8_t key[FK_KEY_FILE_MAX];
	char err[512];
	int loose;
	long n = fk_read_key_file(fk_cfg.auth_key_file, key, sizeof key, &loose, err, sizeof err);
	if (n < 0) {
		fk_log(FK_LOG_WARN, "FIKIT_AUTH_KEY_FILE: %s; running un-hooked", err);
		return -1;
	}
	if (loose)
		fk_log(FK_LOG_WARN, "FIKIT_AUTH_KEY_FILE %s may be read by other users (chmod 600 it)", fk_cfg.auth_key_file);
	fk_hmac_init(&auth_key, key, (size_t)n);
	memset(key, 0, sizeof key);
	auth_on = 1;
	return 0;
}

int fk_sched_socket(void)
{
	int fd = socket(sched_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	/* Connected, so an ICMP port-unreachable surfaces as ECONNREFUSED and
	 * only the scheduler's datagrams are received. */
	if (connect(fd, (struct sockaddr *)&sched_sa, sched_salen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

atomic_int fk_sender_dozing;

void fk_sender_wake(void)
{
	uint64_t one = 1;
	if (efd >= 0) {
		ssize_t r = write(efd, &one, sizeof one);
		(void)r; /* a full counter already means "wake up" */
	}
}

/* ---- task state changes ---- */

void fk_sched_lost(const char *why)
{
	int n = atomic_load(&fk_ntasks);
	uint64_t now = fk_now_ns();
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		unsigned st = atomic_load(&t->state);
		if (st == FK_ST_DISABLED || st == FK_ST_NEW)
			continue;
		fk_task_set_unreachable(t);
		pthread_mutex_lock(&t->mu);
		if (t->reg_backoff_ms < REG_RETRY_LOST_MS)
			t->reg_backoff_ms = REG_RETRY_LOST_MS;
		t->reg_next_ns = now + (uint64_t)t->reg_backoff_ms * 1000000u;
		pthread_mutex_unlock(&t->mu);
	}
	if (!atomic_exchange(&outage_warned, 1))
		fk_log(FK_LOG_WARN, "scheduler %s:%d unreachable (%s); running un-hooked, retrying in the background",
		       fk_cfg.host, fk_cfg.port, why);
}

void fk_task_reregister(fk_task *t)
{
	atomic_store(&t->rereg, 1);
	fk_sender_wake();
}

/* send_register sends t's Register: with a new seq when fresh (a first
 * registration, or one the daemon asked for by forgetting the task), else
 * again with the seq of the last one (a retry after no answer). A retry
 * is a retransmission: the daemon answers a Register it has already
 * registered with the same ack, and an ack to the first copy that arrives
 * after the retry went out still matches. (With a new seq per retry, a
 * daemon that answered late registered the task twice, and the hook
 * ignored the first ack.) */
static void send_register(fk_task *t, int fresh)
{
	fk_register m = {0};
	static char key[FK_TASK_KEY_MAX + 1];
	static size_t keylen;
	if (!keylen)
		keylen = fk_cfg.task_key_set ? strlen(fk_cfg.task_key) : fk_task_key_self(key);
	const char *k = fk_cfg.task_key_set ? fk_cfg.task_key : key;
	m.seq = (fresh || !t->reg_seq) ? atomic_fetch_add(&reg_counter, 1) + 1 : t->reg_seq;
	m.task_key = k;
	m.task_key_len = keylen;
	m.pid = (uint32_t)getpid();
	m.priority = (uint8_t)fk_cfg.priority;
	memcpy(m.uuid, t->uuid, 16);
	m.device_name = t->dev_name;
	m.device_name_len = strlen(t->dev_name);
	m.hook_flags = FK_HOOK_SENDS_TOKEN;
	m.weight = fk_cfg.weight == FK_DEFAULT_WEIGHT ? 0 : (uint32_t)fk_cfg.weight;
	t->reg_seq = m.seq;
	t->reg_sent_ns = fk_now_ns();
	fk_out_commit(fk_enc_register(fk_out_slot(), fk_out_cap(), &m));
	fk_log(FK_LOG_DEBUG, "Register seq %u key \"%s\" device %s priority %d weight %d", m.seq, k, t->dev_name,
	       fk_cfg.priority, fk_cfg.weight);
}

static fk_task *task_by_id(uint32_t id)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++)
		if (atomic_load(&fk_tasks[i].task_id) == id && atomic_load(&fk_tasks[i].state) == FK_ST_ACTIVE)
			return &fk_tasks[i];
	return NULL;
}

static void on_register_ack(const fk_msg_in *m)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		if (t->reg_seq != m->seq)
			continue;
		unsigned st = atomic_load(&t->state);
		if (st == FK_ST_DISABLED)
			return;
		/* Only the synchronous first registration starts at a run
		 * boundary; any later activation lands mid-run. */
		if (st != FK_ST_REGISTERING)
			atomic_store(&t->partial_run, 1);
		atomic_store(&t->token, m->token); /* before the ID: no message pairs the new ID with an old token */
		atomic_store(&t->task_id, m->task_id);
		t->heartbeat_ms = m->heartbeat_ms;
		t->profile_runs = m->profile_runs;
		t->next_heartbeat_ns = fk_now_ns() + (uint64_t)m->heartbeat_ms * 1000000u;
		t->run = 1;
		t->reg_backoff_ms = 0;
		t->reg_sent_ns = 0; /* answered: a new Error(unknown task) re-registers at once */
		/* A daemon that answers is no reason to pass launches through: a
		 * request the previous daemon never answered (it was stopped) left
		 * a fail-open back-off of a second or more, which after a restart
		 * let a waiter's launches run ungated beside the holder. */
		atomic_store(&t->backoff_until_ns, 0);
		atomic_store(&t->backoff_ms, 0);
		atomic_fetch_add(&t->reg_gen, 1);
		/* Errors about the old registration that came before this ack asked
		 * for the registration this ack answers: a request left from them
		 * would register the task yet again. */
		atomic_store(&t->rereg, 0);
		fk_measure_registered(t);
		fk_task_board(t, m);
		/* The ack carries no gate: what the board shows now is what the
		 * daemon knew when it answered, near enough. */
		fk_board *b = atomic_load(&t->board);
		fk_board_gpu *bg = atomic_load(&t->bgpu);
		fk_task_apply(t, m->role, m->phase, 0, bg ? fk_board_above(b, bg, fk_cfg.priority, fk_now_ns()) : 0, 0);
		pthread_mutex_lock(&t->mu);
		atomic_store(&t->state, FK_ST_ACTIVE);
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->mu);
		if (atomic_exchange(&outage_warned, 0))
			fk_log(FK_LOG_INFO, "scheduler reachable again");
		fk_log(FK_LOG_INFO, "registered on %s: task %u, %s, %s, %u profile runs", t->dev_name, m->task_id,
		       m->role == FK_ROLE_HOLDER ? "holder" : "waiter",
		       m->phase == FK_PHASE_PROFILING ? "profiling" : "sharing", m->profile_runs);
		return;
	}
}

static void on_message(const uint8_t *buf, size_t len)
{
	fk_msg_in m;
	if (fk_decode(buf, len, &m)) {
		fk_log(FK_LOG_DEBUG, "ignoring a malformed datagram of %zu bytes", len);
		return;
	}
	fk_task *t;
	switch (m.type) {
	case FK_MSG_REGISTER_ACK:
		on_register_ack(&m);
		break;
	case FK_MSG_STATE:
		if ((t = task_by_id(m.task_id)))
			fk_task_apply(t, m.role, m.phase, m.credit, m.seen_ns, m.expires_ns);
		break;
	case FK_MSG_GRANT: /* a credit renewal (or a late grant): only its credit counts here */
		if ((t = task_by_id(m.task_id)))
			fk_credit_grant(t, m.seq, m.credit, m.seen_ns, m.expires_ns);
		break;
	case FK_MSG_ERROR:
		/* Invalid value about a registered task: the policy registered it at a
		 * worse priority than asked. The user should know. */
		fk_log(m.code == FK_ERR_INVALID && m.task_id ? FK_LOG_WARN : FK_LOG_DEBUG, "scheduler error %u for task %u: %.*s",
		       m.code, m.task_id, (int)m.message_len, m.message);
		if (m.code == FK_ERR_UNKNOWN_TASK && (t = task_by_id(m.task_id)))
			atomic_store(&t->rereg, 1);
		if (m.code == FK_ERR_VERSION) {
			fk_log(FK_LOG_WARN, "scheduler does not speak wire protocol v%d; the hook is disabled",
			       FK_WIRE_VERSION);
			for (int i = 0; i < atomic_load(&fk_ntasks); i++) {
				atomic_store(&fk_tasks[i].mode, FK_MODE_PASS);
				atomic_store(&fk_tasks[i].state, FK_ST_DISABLED);
			}
		}
		break;
	default: /* Hold belongs to a waiter's own socket */
		break;
	}
}

static int receive_all(void)
{
	uint8_t buf[2048];
	int n = 0;
	for (;;) {
		ssize_t r = recv(ctl, buf, sizeof buf, MSG_DONTWAIT);
		if (r < 0) {
			if (errno == ECONNREFUSED) {
				fk_sched_lost("connection refused on receive");
				continue; /* the error is reported once; keep reading */
			}
			return n;
		}
		size_t len = fk_open(buf, (size_t)r);
		if (len)
			on_message(buf, len);
		n++;
	}
}

/* ---- per-loop work ---- */

/* Launch reports of one task waiting to go out as one LaunchBatch: one
 * datagram for what the ring held, instead of one per launch (each costs the
 * sender about 5 µs of loopback stack). */
typedef struct batch {
	fk_who who;
	uint32_t seq, n;
	uint64_t base_ns;
	uint64_t kid[FK_BATCH_MAX];
	uint32_t off[FK_BATCH_MAX];
} batch;
static batch batches[FK_MAX_TASKS];

static void batch_flush(int ti)
{
	batch *b = &batches[ti];
	if (!b->n)
		return;
	fk_out_commit(fk_enc_launch_batch(fk_out_slot(), fk_out_cap(), b->who, b->seq, b->base_ns, b->kid,
					  b->off, b->n));
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
	b->kid[b->n] = r->kid;
	b->off[b->n] = (uint32_t)(r->t_ns - b->base_ns);
	b->n++;
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
		if ((r.kind == FK_REC_LAUNCH && (r.flags & FK_RF_MEASURE)) || r.kind == FK_REC_RUN_END) {
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

static void timers(uint64_t now)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		fk_task *t = &fk_tasks[i];
		unsigned st = atomic_load(&t->state);
		int due = 0, fresh = 1;
		pthread_mutex_lock(&t->mu);
		if (st == FK_ST_REGISTERING && t->reg_next_ns == 0) {
			due = 1; /* the first launch waits for this one */
			t->reg_next_ns = now + (uint64_t)REG_RETRY_MIN_MS * 1000000u;
		} else if (st == FK_ST_UNREACHABLE && now >= t->reg_next_ns) {
			due = 1;
			fresh = 0;
			t->reg_backoff_ms = t->reg_backoff_ms ? t->reg_backoff_ms * 2 : REG_RETRY_LOST_MS;
			if (t->reg_backoff_ms > REG_RETRY_MAX_MS)
				t->reg_backoff_ms = REG_RETRY_MAX_MS;
			t->reg_next_ns = now + (uint64_t)t->reg_backoff_ms * 1000000u;
		} else if (st == FK_ST_ACTIVE && now - t->reg_sent_ns > (uint64_t)REG_RETRY_MIN_MS * 1000000u &&
			   atomic_exchange(&t->rereg, 0)) {
			/* Every message sent before the new ack may draw another
			 * Error(unknown task): while a Register is unanswered, another
			 * goes after a second at the earliest. */
			due = 1;
		}
		pthread_mutex_unlock(&t->mu);
		if (due)
			send_register(t, fresh);
		if (st == FK_ST_ACTIVE && t->heartbeat_ms && now >= t->next_heartbeat_ns) {
			fk_out_commit(fk_enc_task_only(fk_out_slot(), fk_out_cap(), FK_MSG_HEARTBEAT, fk_who_of(t)));
			t->next_heartbeat_ns = now + (uint64_t)t->heartbeat_ms * 1000000u;
		}
	}
}

static void *sender_main(void *arg)
{
	(void)arg;
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
		int activity = drain_ring();
		int pending = 0;
		int n = atomic_load(&fk_ntasks);
		for (int i = 0; i < n; i++) {
			int p = 0;
			activity += fk_measure_poll(&fk_tasks[i], &p);
			pending |= p;
		}
		timers(fk_now_ns());
		if (out_n)
			out_flush();
		if (readable)
			activity += receive_all();
		if (atomic_load(&exiting)) {
			pthread_mutex_lock(&exit_mu);
			exit_drained = !fk_ring_maybe_nonempty(&fk_q) && !pending;
			pthread_cond_broadcast(&exit_cv);
			pthread_mutex_unlock(&exit_mu);
		}
		timeout = activity ? POLL_MIN_NS : (timeout * 2 > POLL_MAX_NS ? POLL_MAX_NS : timeout * 2);
		uint64_t wait = pending && timeout > POLL_MEASURE_NS ? POLL_MEASURE_NS : timeout;
		struct pollfd pfd[2] = {{.fd = ctl, .events = POLLIN}, {.fd = efd, .events = POLLIN}};
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
		readable = 0;
		atomic_store_explicit(&fk_sender_dozing, wait > POLL_MIN_NS, memory_order_relaxed);
		int woke = ppoll(pfd, 2, &ts, NULL);
		atomic_store_explicit(&fk_sender_dozing, 0, memory_order_relaxed);
		if (woke > 0) {
			readable = pfd[0].revents != 0; /* data, or an error (ECONNREFUSED) to collect */
			if (pfd[1].revents & POLLIN) {
				uint64_t v;
				ssize_t r = read(efd, &v, sizeof v);
				(void)r;
				timeout = POLL_MIN_NS;
			}
		}
	}
	return NULL;
}

/* ---- start, exit, fork ---- */

static void at_exit(void)
{
	if (!started)
		return;
	/* Let the sender ship what the last run left, its events included
	 * (bounded: exit must not hang), then say goodbye without blocking.
	 * Programs that exit without running atexit handlers (Go) lose what
	 * the sender had not shipped yet. */
	pthread_mutex_lock(&exit_mu);
	exit_drained = 0;
	pthread_mutex_unlock(&exit_mu);
	atomic_store(&exiting, 1);
	fk_sender_wake();
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += 100000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&exit_mu);
	while (!exit_drained)
		if (pthread_cond_timedwait(&exit_cv, &exit_mu, &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&exit_mu);
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		/* The task is gone for the daemon from here on: CUDA calls after
		 * this handler (a framework's static destructors synchronize)
		 * pass through unreported. Reported, they drew Error(unknown
		 * task), and the exiting process registered anew. */
		unsigned st = FK_ST_ACTIVE;
		if (!atomic_compare_exchange_strong(&fk_tasks[i].state, &st, FK_ST_DISABLED))
			continue;
		fk_task_set_pass(&fk_tasks[i]);
		uint8_t buf[64];
		size_t len = fk_enc_task_only(buf, sizeof buf - FK_MAC_TRAILER, FK_MSG_GOODBYE, fk_who_of(&fk_tasks[i]));
		len = fk_seal(buf, len, sizeof buf);
		ssize_t r = send(ctl, buf, len, MSG_DONTWAIT);
		(void)r;
	}
}

int fk_sender_start(void)
{
	static int atexit_done;
	int rc = 0;
	pthread_mutex_lock(&start_mu);
	if (started)
		goto out;
	rc = -1;
	if (resolve()) {
		fk_log(FK_LOG_WARN, "cannot resolve scheduler host \"%s\"; running un-hooked", fk_cfg.host);
		goto out;
	}
	if (auth_setup())
		goto out;
	ctl = fk_sched_socket();
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl < 0 || efd < 0) {
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

void fk_sender_reset_child(void)
{
	/* The child has no sender thread; its sockets would share the parent's
	 * (the daemon would see one peer). Start over at the next launch. */
	pthread_mutex_init(&start_mu, NULL);
	pthread_mutex_init(&exit_mu, NULL);
	pthread_cond_init(&exit_cv, NULL);
	if (ctl >= 0)
		close(ctl);
	if (efd >= 0)
		close(efd);
	ctl = efd = -1;
	started = 0;
	out_n = 0;
	memset(batches, 0, sizeof batches);
	atomic_store(&outage_warned, 0);
	atomic_store(&exiting, 0);
	atomic_fetch_add(&fk_generation, 1);
}
