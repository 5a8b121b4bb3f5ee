/*
 * device.c — cuInit, versions, device queries and error strings.
 */
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

sg_proc sg_p = {.timeline_fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int init_done;

static void atfork_child(void)
{
	/* Contexts stay with the parent (their owner pid); the child gets its own. */
	sg_p.pid = (uint32_t)getpid();
}

void sg_exit_cleanup(void); /* context.c */

__attribute__((destructor)) static void driver_fini(void)
{
	if (sg_p.initialized)
		sg_exit_cleanup();
}

CUresult cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (__atomic_load_n(&init_done, __ATOMIC_ACQUIRE))
		return sg_p.init_error;
	pthread_mutex_lock(&init_mu);
	if (!init_done) {
		sg_p.pid = (uint32_t)getpid();
		int rc = sg_env_load(&sg_p.env);
		if (rc != 0) {
			sg_p.init_error = CUDA_ERROR_INVALID_VALUE;
		} else if ((rc = sg_shm_attach(&sg_p.env)) != 0) {
			sg_p.init_error = CUDA_ERROR_NO_DEVICE;
		} else {
			sg_p.ndev = (int)sg_shared->ndev;
			if (sg_p.env.timeline[0]) {
				sg_p.timeline_fd = open(sg_p.env.timeline, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
				if (sg_p.timeline_fd < 0)
					fprintf(stderr, "simgpu: FIKIT_SIMGPU_TIMELINE=%s: cannot open; no timeline\n",
						sg_p.env.timeline);
			}
			pthread_atfork(NULL, NULL, atfork_child);
			sg_p.init_error = CUDA_SUCCESS;
			__atomic_store_n(&sg_p.initialized, 1, __ATOMIC_RELEASE);
			sg_timeline_start();
		}
		__atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_mu);
	return sg_p.init_error;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = 12040;
	return CUDA_SUCCESS;
}

#define CHECK_DEV(dev)                                       \
	do {                                                 \
		SG_CHECK_INIT();                             \
		if ((dev) < 0 || (dev) >= sg_p.ndev)         \
			return CUDA_ERROR_INVALID_DEVICE;    \
	} while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	SG_CHECK_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= sg_p.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	SG_CHECK_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sg_p.ndev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", sg_shared->params.name);
	return CUDA_SUCCESS;
}

/* Deterministic and distinct per device index: FNV-1a of a fixed text,
 * shaped as an RFC 4122 version-4 UUID. */
static void device_uuid(int dev, CUuuid *u)
{
	char text[64];
	snprintf(text, sizeof text, "fikit simgpu device %d", dev);
	uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
	for (const char *p = text; *p; p++) {
		h1 = (h1 ^ (unsigned char)*p) * 0x100000001b3ULL;
		h2 = (h2 ^ (unsigned char)*p) * 0x100000001b3ULL;
	}
	memcpy(u->bytes, &h1, 8);
	memcpy(u->bytes + 8, &h2, 8);
	u->bytes[6] = (char)((u->bytes[6] & 0x0f) | 0x40);
	u->bytes[8] = (char)((u->bytes[8] & 0x3f) | 0x80);
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	device_uuid(dev, uuid);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	device_uuid(dev, uuid);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t m = sg_shared->params.mem_bytes;
	*bytes = m > 0xffffffffLL ? 0xffffffffu : (unsigned)m;
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = (size_t)sg_shared->params.mem_bytes;
	return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	*major = 9;
	*minor = 0;
	return CUDA_SUCCESS;
}

/* An H100 SXM's attributes (compute capability 9.0); the SM count follows
 * FIKIT_SIMGPU_SMS. Attributes not listed read 0 (feature absent). */
static int attribute(CUdevice_attribute a, int dev)
{
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return sg_shared->params.sms;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + dev;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 1; /* the model has one copy engine */
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 0;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
	default: return 0;
	}
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!pi || (int)attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attribute(attrib, dev);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
	CHECK_DEV(dev);
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	memset(prop, 0, sizeof *prop);
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 2147483647;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->sharedMemPerBlock = 49152;
	prop->totalConstantMemory = 65536;
	prop->SIMDWidth = 32;
	prop->memPitch = 2147483647;
	prop->regsPerBlock = 65536;
	prop->clockRate = 1980000;
	prop->textureAlign = 512;
	return CUDA_SUCCESS;
}

/* ---- errors ----------------------------------------------------------- */

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch ((int)error) {
#define CU_ERR(name, value, msg) case value: *pStr = #name; return CUDA_SUCCESS;
#include "errors.def"
#undef CU_ERR
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch ((int)error) {
#define CU_ERR(name, value, msg) case value: *pStr = msg; return CUDA_SUCCESS;
#include "errors.def"
#undef CU_ERR
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}
