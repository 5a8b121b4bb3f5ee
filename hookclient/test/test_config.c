/* test_config.c — environment parsing: good values taken, each bad value
 * reported in one line naming the variable and ignored (default kept). */
#include "check.h"
#include "config.h"
#include "log.h"

#include <string.h>

static const char *env[32][2];
static int nenv;
static char reports[16][512];
static int nreports;

static const char *fake_getenv(const char *name)
{
	for (int i = 0; i < nenv; i++)
		if (!strcmp(env[i][0], name))
			return env[i][1];
	return NULL;
}

static void fake_report(const char *line)
{
	if (nreports < 16)
		snprintf(reports[nreports], sizeof reports[0], "%s", line);
	nreports++;
}

static void load(fk_config *c, int n, const char *const kv[][2])
{
	nenv = n;
	for (int i = 0; i < n; i++) {
		env[i][0] = kv[i][0];
		env[i][1] = kv[i][1];
	}
	nreports = 0;
	fk_config_load(c, fake_getenv, fake_report);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	fk_config c;

	load(&c, 0, NULL);
	CHECK(!strcmp(c.host, "127.0.0.1") && c.port == 7070 && c.priority == 5 && !c.disabled &&
		      c.log_level == FK_LOG_WARN && c.grant_timeout_ms == 200 && c.connect_timeout_ms == 1000 &&
		      !c.task_key_set && nreports == 0 && !c.board_off && c.inflight == -1 && c.local && c.weight == 1,
	      "defaults");

	const char *const good[][2] = {{"FIKIT_SCHEDULER", "10.1.2.3:9000"}, {"FIKIT_PRIORITY", "0"},
				       {"FIKIT_TASK_KEY", "svc-a"},          {"FIKIT_LOG", "debug"},
				       {"FIKIT_DISABLE", "true"},            {"FIKIT_GRANT_TIMEOUT_MS", "50"},
				       {"FIKIT_CONNECT_TIMEOUT_MS", "20"}};
	load(&c, 7, good);
	CHECK(nreports == 0, "good values reported: %s", reports[0]);
	CHECK(!strcmp(c.host, "10.1.2.3") && c.port == 9000, "scheduler %s:%d", c.host, c.port);
	CHECK(c.priority == 0 && c.task_key_set && !strcmp(c.task_key, "svc-a") && c.log_level == FK_LOG_DEBUG &&
		      c.disabled && c.grant_timeout_ms == 50 && c.connect_timeout_ms == 20 && !c.local,
	      "good values not taken");

	const char *const gate[][2] = {{"FIKIT_BOARD", "off"}, {"FIKIT_INFLIGHT", "0"}};
	load(&c, 2, gate);
	CHECK(nreports == 0 && c.board_off && c.inflight == 0, "FIKIT_BOARD=off FIKIT_INFLIGHT=0");
	const char *const gate2[][2] = {{"FIKIT_BOARD", "on"}, {"FIKIT_INFLIGHT", "16"}};
	load(&c, 2, gate2);
	CHECK(nreports == 0 && !c.board_off && c.inflight == 16, "FIKIT_BOARD=on FIKIT_INFLIGHT=16");
	const char *const gate_auto[][2] = {{"FIKIT_INFLIGHT", "auto"}};
	load(&c, 1, gate_auto);
	CHECK(nreports == 0 && c.inflight == -1, "FIKIT_INFLIGHT=auto");
	const char *const gate_bad[][2] = {{"FIKIT_BOARD", "maybe"}, {"FIKIT_INFLIGHT", "17"}};
	load(&c, 2, gate_bad);
	CHECK(nreports == 2 && !c.board_off && c.inflight == -1, "bad FIKIT_BOARD / FIKIT_INFLIGHT");
	const char *const weight[][2] = {{"FIKIT_WEIGHT", "100"}};
	load(&c, 1, weight);
	CHECK(nreports == 0 && c.weight == 100, "FIKIT_WEIGHT=100");
	const char *const weight_bad[][2] = {{"FIKIT_WEIGHT", "0"}};
	load(&c, 1, weight_bad);
	CHECK(nreports == 1 && c.weight == 1 && strstr(reports[0], "FIKIT_WEIGHT"), "FIKIT_WEIGHT=0");
	const char *const weight_big[][2] = {{"FIKIT_WEIGHT", "101"}};
	load(&c, 1, weight_big);
	CHECK(nreports == 1 && c.weight == 1, "FIKIT_WEIGHT=101");
	const char *const key[][2] = {{"FIKIT_AUTH_KEY_FILE", "/etc/fikit/key"}};
	load(&c, 1, key);
	CHECK(nreports == 0 && !strcmp(c.auth_key_file, "/etc/fikit/key"), "FIKIT_AUTH_KEY_FILE");
	static char longpath[5000];
	memset(longpath, 'k', sizeof longpath - 1);
	const char *const key_bad[][2] = {{"FIKIT_AUTH_KEY_FILE", longpath}};
	load(&c, 1, key_bad);
	CHECK(nreports == 1 && c.auth_key_file[0] == 0, "a FIKIT_AUTH_KEY_FILE too long");

	const char *const v6[][2] = {{"FIKIT_SCHEDULER", "[::1]:7071"}, {"FIKIT_PRIORITY", "9"},
				     {"FIKIT_DISABLE", "0"}, {"FIKIT_LOG", "OFF"}};
	load(&c, 4, v6);
	CHECK(nreports == 0 && !strcmp(c.host, "::1") && c.port == 7071 && c.priority == 9 && !c.disabled &&
		      c.log_level == FK_LOG_OFF,
	      "IPv6 / edge values");

	const char *const named[][2] = {{"FIKIT_SCHEDULER", "sched.local:7070"}};
	load(&c, 1, named);
	CHECK(nreports == 0 && !strcmp(c.host, "sched.local"), "host name");

	/* unix:PATH (a hook in a pod): the reply directory is c/ beside the
	 * socket's directory, or FIKIT_REPLY_DIR; the daemon shares our clock. */
	const char *const un[][2] = {{"FIKIT_SCHEDULER", "unix:/run/fikit/sock/hooks.sock"}};
	load(&c, 1, un);
	CHECK(nreports == 0 && !strcmp(c.unix_path, "/run/fikit/sock/hooks.sock") && !strcmp(c.reply_dir, "/run/fikit/c") &&
		      c.local,
	      "unix: %s reply %s local %d", c.unix_path, c.reply_dir, c.local);
	const char *const un2[][2] = {{"FIKIT_SCHEDULER", "unix:/s.sock"}, {"FIKIT_REPLY_DIR", "/tmp/replies"}};
	load(&c, 2, un2);
	CHECK(nreports == 0 && !strcmp(c.unix_path, "/s.sock") && !strcmp(c.reply_dir, "/tmp/replies"), "unix with reply dir: %s",
	      c.reply_dir);
	const char *const unbad[][2] = {{"FIKIT_SCHEDULER", "unix:relative.sock"}};
	load(&c, 1, unbad);
	CHECK(nreports == 1 && !c.unix_path[0] && !strcmp(c.host, "127.0.0.1"), "relative unix path: %d reports", nreports);
	const char *const unlong[][2] = {
	    {"FIKIT_SCHEDULER", "unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}};
	load(&c, 1, unlong);
	CHECK(nreports == 1 && !c.unix_path[0], "unix path too long for sockaddr_un");

	/* Every variable bad at once: one line each, each naming its variable,
	 * and every default kept. */
	const char *const bad[][2] = {{"FIKIT_SCHEDULER", "localhost"},  {"FIKIT_PRIORITY", "12"},
				      {"FIKIT_LOG", "loud"},             {"FIKIT_DISABLE", "maybe"},
				      {"FIKIT_GRANT_TIMEOUT_MS", "-5"},  {"FIKIT_CONNECT_TIMEOUT_MS", "1e3"}};
	load(&c, 6, bad);
	CHECK(nreports == 6, "%d reports for 6 bad values", nreports);
	static const char *const vars[] = {"FIKIT_SCHEDULER", "FIKIT_PRIORITY", "FIKIT_LOG", "FIKIT_DISABLE",
					   "FIKIT_GRANT_TIMEOUT_MS", "FIKIT_CONNECT_TIMEOUT_MS"};
	for (int i = 0; i < 6; i++) {
		int found = 0;
		for (int j = 0; j < nreports && j < 16; j++)
			if (strstr(reports[j], vars[i]) && strstr(reports[j], "using") && !strchr(reports[j], '\n'))
				found++;
		CHECK(found == 1, "%s reported %d times", vars[i], found);
	}
	CHECK(!strcmp(c.host, "127.0.0.1") && c.port == 7070 && c.priority == 5 && c.log_level == FK_LOG_WARN &&
		      !c.disabled && c.grant_timeout_ms == 200 && c.connect_timeout_ms == 1000,
	      "defaults not kept after bad values");

	const char *const more_bad[][2] = {{"FIKIT_SCHEDULER", "host:0"}, {"FIKIT_PRIORITY", "5x"},
					   {"FIKIT_GRANT_TIMEOUT_MS", "99999999999999999999"}};
	load(&c, 3, more_bad);
	CHECK(nreports == 3 && c.port == 7070 && c.priority == 5 && c.grant_timeout_ms == 200, "more bad values");

	const char *const ipv6_bare[][2] = {{"FIKIT_SCHEDULER", "::1:7070"}, {"FIKIT_PRIORITY", " 3"}};
	load(&c, 2, ipv6_bare);
	CHECK(nreports == 2 && !strcmp(c.host, "127.0.0.1") && c.priority == 5, "ambiguous IPv6, spaces");

	/* Empty values count as unset (FIKIT_TASK_KEY as kernelid.ResolveTaskKey). */
	const char *const empty[][2] = {{"FIKIT_TASK_KEY", ""}, {"FIKIT_PRIORITY", ""}};
	load(&c, 2, empty);
	CHECK(nreports == 0 && !c.task_key_set && c.priority == 5, "empty values");

	char longkey[300];
	memset(longkey, 'k', 299);
	longkey[299] = '\0';
	const char *const lk[][2] = {{"FIKIT_TASK_KEY", longkey}};
	load(&c, 1, lk);
	CHECK(strlen(c.task_key) == 200 && c.task_key[183] == '~', "long FIKIT_TASK_KEY not cut");
	return check_done("test_config");
}
