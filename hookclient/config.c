/* config.c — see config.h. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void bad(fk_report_fn report, const char *var, const char *val, const char *want, const char *dflt)
{
	char line[512];
	snprintf(line, sizeof line, "%s=\"%.200s\" is not %s; using %s", var, val, want, dflt);
	report(line);
}

/* A decimal integer in [lo, hi], nothing else (no sign games, no suffix). */
static int parse_int(const char *s, long lo, long hi, long *out)
{
	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	errno = 0;
	char *end;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* host:port, [v6]:port; the host part must be non-empty. */
static int parse_addr(const char *s, fk_config *c)
{
	const char *colon, *host = s;
	size_t hlen;
	if (*s == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return -1;
		host = s + 1;
		hlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -1; /* an unbracketed IPv6 address is ambiguous */
		hlen = (size_t)(colon - s);
	}
	long port;
	if (hlen == 0 || hlen >= sizeof c->host || parse_int(colon + 1, 1, 65535, &port))
		return -1;
	memcpy(c->host, host, hlen);
	c->host[hlen] = '\0';
	c->port = (int)port;
	return 0;
}

/* unix:PATH: an absolute path that fits a sockaddr_un, and the directory
 * of reply sockets: reply (FIKIT_REPLY_DIR) or c/ beside PATH's directory
 * (/run/fikit/sock/hooks.sock: /run/fikit/c), short enough for the names
 * bound in it (64 bytes, then 40 for a name). */
static int parse_unix(const char *path, const char *reply, fk_config *c)
{
	size_t n = strlen(path);
	if (path[0] != '/' || n >= sizeof c->unix_path)
		return -1;
	memcpy(c->unix_path, path, n + 1);
	if (reply && *reply) {
		if (reply[0] != '/' || strlen(reply) >= 64)
			return -1;
		snprintf(c->reply_dir, sizeof c->reply_dir, "%s", reply);
		return 0;
	}
	/* dirname(dirname(path)) + "/c" */
	const char *end = path + n;
	for (int up = 0; up < 2; up++) {
		while (end > path && end[-1] == '/')
			end--;
		while (end > path && end[-1] != '/')
			end--;
	}
	while (end > path + 1 && end[-1] == '/')
		end--;
	size_t dlen = (size_t)(end - path);
	if (dlen == 0 || dlen + 2 >= 64)
		return -1;
	memcpy(c->reply_dir, path, dlen);
	snprintf(c->reply_dir + dlen, sizeof c->reply_dir - dlen, "%sc", dlen == 1 ? "" : "/");
	return 0;
}

void fk_config_load(fk_config *c, fk_getenv_fn get, fk_report_fn report)
{
	memset(c, 0, sizeof *c);
	snprintf(c->host, sizeof c->host, "%s", FK_DEFAULT_HOST);
	c->port = FK_DEFAULT_PORT;
	c->priority = FK_DEFAULT_PRIORITY;
	c->weight = FK_DEFAULT_WEIGHT;
	c->log_level = FK_LOG_WARN;
	c->grant_timeout_ms = FK_DEFAULT_GRANT_TIMEOUT_MS;
	c->connect_timeout_ms = FK_DEFAULT_CONNECT_TIMEOUT_MS;
	c->inflight = -1; /* auto */

	const char *v;
	long n;
	/* FIKIT_LOG first: a bad value is reported at the default level. */
	if ((v = get("FIKIT_LOG")) && *v) {
		static const char *const names[] = {"off", "warn", "info", "debug"};
		int found = -1;
		for (int i = 0; i < 4; i++)
			if (!strcasecmp(v, names[i]))
				found = i;
		if (found < 0 && !strcasecmp(v, "warning"))
			found = FK_LOG_WARN;
		if (found >= 0)
			c->log_level = found;
		else
			bad(report, "FIKIT_LOG", v, "one of off, warn, info, debug", "warn");
	}
	if ((v = get("FIKIT_DISABLE")) && *v) {
		if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
			c->disabled = 1;
		else if (strcasecmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") && strcasecmp(v, "off"))
			bad(report, "FIKIT_DISABLE", v, "1/true/yes/on or 0/false/no/off", "enabled (0)");
	}
	if ((v = get("FIKIT_BOARD")) && *v) {
		if (!strcasecmp(v, "off") || !strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no"))
			c->board_off = 1;
		else if (strcasecmp(v, "on") && strcasecmp(v, "1") && strcasecmp(v, "true") && strcasecmp(v, "yes"))
			bad(report, "FIKIT_BOARD", v, "on or off", "on");
	}
	if ((v = get("FIKIT_SCHEDULER")) && !strncmp(v, "unix:", 5)) {
		if (parse_unix(v + 5, get("FIKIT_REPLY_DIR"), c)) {
			c->unix_path[0] = c->reply_dir[0] = '\0';
			bad(report, "FIKIT_SCHEDULER", v, "unix:/ABSOLUTE/PATH (under 108 bytes) with a reply directory under 64 bytes", "127.0.0.1:7070");
		}
	} else if ((v = get("FIKIT_SCHEDULER")) && *v && parse_addr(v, c)) {
		char dflt[64];
		snprintf(dflt, sizeof dflt, "%s:%d", FK_DEFAULT_HOST, FK_DEFAULT_PORT);
		snprintf(c->host, sizeof c->host, "%s", FK_DEFAULT_HOST);
		c->port = FK_DEFAULT_PORT;
		bad(report, "FIKIT_SCHEDULER", v, "host:port (port 1-65535)", dflt);
	}
	if ((v = get("FIKIT_PRIORITY")) && *v) {
		if (parse_int(v, 0, 9, &n) == 0)
			c->priority = (int)n;
		else
			bad(report, "FIKIT_PRIORITY", v, "an integer 0 (highest) to 9", "5");
	}
	if ((v = get("FIKIT_WEIGHT")) && *v) {
		if (parse_int(v, 1, FK_MAX_WEIGHT, &n) == 0)
			c->weight = (int)n;
		else
			bad(report, "FIKIT_WEIGHT", v, "an integer 1-" FK_XSTR(FK_MAX_WEIGHT), FK_XSTR(FK_DEFAULT_WEIGHT));
	}
	/* An empty FIKIT_TASK_KEY counts as unset (as kernelid.ResolveTaskKey). */
	if ((v = get("FIKIT_TASK_KEY")) && *v) {
		c->task_key_set = 1;
		fk_task_key_cut(c->task_key, v, strlen(v));
	}
	if ((v = get("FIKIT_GRANT_TIMEOUT_MS")) && *v) {
		if (parse_int(v, 1, 60000, &n) == 0)
			c->grant_timeout_ms = (int)n;
		else
			bad(report, "FIKIT_GRANT_TIMEOUT_MS", v, "an integer 1-60000", FK_XSTR(FK_DEFAULT_GRANT_TIMEOUT_MS));
	}
	if ((v = get("FIKIT_CONNECT_TIMEOUT_MS")) && *v) {
		if (parse_int(v, 1, 10000, &n) == 0)
			c->connect_timeout_ms = (int)n;
		else
			bad(report, "FIKIT_CONNECT_TIMEOUT_MS", v, "an integer 1-10000", FK_XSTR(FK_DEFAULT_CONNECT_TIMEOUT_MS));
	}
	if ((v = get("FIKIT_AUTH_KEY_FILE")) && *v) {
		if (strlen(v) < sizeof c->auth_key_file)
			memcpy(c->auth_key_file, v, strlen(v) + 1);
		else
			bad(report, "FIKIT_AUTH_KEY_FILE", v, "a path shorter than 4096 bytes", "no key");
	}
	if ((v = get("FIKIT_INFLIGHT")) && *v && strcmp(v, "auto")) {
		if (parse_int(v, 0, FK_INFLIGHT_MAX, &n) == 0)
			c->inflight = (int)n;
		else
			bad(report, "FIKIT_INFLIGHT", v, "auto or an integer 0-" FK_XSTR(FK_INFLIGHT_MAX), "auto");
	}
	c->local = c->unix_path[0] || !strncmp(c->host, "127.", 4) || !strcmp(c->host, "::1") ||
		   !strcasecmp(c->host, "localhost");
}
