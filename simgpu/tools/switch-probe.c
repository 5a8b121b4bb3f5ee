/* switch-probe — what a GPU charges one context for another's work, measured
 * from the host with spin kernels (tests/gpu/calibrate.sh runs it on a GPU
 * and on simgpu side by side; docs/simgpu.md "What a GPU run would settle"):
 *
 *   switch-probe [--reps N] [--case NAME]... [--footprint-mb MB] [--json]
 *   switch-probe --free SECONDS [--seed S]      (requests at random times)
 *
 * Two processes, each with its own context: A (this one) measures, B (this
 * program re-executed, driven over a pipe) is the other service. A's probe
 * request is one spin kernel of 20 µs launched and synchronised; its delay
 * is its time from launch to synchronisation minus the median of the same
 * request when A's own work came last (the baseline, measured the same way
 * in the same case). Spin kernels wait on %globaltimer, so cold caches do not
 * change them: what remains is the context switch. Cases:
 *
 *   idle       B works 2 ms, then A's request after an idle gap of 0, 0.2,
 *              1, 5 or 20 ms (does an idle GPU switch in the background?)
 *   footprint  gap 0, with 0 or 4 GiB (--footprint-mb) allocated and written by B, by A, or
 *              both, and with B holding 32 idle streams (does the switch cost
 *              depend on what a context maps, or on its channels?)
 *   resident   after B's work A first does an event record, a 4-byte
 *              memset or a 5 µs kernel (and synchronises; its own latency
 *              is reported), then its request (which commands load A?)
 *   flip       A's request, then B only records an event (or memsets), then
 *              A's request again (does that load B?)
 *   graph      A's request is a CUDA graph of 50 spin kernels (875 µs)
 *   cache      A's request is a 20 µs spin kernel (it pays any switch), then
 *              a kernel reading A's 40 MB buffer, timed with events; before
 *              it B read 1 GiB (the L2 is 50-60 MB) or A read its buffer
 *              (how much slower are A's later kernels after B?)
 *   slice      B runs 5 ms spin kernels back to back; A's requests at random
 *              times wait for B's time slice to end (max ≈ slice + switch)
 *
 * --free: A alone sends requests at random times (5-45 ms apart, so that
 * most of another service's requests run without one of A's inside) for
 * SECONDS and prints each one's launch time and JCT (CLOCK_MONOTONIC ns):
 * calibrate.sh runs it beside a PyTorch service to see the switch from a
 * framework's context.
 *
 * Output: per case and variant the request's median, p10, p90 delay over
 * --reps requests (µs); --json: one object per line. The driver is whatever
 * libcuda.so.1 the loader finds (simgpu's via LD_LIBRARY_PATH, or a real
 * one). */
#include <cuda.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* spin: thread 0 of block 0 waits on %globaltimer for duration_ns (simgpu
 * runs a kernel whose first parameter is a .u64 named *_ns that long);
 * touch: every thread sums a grid-stride share of n words at p and stores
 * the sum only if it is an unlikely value (so the loads stay). */
static const char ptx[] =
	".version 7.0\n.target sm_70\n.address_size 64\n"
	".visible .entry spin(.param .u64 duration_ns)\n{\n"
	"\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<5>;\n"
	"\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\tor.b32 %r3, %r1, %r2;\n"
	"\tsetp.ne.u32 %p1, %r3, 0;\n\t@%p1 bra DONE;\n"
	"\tld.param.u64 %rd1, [duration_ns];\n\tmov.u64 %rd2, %globaltimer;\n\tadd.u64 %rd3, %rd2, %rd1;\n"
	"WAIT:\n\tmov.u64 %rd4, %globaltimer;\n\tsetp.lt.u64 %p1, %rd4, %rd3;\n\t@%p1 bra WAIT;\n"
	"DONE:\n\tret;\n}\n"
	".visible .entry touch(.param .u64 p, .param .u64 n)\n{\n"
	"\t.reg .pred %q<3>;\n\t.reg .b32 %s<9>;\n\t.reg .b64 %a<8>;\n"
	"\tld.param.u64 %a1, [p];\n\tld.param.u64 %a2, [n];\n\tcvta.to.global.u64 %a1, %a1;\n"
	"\tmov.u32 %s1, %ctaid.x;\n\tmov.u32 %s2, %ntid.x;\n\tmov.u32 %s3, %tid.x;\n\tmov.u32 %s4, %nctaid.x;\n"
	"\tmad.lo.u32 %s5, %s1, %s2, %s3;\n\tmul.lo.u32 %s6, %s4, %s2;\n"
	"\tcvt.u64.u32 %a3, %s5;\n\tcvt.u64.u32 %a4, %s6;\n\tmov.u32 %s7, 0;\n"
	"LOOP:\n\tsetp.ge.u64 %q1, %a3, %a2;\n\t@%q1 bra END;\n"
	"\tshl.b64 %a5, %a3, 2;\n\tadd.u64 %a6, %a1, %a5;\n\tld.global.u32 %s8, [%a6];\n"
	"\tadd.u32 %s7, %s7, %s8;\n\tadd.u64 %a3, %a3, %a4;\n\tbra LOOP;\n"
	"END:\n\tsetp.eq.u32 %q2, %s7, 0x9e3779b9;\n\t@%q2 st.global.u32 [%a1], %s7;\n\tret;\n}\n";

#define REQ_NS 20000         /* the probe request: one 20 µs spin kernel */
#define B_WORK_NS 2000000    /* B's work before a request: 2 ms */
#define CACHE_A (40u << 20)  /* A's working set for the cache case */
#define CACHE_B (1024u << 20) /* what B reads to evict it */
#define GRAPH_KERNELS 50
#define GRAPH_KERNEL_NS 17500

static CUfunction f_spin, f_touch;
static CUstream st;
static int json;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
	int64_t d;
	while ((d = t - now_ns()) > 200000) {
		struct timespec ts = {0, d - 150000};
		nanosleep(&ts, NULL);
	}
	while (now_ns() < t) {
	}
}

static void die(const char *what, CUresult rc)
{
	const char *s = "?";
	cuGetErrorName(rc, &s);
	fprintf(stderr, "switch-probe: %s: %s\n", what, s);
	exit(1);
}
#define CK(call)                              \
	do {                                  \
		CUresult rc_ = (call);        \
		if (rc_ != CUDA_SUCCESS)      \
			die(#call, rc_);      \
	} while (0)

static void setup(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuCtxCreate(&ctx, 0, dev));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleGetFunction(&f_spin, mod, "spin"));
	CK(cuModuleGetFunction(&f_touch, mod, "touch"));
	CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
}

static void spin(int64_t ns)
{
	uint64_t d = (uint64_t)ns;
	void *args[] = {&d};
	CK(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, st, args, NULL));
}

static void touch(CUdeviceptr p, size_t bytes)
{
	uint64_t n = bytes / 4;
	void *args[] = {&p, &n};
	CK(cuLaunchKernel(f_touch, 528, 1, 1, 256, 1, 1, 0, st, args, NULL));
}

static CUdeviceptr alloc_written(size_t bytes)
{
	CUdeviceptr p;
	CK(cuMemAlloc(&p, bytes));
	CK(cuMemsetD8(p, 1, bytes));
	return p;
}

/* ---- B: the other service, driven by one-line commands on stdin --------- */

static int role_b(void)
{
	setup();
	CUdeviceptr big = 0, mem = 0;
	size_t big_bytes = 0;
	CUstream extra[64];
	long long nextra = 0;
	CUevent ev;
	CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	char line[128];
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		long long v = 0;
		char cmd[32] = "";
		sscanf(line, "%31s %lld", cmd, &v);
		if (!strcmp(cmd, "quit"))
			break;
		if (!strcmp(cmd, "spin")) {
			spin(v);
		} else if (!strcmp(cmd, "spins")) { /* v kernels of 5 ms, not waited for */
			for (long long i = 0; i < v; i++)
				spin(5000000);
			printf("ok %lld\n", (long long)now_ns());
			continue;
		} else if (!strcmp(cmd, "event")) {
			CK(cuEventRecord(ev, st));
		} else if (!strcmp(cmd, "memset")) {
			if (!mem)
				CK(cuMemAlloc(&mem, 4));
			CK(cuMemsetD32Async(mem, 7, 1, st));
		} else if (!strcmp(cmd, "touch")) {
			if (!big) {
				big_bytes = CACHE_B;
				big = alloc_written(big_bytes);
			}
			touch(big, big_bytes);
		} else if (!strcmp(cmd, "streams")) { /* hold v idle streams (≤ 64): a framework's channels */
			for (; nextra < v && nextra < 64; nextra++)
				CK(cuStreamCreate(&extra[nextra], CU_STREAM_NON_BLOCKING));
			for (; nextra > v; nextra--)
				CK(cuStreamDestroy(extra[nextra - 1]));
		} else if (!strcmp(cmd, "alloc")) { /* v MiB held, written once; 0 frees */
			if (big)
				CK(cuMemFree(big));
			big = 0;
			big_bytes = (size_t)v << 20;
			if (big_bytes)
				big = alloc_written(big_bytes);
		}
		CK(cuStreamSynchronize(st));
		printf("ok %lld\n", (long long)now_ns());
	}
	return 0;
}

/* ---- A: the measuring side ---------------------------------------------- */

static FILE *to_b, *from_b;
static pid_t b_pid;

static int64_t b_do(const char *cmd, long long v)
{
	fprintf(to_b, "%s %lld\n", cmd, v);
	fflush(to_b);
	char line[128];
	long long t = 0;
	if (!fgets(line, sizeof line, from_b) || sscanf(line, "ok %lld", &t) != 1) {
		fprintf(stderr, "switch-probe: B did not answer %s\n", cmd);
		exit(1);
	}
	return t;
}

static void start_b(const char *self)
{
	int in[2], out[2];
	if (pipe(in) || pipe(out)) {
		perror("pipe");
		exit(1);
	}
	b_pid = fork();
	if (b_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(self, self, "--role-b", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	to_b = fdopen(in[1], "w");
	from_b = fdopen(out[0], "r");
}

/* The probe request: launch, synchronise; its time. */
static int64_t request(void)
{
	int64_t t0 = now_ns();
	spin(REQ_NS);
	CK(cuStreamSynchronize(st));
	return now_ns() - t0;
}

static CUgraphExec graph_exec;

static int64_t graph_request(void)
{
	int64_t t0 = now_ns();
	CK(cuGraphLaunch(graph_exec, st));
	CK(cuStreamSynchronize(st));
	return now_ns() - t0;
}

static void make_graph(void)
{
	CUgraph g;
	CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	for (int i = 0; i < GRAPH_KERNELS; i++)
		spin(GRAPH_KERNEL_NS);
	CK(cuStreamEndCapture(st, &g));
	CK(cuGraphInstantiate(&graph_exec, g, 0));
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t quant(int64_t *v, int n, double q)
{
	qsort(v, (size_t)n, sizeof *v, cmp64);
	int i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

static void report(const char *c, const char *variant, int64_t *v, int n, int64_t base, const char *what)
{
	int64_t p10 = quant(v, n, 0.1), p50 = quant(v, n, 0.5), p90 = quant(v, n, 0.9);
	if (json)
		printf("{\"case\":\"%s\",\"variant\":\"%s\",\"n\":%d,\"p10_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
		       "\"max_us\":%.1f,\"what\":\"%s\"}\n",
		       c, variant, n, (p10 - base) / 1e3, (p50 - base) / 1e3, (p90 - base) / 1e3,
		       (v[n - 1] - base) / 1e3, what);
	else
		printf("%-9s %-28s %8.1f %8.1f %8.1f %8.1f  %s\n", c, variant, (p50 - base) / 1e3, (p10 - base) / 1e3,
		       (p90 - base) / 1e3, (v[n - 1] - base) / 1e3, what);
	fflush(stdout);
}

/* Baseline: A's request right after A's own 2 ms of work and the same gap. */
static int64_t baseline(int reps, int64_t gap, int64_t (*req)(void))
{
	int64_t v[reps];
	for (int i = 0; i < reps; i++) {
		spin(B_WORK_NS);
		CK(cuStreamSynchronize(st));
		sleep_until(now_ns() + gap);
		v[i] = req();
	}
	return quant(v, reps, 0.5);
}

/* A's request (req) gap after B's 2 ms of work; reported against the baseline. */
static void after_b(const char *c, const char *variant, int reps, int64_t gap, int64_t (*req)(void))
{
	int64_t base = baseline(reps, gap, req);
	int64_t v[reps];
	for (int i = 0; i < reps; i++) {
		int64_t end = b_do("spin", B_WORK_NS);
		sleep_until(end + gap);
		v[i] = req();
	}
	report(c, variant, v, reps, base, "request delay after B's work, us (vs after A's own)");
}

static void case_idle(int reps)
{
	const int64_t gaps[] = {0, 200000, 1000000, 5000000, 20000000};
	for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "gap %.1f ms", gaps[i] / 1e6);
		after_b("idle", name, reps, gaps[i], request);
	}
}

static size_t footprint_mb = 4096; /* --footprint-mb */

static void case_footprint(int reps)
{
	const size_t gib4 = footprint_mb;
	for (int a = 0; a < 2; a++) {
		CUdeviceptr mine = a ? alloc_written(gib4 << 20) : 0;
		for (int b = 0; b < 2; b++) {
			b_do("alloc", b ? (long long)gib4 : 0);
			char name[48];
			snprintf(name, sizeof name, "A %zu MiB, B %zu MiB", a ? gib4 : 0, b ? gib4 : 0);
			after_b("footprint", name, reps, 0, request);
		}
		if (mine)
			CK(cuMemFree(mine));
	}
	b_do("alloc", 0);
	b_do("streams", 32);
	after_b("footprint", "B 32 idle streams", reps, 0, request);
	b_do("streams", 0);
}

static void case_resident(int reps)
{
	CUevent ev;
	CUdeviceptr m;
	CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	CK(cuMemAlloc(&m, 4));
	const char *what[] = {"nothing", "event record", "memset", "5 us kernel"};
	int64_t base = baseline(reps, 0, request);
	for (int w = 0; w < 4; w++) {
		int64_t own[reps], v[reps];
		for (int i = 0; i < reps; i++) {
			b_do("spin", B_WORK_NS);
			int64_t t0 = now_ns();
			if (w == 1)
				CK(cuEventRecord(ev, st));
			else if (w == 2)
				CK(cuMemsetD32Async(m, 7, 1, st));
			else if (w == 3)
				spin(5000);
			CK(cuStreamSynchronize(st));
			own[i] = now_ns() - t0;
			v[i] = request();
		}
		char name[48];
		snprintf(name, sizeof name, "%s first", what[w]);
		report("resident", name, v, reps, base, "the request after it, us (vs after A's own work)");
		snprintf(name, sizeof name, "%s itself", what[w]);
		report("resident", name, own, reps, 0, "that command's own launch-to-sync time, us");
	}
	CK(cuMemFree(m));
}

static void case_flip(int reps)
{
	const char *cmds[] = {"event", "memset"};
	int64_t base = baseline(reps, 0, request);
	for (int c = 0; c < 2; c++) {
		int64_t v[reps];
		for (int i = 0; i < reps; i++) {
			request();
			b_do(cmds[c], 0);
			v[i] = request();
		}
		char name[48];
		snprintf(name, sizeof name, "B %s only", cmds[c]);
		report("flip", name, v, reps, base, "A's request after B did only that, us");
	}
}

static void case_graph(int reps)
{
	make_graph();
	after_b("graph", "50 x 17.5 us graph", reps, 0, graph_request);
}

static int64_t cache_timed(CUdeviceptr p, CUevent e1, CUevent e2)
{
	spin(REQ_NS);
	CK(cuEventRecord(e1, st));
	touch(p, CACHE_A);
	CK(cuEventRecord(e2, st));
	CK(cuStreamSynchronize(st));
	float ms = 0;
	CK(cuEventElapsedTime(&ms, e1, e2));
	return (int64_t)(ms * 1e6);
}

static void case_cache(int reps)
{
	CUdeviceptr p = alloc_written(CACHE_A);
	CUevent e1, e2;
	CK(cuEventCreate(&e1, 0));
	CK(cuEventCreate(&e2, 0));
	int64_t warm[reps], cold[reps];
	for (int i = 0; i < reps; i++) {
		touch(p, CACHE_A);
		CK(cuStreamSynchronize(st));
		warm[i] = cache_timed(p, e1, e2);
	}
	for (int i = 0; i < reps; i++) {
		b_do("touch", 0);
		cold[i] = cache_timed(p, e1, e2);
	}
	report("cache", "40 MB read, warm (A's own)", warm, reps, 0, "A's read kernel, us (events)");
	report("cache", "40 MB read, after B read 1 GiB", cold, reps, 0, "A's read kernel, us (events)");
	b_do("alloc", 0);
	CK(cuMemFree(p));
}

static void case_slice(int reps)
{
	int64_t base = baseline(reps, 0, request);
	int64_t v[reps];
	b_do("spins", 80); /* 400 ms of B's 5 ms kernels */
	unsigned seed = 7;
	int64_t t = now_ns() + 20000000;
	for (int i = 0; i < reps && i < 80; i++) {
		t += 2000000 + (int64_t)(rand_r(&seed) % 3000000);
		sleep_until(t);
		v[i] = request();
	}
	b_do("spin", 0); /* waits for B's queue to drain */
	report("slice", "B busy with 5 ms kernels", v, reps, base,
	       "request delay, us: max ~ time slice + switch, median ~ half a slice + switch");
}

static int free_mode(double seconds, unsigned seed)
{
	setup();
	int64_t end = now_ns() + (int64_t)(seconds * 1e9);
	int64_t t = now_ns();
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (t < end) {
		t += 5000000 + (int64_t)(rand_r(&seed) % 40000000);
		sleep_until(t);
		int64_t t0 = now_ns();
		int64_t j = request();
		printf("{\"start_ns\":%lld,\"jct_ns\":%lld}\n", (long long)t0, (long long)j);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int reps = 30;
	const char *cases[16];
	int ncases = 0;
	double free_s = 0;
	unsigned seed = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--role-b"))
			return role_b();
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--case") && i + 1 < argc && ncases < 16)
			cases[ncases++] = argv[++i];
		else if (!strcmp(argv[i], "--free") && i + 1 < argc)
			free_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--footprint-mb") && i + 1 < argc)
			footprint_mb = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = (unsigned)atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: switch-probe [--reps N] [--case idle|footprint|resident|flip|graph|cache|slice]... [--footprint-mb MB] [--json]\n"
					"       switch-probe --free SECONDS [--seed S]\n");
			return 2;
		}
	}
	if (reps < 3 || reps > 1000) {
		fprintf(stderr, "switch-probe: --reps must be 3..1000\n");
		return 2;
	}
	if (free_s > 0)
		return free_mode(free_s, seed);
	static const struct {
		const char *name;
		void (*run)(int);
	} all[] = {{"idle", case_idle},   {"footprint", case_footprint}, {"resident", case_resident},
		   {"flip", case_flip},   {"graph", case_graph},         {"cache", case_cache},
		   {"slice", case_slice}};
	setup();
	start_b(argv[0]);
	b_do("spin", 1000); /* B is up and its context loaded */
	for (int i = 0; i < 3; i++)
		request();
	if (!json)
		printf("%-9s %-28s %8s %8s %8s %8s\n", "case", "variant", "p50", "p10", "p90", "max");
	for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
		int want = ncases == 0;
		for (int c = 0; c < ncases; c++)
			want |= !strcmp(cases[c], all[k].name);
		if (want)
			all[k].run(reps);
	}
	fprintf(to_b, "quit\n");
	fclose(to_b);
	int status;
	waitpid(b_pid, &status, 0);
	return 0;
}
