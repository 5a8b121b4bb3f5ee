/* control.c — the process's hook core (core.h) and what its actions do to
 * the process. One fk_core behind a mutex, stepped by whichever thread has
 * an event: the sender (the daemon's messages, its timer, run ends), a
 * launching thread (its first launch, a waiter's request and answers, a
 * stale gate), the exiting thread, a forked child. The views a step changes
 * are published into the tasks' atomics, which is all a launch reads;
 * threads waiting for a registration are woken, the sender is woken, lines
 * are logged. The actions only the stepping thread can carry out (datagrams,
 * a waiter's wait) go back to it. Never on a holder's launch path. */
#include "hook.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fk_core core;
static int ready;
static fk_acts acts; /* under mu */
static char task_key[FK_TASK_KEY_MAX + 1];
static char sched_name[300];
int fk_wake_fd = -1;

void fk_sender_wake(void)
{
	uint64_t one = 1;
	int fd = fk_wake_fd;
	if (fd >= 0) {
		ssize_t r = write(fd, &one, sizeof one);
		(void)r; /* a full counter already means "wake up" */
	}
}

/* The core's configuration, from the environment, at its first event. */
static void init_locked(void)
{
	if (ready)
		return;
	fk_core_config cfg = {.priority = fk_cfg.priority,
			      .weight = fk_cfg.weight,
			      .grant_timeout_ms = (uint32_t)fk_cfg.grant_timeout_ms,
			      .local = fk_cfg.local,
			      .sched = sched_name,
			      .pid = (uint32_t)getpid()};
	snprintf(sched_name, sizeof sched_name, "%s:%d", fk_cfg.host, fk_cfg.port);
	if (fk_cfg.task_key_set) {
		cfg.task_key = fk_cfg.task_key;
		cfg.task_key_len = strlen(fk_cfg.task_key);
	} else {
		cfg.task_key_len = fk_task_key_self(task_key);
		cfg.task_key = task_key;
	}
	fk_core_init(&core, &cfg);
	ready = 1;
}

/* What a launch reads of task ti, in the order it reads it: the ID's token
 * before the ID (no message pairs a new ID with an old token), the gate and
 * credit before the mode (a launch loads the mode with acquire, then the
 * rest), the state last. */
static void publish(int ti)
{
	fk_task *t = &fk_tasks[ti];
	const fk_view *v = &core.task[ti].v;
	atomic_store(&t->token, v->token);
	atomic_store(&t->task_id, v->task_id);
	atomic_store(&t->reg_gen, v->reg_gen);
	atomic_store_explicit(&t->gate_seen, v->gate_seen, memory_order_relaxed);
	atomic_store_explicit(&t->gate_expires, v->gate_expires, memory_order_relaxed);
	atomic_store_explicit(&t->credit_limit, v->credit_limit, memory_order_relaxed);
	atomic_store_explicit(&t->backoff_until_ns, v->backoff_until, memory_order_relaxed);
	atomic_store_explicit(&t->mode, v->mode, memory_order_release);
	atomic_store_explicit(&t->state, v->state, memory_order_release);
}

int fk_ctl_step(const fk_ev *ev, fk_act *out, int cap)
{
	int n = 0;
	pthread_mutex_lock(&mu);
	init_locked();
	fk_core_step(&core, ev, &acts);
	for (int i = 0; i < acts.n; i++) {
		const fk_act *a = &acts.a[i];
		switch (a->type) {
		case FK_ACT_PUBLISH:
			publish(a->task);
			break;
		case FK_ACT_REGISTERED: {
			fk_task *t = &fk_tasks[a->task];
			pthread_mutex_lock(&t->mu);
			pthread_cond_broadcast(&t->cv);
			pthread_mutex_unlock(&t->mu);
			break;
		}
		case FK_ACT_WAKE:
			fk_sender_wake();
			break;
		case FK_ACT_LOG:
			fk_log(a->level, "%s", a->text);
			break;
		default:
			if (n < cap)
				out[n++] = *a;
		}
	}
	pthread_mutex_unlock(&mu);
	return n;
}

int fk_ctl_target(const fk_msg_in *m)
{
	pthread_mutex_lock(&mu);
	init_locked();
	int ti = fk_core_target(&core, m);
	pthread_mutex_unlock(&mu);
	return ti;
}

void fk_ctl_lock(void) { pthread_mutex_lock(&mu); }
void fk_ctl_unlock(void) { pthread_mutex_unlock(&mu); }

void fk_ctl_reset_child(void)
{
	pthread_mutex_init(&mu, NULL);
	fk_wake_fd = -1; /* the sender closed it */
	if (ready)
		fk_core_step(&core, &(fk_ev){.type = FK_EV_FORK, .pid = (uint32_t)getpid()}, &acts);
}
