/* test_core.c — the hook's core (core.h) driven by scenario files, like the
 * scheduler's (scheduler/testdata): the files in hookclient/test/testdata/core/.
 * Each file is a script of events, each followed by the actions the core
 * must answer with:
 *
 *	# a comment
 *	<command> key=value …
 *	----
 *	<one line per action, or "ok">
 *	<a blank line>
 *
 * Commands (times: 0, 250ns, 5us, 2ms, 1s; "at" is the event's clock):
 *
 *	config prio=5 weight=1 grant-timeout=200ms local=1 key=svc pid=100 sched=127.0.0.1:7070
 *	register task=0 at=…            a launch needs the task registered
 *	register-timeout task=0 at=…    … unanswered for the connect timeout
 *	start-failed task=0             the sender could not start
 *	tick at=…                       the sender's timer
 *	recv at=… [seq-now=N] [board=1 above=…] [pool=0] [wait=TASK/SEQ/ID] <Message>
 *	                                a datagram from the daemon, in the text
 *	                                form of udp/testdata/vectors.txt; wait=: on
 *	                                the socket of a thread waiting for SEQ
 *	request task=0 seq=N at=…       a LaunchRequest went out
 *	expire task=0 seq=N gen=G at=…  no answer in time
 *	granted task=0 seq=N asks=K above=… at=…
 *	gate-closed task=0 seq-now=N at=…
 *	refused [task=0 seq=N gen=G] why="…" at=…
 *	run-end task=0 kernels=K run-ns=… reason=R last-seq=S [measured=0 unmeasured=U] at=…
 *	flush until=… at=…              fikit_flush(): what was measured is shipped
 *	exit at=…
 *	leave task=0 at=…               the task's process hit a sticky device error
 *	fork pid=N
 *	view task=0                     the task's whole view
 *
 * Actions print as: view task=T <fields that changed> | send task=T
 * <Message> | start | wake | registered | wait seq= until= | go seq=
 * granted|open | reask seq= | records run= who=ID/TOKEN gen= runs= | log
 * <level> <text> | flushed ok|failed.
 *
 * FIKIT_REWRITE=1 rewrites the expected outputs from what the core does
 * (read the diff before committing it). */
#include "check.h"
#include "core.h"
#include "log.h"
#include "wiretext.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static fk_core core;
static fk_view shown[FK_MAX_TASKS]; /* the views as last printed */
static char device[FK_MAX_TASKS][32];

/* ---- output ---- */

static char out[1 << 16];
static size_t outlen;

__attribute__((format(printf, 1, 2))) static void emit(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out + outlen, sizeof out - outlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		outlen += (size_t)n < sizeof out - outlen ? (size_t)n : sizeof out - outlen - 1;
}

static const char *fmt_t(uint64_t v)
{
	static char buf[8][32];
	static int k;
	char *b = buf[k++ % 8];
	if (v == 0)
		snprintf(b, 32, "0");
	else if (v % 1000000000u == 0)
		snprintf(b, 32, "%" PRIu64 "s", v / 1000000000u);
	else if (v % 1000000u == 0)
		snprintf(b, 32, "%" PRIu64 "ms", v / 1000000u);
	else if (v % 1000u == 0)
		snprintf(b, 32, "%" PRIu64 "us", v / 1000u);
	else
		snprintf(b, 32, "%" PRIu64 "ns", v);
	return b;
}

static const char *const state_name[] = {"new", "registering", "active", "unreachable", "disabled"};

static const char *mode_name(uint32_t m)
{
	static char b[64];
	if (m == FK_MODE_PASS)
		return "pass";
	snprintf(b, sizeof b, "%s%s", m & FK_MODE_HOLDER ? "holder" : m & FK_MODE_WAITER ? "waiter" : "?",
		 m & FK_MODE_MEASURE ? "+measure" : "");
	return b;
}

static void print_view(int ti, int all)
{
	const fk_view *v = &core.task[ti].v, *s = &shown[ti];
	emit("view task=%d", ti);
	if (all || v->state != s->state)
		emit(" state=%s", state_name[v->state]);
	if (all || v->mode != s->mode)
		emit(" mode=%s", mode_name(v->mode));
	if (all || v->task_id != s->task_id)
		emit(" id=%" PRIu32, v->task_id);
	if (all || v->token != s->token)
		emit(" token=%" PRIu64, v->token);
	if (all || v->reg_gen != s->reg_gen)
		emit(" gen=%" PRIu32, v->reg_gen);
	if (all || v->credit_limit != s->credit_limit)
		emit(" credit-limit=%" PRIu32, v->credit_limit);
	if (all || v->revoked_seq != s->revoked_seq)
		emit(" revoked=%" PRIu32, v->revoked_seq);
	if (all || v->gate_seen != s->gate_seen)
		emit(" seen=%s", fmt_t(v->gate_seen));
	if (all || v->gate_expires != s->gate_expires)
		emit(" expires=%s", fmt_t(v->gate_expires));
	if (all || v->backoff_until != s->backoff_until)
		emit(" backoff-until=%s", fmt_t(v->backoff_until));
	if (all || v->sample != s->sample)
		emit(" sample=%" PRIu32, v->sample);
	if (all || v->profile_runs != s->profile_runs)
		emit(" profile-runs=%" PRIu32, v->profile_runs);
	emit("\n");
	shown[ti] = *v;
}

static const char *const level_name[] = {"off", "warn", "info", "debug"};

static void print_acts(const fk_acts *a)
{
	static char msg[8192];
	if (a->n == 0)
		emit("ok\n");
	for (int i = 0; i < a->n; i++) {
		const fk_act *x = &a->a[i];
		switch (x->type) {
		case FK_ACT_PUBLISH:
			print_view(x->task, 0);
			break;
		case FK_ACT_SEND:
			wt_format(msg, sizeof msg, x->msg.type, &x->msg);
			emit("send task=%d %s\n", x->task, msg);
			break;
		case FK_ACT_START:
			emit("start task=%d\n", x->task);
			break;
		case FK_ACT_WAKE:
			emit("wake\n");
			break;
		case FK_ACT_REGISTERED:
			emit("registered task=%d\n", x->task);
			break;
		case FK_ACT_WAIT:
			emit("wait task=%d seq=%" PRIu32 " until=%s\n", x->task, x->seq, fmt_t(x->until));
			break;
		case FK_ACT_GO:
			emit("go task=%d seq=%" PRIu32 " %s\n", x->task, x->seq, x->granted ? "granted" : "open");
			break;
		case FK_ACT_REASK:
			emit("reask task=%d seq=%" PRIu32 "\n", x->task, x->seq);
			break;
		case FK_ACT_RECORDS:
			emit("records task=%d run=%" PRIu32 " who=%" PRIu32 "/%" PRIu64 " gen=%" PRIu32 " runs=%" PRIu32 "\n",
			     x->task, x->run, x->who.id, x->who.token, x->reg_gen, x->profile_runs);
			break;
		case FK_ACT_LOG:
			emit("log %s %s\n", level_name[x->level], x->text);
			break;
		case FK_ACT_FLUSHED:
			emit("flushed %s\n", x->granted ? "ok" : "failed");
			break;
		case FK_ACT_WARM:
			emit("warm task=%d seq=%" PRIu32 " probe=%s\n", x->task, x->seq, fmt_t(x->ns));
			break;
		case FK_ACT_CALIBRATE:
			emit("calibrate task=%d seq=%" PRIu32 " probe=%s\n", x->task, x->seq, fmt_t(x->ns));
			break;
		case FK_ACT_KERNEL_TIMES:
			emit("kernel-times task=%d\n", x->task);
			break;
		default:
			emit("? action %d\n", x->type);
		}
	}
}

/* ---- input ---- */

typedef struct args {
	char *key[32], *val[32];
	int n;
	char *msg; /* recv: the message text */
	const char *err;
} args;

/* "cmd k=v k="quoted v" … [Message …]" */
static void parse_args(char *p, args *a)
{
	a->n = 0;
	a->msg = NULL;
	a->err = NULL;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (*p >= 'A' && *p <= 'Z') {
			a->msg = p;
			return;
		}
		char *eq = strchr(p, '=');
		if (!eq || a->n == 32) {
			a->err = "not key=value";
			return;
		}
		*eq = '\0';
		a->key[a->n] = p;
		char *v = eq + 1;
		if (*v == '"') {
			char *close = strchr(v + 1, '"');
			if (!close) {
				a->err = "unterminated quote";
				return;
			}
			*close = '\0';
			a->val[a->n++] = v + 1;
			p = close + 1;
			continue;
		}
		a->val[a->n++] = v;
		p = v + strcspn(v, " ");
		if (*p)
			*p++ = '\0';
	}
}

static const char *arg(const args *a, const char *key)
{
	for (int i = 0; i < a->n; i++)
		if (!strcmp(a->key[i], key))
			return a->val[i];
	return NULL;
}

static uint64_t num(const args *a, const char *key, uint64_t def)
{
	const char *s = arg(a, key);
	return s ? strtoull(s, NULL, 10) : def;
}

static uint64_t dur(const args *a, const char *key, uint64_t def)
{
	const char *s = arg(a, key);
	if (!s)
		return def;
	char *end;
	double v = strtod(s, &end);
	double mul = 1;
	if (!strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	return (uint64_t)(v * mul + 0.5);
}

static char key_buf[256], sched_buf[256];
static fk_core_config cfg = {.priority = 5, .grant_timeout_ms = 200, .local = 1, .sched = "127.0.0.1:7070",
			     .task_key = "svc", .task_key_len = 3, .pid = 100};

static void reset(void)
{
	fk_core_init(&core, &cfg);
	memset(shown, 0, sizeof shown);
}

/* One command: its output into out. */
static void run(char *line)
{
	outlen = 0;
	out[0] = '\0';
	char *cmd = line;
	char *rest = line + strcspn(line, " ");
	if (*rest)
		*rest++ = '\0';
	args a;
	parse_args(rest, &a);
	if (a.err) {
		emit("error: %s\n", a.err);
		return;
	}
	fk_ev ev = {.now = dur(&a, "at", 0), .task = (int)num(&a, "task", 0), .seq = (uint32_t)num(&a, "seq", 0),
		    .seq_now = (uint32_t)num(&a, "seq-now", 0), .gen = (uint32_t)num(&a, "gen", 0),
		    .asks = (uint32_t)num(&a, "asks", 1), .above = dur(&a, "above", 0), .wait_task = -1};
	fk_acts acts;
	if (!strcmp(cmd, "config")) {
		cfg.priority = (int)num(&a, "prio", (uint64_t)cfg.priority);
		cfg.weight = (int)num(&a, "weight", (uint64_t)cfg.weight);
		cfg.grant_timeout_ms = (uint32_t)(dur(&a, "grant-timeout", cfg.grant_timeout_ms * 1000000ull) / 1000000);
		cfg.local = (int)num(&a, "local", (uint64_t)cfg.local);
		cfg.pid = (uint32_t)num(&a, "pid", cfg.pid);
		if (arg(&a, "key")) {
			snprintf(key_buf, sizeof key_buf, "%s", arg(&a, "key"));
			cfg.task_key = key_buf;
			cfg.task_key_len = strlen(key_buf);
		}
		if (arg(&a, "sched")) {
			snprintf(sched_buf, sizeof sched_buf, "%s", arg(&a, "sched"));
			cfg.sched = sched_buf;
		}
		reset();
		emit("ok\n");
		return;
	}
	if (!strcmp(cmd, "view")) {
		print_view(ev.task, 1);
		return;
	}
	if (ev.task < 0 || ev.task >= FK_MAX_TASKS) {
		emit("error: task %d\n", ev.task);
		return;
	}
	if (!strcmp(cmd, "register")) {
		ev.type = FK_EV_REGISTER;
		if (!core.task[ev.task].known) /* the core keeps the name: the shell's is fixed */
			snprintf(device[ev.task], sizeof device[ev.task], "%s", arg(&a, "device") ? arg(&a, "device") : "GPU");
		ev.dev_name = device[ev.task];
		ev.dev_name_len = strlen(device[ev.task]);
		memset(ev.uuid, 0xa0 + ev.task, 16);
	} else if (!strcmp(cmd, "register-timeout")) {
		ev.type = FK_EV_REGISTER_TIMEOUT;
	} else if (!strcmp(cmd, "start-failed")) {
		ev.type = FK_EV_START_FAILED;
	} else if (!strcmp(cmd, "tick")) {
		ev.type = FK_EV_TICK;
	} else if (!strcmp(cmd, "recv")) {
		ev.type = FK_EV_MESSAGE;
		ev.board = (int)num(&a, "board", 0);
		ev.pool = (int)num(&a, "pool", 1);
		ev.in_run = (int)num(&a, "in-run", 0);
		ev.capturing = (int)num(&a, "capturing", 0);
		ev.ctx_gone = (int)num(&a, "ctx-gone", 0);
		const char *w = arg(&a, "wait");
		if (w && sscanf(w, "%d/%" SCNu32 "/%" SCNu32, &ev.wait_task, &ev.wait_seq, &ev.wait_id) != 3) {
			emit("error: wait=TASK/SEQ/ID\n");
			return;
		}
		wt_reset();
		if (!a.msg || wt_parse(a.msg, &ev.msg) < 0 || fk_wire_msgs[ev.msg.type].dir != FK_DIR_TO_HOOK) {
			emit("error: not a daemon → hook message\n");
			return;
		}
		ev.task = fk_core_target(&core, &ev.msg);
	} else if (!strcmp(cmd, "request")) {
		ev.type = FK_EV_REQUEST;
	} else if (!strcmp(cmd, "expire")) {
		ev.type = FK_EV_WAIT_EXPIRED;
	} else if (!strcmp(cmd, "granted")) {
		ev.type = FK_EV_GRANTED;
	} else if (!strcmp(cmd, "gate-closed")) {
		ev.type = FK_EV_GATE_CLOSED;
	} else if (!strcmp(cmd, "refused")) {
		ev.type = FK_EV_REFUSED;
		ev.task = arg(&a, "task") ? ev.task : -1;
		ev.why = arg(&a, "why");
	} else if (!strcmp(cmd, "run-end")) {
		ev.type = FK_EV_RUN_END;
		ev.kernels = (uint32_t)num(&a, "kernels", 0);
		ev.run_ns = dur(&a, "run-ns", 0);
		ev.reason = (uint8_t)num(&a, "reason", FK_RUN_END_STREAM_SYNC);
		ev.last_seq = (uint32_t)num(&a, "last-seq", 0);
		ev.measured = (int)num(&a, "measured", 1);
		ev.unmeasured = (uint8_t)num(&a, "unmeasured", 0);
	} else if (!strcmp(cmd, "flush")) {
		ev.type = FK_EV_FLUSH;
		ev.until = dur(&a, "until", 0);
	} else if (!strcmp(cmd, "calibrated")) {
		ev.type = FK_EV_CALIBRATED;
		ev.host_ns = dur(&a, "host", 0);
		ev.device_ns = dur(&a, "device", 0);
		ev.calib_flags = (uint8_t)num(&a, "flags", 0);
	} else if (!strcmp(cmd, "exit")) {
		ev.type = FK_EV_EXIT;
	} else if (!strcmp(cmd, "leave")) {
		ev.type = FK_EV_LEAVE;
	} else if (!strcmp(cmd, "fork")) {
		ev.type = FK_EV_FORK;
		ev.pid = (uint32_t)num(&a, "pid", 0);
		memset(shown, 0, sizeof shown);
	} else {
		emit("error: unknown command %s\n", cmd);
		return;
	}
	fk_core_step(&core, &ev, &acts);
	print_acts(&acts);
}

/* ---- the files ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Run one scenario file; rewrite: write back what the core answered. */
static int run_file(const char *path, int rewrite, int *cases)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		CHECK(0, "cannot open %s", path);
		return 0;
	}
	static char text[1 << 20];
	size_t len = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[len] = '\0';
	static char result[1 << 20];
	size_t rl = 0;
	int failures = 0;
	cfg = (fk_core_config){.priority = 5, .grant_timeout_ms = 200, .local = 1, .sched = "127.0.0.1:7070",
			       .task_key = "svc", .task_key_len = 3, .pid = 100};
	reset();
	char *p = text;
	int lineno = 0;
	while (*p) {
		char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		lineno++;
		if (ll == 0 || p[0] == '#') {
			rl += (size_t)snprintf(result + rl, sizeof result - rl, "%.*s\n", (int)ll, p);
			p += ll + (nl != NULL);
			continue;
		}
		char cmdline[4096];
		snprintf(cmdline, sizeof cmdline, "%.*s", (int)ll, p);
		int cmd_line = lineno;
		rl += (size_t)snprintf(result + rl, sizeof result - rl, "%s\n", cmdline);
		p += ll + (nl != NULL);
		/* "----", then the expected lines up to a blank line or the end */
		if (strncmp(p, "----\n", 5) != 0) {
			CHECK(0, "%s:%d: no ---- after the command", path, cmd_line);
			return 1;
		}
		p += 5;
		lineno++;
		char *exp = p;
		while (*p && *p != '\n') {
			char *e = strchr(p, '\n');
			p = e ? e + 1 : p + strlen(p);
			lineno++;
		}
		size_t explen = (size_t)(p - exp);
		char run_line[4096];
		snprintf(run_line, sizeof run_line, "%s", cmdline);
		run(run_line);
		(*cases)++;
		rl += (size_t)snprintf(result + rl, sizeof result - rl, "----\n%s", out);
		if (explen != outlen || memcmp(exp, out, outlen) != 0) {
			failures++;
			if (!rewrite)
				CHECK(0, "%s:%d: %s\nwant:\n%.*sgot:\n%s", path, cmd_line, cmdline, (int)explen, exp, out);
		}
	}
	if (rewrite && failures) {
		FILE *w = fopen(path, "w");
		if (!w || fwrite(result, 1, rl, w) != rl) {
			CHECK(0, "cannot rewrite %s", path);
		} else {
			printf("test_core: rewrote %s\n", path);
		}
		if (w)
			fclose(w);
	}
	return failures;
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	int rewrite = getenv("FIKIT_REWRITE") && !strcmp(getenv("FIKIT_REWRITE"), "1");
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/hookclient/test/testdata/core", check_root);
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "cannot open %s\n", dir);
		return 2;
	}
	char *names[256];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 256) {
		size_t l = strlen(e->d_name);
		if (l > 4 && !strcmp(e->d_name + l - 4, ".txt"))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof names[0], cmp_str);
	int cases = 0;
	for (int i = 0; i < n; i++) {
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		run_file(path, rewrite, &cases);
		free(names[i]);
	}
	CHECK(n >= 10 && cases > 100, "%d scenario files, %d steps", n, cases);
	printf("test_core: %d scenario files, %d steps\n", n, cases);
	return check_done("test_core");
}
