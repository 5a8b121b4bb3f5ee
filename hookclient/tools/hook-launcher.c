/* hook-launcher — launches a PTX file's kernels through one of the ways an
 * application can reach the driver, so the end-to-end tests
 * (tests/hook_test.go) can check that the hook sees every launch:
 *
 *   hook-launcher PTX PATH [RUNS] [DUR_NS]
 *
 * PATH: direct (linked symbols), dlsym (dlopen + dlsym, as libcudart),
 * gpa1 / gpa2 (cuGetProcAddress v1 / v2), gpa2-ptds (v2 with the
 * per-thread-default-stream flag), ptsz (cuLaunchKernel_ptsz on the
 * per-thread default stream), ex (cuLaunchKernelEx), coop
 * (cuLaunchCooperativeKernel), library (cuLibraryGetKernel: CUkernel passed
 * as CUfunction, and cuKernelGetFunction), null (direct, after 20000
 * launches of a NULL function, which the driver refuses), enumerate (handles from
 * cuModuleEnumerateFunctions: named only by cuFuncGetName), graph-capture,
 * graph-build, threads (two threads at once; threadsN: N of them), fork (a child process
 * mid-run), exit-run (direct, and one more run from an atexit handler that
 * runs after the hook's: a framework's teardown, such as a C++ static
 * destructor that synchronizes, after the hook said Goodbye).
 *
 * Every kernel of the PTX whose first parameter is a .u64 *_ns runs for
 * DUR_NS (default 2000). Each run launches every entry once (entry i with
 * grid (i+1,2,1), block (32,i+1,1)) and ends with a stream
 * synchronization reached the same way as the launch. What was launched
 * goes to stdout, one line per schedulable unit, so the test can compute
 * the expected kernel IDs independently:
 *   <pid> K <name> gx gy gz bx by bz        a kernel launch
 *   <pid> G <name> gx … bz;<name> gx … bz   a graph launch and its kernel nodes
 *   <pid> E <call> <error>                  a failed call (HOOK_LAUNCHER_ON_ERROR=continue)
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXK 64

static char *ptx;
static char *names[MAXK];
static int nk;
static unsigned long long dur_ns = 2000;
static CUcontext ctx;
/* exit-run: what the atexit handler launches again. */
static CUfunction exit_fns[MAXK];
static CUstream exit_stream;

/* A failed call ends the program, or with HOOK_LAUNCHER_ON_ERROR=continue
 * (a service that answers each request with an error and carries on) is
 * printed as "<pid> E <call> <error name>" on stdout, 1 ms later the
 * program goes on. */
static int on_error_continue = -1;

static void failed(const char *call, CUresult rc)
{
	const char *s = "?";
	cuGetErrorName(rc, &s);
	if (on_error_continue < 0) {
		const char *v = getenv("HOOK_LAUNCHER_ON_ERROR");
		on_error_continue = v && !strcmp(v, "continue");
	}
	if (!on_error_continue) {
		fprintf(stderr, "hook-launcher: %s failed: %s (%d)\n", call, s, rc);
		exit(1);
	}
	char name[64];
	snprintf(name, sizeof name, "%.*s", (int)strcspn(call, "("), call);
	dprintf(1, "%d E %s %s\n", (int)getpid(), name, s);
	usleep(1000);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS)                                                           \
			failed(#call, rc_);                                                        \
	} while (0)

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		exit(2);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The entry names, in file order: ".entry NAME(". */
static void entries(void)
{
	for (char *p = strstr(ptx, ".entry"); p && nk < MAXK; p = strstr(p + 6, ".entry")) {
		char *s = p + 6;
		while (*s == ' ' || *s == '\t')
			s++;
		size_t n = strcspn(s, " \t(\n");
		names[nk] = strndup(s, n);
		nk++;
	}
	if (nk == 0) {
		fprintf(stderr, "hook-launcher: no .entry in the PTX\n");
		exit(2);
	}
}

static void dims_of(int i, unsigned d[6])
{
	d[0] = (unsigned)i + 1, d[1] = 2, d[2] = 1;
	d[3] = 32, d[4] = (unsigned)i + 1, d[5] = 1;
}

static void print_kernel(const char *name, const unsigned d[6])
{
	dprintf(1, "%d K %s %u %u %u %u %u %u\n", (int)getpid(), name, d[0], d[1], d[2], d[3], d[4], d[5]);
}

/* ---- ways to reach cuLaunchKernel and cuStreamSynchronize ---- */

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			      CUstream, void **, void **);
typedef CUresult (*sync_fn)(CUstream);

static void lookup(const char *path, launch_fn *launch, sync_fn *sync)
{
	*launch = cuLaunchKernel;
	*sync = cuStreamSynchronize;
	if (!strcmp(path, "direct") || !strcmp(path, "library") || !strcmp(path, "enumerate") ||
	    !strcmp(path, "ex") || !strcmp(path, "coop") || !strcmp(path, "null"))
		return;
	if (!strcmp(path, "ptsz")) {
		*launch = cuLaunchKernel_ptsz;
		*sync = cuStreamSynchronize_ptsz;
		return;
	}
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "hook-launcher: dlopen: %s\n", dlerror());
		exit(1);
	}
	if (!strcmp(path, "dlsym")) {
		*launch = (launch_fn)dlsym(h, "cuLaunchKernel");
		*sync = (sync_fn)dlsym(h, "cuStreamSynchronize");
		return;
	}
	void *l = NULL, *s = NULL;
	if (!strcmp(path, "gpa1")) {
		CUresult (*gpa)(const char *, void **, int, cuuint64_t) = (__typeof__(gpa))dlsym(h, "cuGetProcAddress");
		CK(gpa("cuLaunchKernel", &l, 11080, CU_GET_PROC_ADDRESS_DEFAULT));
		CK(gpa("cuStreamSynchronize", &s, 11080, CU_GET_PROC_ADDRESS_DEFAULT));
	} else if (!strcmp(path, "gpa2") || !strcmp(path, "gpa2-ptds")) {
		/* libcudart's way: the driver's own cuGetProcAddress first, then
		 * everything through it. */
		CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
			(__typeof__(gpa))dlsym(h, "cuGetProcAddress_v2");
		void *gpa_again = NULL;
		CUdriverProcAddressQueryResult st;
		CK(gpa("cuGetProcAddress", &gpa_again, 12040, 0, &st));
		gpa = (__typeof__(gpa))gpa_again;
		cuuint64_t fl = strcmp(path, "gpa2") ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
		CK(gpa("cuLaunchKernel", &l, 12040, fl, &st));
		CK(gpa("cuStreamSynchronize", &s, 12040, fl, &st));
	} else {
		fprintf(stderr, "hook-launcher: unknown path %s\n", path);
		exit(2);
	}
	*launch = (launch_fn)l;
	*sync = (sync_fn)s;
}

static void setup(CUmodule *mod)
{
	CK(cuInit(0));
	CUdevice dev;
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	if (mod)
		CK(cuModuleLoadData(mod, ptx));
}

static void plain_runs(const char *path, int runs)
{
	CUmodule mod;
	setup(&mod);
	launch_fn launch;
	sync_fn sync;
	lookup(path, &launch, &sync);
	CUfunction f[MAXK];
	CUlibrary lib = NULL;
	if (!strcmp(path, "library"))
		CK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	if (!strcmp(path, "enumerate")) {
		unsigned count = 0;
		CK(cuModuleGetFunctionCount(&count, mod));
		if ((int)count != nk)
			exit(3);
		CK(cuModuleEnumerateFunctions(f, count, mod));
		for (int i = 0; i < nk; i++) { /* the enumeration order is the driver's */
			const char *n;
			CK(cuFuncGetName(&n, f[i]));
			free(names[i]);
			names[i] = strdup(n);
		}
	}
	for (int i = 0; i < nk; i++) {
		if (lib) {
			CUkernel k;
			CK(cuLibraryGetKernel(&k, lib, names[i]));
			if (i % 2)
				CK(cuKernelGetFunction(&f[i], k));
			else
				f[i] = (CUfunction)k; /* accepted by cuLaunchKernel since CUDA 12 */
		} else if (strcmp(path, "enumerate")) {
			CK(cuModuleGetFunction(&f[i], mod, names[i]));
		}
	}
	CUstream s = NULL; /* ptsz: the per-thread default stream */
	if (strcmp(path, "ptsz"))
		CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (!strcmp(path, "null")) {
		/* A service's bug: launches of a NULL function, refused by the
		 * driver (the hook must not allocate per such launch). */
		for (int i = 0; i < 20000; i++) { /* more than the hook's ring holds */
			void *args[] = {&dur_ns};
			if (cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, s, args, NULL) == CUDA_SUCCESS) {
				fprintf(stderr, "hook-launcher: a NULL function launched\n");
				exit(1);
			}
		}
		/* The hook reported them (before the driver refused them) and
		 * dropped what its ring could not hold: let it drain first. */
		usleep(200000);
	}
	/* HOOK_LAUNCHER_GAP_US: host time between runs (a service between
	 * requests), the gaps lower priorities fill. */
	const char *gap = getenv("HOOK_LAUNCHER_GAP_US");
	useconds_t gap_us = gap && *gap ? (useconds_t)atoi(gap) : 0;
	for (int r = 0; r < runs; r++) {
		if (r && gap_us)
			usleep(gap_us);
		for (int i = 0; i < nk; i++) {
			unsigned d[6];
			dims_of(i, d);
			void *args[] = {&dur_ns};
			if (!strcmp(path, "ex") || !strcmp(path, "coop")) {
				if (path[0] == 'e') {
					CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY};
					CUlaunchConfig cfg = {d[0], d[1], d[2], d[3], d[4], d[5], 0, s, &attr, 1};
					CK(cuLaunchKernelEx(&cfg, f[i], args, NULL));
				} else {
					CK(cuLaunchCooperativeKernel(f[i], d[0], d[1], d[2], d[3], d[4], d[5], 0, s, args));
				}
			} else {
				CK(launch(f[i], d[0], d[1], d[2], d[3], d[4], d[5], 0, s, args, NULL));
			}
			print_kernel(names[i], d);
		}
		CK(sync(s));
	}
	memcpy(exit_fns, f, sizeof exit_fns);
	exit_stream = s;
}

static void exit_run(void)
{
	for (int i = 0; i < nk; i++) {
		unsigned d[6];
		dims_of(i, d);
		void *args[] = {&dur_ns};
		CK(cuLaunchKernel(exit_fns[i], d[0], d[1], d[2], d[3], d[4], d[5], 0, exit_stream, args, NULL));
	}
	CK(cuStreamSynchronize(exit_stream));
}

/* ---- graphs ---- */

static void print_graph(void)
{
	char line[8192];
	int n = snprintf(line, sizeof line, "%d G", (int)getpid());
	for (int i = 0; i < nk; i++) {
		unsigned d[6];
		dims_of(i, d);
		n += snprintf(line + n, sizeof line - (size_t)n, "%s%s %u %u %u %u %u %u", i ? ";" : " ", names[i], d[0],
			      d[1], d[2], d[3], d[4], d[5]);
	}
	dprintf(1, "%s\n", line);
}

static void graph_runs(const char *path, int runs)
{
	CUmodule mod;
	setup(&mod);
	CUfunction f[MAXK];
	for (int i = 0; i < nk; i++)
		CK(cuModuleGetFunction(&f[i], mod, names[i]));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUgraph g;
	if (!strcmp(path, "graph-capture")) {
		/* Launches while capturing are recorded, not run: not launches. */
		CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		for (int i = 0; i < nk; i++) {
			unsigned d[6];
			dims_of(i, d);
			void *args[] = {&dur_ns};
			CK(cuLaunchKernel(f[i], d[0], d[1], d[2], d[3], d[4], d[5], 0, s, args, NULL));
		}
		CK(cuStreamEndCapture(s, &g));
	} else {
		CK(cuGraphCreate(&g, 0));
		CUgraphNode prev = NULL;
		for (int i = 0; i < nk; i++) {
			unsigned d[6];
			dims_of(i, d);
			void *args[] = {&dur_ns};
			CUDA_KERNEL_NODE_PARAMS_v2 p = {.func = f[i], .gridDimX = d[0], .gridDimY = d[1],
							.gridDimZ = d[2], .blockDimX = d[3], .blockDimY = d[4],
							.blockDimZ = d[5], .kernelParams = args};
			CUgraphNode node;
			CK(cuGraphAddKernelNode_v2(&node, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
			prev = node;
		}
	}
	CUgraphExec ge;
	CK(cuGraphInstantiateWithFlags(&ge, g, 0));
	for (int r = 0; r < runs; r++) {
		CK(cuGraphLaunch(ge, s));
		print_graph();
		CK(cuStreamSynchronize(s));
	}
}

/* ---- threads at once: thread t launches entry t % nk only ---- */

static int thread_runs;

static void *thread_main(void *arg)
{
	int t = (int)(intptr_t)arg, i = t % nk;
	CK(cuCtxSetCurrent(ctx));
	CUmodule mod;
	CK(cuModuleLoadData(&mod, ptx));
	CUfunction f;
	CK(cuModuleGetFunction(&f, mod, names[i]));
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	unsigned d[6];
	dims_of(i, d);
	d[2] = (unsigned)t + 1; /* distinct IDs per thread even for one entry */
	for (int r = 0; r < thread_runs; r++) {
		for (int k = 0; k < 4; k++) {
			void *args[] = {&dur_ns};
			CK(cuLaunchKernel(f, d[0], d[1], d[2], d[3], d[4], d[5], 0, s, args, NULL));
			print_kernel(names[i], d);
		}
		CK(cuStreamSynchronize(s));
	}
	return NULL;
}

static void threads(int runs, int n)
{
	setup(NULL);
	thread_runs = runs;
	pthread_t th[32];
	for (int t = 0; t < n; t++)
		pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
	for (int t = 0; t < n; t++)
		pthread_join(th[t], NULL);
}

/* ---- a fork mid-run: the child is a new process to the scheduler ---- */

static void fork_runs(int runs)
{
	plain_runs("direct", 1);
	/* gcc 12's AddressSanitizer allocator takes no lock around fork: a
	 * child forked while another thread (the hook's sender, allocating as
	 * the task registers) is inside malloc inherits a locked allocator and
	 * hangs. make test-asan lets the parent settle first (docs/operations.md
	 * "Sanitizers"); with glibc's malloc nothing waits. */
	const char *settle = getenv("HOOK_LAUNCHER_FORK_SETTLE_MS");
	if (settle && *settle)
		usleep((useconds_t)atoi(settle) * 1000);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		/* CUDA's rule: the parent's contexts are not usable here. */
		CUdevice dev;
		CK(cuDeviceGet(&dev, 0));
		CK(cuCtxCreate_v2(&ctx, 0, dev));
		CUmodule mod;
		CK(cuModuleLoadData(&mod, ptx));
		for (int r = 0; r < runs; r++) {
			for (int i = 0; i < nk; i++) {
				CUfunction f;
				CK(cuModuleGetFunction(&f, mod, names[i]));
				unsigned d[6];
				dims_of(i, d);
				d[2] = 7; /* the child's launches differ from the parent's */
				void *args[] = {&dur_ns};
				CK(cuLaunchKernel(f, d[0], d[1], d[2], d[3], d[4], d[5], 0, NULL, args, NULL));
				print_kernel(names[i], d);
			}
			CK(cuCtxSynchronize());
		}
		exit(0);
	}
	plain_runs("direct", runs - 1 > 0 ? runs - 1 : 1);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "hook-launcher: child failed\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: hook-launcher PTX PATH [RUNS] [DUR_NS]\n");
		return 2;
	}
	ptx = slurp(argv[1]);
	entries();
	int runs = argc > 3 ? atoi(argv[3]) : 3;
	if (argc > 4)
		dur_ns = strtoull(argv[4], NULL, 10);
	const char *path = argv[2];
	if (!strcmp(path, "exit-run")) {
		/* Registered before the first launch, so it runs after the hook's
		 * handler (atexit runs them in reverse order). */
		atexit(exit_run);
		path = "direct";
	}
	if (!strncmp(path, "graph", 5))
		graph_runs(path, runs);
	else if (!strncmp(path, "threads", 7)) {
		int n = path[7] ? atoi(path + 7) : 2; /* threadsN: N threads */
		if (n < 1 || n > 32) {
			fprintf(stderr, "hook-launcher: %s: 1 to 32 threads\n", path);
			return 2;
		}
		threads(runs, n);
	}
	else if (!strcmp(path, "fork"))
		fork_runs(runs);
	else
		plain_runs(path, runs);
	return 0;
}
