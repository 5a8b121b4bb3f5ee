/*
 * testutil.c — see testutil.h.
 */
#include "testutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int t_pass, t_fail;

void t_check(int ok, const char *file, int line, const char *what, const char *fmt, ...)
{
	if (ok) {
		t_pass++;
		return;
	}
	t_fail++;
	fprintf(stderr, "FAIL %s:%d: %s", file, line, what);
	if (fmt && fmt[0] == ' ')
		fmt++; /* CHECK's format is " " followed by the caller's */
	if (fmt && *fmt) {
		va_list ap;
		va_start(ap, fmt);
		fputs(": ", stderr);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
}

const char *t_errname(CUresult r)
{
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "?";
	return s;
}

int t_done(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);
	return t_fail ? 1 : 0;
}

static char shm_name[128];
static pid_t shm_owner;

static void unlink_shm(void)
{
	if (getpid() == shm_owner)
		shm_unlink(shm_name);
}

void t_unique_shm(const char *tag)
{
	const char *inherited = getenv("FIKIT_SIMGPU_SHM");
	/* Child processes of a test (re-executed with a role) inherit the parent's. */
	if (inherited && strstr(inherited, "/fikit-simgpu-test-"))
		return;
	snprintf(shm_name, sizeof shm_name, "/fikit-simgpu-test-%s-%d", tag, (int)getpid());
	setenv("FIKIT_SIMGPU_SHM", shm_name, 1);
	shm_owner = getpid();
	atexit(unlink_shm);
}

int64_t t_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void t_spin_for(int64_t ns)
{
	int64_t end = t_now() + ns;
	while (t_now() < end)
		;
}

const char t_ptx[] =
	"// spin kernels as fikit-replay generates them\n"
	".version 8.0\n"
	".target sm_90\n"
	".address_size 64\n"
	"\n"
	".visible .entry spin(\n"
	"\t.param .u64 spin_ns\n"
	")\n"
	"{\n"
	"\t.reg .u64 %rd<4>;\n"
	"\tld.param.u64 %rd1, [spin_ns];\n"
	"\tmov.u64 %rd2, %globaltimer;\n"
	"\tret;\n"
	"}\n"
	"\n"
	".visible .entry plain(\n"
	"\t.param .u64 x,\n"
	"\t.param .u32 y\n"
	")\n"
	"{\n"
	"\tret;\n"
	"}\n";

CUfunction t_spin_function(void)
{
	CUmodule m;
	CUfunction f = NULL;
	if (cuModuleLoadData(&m, t_ptx) != CUDA_SUCCESS || cuModuleGetFunction(&f, m, "spin") != CUDA_SUCCESS)
		fprintf(stderr, "t_spin_function: cannot load the spin kernel\n");
	return f;
}

CUresult t_spin(CUfunction f, CUstream s, uint64_t ns)
{
	void *args[] = {&ns};
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

/* ---- timeline --------------------------------------------------------- */

static const char *field(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(line, pat);
	return p ? p + strlen(pat) : NULL;
}

static long long num(const char *line, const char *key)
{
	const char *p = field(line, key);
	return p ? strtoll(p, NULL, 10) : -1;
}

static void triple(const char *line, const char *key, unsigned v[3])
{
	const char *p = field(line, key);
	v[0] = v[1] = v[2] = 0;
	if (p)
		sscanf(p, "[%u,%u,%u]", &v[0], &v[1], &v[2]);
}

static int by_start(const void *a, const void *b)
{
	const t_seg *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int t_read_timeline(const char *path, t_seg **out)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0, cap = 0;
	t_seg *v = NULL;
	char *line = NULL;
	size_t lcap = 0;
	while (getline(&line, &lcap, f) > 0) {
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			v = realloc(v, sizeof *v * (size_t)cap);
		}
		t_seg *s = &v[n++];
		memset(s, 0, sizeof *s);
		s->pid = (int)num(line, "pid");
		s->dev = (int)num(line, "dev");
		s->ctx = (int)num(line, "ctx");
		s->stream = (unsigned)num(line, "stream");
		s->seq = (unsigned long long)num(line, "seq");
		s->start = num(line, "start_ns");
		s->end = num(line, "end_ns");
		s->arrive = num(line, "arrive_ns");
		s->blocked = num(line, "blocked_ns");
		s->seg = (int)num(line, "seg");
		const char *l = field(line, "last");
		s->last = l && !strncmp(l, "true", 4);
		s->dropped = strstr(line, "\"dropped\":true") != NULL;
		triple(line, "grid", s->grid);
		triple(line, "block", s->block);
		const char *nm = field(line, "name");
		if (nm && *nm == '"') {
			size_t k = 0;
			for (nm++; *nm && *nm != '"' && k + 1 < sizeof s->name; nm++) {
				if (*nm == '\\' && nm[1])
					nm++; /* tests use plain names; escapes keep their character */
				s->name[k++] = *nm;
			}
			s->name[k] = '\0';
		}
	}
	free(line);
	fclose(f);
	if (n)
		qsort(v, (size_t)n, sizeof *v, by_start);
	*out = v;
	return n;
}

int t_overlaps(t_seg *v, int n)
{
	int bad = 0;
	for (int i = 1; i < n; i++)
		if (v[i].start < v[i - 1].end)
			bad++;
	return bad;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int64_t t_percentile(int64_t *v, int n, double p)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, cmp64);
	int i = (int)(p / 100.0 * (n - 1) + 0.5);
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int t_sanitized(void)
{
	const char *v = getenv("FIKIT_TEST_SANITIZED");
	return v && *v && strcmp(v, "0") != 0;
}
