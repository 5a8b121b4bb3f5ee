/*
 * memory.c — "device" memory is host memory. Data moves on the host at call
 * time (so programs see their bytes), while the device time of a copy is
 * modelled by a COPY op on the stream (the copy engine) and a memset's by a
 * kernel named SG_MEMSET (the compute engine, in the caller's context: on an
 * H200 a memset loads its context like a kernel, docs/simgpu.md "Presets"):
 * asynchronous calls return at once, synchronous ones wait for that op. Capacity is accounted per process
 * against FIKIT_SIMGPU_MEM_GB.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations, sorted by address, for validating device pointers. */
typedef struct alloc {
	uintptr_t base;
	size_t size;
	int host; /* cuMemAllocHost/HostAlloc: page-locked host memory */
	int low;  /* mmap'ed below 4 GB for the 32-bit-pointer (v1) API */
} alloc;

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static alloc *allocs;
static size_t nallocs, capallocs;
static size_t dev_bytes; /* device allocations outstanding */

static size_t find(uintptr_t p) /* index of the last allocation with base <= p, or nallocs */
{
	size_t lo = 0, hi = nallocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (allocs[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : nallocs;
}

static int track(uintptr_t base, size_t size, int host, int low)
{
	pthread_mutex_lock(&mem_mu);
	if (nallocs == capallocs) {
		size_t cap = capallocs ? capallocs * 2 : 64;
		alloc *a = realloc(allocs, sizeof *a * cap);
		if (!a) {
			pthread_mutex_unlock(&mem_mu);
			return -1;
		}
		allocs = a;
		capallocs = cap;
	}
	size_t i = find(base);
	i = i == nallocs ? 0 : i + 1;
	memmove(&allocs[i + 1], &allocs[i], sizeof *allocs * (nallocs - i));
	allocs[i] = (alloc){base, size, host, low};
	nallocs++;
	if (!host)
		dev_bytes += size;
	pthread_mutex_unlock(&mem_mu);
	return 0;
}

/* Remove the allocation starting exactly at base; -1 if none, else whether
 * it was a low (mmap'ed) one. */
static int untrack(uintptr_t base, int host)
{
	pthread_mutex_lock(&mem_mu);
	size_t i = find(base);
	if (i == nallocs || allocs[i].base != base || allocs[i].host != host) {
		pthread_mutex_unlock(&mem_mu);
		return -1;
	}
	if (!host)
		dev_bytes -= allocs[i].size;
	int low = allocs[i].low;
	memmove(&allocs[i], &allocs[i + 1], sizeof *allocs * (nallocs - i - 1));
	nallocs--;
	pthread_mutex_unlock(&mem_mu);
	return low;
}

/* Is [p, p+n) inside one device allocation? */
static int valid_dev(CUdeviceptr p, size_t n)
{
	pthread_mutex_lock(&mem_mu);
	size_t i = find((uintptr_t)p);
	int ok = i < nallocs && !allocs[i].host && (uintptr_t)p + n <= allocs[i].base + allocs[i].size &&
		 (uintptr_t)p + n >= (uintptr_t)p;
	pthread_mutex_unlock(&mem_mu);
	return ok;
}

static CUresult dev_alloc(uintptr_t *out, size_t bytesize, int low)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!out || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mem_mu);
	int over = dev_bytes + bytesize > (size_t)sg_shared->params.mem_bytes || bytesize > ((size_t)1 << 46);
	pthread_mutex_unlock(&mem_mu);
	if (over)
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *p = NULL;
	if (low) {
#ifdef MAP_32BIT
		/* A 32-bit CUdeviceptr_v1 must hold the address: map in the low 2 GB. */
		p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
		if (p == MAP_FAILED)
			return CUDA_ERROR_OUT_OF_MEMORY;
#else
		return CUDA_ERROR_NOT_SUPPORTED;
#endif
	} else if (posix_memalign(&p, 256, (bytesize + 255) & ~(size_t)255) != 0) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (track((uintptr_t)p, bytesize, 0, low) != 0) {
		if (low)
			munmap(p, bytesize);
		else
			free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = (uintptr_t)p;
	return CUDA_SUCCESS;
}

static CUresult dev_free(uintptr_t p)
{
	SG_CHECK_INIT();
	if (p == 0)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mem_mu);
	size_t i = find(p), size = i < nallocs ? allocs[i].size : 0;
	pthread_mutex_unlock(&mem_mu);
	int low = untrack(p, 0);
	if (low < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (low)
		munmap((void *)p, size);
	else
		free((void *)p);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	uintptr_t p;
	CUresult r = dev_alloc(dptr ? &p : NULL, bytesize, 0);
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)p;
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	return dev_free((uintptr_t)dptr);
}

static CUresult alloc_host(void **pp, size_t bytesize)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pp || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytesize) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (track((uintptr_t)p, bytesize, 1, 0) != 0) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize) { return alloc_host(pp, bytesize); }
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return alloc_host(pp, bytesize); }

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_host(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
	SG_CHECK_INIT();
	if (!p || untrack((uintptr_t)p, 1) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	free(p);
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mem_mu);
	size_t used = dev_bytes;
	pthread_mutex_unlock(&mem_mu);
	*total = (size_t)sg_shared->params.mem_bytes;
	*free_bytes = used > *total ? 0 : *total - used;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	SG_CHECK_INIT();
	pthread_mutex_lock(&mem_mu);
	size_t i = find((uintptr_t)dptr);
	int ok = i < nallocs && (uintptr_t)dptr < allocs[i].base + allocs[i].size;
	if (ok) {
		if (pbase)
			*pbase = (CUdeviceptr)allocs[i].base;
		if (psize)
			*psize = allocs[i].size;
	}
	pthread_mutex_unlock(&mem_mu);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- copies and memsets ----------------------------------------------------- */

enum { K_HTOD, K_DTOH, K_DTOD, K_ANY };

/* Model the device time of moving `bytes` on stream hs (already done on the host). */
static CUresult device_op(CUstream hs, int pt, size_t bytes, int sync)
{
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->capture)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* memcpy nodes are not modelled */
	dm_op op;
	memset(&op, 0, sizeof op);
	op.type = DM_OP_COPY;
	op.stream = s->sid;
	op.flags = sg_stream_op_flags(s);
	op.bytes = bytes;
	uint64_t seq;
	if ((r = sg_submit(s, &op, &seq)) != CUDA_SUCCESS)
		return r;
	if (sync)
		sg_wait_op(s->ctx->dev, s->ctx->dmctx, s->ctx->dmgen, seq);
	return CUDA_SUCCESS;
}

static CUresult copy(int kind, void *dst, const void *src, size_t n, CUstream hs, int pt, int sync)
{
	SG_CHECK_INIT();
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if ((kind == K_HTOD || kind == K_DTOD) && !valid_dev((CUdeviceptr)(uintptr_t)dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	if ((kind == K_DTOH || kind == K_DTOD) && !valid_dev((CUdeviceptr)(uintptr_t)src, n))
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s); /* check before touching memory */
	if (r != CUDA_SUCCESS)
		return r;
	memmove(dst, src, n);
	r = device_op(hs, pt, n, sync);
	return sync ? sg_fault_result(r) : r;
}

#define P(x) ((void *)(uintptr_t)(x))

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(K_ANY, P(dst), P(src), n, NULL, 0, 1); }
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(K_ANY, P(dst), P(src), n, NULL, 1, 1); }
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_ANY, P(dst), P(src), n, s, 0, 0);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_ANY, P(dst), P(src), n, s, 1, 0);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return copy(K_HTOD, P(dst), src, n, NULL, 0, 1); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	return copy(K_HTOD, P(dst), src, n, NULL, 1, 1);
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return copy(K_DTOH, dst, P(src), n, NULL, 0, 1); }
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return copy(K_DTOH, dst, P(src), n, NULL, 1, 1);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(K_DTOD, P(dst), P(src), n, NULL, 0, 1);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(K_DTOD, P(dst), P(src), n, NULL, 1, 1);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(K_HTOD, P(dst), src, n, s, 0, 0);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(K_HTOD, P(dst), src, n, s, 1, 0);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_DTOH, dst, P(src), n, s, 0, 0);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_DTOH, dst, P(src), n, s, 1, 0);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_DTOD, P(dst), P(src), n, s, 0, 0);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(K_DTOD, P(dst), P(src), n, s, 1, 0);
}

static CUresult memset_n(CUdeviceptr dst, unsigned value, size_t elem, size_t n, CUstream hs, int pt, int sync)
{
	SG_CHECK_INIT();
	if (n == 0)
		return CUDA_SUCCESS;
	if (n > SIZE_MAX / elem || !valid_dev(dst, n * elem))
		return CUDA_ERROR_INVALID_VALUE;
	if (elem > 1 && (dst % elem))
		return CUDA_ERROR_INVALID_VALUE; /* misaligned, as the real driver reports */
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->capture)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* memset nodes are not modelled */
	unsigned char *p = P(dst);
	if (elem == 1) {
		memset(p, (int)(value & 0xff), n);
	} else {
		for (size_t i = 0; i < n; i++)
			memcpy(p + i * elem, &value, elem); /* little-endian: the low bytes */
	}
	/* A fill kernel: a fixed start plus the bytes at device-memory speed. */
	static const uint32_t one[3] = {1, 1, 1};
	int64_t dur = SG_MEMSET_BASE_NS + (int64_t)((n * elem) / SG_MEMSET_BYTES_PER_NS);
	uint64_t seq;
	if ((r = sg_launch_seq(sg_intern(SG_MEMSET), one, one, s, dur, &seq)) != CUDA_SUCCESS)
		return r;
	if (!sync)
		return CUDA_SUCCESS;
	sg_wait_op(s->ctx->dev, s->ctx->dmctx, s->ctx->dmgen, seq);
	return sg_fault_result(CUDA_SUCCESS);
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t n) { return memset_n(d, uc, 1, n, NULL, 0, 1); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char uc, size_t n) { return memset_n(d, uc, 1, n, NULL, 1, 1); }
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t n) { return memset_n(d, us, 2, n, NULL, 0, 1); }
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short us, size_t n) { return memset_n(d, us, 2, n, NULL, 1, 1); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t n) { return memset_n(d, ui, 4, n, NULL, 0, 1); }
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int ui, size_t n) { return memset_n(d, ui, 4, n, NULL, 1, 1); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
	return memset_n(d, uc, 1, n, s, 0, 0);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
	return memset_n(d, uc, 1, n, s, 1, 0);
}
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t n, CUstream s)
{
	return memset_n(d, us, 2, n, s, 0, 0);
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short us, size_t n, CUstream s)
{
	return memset_n(d, us, 2, n, s, 1, 0);
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
	return memset_n(d, ui, 4, n, s, 0, 0);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
	return memset_n(d, ui, 4, n, s, 1, 0);
}

/* ---- the 32-bit-pointer (v1) API ------------------------------------------------
 * Still exported by the real driver; cuGetProcAddress hands these out for
 * cudaVersion < 3020. Their allocations live below 2 GB so that the pointers fit. */

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	uintptr_t p;
	CUresult r = dev_alloc(dptr ? &p : NULL, bytesize, 1);
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr_v1)p;
	return r;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) { return dev_free(dptr); }

CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
	size_t f, t;
	CUresult r = cuMemGetInfo_v2(free_bytes ? &f : NULL, total ? &t : NULL);
	if (r == CUDA_SUCCESS) {
		*free_bytes = f > 0xffffffffu ? 0xffffffffu : (unsigned)f;
		*total = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
	}
	return r;
}

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n) { return copy(K_HTOD, P(dst), src, n, NULL, 0, 1); }
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n) { return copy(K_DTOH, dst, P(src), n, NULL, 0, 1); }
CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n)
{
	return copy(K_DTOD, P(dst), P(src), n, NULL, 0, 1);
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream s)
{
	return copy(K_HTOD, P(dst), src, n, s, 0, 0);
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream s)
{
	return copy(K_DTOH, dst, P(src), n, s, 0, 0);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream s)
{
	return copy(K_DTOD, P(dst), P(src), n, s, 0, 0);
}
CUresult cuMemsetD8(CUdeviceptr_v1 d, unsigned char uc, unsigned int n) { return memset_n(d, uc, 1, n, NULL, 0, 1); }
CUresult cuMemsetD16(CUdeviceptr_v1 d, unsigned short us, unsigned int n) { return memset_n(d, us, 2, n, NULL, 0, 1); }
CUresult cuMemsetD32(CUdeviceptr_v1 d, unsigned int ui, unsigned int n) { return memset_n(d, ui, 4, n, NULL, 0, 1); }
