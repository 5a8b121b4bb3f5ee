/*
 * launch.c — kernel launches. The hot path: resolve handles (no lock), then
 * one trip through the shared lock (advance to now, retire, enqueue).
 */
#include "internal.h"

#include <string.h>

CUresult sg_launch(const sg_name *name, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
		   int64_t duration_ns)
{
	return sg_launch_seq(name, grid, block, s, duration_ns, NULL);
}

CUresult sg_launch_seq(const sg_name *name, const uint32_t grid[3], const uint32_t block[3], sg_stream *s,
		       int64_t duration_ns, uint64_t *seq)
{
	dm_op op;
	memset(&op, 0, sizeof op);
	op.type = DM_OP_KERNEL;
	op.stream = s->sid;
	op.flags = sg_stream_op_flags(s);
	if (!strcmp(name->name, SG_HOOK_PROBE))
		op.flags |= DM_OPF_UNCOUNTED; /* the hook's probe or warm-up: not the service's interference */
	op.duration_ns = duration_ns;
	op.tag = (uint64_t)(uintptr_t)name; /* interned: the timeline names kernels by it */
	memcpy(op.grid, grid, sizeof op.grid);
	memcpy(op.block, block, sizeof op.block);
	return sg_submit(s, &op, seq);
}

static CUresult check_dims(const uint32_t g[3], const uint32_t b[3], unsigned shmem)
{
	if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
		return CUDA_ERROR_INVALID_VALUE;
	if (g[1] > 65535 || g[2] > 65535 || g[0] > 2147483647u)
		return CUDA_ERROR_INVALID_VALUE;
	if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || (uint64_t)b[0] * b[1] * b[2] > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (shmem > 232448)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction hf, const uint32_t g[3], const uint32_t b[3], unsigned shmem, CUstream hs,
		       void **kernelParams, void **extra, int pt)
{
	SG_CHECK_INIT();
	sg_func *f;
	CUresult r = sg_func_of(hf, &f);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = check_dims(g, b, shmem)) != CUDA_SUCCESS)
		return r;
	if (kernelParams && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (f->e->nparams > 0 && !kernelParams && !extra)
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	if ((r = sg_stream_resolve(hs, pt, &s)) != CUDA_SUCCESS)
		return r;
	int64_t dur = sg_spin_duration(f->e, kernelParams, extra);
	if (s->capture)
		return sg_capture_kernel(s, f, g, b, shmem, dur, kernelParams, extra);
	if ((r = sg_fault_poll()) != CUDA_SUCCESS)
		return r;
	int handled;
	r = sg_fault_launch(f->e->name, g, b, s, dur, &handled);
	if (handled)
		return r;
	return sg_launch(f->e->name, g, b, s, dur);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
			unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
			unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
	const uint32_t g[3] = {gridDimX, gridDimY, gridDimZ}, b[3] = {blockDimX, blockDimY, blockDimZ};
	return launch(f, g, b, sharedMemBytes, hStream, kernelParams, extra, 0);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
			     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
			     unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
	const uint32_t g[3] = {gridDimX, gridDimY, gridDimZ}, b[3] = {blockDimX, blockDimY, blockDimZ};
	return launch(f, g, b, sharedMemBytes, hStream, kernelParams, extra, 1);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
				   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams)
{
	const uint32_t g[3] = {gridDimX, gridDimY, gridDimZ}, b[3] = {blockDimX, blockDimY, blockDimZ};
	return launch(f, g, b, sharedMemBytes, hStream, kernelParams, NULL, 0);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
					unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
					void **kernelParams)
{
	const uint32_t g[3] = {gridDimX, gridDimY, gridDimZ}, b[3] = {blockDimX, blockDimY, blockDimZ};
	return launch(f, g, b, sharedMemBytes, hStream, kernelParams, NULL, 1);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra, int pt)
{
	SG_CHECK_INIT();
	if (!config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	/* Attributes (cooperative, clusters, priorities…) do not change the model. */
	const uint32_t g[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
	const uint32_t b[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
	return launch(f, g, b, config->sharedMemBytes, config->hStream, kernelParams, extra, pt);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
	return launch_ex(config, f, kernelParams, extra, 0);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
	return launch_ex(config, f, kernelParams, extra, 1);
}
