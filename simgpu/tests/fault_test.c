/*
 * fault_test.c — injected faults (FIKIT_SIMGPU_FAULT, driver/fault.c), each
 * in a process of its own (the setting is read once per process) sharing the
 * device with a healthy one:
 *   illegal-address: the faulting launch succeeds; the synchronization that
 *     observes it returns CUDA_ERROR_ILLEGAL_ADDRESS, and so does every later
 *     call (sticky); the work it had queued behind the fault leaves the
 *     device, so the healthy process's kernel does not wait for it;
 *   destroy-context: the launch returns CUDA_ERROR_CONTEXT_IS_DESTROYED, so
 *     do later uses of the context and its streams; a new context works;
 *   the count is the service's launches: the hook's own probe kernel
 *     (fikit_hook_probe, launched when the scheduler asks) neither counts
 *     nor faults, so the fault lands on the same service kernel however
 *     many probes ran;
 *   a bad setting is reported and ignored.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LONG_NS 50000000ull /* 50 ms */

static int illegal_address(void)
{
	/* The 3rd launch faults; 10 long kernels are queued behind it. */
	OK(cuInit(0));
	CUcontext ctx;
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(t_spin(f, s, 1000000));
	OK(t_spin(f, s, 1000000));
	OK(t_spin(f, s, 1000000)); /* asynchronous: the fault is not seen yet */
	for (int i = 0; i < 10; i++)
		t_spin(f, s, LONG_NS);
	int64_t t0 = t_now();
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
	CHECK(t_now() - t0 < 400000000, "the sync waited %lld ms: the queued work was not dropped",
	      (long long)((t_now() - t0) / 1000000));
	/* Sticky: the launch, queries, allocation, the context's sync. */
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, t_spin(f, s, 1000));
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(s));
	CUdeviceptr p;
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemAlloc_v2(&p, 256));
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	CUcontext c2;
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxCreate_v2(&c2, 0, 0));
	const char *name = NULL;
	OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &name)); /* not device work */
	return t_done("fault_test illegal-address");
}

static const char probe_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
				".visible .entry fikit_hook_probe(\n\t.param .u64 fikit_hook_probe_ns\n)\n"
				"{\n\tret;\n}\n";

static int probes_not_counted(void)
{
	/* illegal-address@3: probes launched before and between the service's
	 * launches leave the 3rd service launch the faulting one. */
	OK(cuInit(0));
	CUcontext ctx;
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	CUfunction f = t_spin_function();
	CUmodule m;
	CUfunction probe;
	OK(cuModuleLoadData(&m, probe_ptx));
	OK(cuModuleGetFunction(&probe, m, "fikit_hook_probe"));
	CUstream s, ps;
	OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 3; i++)
		OK(t_spin(probe, ps, 5000));
	OK(cuStreamSynchronize(ps));
	OK(t_spin(f, s, 100000));
	OK(t_spin(probe, ps, 5000));
	OK(t_spin(f, s, 100000));
	OK(t_spin(probe, ps, 5000));
	OK(cuStreamSynchronize(ps));
	OK(cuStreamSynchronize(s)); /* two service launches and five probes: no fault yet */
	OK(t_spin(f, s, 100000));  /* the 3rd service launch */
	CHECK_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
	return t_done("fault_test probes not counted");
}

static int destroy_context(void)
{
	OK(cuInit(0));
	CUcontext ctx;
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	OK(cuStreamCreate(&s, 0));
	OK(t_spin(f, s, 1000000));
	CHECK_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, t_spin(f, s, 1000000));
	CHECK_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, t_spin(f, s, 1000));
	CHECK_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuStreamSynchronize(s));
	CHECK_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuCtxSynchronize());
	CHECK_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, t_spin(f, NULL, 1000));
	/* The process is not poisoned: a new context works. */
	CUcontext c2;
	OK(cuCtxCreate_v2(&c2, 0, 0));
	CUfunction f2 = t_spin_function();
	OK(t_spin(f2, NULL, 1000000));
	OK(cuCtxSynchronize());
	return t_done("fault_test destroy-context");
}

static int bad_setting(void)
{
	OK(cuInit(0));
	CUcontext ctx;
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	CUfunction f = t_spin_function();
	for (int i = 0; i < 5; i++)
		OK(t_spin(f, NULL, 1000));
	OK(cuCtxSynchronize());
	return t_done("fault_test bad setting");
}

/* Run this program as `mode` with FIKIT_SIMGPU_FAULT=fault; returns its pid. */
static pid_t spawn(const char *self, const char *mode, const char *fault)
{
	pid_t p = fork();
	if (p == 0) {
		setenv("FIKIT_SIMGPU_FAULT", fault, 1);
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	return p;
}

static int wait_ok(pid_t p)
{
	int st;
	return waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "illegal"))
		return illegal_address();
	if (argc == 2 && !strcmp(argv[1], "probes"))
		return probes_not_counted();
	if (argc == 2 && !strcmp(argv[1], "destroy"))
		return destroy_context();
	if (argc == 2 && !strcmp(argv[1], "bad"))
		return bad_setting();
	t_unique_shm("fault");
	/* The healthy process starts first and launches after the faulting one
	 * queued its long kernels: it must not wait for them. */
	OK(cuInit(0));
	CUcontext ctx;
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	CUfunction f = t_spin_function();
	pid_t p = spawn(argv[0], "illegal", "illegal-address@3");
	CHECK(wait_ok(p), "the illegal-address process failed its checks");
	int64_t t0 = t_now();
	OK(t_spin(f, NULL, 1000000));
	OK(cuCtxSynchronize());
	CHECK(t_now() - t0 < 100000000, "a healthy 1 ms kernel took %lld ms after another process faulted",
	      (long long)((t_now() - t0) / 1000000));
	CHECK(wait_ok(spawn(argv[0], "probes", "illegal-address@3")), "the hook's probes counted as the service's launches");
	CHECK(wait_ok(spawn(argv[0], "destroy", "destroy-context@2")), "the destroy-context process failed its checks");
	CHECK(wait_ok(spawn(argv[0], "bad", "illegal-address@0")), "a bad setting was not ignored");
	CHECK(wait_ok(spawn(argv[0], "bad", "sometimes")), "a bad setting was not ignored");
	OK(t_spin(f, NULL, 1000));
	OK(cuCtxSynchronize());
	return t_done("fault_test");
}
