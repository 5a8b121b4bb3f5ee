/* config.h — the hook's environment (docs/design.md "Hook"; hookclient/README.md).
 * Parsing is pure (getenv and the report sink are parameters) so the C tests
 * can drive it; a bad value is reported in one line naming the variable and
 * the default, and the default is used: the hook never aborts the service. */
#ifndef FIKIT_CONFIG_H
#define FIKIT_CONFIG_H

#include "kernelid.h"

#define FK_DEFAULT_HOST "127.0.0.1"
#define FK_DEFAULT_PORT 7070
#define FK_DEFAULT_PRIORITY 5
/* Share among tasks of the same priority on a GPU (docs/scheduler.md
 * "Equals"); udp.DefaultWeight and udp.MaxWeight. */
#define FK_DEFAULT_WEIGHT 1
#define FK_MAX_WEIGHT 100
#define FK_DEFAULT_GRANT_TIMEOUT_MS 200
/* How long the first launch waits for the answer to its Register. A daemon
 * that is not there answers at once (ICMP: connection refused); one that is
 * there but waits for a CPU (64 clients starting together on 2 cores) needs
 * hundreds of milliseconds, and a task that gives up runs un-hooked until a
 * later answer. */
#define FK_DEFAULT_CONNECT_TIMEOUT_MS 1000
/* Kernels a task may have queued or running while a better priority is
 * registered on its GPU (docs/design.md "Board"): what a returning better
 * task waits for at most. 0: no bound. By default (FIKIT_INFLIGHT unset or
 * auto) this count applies only where the daemon gave the task no µs bound
 * (KernelTimes with bound_ns; docs/scheduler.md "The µs bound"). */
#define FK_DEFAULT_INFLIGHT 2
#define FK_INFLIGHT_MAX 16

#define FK_STR(x) #x
#define FK_XSTR(x) FK_STR(x)

typedef struct fk_config {
	char host[256]; /* numeric address or name, without IPv6 brackets */
	int port;
	int priority;
	int weight;       /* FIKIT_WEIGHT */
	int task_key_set; /* FIKIT_TASK_KEY given */
	char task_key[FK_TASK_KEY_MAX + 1];
	int log_level;
	int disabled;
	int grant_timeout_ms;
	int connect_timeout_ms;
	int board_off; /* FIKIT_BOARD=off: gate by UDP alone (docs/design.md "Board") */
	int inflight;  /* FIKIT_INFLIGHT; -1: auto */
	int local;     /* the scheduler's address is loopback: it shares our clock */
	char auth_key_file[4096]; /* FIKIT_AUTH_KEY_FILE: MACs to a scheduler on another host */
	/* FIKIT_SCHEDULER=unix:PATH: the daemon's unix datagram socket (a hook
	 * in a pod); reply_dir (FIKIT_REPLY_DIR, default c/ beside PATH's
	 * directory) is where this hook binds its sockets. "" : UDP. */
	char unix_path[108];
	char reply_dir[80];
} fk_config;

typedef const char *(*fk_getenv_fn)(const char *name);
typedef void (*fk_report_fn)(const char *line);

/* Fill c from the environment. report gets one line per bad value. */
void fk_config_load(fk_config *c, fk_getenv_fn get, fk_report_fn report);

#endif
