/*
 * procaddr_test.c — cuGetProcAddress and cuGetProcAddress_v2: the version
 * argument picks the newest variant introduced at or below it, the
 * per-thread-default-stream flag picks _ptsz/_ptds variants, symbolStatus
 * tells not-found from version-too-old, and the answers are the very
 * functions the library exports.
 */
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>

static void *self;

static void *exported(const char *sym)
{
	return dlsym(self, sym);
}

/* cuGetProcAddress_v2(base, version, flags) must return exported symbol `want`. */
static void expect(const char *base, int version, cuuint64_t flags, const char *want)
{
	void *fn = NULL;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
	CUresult r = cuGetProcAddress_v2(base, &fn, version, flags, &st);
	void *w = exported(want);
	t_check(r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && fn && fn == w, __FILE__, __LINE__, base,
		"version %d flags %llu: got %p (rc %d, status %d), want %s = %p", version, (unsigned long long)flags,
		fn, (int)r, (int)st, want, w);
}

int main(void)
{
	t_unique_shm("procaddr");
	self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(self != NULL, "libcuda.so.1 is not loaded");
	if (!self)
		return t_done("procaddr_test");

	/* Works before cuInit, as the CUDA runtime needs. */
	const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const cuuint64_t LEG = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	expect("cuInit", 12000, 0, "cuInit");
	OK(cuInit(0));

	/* versions */
	expect("cuMemAlloc", 3010, 0, "cuMemAlloc");
	expect("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
	expect("cuMemAlloc", 12040, 0, "cuMemAlloc_v2");
	expect("cuStreamDestroy", 3020, 0, "cuStreamDestroy");
	expect("cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2");
	expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
	expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	expect("cuGraphAddKernelNode", 11080, 0, "cuGraphAddKernelNode");
	expect("cuGraphAddKernelNode", 12000, 0, "cuGraphAddKernelNode_v2");
	expect("cuGraphKernelNodeGetParams", 12000, 0, "cuGraphKernelNodeGetParams_v2");
	expect("cuDeviceGetUuid", 11030, 0, "cuDeviceGetUuid");
	expect("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
	expect("cuDevicePrimaryCtxRelease", 10020, 0, "cuDevicePrimaryCtxRelease");
	expect("cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2");
	expect("cuCtxCreate", 11030, 0, "cuCtxCreate_v2");
	expect("cuCtxCreate", 11040, 0, "cuCtxCreate_v3");
	expect("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate");
	expect("cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2");
	expect("cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags");
	expect("cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture");
	expect("cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2");
	expect("cuEventDestroy", 12000, 0, "cuEventDestroy_v2");
	expect("cuMemcpyDtoH", 12000, 0, "cuMemcpyDtoH_v2");

	/* per-thread default stream flag */
	expect("cuLaunchKernel", 12000, 0, "cuLaunchKernel");
	expect("cuLaunchKernel", 12000, LEG, "cuLaunchKernel");
	expect("cuLaunchKernel", 12000, PT, "cuLaunchKernel_ptsz");
	expect("cuLaunchKernel", 6050, PT, "cuLaunchKernel"); /* no _ptsz before 7.0 */
	expect("cuLaunchKernelEx", 12000, PT, "cuLaunchKernelEx_ptsz");
	expect("cuLaunchCooperativeKernel", 12000, PT, "cuLaunchCooperativeKernel_ptsz");
	expect("cuMemcpyDtoH", 12000, PT, "cuMemcpyDtoH_v2_ptds");
	expect("cuMemcpyHtoDAsync", 12000, PT, "cuMemcpyHtoDAsync_v2_ptsz");
	expect("cuEventRecord", 12000, PT, "cuEventRecord_ptsz");
	expect("cuStreamSynchronize", 12000, PT, "cuStreamSynchronize_ptsz");
	expect("cuStreamBeginCapture", 12000, PT, "cuStreamBeginCapture_v2_ptsz");
	expect("cuGraphLaunch", 12000, PT, "cuGraphLaunch_ptsz");
	expect("cuGraphInstantiateWithParams", 12000, PT, "cuGraphInstantiateWithParams_ptsz");
	expect("cuStreamCreate", 12000, PT, "cuStreamCreate"); /* no per-thread variant */
	expect("cuCtxSynchronize", 12000, PT, "cuCtxSynchronize");

	/* not found / too old / bad arguments */
	void *fn = (void *)1;
	CUdriverProcAddressQueryResult st;
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress_v2("cuNoSuchThing", &fn, 12040, 0, &st));
	CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress_v2("cuLaunchKernelEx", &fn, 11000, 0, &st));
	CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "status %d", (int)st);
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 12040, 0, &st)); /* base names only */
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2(NULL, &fn, 12040, 0, &st));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2("cuInit", NULL, 12040, 0, &st));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress_v2("cuInit", &fn, 12040, 8, &st));
	OK(cuGetProcAddress_v2("cuInit", &fn, 12040, 0, NULL));

	/* the v1 entry point answers the same way, without a status */
	OK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, PT));
	CHECK(fn == exported("cuLaunchKernel_ptsz"));
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuNoSuchThing", &fn, 12000, 0));

	/* a looked-up function works: launch through the table */
	CUcontext c;
	OK(cuCtxCreate_v2(&c, 0, 0));
	CUfunction f = t_spin_function();
	void *launch = NULL, *sync = NULL;
	OK(cuGetProcAddress_v2("cuLaunchKernel", &launch, 12040, PT, NULL));
	OK(cuGetProcAddress_v2("cuStreamSynchronize", &sync, 12040, PT, NULL));
	uint64_t ns = 2000000;
	void *args[] = {&ns};
	int64_t t0 = t_now();
	OK(((CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
			 void **, void **))launch)(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	OK(((CUresult(*)(CUstream))sync)(NULL)); /* the per-thread stream of this thread */
	CHECK(t_now() - t0 >= 2000000, "per-thread stream sync returned before its kernel");
	OK(cuCtxDestroy_v2(c));
	return t_done("procaddr_test");
}
