/* core.h — the hook's decisions as a pure core, like etcd-io/raft's RawNode
 * and the daemon's scheduler/: a step function fed events (a message from
 * the daemon, a timer, a launch request and its answers, what the board
 * shows, a run end, registration outcomes, exit, fork) that returns actions
 * (datagrams to send, waits to end, views to publish, lines to log) and
 * holds every task's state machine — registration and re-registration,
 * retries and back-off, credit, the gate, stale grants, fail-open and
 * recovery, Goodbye and after it, fork.
 *
 * No sockets, clock reads, threads, locks or globals: time comes in with the
 * events, and one fk_core holds all state (control.c owns the process's,
 * behind a mutex; the scenario tests in test/testdata/core/ drive their own).
 * What a launch needs to decide without a lock — its mode, credit, gate,
 * back-off — is the task's view (fk_view), which the shell publishes as
 * atomics after every step that changes it (hookclient/README.md, "The
 * core", says which decisions stay inline on the application's threads). */
#ifndef FIKIT_CORE_H
#define FIKIT_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define FK_MAX_TASKS 16
/* How often a launch asks again after a grant the board shows stale. */
#define FK_REASK_MAX 4

enum fk_state { FK_ST_NEW, FK_ST_REGISTERING, FK_ST_ACTIVE, FK_ST_UNREACHABLE, FK_ST_DISABLED };
/* mode: what a launch does, one load on the hot path. */
enum { FK_MODE_PASS = 0, FK_MODE_HOLDER = 1, FK_MODE_WAITER = 2, FK_MODE_MEASURE = 4 };

/* Registration retries: while the first registration is unanswered,
 * another Register after this long at the earliest. After losing the
 * scheduler the Register goes again every FK_REG_PROBE_MS, without
 * back-off, however long the outage: a daemon back after any outage is
 * rejoined within that (a back-off that had grown over a 13 s outage left
 * the services un-hooked for 14 to 20 s after the daemon's return, the
 * high priority unprotected behind the low). A probe is one datagram from
 * the sender thread; the launch path never waits for it. */
#define FK_REG_RETRY_MIN_MS 1000
#define FK_REG_PROBE_MS 100
/* A waiter that failed open passes its launches through this long,
 * doubling up to the maximum, until a grant. */
#define FK_BACKOFF_MIN_MS 1000
#define FK_BACKOFF_MAX_MS 30000

typedef struct fk_core_config {
	int priority;
	int weight; /* among equals (FIKIT_WEIGHT); the default, 1, is left out of Register */
	uint32_t grant_timeout_ms;
	int local;         /* the scheduler is on this host: it shares our CLOCK_MONOTONIC */
	const char *sched; /* "host:port", for log lines */
	const char *task_key;
	size_t task_key_len;
	uint32_t pid;
} fk_core_config;

/* What the launch path reads of a task, published as atomics. */
typedef struct fk_view {
	uint64_t token;         /* the registration's, on every message about the task */
	uint64_t gate_seen;     /* the permission holds while no better priority launched after this … */
	uint64_t gate_expires;  /* … and until this (0: no expiry; local clock) */
	uint64_t backoff_until; /* failed open: a waiter passes its launches through until then */
	uint32_t state;         /* enum fk_state */
	uint32_t mode;          /* FK_MODE_* */
	uint32_t task_id;
	uint32_t credit_limit; /* launch s goes without asking while s ≤ credit_limit (serial order) */
	uint32_t revoked_seq;  /* a grant for an older launch renews nothing */
	uint32_t reg_gen;      /* acks received: tells a registration from the one before */
	uint32_t sample;       /* sharing: measure one run in this many (0: none) */
	uint32_t profile_runs; /* T: the measurement's uncertainty bound (measure.c) */
} fk_view;

typedef struct fk_core_task {
	int known; /* a registration was asked for */
	uint8_t uuid[16];
	const char *dev_name; /* the shell's, stable */
	size_t dev_name_len;
	fk_view v, published;
	uint32_t reg_seq;       /* the last Register sent */
	uint64_t reg_sent_ns;   /* … and when, while unanswered */
	uint64_t reg_next_ns;   /* the next attempt (0 while registering: now) */
	int rereg;       /* register again (Error unknown task, a waiter's second timeout) */
	int partial_run; /* activated mid-run: that run is not reported */
	int board;       /* the daemon's board is mapped: the gate reads it */
	uint32_t heartbeat_ms, profile_runs, run;
	uint64_t next_heartbeat_ns;
	uint32_t backoff_ms; /* fail-open back-off, 0 after a grant */
	uint32_t flush_seq;  /* the last Flush sent about it */
	int flush_pending;   /* … not answered yet */
} fk_core_task;

typedef struct fk_core {
	fk_core_config cfg;
	fk_core_task task[FK_MAX_TASKS];
	uint32_t reg_counter; /* Register seqs: unique across tasks */
	int outage_warned;    /* one warning per outage */
	int timeout_warned;   /* one warning for grant timeouts */
	int disabled;         /* the daemon does not speak our protocol: nothing registers */
	/* fikit_flush(): a flush under way until flush_until, failed if a task
	 * could not be flushed. */
	int flushing, flush_failed;
	uint64_t flush_until;
	uint32_t flush_counter;
} fk_core;

enum fk_ev_type {
	FK_EV_REGISTER = 1,     /* a launch needs task registered (its first): uuid, dev_name */
	FK_EV_REGISTER_TIMEOUT, /* that registration went unanswered for the connect timeout */
	FK_EV_START_FAILED,     /* the sender could not start */
	FK_EV_TICK,             /* the sender's timer */
	FK_EV_MESSAGE,          /* a datagram from the daemon (msg); see fk_ev */
	FK_EV_REQUEST,          /* a LaunchRequest for seq went out */
	FK_EV_WAIT_EXPIRED,     /* no answer to request seq, asked under registration gen */
	FK_EV_GRANTED,          /* request seq was granted; above: what the board shows now; asks so far */
	FK_EV_GATE_CLOSED,      /* a launching thread found the permission stale */
	FK_EV_REFUSED,          /* connection refused: on a request's socket under gen (task ≥ 0) or the sender's */
	FK_EV_RUN_END,          /* a run ended */
	FK_EV_EXIT,             /* the process exits */
	FK_EV_LEAVE,            /* the task leaves: its process hit a sticky device error */
	FK_EV_FORK,             /* this is a forked child (pid) */
	FK_EV_FLUSH,            /* what was measured is shipped: ask the daemon to say when it is durable, until `until` */
	FK_EV_CALIBRATED,       /* the probe measured calibration seq: host_ns, device_ns, calib_flags */
};

typedef struct fk_ev {
	int type;
	int task; /* index; FK_EV_MESSAGE: the task the message names (fk_core_target), -1 none */
	uint64_t now;
	uint32_t seq;     /* REQUEST, WAIT_EXPIRED, GRANTED: the launch's */
	uint32_t seq_now; /* the task's launch counter now (credit is counted from it) */
	uint32_t gen;     /* WAIT_EXPIRED, REFUSED: the registration the request was made under */
	uint32_t asks;    /* GRANTED: requests made for this launch so far */
	uint64_t above;   /* the board's latest launch of a better priority (0: none, no board) */
	int board;        /* MESSAGE (RegisterAck): the board it names is mapped */
	int pool;         /* MESSAGE: the task's measurement events exist (profiling can measure) */
	fk_msg_in msg;    /* MESSAGE */
	/* MESSAGE on a waiting thread's socket or board slot: the request it
	 * waits for (wait_seq 0: the sender's socket). */
	int wait_task;
	uint32_t wait_seq, wait_id;
	const char *why; /* REFUSED */
	uint8_t uuid[16]; /* REGISTER */
	const char *dev_name;
	size_t dev_name_len;
	uint32_t kernels, last_seq, pid; /* RUN_END; FORK: pid */
	uint64_t run_ns;
	uint8_t reason;
	int measured;       /* RUN_END: its measurements are ready to ship */
	uint8_t unmeasured; /* RUN_END: measured, but not shippable, and why (FK_UNMEASURED_*) */
	uint64_t until;     /* FLUSH: when to give up waiting for the answers */
	uint64_t host_ns, device_ns; /* CALIBRATED */
	uint8_t calib_flags;
	/* MESSAGE (Warm): what the shell sees of the task now: a run under
	 * way (launches since its last host sync), a stream capture in the
	 * process, its context destroyed or reset (warm.c). */
	int in_run, capturing, ctx_gone;
} fk_ev;

enum fk_act_type {
	FK_ACT_PUBLISH = 1, /* the task's view changed: publish core->task[task].v */
	FK_ACT_SEND,        /* send msg */
	FK_ACT_START,       /* this thread registers task: start the sender, then wait */
	FK_ACT_WAKE,        /* wake the sender: it has something to send */
	FK_ACT_REGISTERED,  /* the task's registration wait is over */
	FK_ACT_WAIT,        /* keep waiting for request seq until `until` */
	FK_ACT_GO,          /* the launch waiting for seq goes: granted 1, or 0 (failed open, told to stop) */
	FK_ACT_REASK,       /* granted on a stale view: ask again for seq */
	FK_ACT_RECORDS,     /* ship the run's measurements as run `run` (before the RunEnd that follows) */
	FK_ACT_LOG,         /* level (log.h), text */
	FK_ACT_FLUSHED,     /* the flush is over: granted 1 if every task's measurements are durable */
	FK_ACT_CALIBRATE,   /* time the probe for calibration seq, ns long (probe.c) */
	FK_ACT_KERNEL_TIMES, /* the message (KernelTimes) is the task's: store its table (kerneltimes.h) */
	FK_ACT_WARM,         /* launch the hook's kernel, ns long, in the task's context (warm.c) */
};

typedef struct fk_act {
	int type, task;
	uint32_t seq, run, reg_gen, profile_runs;
	uint64_t until, ns;
	int granted, level;
	fk_who who;
	union {
		fk_msg_out msg;
		char text[160];
	};
} fk_act;

#define FK_ACTS_MAX 56 /* the most one step emits: two per task and a few */
typedef struct fk_acts {
	int n;
	fk_act a[FK_ACTS_MAX];
} fk_acts;

void fk_core_init(fk_core *c, const fk_core_config *cfg);
/* Step one event; out gets its actions, PUBLISH first. */
void fk_core_step(fk_core *c, const fk_ev *ev, fk_acts *out);
/* The task a message from the daemon is about (RegisterAck: the one whose
 * Register it answers; the others: the active task of its ID), or -1. */
int fk_core_target(const fk_core *c, const fk_msg_in *m);

/* Whether a permission with gate (seen, expires) is stale at now: its expiry
 * passed, or the board shows a better priority's launch after seen (above; 0
 * without a board). One predicate for the launch path and the core. */
static inline int fk_gate_stale(uint64_t seen, uint64_t expires, uint64_t above, uint64_t now)
{
	return (expires && now > expires) || above > seen;
}

#endif
