/*
 * api_test.c — driver API basics and error codes: initialisation, devices,
 * contexts, streams, events, memory, error strings, and that what simgpu does
 * not implement answers CUDA_ERROR_NOT_SUPPORTED instead of crashing.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <cudaProfiler.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void before_init(void)
{
	int n = -1;
	CHECK_CU(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
	CUcontext c;
	CHECK_CU(CUDA_ERROR_NOT_INITIALIZED, cuCtxCreate(&c, 0, 0));
	CHECK_CU(CUDA_ERROR_NOT_INITIALIZED, cuLaunchKernel((CUfunction)0x10, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
	CHECK_CU(CUDA_ERROR_NOT_INITIALIZED, cuStreamSynchronize(NULL));
	int v = 0;
	OK(cuDriverGetVersion(&v));
	CHECK(v == 12040, "driver version %d", v);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuInit(1));
	OK(cuInit(0));
	OK(cuInit(0)); /* idempotent */
}

static void devices(void)
{
	int n = 0;
	OK(cuDeviceGetCount(&n));
	CHECK(n == 2, "FIKIT_SIMGPU_DEVICES=2 gave %d devices", n);
	CUdevice d;
	OK(cuDeviceGet(&d, 1));
	CHECK(d == 1);
	CHECK_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, 2));
	CHECK_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, -1));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGet(NULL, 0));
	char name[64];
	OK(cuDeviceGetName(name, sizeof name, 0));
	CHECK(!strcmp(name, "fikit test gpu"), "name %s", name);
	OK(cuDeviceGetName(name, 6, 0));
	CHECK(!strcmp(name, "fikit"), "truncated name %s", name);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetName(name, 0, 0));
	CHECK_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, 64, 7));
	CUuuid u0, u1, u0b;
	OK(cuDeviceGetUuid(&u0, 0));
	OK(cuDeviceGetUuid_v2(&u1, 1));
	OK(cuDeviceGetUuid_v2(&u0b, 0));
	CHECK(memcmp(&u0, &u1, sizeof u0) != 0, "devices share a UUID");
	CHECK(memcmp(&u0, &u0b, sizeof u0) == 0, "UUID not deterministic");
	int sms = 0, major = 0, minor = -1, warp = 0;
	OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	CHECK(sms == 100, "FIKIT_SIMGPU_SMS=100 gave %d", sms);
	OK(cuDeviceComputeCapability(&major, &minor, 0));
	CHECK(major == 9 && minor == 0);
	OK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1));
	CHECK(warp == 32);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_MAX, 0));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
	size_t mem = 0;
	OK(cuDeviceTotalMem_v2(&mem, 0));
	CHECK(mem == (size_t)16 << 30, "FIKIT_SIMGPU_MEM_GB=16 gave %zu", mem);
}

static void contexts(void)
{
	CUcontext cur = (CUcontext)1;
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == NULL, "no context is current yet");
	CUstream s;
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());

	CUcontext p, p2;
	OK(cuDevicePrimaryCtxRetain(&p, 0));
	OK(cuDevicePrimaryCtxRetain(&p2, 0));
	CHECK(p == p2, "one primary context per device");
	unsigned flags;
	int active;
	OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 1);
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(p)); /* primary contexts are released, not destroyed */

	CUcontext a, b, popped;
	OK(cuCtxCreate_v2(&a, 0, 0));
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == a, "a created context becomes current");
	OK(cuCtxCreate_v2(&b, 0, 1));
	CUdevice dev;
	OK(cuCtxGetDevice(&dev));
	CHECK(dev == 1);
	OK(cuCtxPopCurrent_v2(&popped));
	CHECK(popped == b);
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == a);
	OK(cuCtxPushCurrent_v2(p));
	OK(cuCtxGetCurrent(&cur));
	CHECK(cur == p);
	OK(cuCtxPopCurrent_v2(NULL));
	unsigned ver;
	OK(cuCtxGetApiVersion(a, &ver));
	CHECK(ver == 3020);
	int lo, hi;
	OK(cuCtxGetStreamPriorityRange(&lo, &hi));
	CHECK(lo == 0 && hi < 0);
	size_t lim;
	OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
	OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
	CHECK(lim == 4096);
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent_v2((CUcontext)0x1234));
	OK(cuCtxDestroy_v2(b));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(b));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent_v2(b));
	OK(cuDevicePrimaryCtxRelease_v2(0));
	OK(cuDevicePrimaryCtxRelease_v2(0));
	OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 0);
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease_v2(0));
	OK(cuCtxSetCurrent(a));
}

static void launches(CUfunction f)
{
	uint64_t ns = 1000;
	void *args[] = {&ns};
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel((CUfunction)0x1234, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, 0, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, 0, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, 0, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
	void *extra[] = {CU_LAUNCH_PARAM_END};
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, args, extra));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)0x77, args, NULL));
	OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, args, NULL));
	OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL));
	OK(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	OK(cuLaunchCooperativeKernel(f, 2, 1, 1, 64, 1, 1, 0, NULL, args));
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 128, cfg.blockDimY = cfg.blockDimZ = 1;
	OK(cuLaunchKernelEx(&cfg, f, args, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(NULL, f, args, NULL));
	OK(cuCtxSynchronize());
}

static void streams_and_events(CUfunction f)
{
	CUstream s, nb;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x40));
	OK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	OK(cuStreamCreateWithPriority(&nb, CU_STREAM_NON_BLOCKING, -3));
	int prio;
	unsigned flags;
	OK(cuStreamGetPriority(nb, &prio));
	CHECK(prio == -3);
	OK(cuStreamGetFlags(nb, &flags));
	CHECK(flags == CU_STREAM_NON_BLOCKING);
	CUcontext c, cur;
	OK(cuStreamGetCtx(s, &c));
	OK(cuCtxGetCurrent(&cur));
	CHECK(c == cur);

	OK(t_spin(f, s, 30000000)); /* 30 ms */
	CHECK_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
	OK(cuStreamQuery(nb));
	int64_t t0 = t_now();
	OK(cuStreamSynchronize(s));
	int64_t waited = t_now() - t0;
	CHECK(waited > 25000000 && waited < 200000000, "stream sync waited %lld ns for a 30 ms kernel", (long long)waited);
	OK(cuStreamQuery(s));

	/* events time the device work between them */
	CUevent a, b, notime;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&a, 0x100));
	OK(cuEventCreate(&a, CU_EVENT_DEFAULT));
	OK(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
	OK(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
	float ms = 0;
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, b)); /* never recorded */
	OK(cuEventQuery(a));
	OK(cuEventRecord(a, s));
	OK(t_spin(f, s, 5000000));
	OK(cuEventRecord(b, s));
	OK(cuEventRecord(notime, s));
	CHECK_CU(CUDA_ERROR_NOT_READY, cuEventQuery(b));
	CHECK_CU(CUDA_ERROR_NOT_READY, cuEventElapsedTime(&ms, a, b));
	OK(cuEventSynchronize(b));
	OK(cuEventQuery(b));
	OK(cuEventElapsedTime(&ms, a, b));
	/* The kernel starts a launch call after event a: slow under a sanitizer. */
	CHECK(ms > 4.99f && (ms < 5.05f || (t_sanitized() && ms < 6.0f)), "elapsed %f ms around a 5 ms kernel", ms);
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, notime));

	/* a wait on another stream's event orders the streams */
	CUevent done;
	OK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
	OK(t_spin(f, s, 20000000));
	OK(cuEventRecord(done, s));
	OK(cuStreamWaitEvent(nb, done, 0));
	OK(t_spin(f, nb, 1000));
	t0 = t_now();
	OK(cuStreamSynchronize(nb));
	waited = t_now() - t0;
	CHECK(waited > 15000000, "the waiting stream finished after %lld ns, before the 20 ms kernel", (long long)waited);
	OK(cuStreamQuery(s));

	OK(cuEventDestroy_v2(a));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy_v2(a));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(a, s));
	OK(cuStreamDestroy_v2(s));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy_v2(s));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy_v2(NULL));
	OK(cuStreamDestroy(nb));
}

static void memory(void)
{
	CUdeviceptr d, d2;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemAlloc_v2(&d, 0));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&d, (size_t)17 << 30));
	size_t free0, total;
	OK(cuMemGetInfo_v2(&free0, &total));
	OK(cuMemAlloc_v2(&d, 1 << 20));
	OK(cuMemAlloc_v2(&d2, 1 << 20));
	size_t free1;
	OK(cuMemGetInfo_v2(&free1, &total));
	CHECK(free0 - free1 == 2 << 20, "free went %zu -> %zu", free0, free1);
	char *h = malloc(1 << 20), *back = malloc(1 << 20);
	for (int i = 0; i < 1 << 20; i++)
		h[i] = (char)(i * 7);
	OK(cuMemcpyHtoD_v2(d, h, 1 << 20));
	OK(cuMemcpyDtoD_v2(d2, d, 1 << 20));
	OK(cuMemcpyDtoH_v2(back, d2, 1 << 20));
	CHECK(!memcmp(h, back, 1 << 20), "data round trip");
	OK(cuMemsetD32_v2(d, 0xdeadbeef, 4));
	OK(cuMemsetD8_v2(d + 16, 0xab, 3));
	OK(cuMemcpyDtoH_v2(back, d, 20));
	unsigned w;
	memcpy(&w, back + 12, 4);
	CHECK(w == 0xdeadbeef && (unsigned char)back[17] == 0xab && back[19] == h[19]);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(d + (1 << 20) - 4, h, 8)); /* past the end */
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(back, (CUdeviceptr)h, 8)); /* not device memory */
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(d + 1, 0, 1));             /* misaligned */
	/* a synchronous copy takes its modelled time: 25 MB at 25 GB/s is 1 ms */
	CUdeviceptr big;
	char *hb = malloc(25000000);
	memset(hb, 1, 25000000);
	OK(cuMemAlloc_v2(&big, 25000000));
	int64_t t0 = t_now();
	OK(cuMemcpyHtoD_v2(big, hb, 25000000));
	int64_t took = t_now() - t0;
	CHECK(took >= 1000000, "25 MB copy returned after %lld ns", (long long)took);
	CUstream s;
	OK(cuStreamCreate(&s, 0));
	OK(cuMemcpyHtoDAsync_v2(big, hb, 25000000, s));
	CHECK_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
	OK(cuStreamSynchronize(s));
	OK(cuMemFree_v2(big));
	OK(cuMemFree_v2(d));
	OK(cuMemFree_v2(d2));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(d));
	/* the 32-bit-pointer (v1) API still works */
	CUdeviceptr_v1 p32;
	OK(cuMemAlloc(&p32, 4096));
	OK(cuMemcpyHtoD(p32, h, 4096));
	memset(back, 0, 4096);
	OK(cuMemcpyDtoH(back, p32, 4096));
	CHECK(!memcmp(h, back, 4096), "v1 data round trip");
	OK(cuMemFree(p32));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(p32));
	void *ph;
	OK(cuMemAllocHost_v2(&ph, 4096));
	OK(cuMemFreeHost(ph));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(ph));
	free(h);
	free(back);
	free(hb);
	OK(cuStreamDestroy_v2(s));
}

static void errors_and_unsupported(void)
{
	const char *s = NULL;
	OK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
	CHECK(s && !strcmp(s, "CUDA_ERROR_INVALID_VALUE"));
	OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
	CHECK(s && !strcmp(s, "invalid argument"));
	OK(cuGetErrorString(CUDA_ERROR_NOT_SUPPORTED, &s));
	CHECK(s && !strcmp(s, "operation not supported"));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)12345, &s));
	CHECK(s == NULL);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGetErrorString(CUDA_SUCCESS, NULL));

	/* Not implemented: exported anyway, and they answer NOT_SUPPORTED. */
	CUmemoryPool pool;
	CUmemPoolProps props;
	memset(&props, 0, sizeof props);
	CHECK_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemPoolCreate(&pool, &props));
	CUarray arr;
	CUDA_ARRAY_DESCRIPTOR desc;
	memset(&desc, 0, sizeof desc);
	CHECK_CU(CUDA_ERROR_NOT_SUPPORTED, cuArrayCreate_v2(&arr, &desc));
	CHECK_CU(CUDA_ERROR_NOT_SUPPORTED, cuProfilerStart());
	CUdeviceptr pitched;
	size_t pitch;
	CHECK_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemAllocPitch_v2(&pitched, &pitch, 64, 64, 4));
	void *fn = NULL;
	OK(cuGetProcAddress_v2("cuTexObjectCreate", &fn, 12040, 0, NULL));
	CHECK(fn != NULL);
	if (fn)
		CHECK(((CUresult(*)(CUtexObject *, const CUDA_RESOURCE_DESC *, const CUDA_TEXTURE_DESC *,
				     const CUDA_RESOURCE_VIEW_DESC *))fn)(NULL, NULL, NULL, NULL) == CUDA_ERROR_NOT_SUPPORTED);
}

/* A forked child cannot use its parent's context, but can make its own. */
static void forked(CUfunction f)
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		CUcontext cur = (CUcontext)1, c;
		int rc = 0;
		rc |= cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL;
		rc |= (cuStreamSynchronize(NULL) != CUDA_ERROR_INVALID_CONTEXT) << 1;
		rc |= (t_spin(f, NULL, 1000) != CUDA_ERROR_INVALID_CONTEXT) << 2;
		rc |= (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS) << 3;
		CUfunction g = t_spin_function();
		rc |= (t_spin(g, NULL, 1000000) != CUDA_SUCCESS) << 4;
		rc |= (cuCtxSynchronize() != CUDA_SUCCESS) << 5;
		rc |= (cuCtxDestroy_v2(c) != CUDA_SUCCESS) << 6;
		_exit(rc);
	}
	int st;
	waitpid(p, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child: status %d (failed checks bitmask)", WEXITSTATUS(st));
	OK(t_spin(f, NULL, 1000)); /* the parent's context still works */
	OK(cuCtxSynchronize());
}

static void extensions(void)
{
	fikit_simgpu_stats st;
	CHECK(fikit_simgpu_get_stats(0, &st) == 0);
	CHECK(st.kernels > 0 && st.busy_ns > 0, "kernels %llu", (unsigned long long)st.kernels);
	CHECK(fikit_simgpu_get_stats(2, &st) == -1);
}

int main(void)
{
	t_unique_shm("api");
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1);
	setenv("FIKIT_SIMGPU_DEVICES", "2", 1);
	setenv("FIKIT_SIMGPU_NAME", "fikit test gpu", 1);
	setenv("FIKIT_SIMGPU_SMS", "100", 1);
	setenv("FIKIT_SIMGPU_MEM_GB", "16", 1);
	before_init();
	devices();
	contexts();
	CUfunction f = t_spin_function();
	CHECK(f != NULL);
	launches(f);
	streams_and_events(f);
	memory();
	errors_and_unsupported();
	forked(f);
	extensions();
	return t_done("api_test");
}
