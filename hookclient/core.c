/* core.c — the hook's state machine (core.h): pure, single-threaded, every
 * input an event, every effect an action. */
#include "core.h"
#include "log.h" /* the levels of FK_ACT_LOG only */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MS 1000000ull

static fk_act *act(fk_acts *out, int type, int task)
{
	if (out->n == FK_ACTS_MAX)
		return &out->a[FK_ACTS_MAX - 1]; /* cannot happen (FK_ACTS_MAX): the last one is overwritten */
	fk_act *a = &out->a[out->n++];
	memset(a, 0, sizeof *a);
	a->type = type;
	a->task = task;
	return a;
}

__attribute__((format(printf, 3, 4))) static void logf_(fk_acts *out, int level, const char *fmt, ...)
{
	fk_act *a = act(out, FK_ACT_LOG, -1);
	a->level = level;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->text, sizeof a->text, fmt, ap);
	va_end(ap);
}

static fk_who who_of(const fk_core_task *t) { return (fk_who){t->v.task_id, t->v.token}; }

static void flush_fail(fk_core *c, fk_acts *out);

static void send_msg(fk_acts *out, int ti, const fk_msg_out *m)
{
	fk_act *a = act(out, FK_ACT_SEND, ti);
	a->msg = *m;
}

void fk_core_init(fk_core *c, const fk_core_config *cfg)
{
	memset(c, 0, sizeof *c);
	c->cfg = *cfg;
}

/* ---- credit and the gate ---- */

/* A gate's expiry on the local clock: the wire's is absolute for a daemon on
 * this host (it shares CLOCK_MONOTONIC), else relative to its receipt. */
static void gate_set(fk_core *c, fk_core_task *t, uint64_t seen, uint64_t expires, uint64_t now)
{
	if (expires && !c->cfg.local)
		expires += now;
	t->v.gate_seen = seen;
	t->v.gate_expires = expires;
}

/* Credit is a limit on the launch seq (docs/design.md): c launches after
 * the task's latest (seq_now). Taking it away marks the launches so far as
 * revoked: a grant older than that renews nothing. Before any launch no
 * grant can be older: nothing to mark. */
static void credit_set(fk_core_task *t, uint32_t credit, uint32_t seq_now)
{
	if (credit == 0 && seq_now)
		t->v.revoked_seq = seq_now;
	t->v.credit_limit = seq_now + credit;
}

/* Grant{seq, credit, gate}: launches up to seq + credit go unasked. A
 * grant for a launch older than the last revocation must not bring credit
 * back; the grant of the launch waiting at the revocation (seq equal) was
 * decided after it and counts. Renewals travel with the revocations on the
 * control socket, in order. */
static void credit_grant(fk_core *c, fk_core_task *t, const fk_msg_in *m, uint64_t now)
{
	uint32_t rev = t->v.revoked_seq;
	if (rev && (int32_t)(m->seq - rev) < 0)
		return;
	gate_set(c, t, m->seen_ns, m->expires_ns, now);
	uint32_t lim = m->seq + m->credit;
	if ((int32_t)(lim - t->v.credit_limit) > 0)
		t->v.credit_limit = lim;
}

/* Role and phase from RegisterAck or State, with credit, gate and sample. */
static void apply(fk_core *c, fk_core_task *t, const fk_ev *ev, int role, int phase, uint32_t credit, uint64_t seen,
		  uint64_t expires, uint32_t sample)
{
	uint32_t mode = role == FK_ROLE_WAITER ? FK_MODE_WAITER : FK_MODE_HOLDER;
	if (phase == FK_PHASE_PROFILING && ev->pool)
		mode |= FK_MODE_MEASURE; /* without its events a task is not measured */
	gate_set(c, t, seen, expires, ev->now);
	credit_set(t, credit, ev->seq_now);
	t->v.mode = mode;
	/* Sharing: one run in `sample` measured (the daemon watches the
	 * profile for drift), if the events are there. */
	t->v.sample = phase == FK_PHASE_SHARING && ev->pool ? sample : 0;
}

/* ---- registration ---- */

/* Register, fresh (a first registration, or one the daemon asked for by
 * forgetting the task) or again with the seq of the last one (a retry after
 * no answer). A retry is a retransmission: the daemon answers a Register it
 * has already registered with the same ack, and an ack to the first copy
 * that arrives after the retry went out still matches. (With a new seq per
 * retry, a daemon that answered late registered the task twice, and the
 * hook ignored the first ack.) */
static void send_register(fk_core *c, int ti, int fresh, uint64_t now, fk_acts *out)
{
	fk_core_task *t = &c->task[ti];
	if (fresh || !t->reg_seq)
		t->reg_seq = ++c->reg_counter;
	t->reg_sent_ns = now;
	fk_msg_out m = {.type = FK_MSG_REGISTER,
			.seq = t->reg_seq,
			.task_key = c->cfg.task_key,
			.task_key_len = c->cfg.task_key_len,
			.pid = c->cfg.pid,
			.priority = (uint8_t)c->cfg.priority,
			.device_name = t->dev_name,
			.device_name_len = t->dev_name_len,
			.hook_flags = FK_HOOK_SENDS_TOKEN,
			.weight = (uint8_t)(c->cfg.weight > 1 ? c->cfg.weight : 0)};
	memcpy(m.device_uuid, t->uuid, 16);
	send_msg(out, ti, &m);
}

static void set_pass(fk_core_task *t, uint32_t state, int ti, fk_acts *out)
{
	if (t->v.state == FK_ST_REGISTERING)
		act(out, FK_ACT_REGISTERED, ti); /* threads waiting for it wake */
	t->v.state = state;
	t->v.mode = FK_MODE_PASS;
}

/* The scheduler is unreachable: every task passes through until a Register
 * is answered again, probed in the background at a fixed interval
 * (FK_REG_PROBE_MS); one warning per outage. */
static void sched_lost(fk_core *c, const char *why, uint64_t now, fk_acts *out)
{
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_core_task *t = &c->task[i];
		if (!t->known || t->v.state == FK_ST_DISABLED || t->v.state == FK_ST_NEW)
			continue;
		set_pass(t, FK_ST_UNREACHABLE, i, out);
		t->reg_next_ns = now + FK_REG_PROBE_MS * MS;
	}
	if (!c->outage_warned) {
		c->outage_warned = 1;
		logf_(out, FK_LOG_WARN, "scheduler %s unreachable (%s); running un-hooked, retrying in the background",
		      c->cfg.sched, why);
	}
	flush_fail(c, out);
}

static void on_register(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_core_task *t = &c->task[ev->task];
	if (!t->known) {
		t->known = 1;
		memcpy(t->uuid, ev->uuid, 16);
		t->dev_name = ev->dev_name;
		t->dev_name_len = ev->dev_name_len;
		t->v.state = c->disabled ? FK_ST_DISABLED : FK_ST_NEW;
	}
	if (t->v.state != FK_ST_NEW)
		return; /* another thread registers it, or did, or the hook is disabled */
	t->v.state = FK_ST_REGISTERING;
	t->reg_next_ns = 0; /* the sender's next tick sends the Register */
	act(out, FK_ACT_START, ev->task);
}

static void on_register_ack(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	const fk_msg_in *m = &ev->msg;
	int ti = fk_core_target(c, m);
	if (ti < 0)
		return;
	fk_core_task *t = &c->task[ti];
	/* Only the synchronous first registration starts at a run boundary;
	 * any later activation lands mid-run. */
	if (t->v.state != FK_ST_REGISTERING)
		t->partial_run = 1;
	t->v.token = m->token;
	t->v.task_id = m->task_id;
	t->heartbeat_ms = m->heartbeat_ms;
	t->profile_runs = m->profile_runs;
	t->next_heartbeat_ns = ev->now + m->heartbeat_ms * MS;
	t->run = 1;
	t->reg_sent_ns = 0; /* answered: a new Error(unknown task) re-registers at once */
	/* A daemon that answers is no reason to pass launches through: a
	 * request the previous daemon never answered (it was stopped) left a
	 * fail-open back-off, which after a restart let a waiter's launches run
	 * ungated beside the holder. */
	t->v.backoff_until = 0;
	t->backoff_ms = 0;
	t->v.reg_gen++;
	/* Errors about the old registration that came before this ack asked
	 * for the registration this ack answers: a request left from them would
	 * register the task yet again. */
	t->rereg = 0;
	t->board = ev->board;
	/* The ack carries no gate: what the board shows now is what the daemon
	 * knew when it answered, near enough. */
	t->v.profile_runs = m->profile_runs;
	apply(c, t, ev, m->role, m->phase, 0, ev->board ? ev->above : 0, 0, m->sample);
	if (t->v.state == FK_ST_REGISTERING)
		act(out, FK_ACT_REGISTERED, ti);
	t->v.state = FK_ST_ACTIVE;
	if (c->outage_warned) {
		c->outage_warned = 0;
		logf_(out, FK_LOG_INFO, "scheduler reachable again");
	}
	logf_(out, FK_LOG_INFO, "registered on %.*s: task %u, %s, %s, %u profile runs", (int)t->dev_name_len, t->dev_name,
	      m->task_id, m->role == FK_ROLE_HOLDER ? "holder" : "waiter",
	      m->phase == FK_PHASE_PROFILING ? "profiling" : "sharing", m->profile_runs);
}

/* Registrations due and heartbeats. */
static void on_tick(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	uint64_t now = ev->now;
	if (c->flushing && now >= c->flush_until)
		flush_fail(c, out);
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_core_task *t = &c->task[i];
		if (!t->known)
			continue;
		uint32_t st = t->v.state;
		if (st == FK_ST_REGISTERING && t->reg_next_ns == 0) {
			t->reg_next_ns = now + FK_REG_RETRY_MIN_MS * MS; /* the first launch waits for this one */
			send_register(c, i, 1, now, out);
		} else if (st == FK_ST_UNREACHABLE && now >= t->reg_next_ns) {
			t->reg_next_ns = now + FK_REG_PROBE_MS * MS;
			send_register(c, i, 0, now, out);
		} else if (st == FK_ST_ACTIVE && t->rereg &&
			   (!t->reg_sent_ns || now - t->reg_sent_ns > FK_REG_RETRY_MIN_MS * MS)) {
			/* Every message sent before the new ack may draw another
			 * Error(unknown task): while a Register is unanswered, another
			 * goes after a second at the earliest (at once when the last
			 * one was answered). */
			t->rereg = 0;
			send_register(c, i, 1, now, out);
		}
		if (st == FK_ST_ACTIVE && t->heartbeat_ms && now >= t->next_heartbeat_ns) {
			fk_who w = who_of(t);
			send_msg(out, i, &(fk_msg_out){.type = FK_MSG_HEARTBEAT, .task_id = w.id, .token = w.token});
			t->next_heartbeat_ns = now + t->heartbeat_ms * MS;
		}
	}
}

/* ---- the daemon's messages ---- */

static void reregister(fk_core_task *t, int wake, fk_acts *out)
{
	t->rereg = 1;
	if (wake)
		act(out, FK_ACT_WAKE, -1);
}

/* ---- fikit_flush() ---- */

/* The flush is over when no Flush is unanswered. */
static void flush_check(fk_core *c, fk_acts *out)
{
	if (!c->flushing)
		return;
	for (int i = 0; i < FK_MAX_TASKS; i++)
		if (c->task[i].flush_pending)
			return;
	c->flushing = 0;
	act(out, FK_ACT_FLUSHED, -1)->granted = !c->flush_failed;
}

/* The flush ends unanswered: a timeout, or the scheduler is gone. */
static void flush_fail(fk_core *c, fk_acts *out)
{
	if (!c->flushing)
		return;
	for (int i = 0; i < FK_MAX_TASKS; i++)
		c->task[i].flush_pending = 0;
	c->flush_failed = 1;
	flush_check(c, out);
}

/* Everything measured has been shipped (the shell read the events of every
 * run that ended): ask the daemon, per registered task, to say when what it
 * was sent is durable. A task registering or unreachable cannot be flushed:
 * the flush fails (what it measured did not reach the daemon). */
static void on_flush(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	c->flushing = 1;
	c->flush_failed = 0;
	c->flush_until = ev->until;
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_core_task *t = &c->task[i];
		t->flush_pending = 0;
		if (!t->known)
			continue;
		if (t->v.state == FK_ST_ACTIVE) {
			t->flush_seq = ++c->flush_counter;
			t->flush_pending = 1;
			fk_who w = who_of(t);
			send_msg(out, i, &(fk_msg_out){.type = FK_MSG_FLUSH, .task_id = w.id, .token = w.token, .seq = t->flush_seq});
		} else if (t->v.state == FK_ST_REGISTERING || t->v.state == FK_ST_UNREACHABLE) {
			c->flush_failed = 1;
		}
	}
	flush_check(c, out);
}

/* An answer on a waiting thread's socket or board slot: a Grant for its
 * seq (launch), a Hold (keep waiting, the timeout starts again) or an Error
 * (stop waiting). Anything else is not for it. */
static void on_answer(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	const fk_msg_in *m = &ev->msg;
	if (ev->wait_task < 0 || ev->wait_task >= FK_MAX_TASKS || m->task_id != ev->wait_id)
		return;
	fk_core_task *t = &c->task[ev->wait_task];
	fk_act *a;
	switch (m->type) {
	case FK_MSG_GRANT:
		if (m->seq != ev->wait_seq)
			return;
		credit_grant(c, t, m, ev->now);
		t->backoff_ms = 0;
		a = act(out, FK_ACT_GO, ev->wait_task);
		a->seq = m->seq;
		a->granted = 1;
		return;
	case FK_MSG_HOLD:
		if (m->seq != ev->wait_seq)
			return;
		a = act(out, FK_ACT_WAIT, ev->wait_task);
		a->seq = m->seq;
		a->until = ev->now + c->cfg.grant_timeout_ms * MS;
		return;
	case FK_MSG_ERROR:
		if (m->code == FK_ERR_UNKNOWN_TASK)
			reregister(t, 1, out);
		a = act(out, FK_ACT_GO, ev->wait_task); /* whatever it is, no answer will come */
		a->seq = ev->wait_seq;
		return;
	}
}

/* Whether a warm-up (Warm: the pre-switch) may go for t: it holds and
 * shares (a task being measured launches nothing of its own), and nothing
 * the shell saw forbids it — a run under way (its own kernels make the
 * context resident; the probe would run among them), a stream capture in
 * the process (a launch on another stream could break a global-mode
 * capture), a context destroyed or reset. A late or stray Warm is harmless
 * to drop: the request then pays the switch, as without the pre-switch. */
static int warm_ok(const fk_core_task *t, const fk_ev *ev)
{
	/* A MIG instance ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"): off, as in the
	 * daemon (its switch was never measured). */
	static const char mig[] = " MIG ";
	for (size_t i = 0; t->dev_name && i + sizeof mig - 1 <= t->dev_name_len; i++)
		if (!memcmp(t->dev_name + i, mig, sizeof mig - 1))
			return 0;
	return t->v.state == FK_ST_ACTIVE && (t->v.mode & FK_MODE_HOLDER) && !(t->v.mode & FK_MODE_MEASURE) &&
	       !ev->in_run && !ev->capturing && !ev->ctx_gone;
}

static void on_message(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	const fk_msg_in *m = &ev->msg;
	if (ev->wait_seq) {
		on_answer(c, ev, out);
		return;
	}
	int ti = fk_core_target(c, m);
	fk_core_task *t = ti >= 0 ? &c->task[ti] : NULL;
	switch (m->type) {
	case FK_MSG_REGISTER_ACK:
		on_register_ack(c, ev, out);
		break;
	case FK_MSG_STATE:
		if (t)
			apply(c, t, ev, m->role, m->phase, m->credit, m->seen_ns, m->expires_ns, m->sample);
		break;
	case FK_MSG_FLUSHED:
		if (t && t->flush_pending && m->seq == t->flush_seq) {
			t->flush_pending = 0;
			flush_check(c, out);
		}
		break;
	case FK_MSG_GRANT: /* a credit renewal (or a late grant): only its credit counts here */
		if (t)
			credit_grant(c, t, m, ev->now);
		break;
	case FK_MSG_KERNEL_TIMES:
		if (t)
			act(out, FK_ACT_KERNEL_TIMES, ti);
		break;
	case FK_MSG_CALIBRATE:
		if (t) {
			fk_act *a = act(out, FK_ACT_CALIBRATE, ti);
			a->seq = m->seq;
			a->ns = m->probe_ns;
		}
		break;
	case FK_MSG_WARM:
		if (t && warm_ok(t, ev)) {
			fk_act *a = act(out, FK_ACT_WARM, ti);
			a->seq = m->seq;
			a->ns = m->probe_ns;
		}
		break;
	case FK_MSG_ERROR:
		/* Invalid value about a registered task: the policy registered it
		 * at a worse priority than asked. The user should know. */
		logf_(out, m->code == FK_ERR_INVALID && m->task_id ? FK_LOG_WARN : FK_LOG_DEBUG,
		      "scheduler error %u for task %u: %.*s", m->code, m->task_id, (int)m->message_len, m->message);
		if (m->code == FK_ERR_UNKNOWN_TASK && t) {
			reregister(t, 0, out);
			if (t->flush_pending) {
				/* The daemon forgot the task: what it had is lost. */
				t->flush_pending = 0;
				c->flush_failed = 1;
				flush_check(c, out);
			}
		}
		if (m->code == FK_ERR_VERSION) {
			logf_(out, FK_LOG_WARN, "scheduler does not speak wire protocol v%d; the hook is disabled", FK_WIRE_VERSION);
			c->disabled = 1;
			for (int i = 0; i < FK_MAX_TASKS; i++)
				if (c->task[i].known)
					set_pass(&c->task[i], FK_ST_DISABLED, i, out);
		}
		break;
	default: /* Hold belongs to a waiter's own socket */
		break;
	}
}

int fk_core_target(const fk_core *c, const fk_msg_in *m)
{
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		const fk_core_task *t = &c->task[i];
		if (!t->known)
			continue;
		if (m->type == FK_MSG_REGISTER_ACK) {
			if (t->reg_seq && t->reg_seq == m->seq)
				return t->v.state == FK_ST_DISABLED ? -1 : i;
		} else if (t->v.state == FK_ST_ACTIVE && t->v.task_id == m->task_id) {
			return i;
		}
	}
	return -1;
}

/* ---- a waiter's request ---- */

static void on_request(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_act *a = act(out, FK_ACT_WAIT, ev->task);
	a->seq = ev->seq;
	a->until = ev->now + c->cfg.grant_timeout_ms * MS;
}

/* No answer in time: launch anyway, and pass this task's launches through
 * for a back-off. */
static void on_wait_expired(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_core_task *t = &c->task[ev->task];
	const char *why = "no grant from the scheduler in time";
	fk_act *go = act(out, FK_ACT_GO, ev->task);
	go->seq = ev->seq;
	if (t->v.reg_gen != ev->gen) {
		/* The task registered anew while this request waited: it went to a
		 * daemon that is gone. This launch goes ahead, the next asks the
		 * new daemon; no back-off (after a restart it let the task's
		 * launches run ungated for a second beside the holder). */
		logf_(out, FK_LOG_DEBUG, "%s (the request was to a previous registration)", why);
		return;
	}
	if (t->v.state != FK_ST_ACTIVE) {
		/* The scheduler was found gone meanwhile: that outage was warned
		 * about, and the sender re-registers when it is back. */
		logf_(out, FK_LOG_INFO, "%s (scheduler unreachable)", why);
		return;
	}
	uint32_t b = t->backoff_ms;
	b = b ? (b * 2 > FK_BACKOFF_MAX_MS ? FK_BACKOFF_MAX_MS : b * 2) : FK_BACKOFF_MIN_MS;
	t->backoff_ms = b;
	t->v.backoff_until = ev->now + b * MS;
	if (!c->timeout_warned) {
		c->timeout_warned = 1;
		logf_(out, FK_LOG_WARN, "%s; launching anyway and passing launches through for %u ms (logged once)", why, b);
	} else {
		logf_(out, FK_LOG_INFO, "%s; passing launches through for %u ms", why, b);
	}
	/* A daemon that forgot the task says so (Error: unknown task). One that
	 * is slow (waiting for a CPU) has not forgotten it: registering anew
	 * would throw away its profiling progress, and under load it
	 * re-registered tasks every second. Only a second timeout in a row (no
	 * grant since the last) re-registers. */
	if (b > FK_BACKOFF_MIN_MS)
		reregister(t, 1, out);
}

/* A grant is given on what the daemon knew. If the board shows a better
 * level launched since, the launch would join that task's run (a request
 * queued before the run began is answered once the daemon's timers or this
 * task's own reports move it): ask again, once the daemon has read the
 * board it holds the request. Bounded, so that a daemon that keeps
 * answering on a stale view is not waited for without end. The stale
 * grant's credit needs no taking back: each credit launch checks the gate,
 * and marking it revoked would make the answer to this very seq look older
 * than the revocation once another thread has launched. */
static void on_granted(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_core_task *t = &c->task[ev->task];
	if (t->board && fk_gate_stale(t->v.gate_seen, t->v.gate_expires, ev->above, ev->now) &&
	    ev->asks < 1 + FK_REASK_MAX) {
		logf_(out, FK_LOG_DEBUG, "launch %u: granted before a better priority's launch; asking again", ev->seq);
		act(out, FK_ACT_REASK, ev->task)->seq = ev->seq;
		return;
	}
	fk_act *a = act(out, FK_ACT_GO, ev->task);
	a->seq = ev->seq;
	a->granted = 1;
}

/* The launching thread found the permission stale: no credit, and a
 * lower-priority holder asks from now on, until the daemon says again. */
static void on_gate_closed(fk_core_task *t, const fk_ev *ev)
{
	credit_set(t, 0, ev->seq_now);
	if (t->v.mode & FK_MODE_HOLDER)
		t->v.mode = (t->v.mode & ~(uint32_t)FK_MODE_HOLDER) | FK_MODE_WAITER;
}

/* The probe measured calibration seq: the answer goes with the task's
 * registration (a task registered anew meanwhile answers as the new one:
 * the daemon drops an answer to no request). */
static void on_calibrated(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_core_task *t = &c->task[ev->task];
	if (t->v.state != FK_ST_ACTIVE)
		return;
	fk_who w = who_of(t);
	send_msg(out, ev->task,
		 &(fk_msg_out){.type = FK_MSG_CALIBRATION, .task_id = w.id, .token = w.token, .seq = ev->seq,
			       .host_ns = ev->host_ns, .device_ns = ev->device_ns, .flags = ev->calib_flags});
}

/* ---- runs, exit, fork ---- */

/* A run ended: report it (measurements first, if it was measured, then
 * RunEnd, saying why a measured run has none) unless it is not whole (the
 * task was activated mid-run) or the task is not registered. */
static void on_run_end(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_core_task *t = &c->task[ev->task];
	int partial = t->partial_run;
	t->partial_run = 0;
	if (partial || t->v.state != FK_ST_ACTIVE)
		return;
	fk_who w = who_of(t);
	if (ev->measured) {
		fk_act *a = act(out, FK_ACT_RECORDS, ev->task);
		a->run = t->run;
		a->who = w;
		a->reg_gen = t->v.reg_gen;
		a->profile_runs = t->profile_runs;
	}
	send_msg(out, ev->task,
		 &(fk_msg_out){.type = FK_MSG_RUN_END, .task_id = w.id, .token = w.token, .run = t->run,
			       .kernels = ev->kernels, .run_ns = ev->run_ns, .reason = ev->reason, .last_seq = ev->last_seq,
			       .unmeasured = ev->measured ? 0 : ev->unmeasured});
	t->run++;
}

/* The task is gone for the daemon from here on: its CUDA calls pass
 * through unreported, and a registered one says Goodbye. At exit, calls
 * after the hook's handler (a framework's static destructors synchronize),
 * reported, drew Error(unknown task), and the exiting process registered
 * anew; after a sticky device error every later call of the process fails,
 * and a task left registered would report launches that never ran and
 * runs that never end. */
static void leave(fk_core *c, int i, fk_acts *out)
{
	fk_core_task *t = &c->task[i];
	if (!t->known || t->v.state == FK_ST_DISABLED)
		return;
	int registered = t->v.state == FK_ST_ACTIVE;
	set_pass(t, FK_ST_DISABLED, i, out);
	if (registered) {
		fk_who w = who_of(t);
		send_msg(out, i, &(fk_msg_out){.type = FK_MSG_GOODBYE, .task_id = w.id, .token = w.token});
	}
}

static void on_exit_(fk_core *c, fk_acts *out)
{
	for (int i = 0; i < FK_MAX_TASKS; i++)
		if (c->task[i].known && c->task[i].v.state == FK_ST_ACTIVE)
			leave(c, i, out);
}

/* A forked child is a new process to the scheduler: its tasks register
 * again at their next launch. */
static void on_fork(fk_core *c, const fk_ev *ev)
{
	uint32_t counter = c->reg_counter; /* a flush under way is the parent's */
	int timeout_warned = c->timeout_warned;
	fk_core_config cfg = c->cfg;
	cfg.pid = ev->pid;
	fk_core_init(c, &cfg);
	c->reg_counter = counter;
	c->timeout_warned = timeout_warned;
}

static int view_eq(const fk_view *a, const fk_view *b)
{
	return a->token == b->token && a->gate_seen == b->gate_seen && a->gate_expires == b->gate_expires &&
	       a->backoff_until == b->backoff_until && a->state == b->state && a->mode == b->mode &&
	       a->task_id == b->task_id && a->credit_limit == b->credit_limit && a->revoked_seq == b->revoked_seq &&
	       a->reg_gen == b->reg_gen && a->sample == b->sample && a->profile_runs == b->profile_runs;
}

static int bad_task(const fk_core *c, const fk_ev *ev)
{
	return ev->task < 0 || ev->task >= FK_MAX_TASKS || !c->task[ev->task].known;
}

void fk_core_step(fk_core *c, const fk_ev *ev, fk_acts *out)
{
	fk_acts *acts = out;
	out->n = 0;
	switch (ev->type) {
	case FK_EV_REGISTER:
		if (ev->task >= 0 && ev->task < FK_MAX_TASKS)
			on_register(c, ev, acts);
		break;
	case FK_EV_TICK:
		on_tick(c, ev, acts);
		break;
	case FK_EV_MESSAGE:
		on_message(c, ev, acts);
		break;
	case FK_EV_EXIT:
		on_exit_(c, acts);
		break;
	case FK_EV_FORK:
		on_fork(c, ev);
		break;
	case FK_EV_FLUSH:
		on_flush(c, ev, acts);
		break;
	case FK_EV_REFUSED:
		/* A refusal on a request's socket under a registration that has
		 * since been replaced came from the daemon that was gone: marking
		 * the new registration lost would run the task un-hooked until its
		 * next one. */
		if (ev->task < 0 || (!bad_task(c, ev) && c->task[ev->task].v.reg_gen == ev->gen))
			sched_lost(c, ev->why ? ev->why : "connection refused", ev->now, acts);
		if (ev->task >= 0 && ev->seq)
			act(acts, FK_ACT_GO, ev->task)->seq = ev->seq;
		break;
	default:
		if (bad_task(c, ev))
			break;
		fk_core_task *t = &c->task[ev->task];
		switch (ev->type) {
		case FK_EV_REGISTER_TIMEOUT:
			/* No answer in time: run un-hooked, the sender keeps trying. */
			if (t->v.state == FK_ST_REGISTERING)
				sched_lost(c, "no answer to Register", ev->now, acts);
			break;
		case FK_EV_START_FAILED:
			set_pass(t, FK_ST_UNREACHABLE, ev->task, acts);
			break;
		case FK_EV_REQUEST:
			on_request(c, ev, acts);
			break;
		case FK_EV_WAIT_EXPIRED:
			on_wait_expired(c, ev, acts);
			break;
		case FK_EV_GRANTED:
			on_granted(c, ev, acts);
			break;
		case FK_EV_GATE_CLOSED:
			on_gate_closed(t, ev);
			break;
		case FK_EV_RUN_END:
			on_run_end(c, ev, acts);
			break;
		case FK_EV_CALIBRATED:
			on_calibrated(c, ev, acts);
			break;
		case FK_EV_LEAVE:
			leave(c, ev->task, acts);
			break;
		}
	}
	/* Views first: a thread woken by the actions after them sees the state
	 * they lead to. */
	int changed[FK_MAX_TASKS], p = 0;
	for (int i = 0; i < FK_MAX_TASKS; i++) {
		fk_core_task *t = &c->task[i];
		if (t->known && !view_eq(&t->v, &t->published)) {
			t->published = t->v;
			changed[p++] = i;
		}
	}
	if (p + out->n > FK_ACTS_MAX)
		out->n = FK_ACTS_MAX - p; /* cannot happen (FK_ACTS_MAX) */
	memmove(&out->a[p], &out->a[0], (size_t)out->n * sizeof out->a[0]);
	for (int i = 0; i < p; i++) {
		memset(&out->a[i], 0, sizeof out->a[i]);
		out->a[i].type = FK_ACT_PUBLISH;
		out->a[i].task = changed[i];
	}
	out->n += p;
}
