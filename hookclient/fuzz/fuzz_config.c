/* fuzz_config.c — the hook's environment (config.h) on any values. Input:
 * the values of the variables below in order, separated by NUL bytes (a
 * missing one is unset). Never a crash; whatever the values, the result is
 * in range, strings are terminated, and each bad value is reported once at
 * most. Seeds: kernelid/testdata/task_keys.tsv and hand-written ones. */
#include "config.h"
#include "fuzz.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

static const char *const vars[] = {
	"FIKIT_SCHEDULER", "FIKIT_PRIORITY", "FIKIT_TASK_KEY", "FIKIT_LOG", "FIKIT_DISABLE",
	"FIKIT_GRANT_TIMEOUT_MS", "FIKIT_CONNECT_TIMEOUT_MS", "FIKIT_BOARD", "FIKIT_INFLIGHT",
	"FIKIT_AUTH_KEY_FILE",
};
#define NVARS (sizeof vars / sizeof vars[0])

static char *vals[NVARS];
static int reports;

static const char *get(const char *name)
{
	for (size_t i = 0; i < NVARS; i++)
		if (!strcmp(name, vars[i]))
			return vals[i];
	return NULL;
}

static void report(const char *line)
{
	FK_FUZZ_CHECK(strlen(line) < 512, "report line of %zu bytes", strlen(line));
	reports++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	for (size_t i = 0; i < NVARS; i++) {
		vals[i] = NULL;
		if (off > size)
			continue;
		const uint8_t *end = memchr(data + off, 0, size - off);
		size_t n = end ? (size_t)(end - (data + off)) : size - off;
		/* Its own allocation: ASan sees any read past its NUL. */
		vals[i] = malloc(n + 1);
		memcpy(vals[i], data + off, n);
		vals[i][n] = '\0';
		off += n + 1;
	}
	fk_config c;
	reports = 0;
	fk_config_load(&c, get, report);
	FK_FUZZ_CHECK(reports <= (int)NVARS, "%d reports", reports);
	FK_FUZZ_CHECK(c.port >= 1 && c.port <= 65535, "port %d", c.port);
	FK_FUZZ_CHECK(c.priority >= 0 && c.priority <= 9, "priority %d", c.priority);
	FK_FUZZ_CHECK(c.grant_timeout_ms >= 1 && c.grant_timeout_ms <= 60000, "grant timeout %d", c.grant_timeout_ms);
	FK_FUZZ_CHECK(c.connect_timeout_ms >= 1 && c.connect_timeout_ms <= 10000, "connect timeout %d",
		      c.connect_timeout_ms);
	FK_FUZZ_CHECK(c.inflight >= -1 && c.inflight <= FK_INFLIGHT_MAX, "inflight %d (-1: auto)", c.inflight);
	FK_FUZZ_CHECK(c.log_level >= FK_LOG_OFF && c.log_level <= FK_LOG_DEBUG, "log level %d", c.log_level);
	FK_FUZZ_CHECK(memchr(c.host, 0, sizeof c.host) && c.host[0], "host not a terminated non-empty string");
	FK_FUZZ_CHECK(memchr(c.task_key, 0, sizeof c.task_key) != NULL, "task key not terminated");
	FK_FUZZ_CHECK(strlen(c.task_key) <= FK_TASK_KEY_MAX, "task key of %zu bytes", strlen(c.task_key));
	FK_FUZZ_CHECK(memchr(c.auth_key_file, 0, sizeof c.auth_key_file) != NULL, "key file not terminated");
	for (size_t i = 0; i < NVARS; i++)
		free(vals[i]);
	return 0;
}
