/*
 * env_test.c — configuration by environment and the shared segment's life:
 * a bad value costs one line on stderr and the default is used; the first
 * process fixes the shared parameters and a later one asking for others is
 * told so in one line; a stale segment of another layout is replaced; a
 * clean environment prints nothing; FIKIT_SIMGPU_DEVICE picks a preset
 * (h200 by default), single variables override its parameters, the device
 * name stays the same, and an unknown preset makes cuInit fail with one
 * line naming the variable.
 *
 * Each case runs this program re-executed as a probe (cuInit, two contexts,
 * a kernel in each, synchronize; prints the device count, the time the
 * device spent on its one context switch and the device name) and reads its
 * stderr.
 */
#include "testutil.h"
#include "../driver/simgpu.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *self;
static char shm[96];

static int probe(void)
{
	if (cuInit(0) != CUDA_SUCCESS)
		return 3;
	int n = 0;
	cuDeviceGetCount(&n);
	CUcontext c[2];
	for (int i = 0; i < 2; i++) {
		if (cuCtxCreate_v2(&c[i], 0, 0) != CUDA_SUCCESS)
			return 4;
		CUfunction f = t_spin_function();
		if (t_spin(f, NULL, 100000) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
			return 5;
	}
	fikit_simgpu_stats st;
	char name[256] = "";
	if (fikit_simgpu_get_stats(0, &st) != 0 || cuDeviceGetName(name, sizeof name, 0) != CUDA_SUCCESS)
		return 7;
	/* The device is shared with earlier probes: this one's switch is the last. */
	printf("%d %lld %s\n", n, st.switches ? (long long)(st.switch_ns / (int64_t)st.switches) : -1LL, name);
	for (int i = 0; i < 2; i++)
		if (cuCtxDestroy_v2(c[i]) != CUDA_SUCCESS)
			return 6;
	return 0;
}

static long long switch_ns; /* the last probe's switch time (per switch, on a fresh segment) */
static char dev_name[128];
static int want_status; /* the exit status the next probe must have */

/* Run a probe with extra environment (NAME=VALUE…, NULL-terminated); return
 * its stderr (malloc'd) and device count. */
static char *run(int *devices, const char *const *env)
{
	int err[2], out[2];
	if (pipe(err) != 0 || pipe(out) != 0)
		return strdup("");
	pid_t p = fork();
	if (p == 0) {
		dup2(err[1], 2);
		dup2(out[1], 1);
		close(err[0]);
		close(out[0]);
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execl(self, self, "probe", (char *)NULL);
		_exit(127);
	}
	close(err[1]);
	close(out[1]);
	char *buf = calloc(1, 8192);
	size_t n = 0;
	ssize_t r;
	while (n < 8191 && (r = read(err[0], buf + n, 8191 - n)) > 0)
		n += (size_t)r;
	char ob[256] = "";
	r = read(out[0], ob, sizeof ob - 1);
	*devices = -1;
	switch_ns = -1;
	dev_name[0] = '\0';
	if (r > 0)
		sscanf(ob, "%d %lld %127[^\n]", devices, &switch_ns, dev_name);
	close(err[0]);
	close(out[0]);
	int st;
	waitpid(p, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == want_status, "probe exited with status %d, want %d; stderr: %s", st,
	      want_status, buf);
	want_status = 0;
	return buf;
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void expect_one_line(const char *what, const char *const *env, const char *must)
{
	int dev;
	char *e = run(&dev, env);
	CHECK(lines(e) == 1 && strstr(e, must), "%s: stderr was \"%s\"", what, e);
	free(e);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "probe"))
		return probe();
	self = argv[0];
	snprintf(shm, sizeof shm, "/fikit-simgpu-test-env-%d", (int)getpid());
	setenv("FIKIT_SIMGPU_SHM", shm, 1);
	shm_unlink(shm);

	/* a stale segment of another layout is replaced */
	int fd = shm_open(shm, O_RDWR | O_CREAT, 0600);
	char junk[4096];
	memset(junk, 0x5a, sizeof junk);
	CHECK(fd >= 0 && write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
	close(fd);
	const char *creator[] = {"FIKIT_SIMGPU_SWITCH_US=10", "FIKIT_SIMGPU_MODEL=fifo", NULL};
	expect_one_line("stale segment", creator, "replacing shared segment");

	int dev;
	char *e = run(&dev, NULL);
	CHECK(*e == '\0' && dev == 1, "clean environment: stderr \"%s\", %d devices", e, dev);
	free(e);

	const char *same[] = {"FIKIT_SIMGPU_SWITCH_US=10", NULL};
	e = run(&dev, same);
	CHECK(*e == '\0', "same settings as the creator: stderr \"%s\"", e);
	free(e);

	const char *other[] = {"FIKIT_SIMGPU_SWITCH_US=30", "FIKIT_SIMGPU_MODEL=timeslice", NULL};
	expect_one_line("different settings", other, "switch=10.000us");
	e = run(&dev, other);
	CHECK(strstr(e, "model=fifo") != NULL, "the warning names every difference: \"%s\"", e);
	free(e);

	const char *bad1[] = {"FIKIT_SIMGPU_TIMESLICE_US=abc", NULL};
	expect_one_line("bad number", bad1, "FIKIT_SIMGPU_TIMESLICE_US");
	const char *bad2[] = {"FIKIT_SIMGPU_MODEL=round-robin", NULL};
	expect_one_line("bad model", bad2, "expected timeslice or fifo");
	const char *bad3[] = {"FIKIT_SIMGPU_LAUNCH_US=-4", NULL};
	expect_one_line("negative latency", bad3, "out of range");
	/* (A bad FIKIT_SIMGPU_SHM falls back to the machine's default segment,
	 * which this test must not touch: not exercised here.) */

	/* devices: a fresh segment takes the count; a bad count falls back to 1 */
	shm_unlink(shm);
	const char *two[] = {"FIKIT_SIMGPU_DEVICES=2", NULL};
	e = run(&dev, two);
	CHECK(*e == '\0' && dev == 2, "2 devices: got %d, stderr \"%s\"", dev, e);
	free(e);
	shm_unlink(shm);
	const char *many[] = {"FIKIT_SIMGPU_DEVICES=99", NULL};
	e = run(&dev, many);
	CHECK(lines(e) == 1 && dev == 1, "99 devices: got %d, stderr \"%s\"", dev, e);
	free(e);

	const char *tl[] = {"FIKIT_SIMGPU_TIMELINE=/nonexistent-dir/x.jsonl", NULL};
	expect_one_line("unwritable timeline", tl, "no timeline");

	/* Presets: h200 by default, legacy by name, one parameter overridden;
	 * the device name is the same under every preset (profiles are keyed
	 * by it). Each on a fresh segment, since its creator fixes them. */
	struct {
		const char *env[3];
		long long switch_ns;
	} presets[] = {
		{{NULL}, 140000},
		{{"FIKIT_SIMGPU_DEVICE=h200", NULL}, 140000},
		{{"FIKIT_SIMGPU_DEVICE=legacy", NULL}, 25000},
		{{"FIKIT_SIMGPU_DEVICE=legacy", "FIKIT_SIMGPU_SWITCH_US=60", NULL}, 60000},
	};
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
		shm_unlink(shm);
		e = run(&dev, presets[i].env);
		CHECK(*e == '\0' && switch_ns == presets[i].switch_ns && !strcmp(dev_name, "fikit simgpu"),
		      "preset case %zu: switch %lld ns, want %lld; device \"%s\"; stderr \"%s\"", i, switch_ns,
		      presets[i].switch_ns, dev_name, e);
		free(e);
	}
	/* A later process asking for another preset is told what is in force. */
	const char *h200[] = {"FIKIT_SIMGPU_DEVICE=h200", NULL};
	expect_one_line("other preset than the creator's", h200, "switch=60.000us");
	/* An unknown preset is refused: cuInit fails, one line names the variable. */
	shm_unlink(shm);
	const char *unknown[] = {"FIKIT_SIMGPU_DEVICE=h900", NULL};
	want_status = 3;
	e = run(&dev, unknown);
	CHECK(lines(e) == 1 && strstr(e, "FIKIT_SIMGPU_DEVICE=\"h900\"") && strstr(e, "legacy"),
	      "unknown preset: stderr \"%s\"", e);
	free(e);
	shm_unlink(shm);
	return t_done("env_test");
}
