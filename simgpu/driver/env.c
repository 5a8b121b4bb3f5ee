/*
 * env.c — configuration from FIKIT_SIMGPU_* environment variables, read once
 * at cuInit. FIKIT_SIMGPU_DEVICE names a device preset (devmodel.h) whose
 * parameters the other variables may override one by one; an unknown preset
 * is refused (cuInit fails), a bad value of any other variable gets one line
 * on stderr and the default is used. The process that creates the shared
 * segment fixes the shared parameters and a later process that asks for
 * different ones is told so (sg_env_compare).
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sg_env_explicit;

enum {
	EX_MODEL = 1, EX_SLICE = 2, EX_SWITCH = 4, EX_LAUNCH = 8, EX_KERNEL = 16,
	EX_DEVICES = 32, EX_NAME = 64, EX_SMS = 128, EX_MEM = 256, EX_COPY = 512,
	/* A preset named explicitly asks for all of the model's parameters. */
	EX_PRESET = EX_MODEL | EX_SLICE | EX_SWITCH | EX_LAUNCH | EX_KERNEL | EX_COPY,
};

/* FIKIT_SIMGPU_DEVICE: the preset the other variables start from. */
static int env_preset(dm_config *cfg)
{
	const char *v = getenv("FIKIT_SIMGPU_DEVICE");
	if (!v || !*v)
		return 0;
	if (dm_preset(v, cfg) == DM_OK) {
		sg_env_explicit |= EX_PRESET;
		return 0;
	}
	char known[256] = "";
	size_t n = 0;
	for (int i = 0; dm_preset_name(i) && n < sizeof known; i++)
		n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", dm_preset_name(i));
	fprintf(stderr, "simgpu: FIKIT_SIMGPU_DEVICE=\"%s\": no such device preset (known: %s); cuInit fails\n", v,
		known);
	return -1;
}

static void bad(const char *var, const char *val, const char *why, const char *dflt)
{
	fprintf(stderr, "simgpu: %s=\"%s\": %s; using the default (%s)\n", var, val, why, dflt);
}

/* A duration in microseconds (fractions allowed) into ns, within [lo, hi] us. */
static void env_us(const char *var, int64_t *dst, double lo, double hi, int bit)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	char *end;
	errno = 0;
	double us = strtod(v, &end);
	char dflt[64];
	snprintf(dflt, sizeof dflt, "%.3f us", (double)*dst / 1000.0);
	if (errno || end == v || *end != '\0' || us != us) {
		bad(var, v, "not a number of microseconds", dflt);
		return;
	}
	if (us < lo || us > hi) {
		char why[96];
		snprintf(why, sizeof why, "out of range [%g, %g] us", lo, hi);
		bad(var, v, why, dflt);
		return;
	}
	*dst = (int64_t)(us * 1000.0 + 0.5);
	sg_env_explicit |= bit;
}

static void env_int(const char *var, int64_t *dst, int64_t lo, int64_t hi, int bit)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	char dflt[32];
	snprintf(dflt, sizeof dflt, "%lld", (long long)*dst);
	if (errno || end == v || *end != '\0') {
		bad(var, v, "not an integer", dflt);
		return;
	}
	if (x < lo || x > hi) {
		char why[96];
		snprintf(why, sizeof why, "out of range [%lld, %lld]", (long long)lo, (long long)hi);
		bad(var, v, why, dflt);
		return;
	}
	*dst = x;
	sg_env_explicit |= bit;
}

int sg_env_load(sg_env *e)
{
	memset(e, 0, sizeof *e);
	dm_config_default(&e->p.model);
	e->p.devices = 1;
	e->p.sms = 132;                 /* an H100 SXM */
	e->p.mem_bytes = 80LL << 30;
	snprintf(e->p.name, sizeof e->p.name, "fikit simgpu");
	sg_env_explicit = 0;
	if (env_preset(&e->p.model) != 0)
		return -1;

	const char *m = getenv("FIKIT_SIMGPU_MODEL");
	if (m && *m) {
		if (!strcmp(m, "timeslice")) {
			e->p.model.model = DM_TIMESLICE;
			sg_env_explicit |= EX_MODEL;
		} else if (!strcmp(m, "fifo")) {
			e->p.model.model = DM_FIFO;
			sg_env_explicit |= EX_MODEL;
		} else {
			bad("FIKIT_SIMGPU_MODEL", m, "expected timeslice or fifo", "timeslice");
		}
	}
	env_us("FIKIT_SIMGPU_TIMESLICE_US", &e->p.model.timeslice_ns, 1, 10e6, EX_SLICE);
	env_us("FIKIT_SIMGPU_SWITCH_US", &e->p.model.switch_ns, 0, 1e6, EX_SWITCH);
	env_us("FIKIT_SIMGPU_LAUNCH_US", &e->p.model.launch_latency_ns, 0, 1e6, EX_LAUNCH);
	env_us("FIKIT_SIMGPU_DEFAULT_KERNEL_US", &e->p.model.default_kernel_ns, 0, 60e6, EX_KERNEL);
	int64_t x = e->p.devices;
	env_int("FIKIT_SIMGPU_DEVICES", &x, 1, SG_MAX_DEVICES, EX_DEVICES);
	e->p.devices = (int32_t)x;
	x = e->p.sms;
	env_int("FIKIT_SIMGPU_SMS", &x, 1, 4096, EX_SMS);
	e->p.sms = (int32_t)x;
	x = e->p.mem_bytes >> 30;
	env_int("FIKIT_SIMGPU_MEM_GB", &x, 1, 1 << 16, EX_MEM);
	e->p.mem_bytes = x << 30;
	x = e->p.model.copy_bytes_per_s / 1000000000LL;
	env_int("FIKIT_SIMGPU_COPY_GBPS", &x, 1, 100000, EX_COPY);
	e->p.model.copy_bytes_per_s = x * 1000000000LL;

	const char *n = getenv("FIKIT_SIMGPU_NAME");
	if (n && *n) {
		if (strlen(n) >= SG_NAME_MAX) {
			bad("FIKIT_SIMGPU_NAME", n, "longer than 255 bytes", "fikit simgpu");
		} else {
			snprintf(e->p.name, sizeof e->p.name, "%s", n);
			sg_env_explicit |= EX_NAME;
		}
	}
	const char *s = getenv("FIKIT_SIMGPU_SHM");
	if (s && *s && s[0] == '/' && !strchr(s + 1, '/') && strlen(s) < SG_NAME_MAX) {
		snprintf(e->shm_name, sizeof e->shm_name, "%s", s);
	} else {
		char dflt[64];
		snprintf(dflt, sizeof dflt, "/fikit-simgpu-%u", (unsigned)getuid());
		if (s && *s)
			bad("FIKIT_SIMGPU_SHM", s, "expected /NAME with no other '/'", dflt);
		snprintf(e->shm_name, sizeof e->shm_name, "%s", dflt);
	}
	const char *v = getenv("FIKIT_SIMGPU_VALIDATE");
	if (v && *v) {
		if (!strcmp(v, "1"))
			e->validate = 1;
		else if (strcmp(v, "0"))
			bad("FIKIT_SIMGPU_VALIDATE", v, "expected 0 or 1", "0");
	}
	const char *t = getenv("FIKIT_SIMGPU_TIMELINE");
	if (t && *t) {
		if (strlen(t) >= sizeof e->timeline)
			bad("FIKIT_SIMGPU_TIMELINE", t, "path too long", "no timeline");
		else
			snprintf(e->timeline, sizeof e->timeline, "%s", t);
	}
	return 0;
}

void sg_env_compare(const sg_params *want, const sg_params *have, int ex)
{
	char diff[512] = "";
	size_t n = 0;
#define DIFF(bit, cond, ...)                                                         \
	do {                                                                         \
		if ((ex & (bit)) && (cond) && n < sizeof diff)                     \
			n += (size_t)snprintf(diff + n, sizeof diff - n, __VA_ARGS__); \
	} while (0)
	DIFF(EX_MODEL, want->model.model != have->model.model, " model=%s",
	     have->model.model == DM_FIFO ? "fifo" : "timeslice");
	DIFF(EX_SLICE, want->model.timeslice_ns != have->model.timeslice_ns, " timeslice=%.3fus",
	     (double)have->model.timeslice_ns / 1e3);
	DIFF(EX_SWITCH, want->model.switch_ns != have->model.switch_ns, " switch=%.3fus",
	     (double)have->model.switch_ns / 1e3);
	DIFF(EX_LAUNCH, want->model.launch_latency_ns != have->model.launch_latency_ns, " launch=%.3fus",
	     (double)have->model.launch_latency_ns / 1e3);
	DIFF(EX_KERNEL, want->model.default_kernel_ns != have->model.default_kernel_ns,
	     " default_kernel=%.3fus", (double)have->model.default_kernel_ns / 1e3);
	DIFF(EX_COPY, want->model.copy_bytes_per_s != have->model.copy_bytes_per_s, " copy=%lldGB/s",
	     (long long)(have->model.copy_bytes_per_s / 1000000000LL));
	DIFF(EX_DEVICES, want->devices != have->devices, " devices=%d", have->devices);
	DIFF(EX_SMS, want->sms != have->sms, " sms=%d", have->sms);
	DIFF(EX_MEM, want->mem_bytes != have->mem_bytes, " mem=%lldGB", (long long)(have->mem_bytes >> 30));
	DIFF(EX_NAME, strcmp(want->name, have->name) != 0, " name=\"%s\"", have->name);
#undef DIFF
	if (n)
		fprintf(stderr,
			"simgpu: the shared simulated GPU was created with different settings; using its%s\n",
			diff);
}
