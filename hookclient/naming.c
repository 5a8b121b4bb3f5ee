/* naming.c — kernel names without rebuilding frameworks (the paper needed
 * PyTorch rebuilt with -rdynamic). A handle is named when the application
 * asks for it by name (cuModuleGetFunction, cuLibraryGetKernel,
 * cuKernelGetFunction), else at its first launch by the driver
 * (cuFuncGetName, or cuKernelGetName for a CUkernel passed as a CUfunction,
 * CUDA ≥ 12.3). The per-handle entry holds the kernel-ID state over the name,
 * so after a handle's first launch the hot path does no string work. */
#include "handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fk_htab fk_funcs, fk_graphs;

const char *const fk_name_path_str[] = {
	[FK_NAME_MODULE] = "cuModuleGetFunction",
	[FK_NAME_LIBRARY] = "cuLibraryGetKernel",
	[FK_NAME_KERNEL_FUNC] = "cuKernelGetFunction",
	[FK_NAME_FUNC_GET] = "cuFuncGetName",
	[FK_NAME_KERNEL_GET] = "cuKernelGetName",
	[FK_NAME_GRAPH] = "graph nodes",
	[FK_NAME_UNKNOWN] = "none (unnamed)",
};

/* Record a name for a handle, unless the same name is already recorded
 * (cuModuleGetFunction is often called again for the same kernel). */
static void remember(uintptr_t handle, const char *name, int path)
{
	if (!handle || !name)
		return;
	size_t len = strlen(name);
	fk_fn *old = fk_htab_get(&fk_funcs, handle);
	if (old && old->len == len && !memcmp(old->name, name, len))
		return;
	fk_htab_put(&fk_funcs, handle, fk_fn_new(name, len, path));
}

/* A NULL handle (the driver refuses its launch) is never stored: one entry
 * serves every such launch instead of a new one each time. */
static fk_fn null_fn;
static pthread_once_t null_once = PTHREAD_ONCE_INIT;
static void null_init(void)
{
	null_fn.name = "fikit.unnamed";
	null_fn.len = (uint32_t)strlen(null_fn.name);
	null_fn.state = fk_kid_name_state(null_fn.name, null_fn.len);
	null_fn.path = FK_NAME_UNKNOWN;
}

fk_fn *fk_name_slow(CUfunction f)
{
	if (!f) {
		pthread_once(&null_once, null_init);
		return &null_fn;
	}
	const char *name = NULL;
	int path = FK_NAME_UNKNOWN;
	if (fk_drv.cuFuncGetName && fk_drv.cuFuncGetName(&name, f) == CUDA_SUCCESS && name)
		path = FK_NAME_FUNC_GET;
	else if (fk_drv.cuKernelGetName && fk_drv.cuKernelGetName(&name, (CUkernel)f) == CUDA_SUCCESS && name)
		path = FK_NAME_KERNEL_GET;
	else
		name = "fikit.unnamed"; /* stable across restarts; grid/block still tell kernels apart */
	fk_fn *fn = fk_fn_new(name, strlen(name), path);
	fk_fn *stored = fk_htab_put(&fk_funcs, (uintptr_t)f, fn);
	if (path == FK_NAME_UNKNOWN)
		fk_log(FK_LOG_INFO, "kernel handle %p has no name (driver without cuFuncGetName?)", (void *)f);
	return stored ? stored : fn;
}

void fk_name_log_first(fk_fn *fn, uintptr_t handle, const uint32_t dims[6])
{
	if (atomic_exchange_explicit(&fn->logged, 1, memory_order_relaxed))
		return;
	fk_log(FK_LOG_DEBUG, "kernel %s handle %#lx grid %u,%u,%u block %u,%u,%u named by %s", fn->name,
	       (unsigned long)handle, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
	       fk_name_path_str[fn->path]);
}

CUresult fk_on_module_get_function(int slot, CUfunction *pf, CUmodule mod, const char *name)
{
	__typeof__(&cuModuleGetFunction) real = FK_REAL(slot, cuModuleGetFunction);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(pf, mod, name);
	if (rc == CUDA_SUCCESS && pf && !fk_cfg.disabled)
		remember((uintptr_t)*pf, name, FK_NAME_MODULE);
	return rc;
}

CUresult fk_on_library_get_kernel(int slot, CUkernel *pk, CUlibrary lib, const char *name)
{
	__typeof__(&cuLibraryGetKernel) real = FK_REAL(slot, cuLibraryGetKernel);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(pk, lib, name);
	if (rc == CUDA_SUCCESS && pk && !fk_cfg.disabled)
		remember((uintptr_t)*pk, name, FK_NAME_LIBRARY);
	return rc;
}

CUresult fk_on_kernel_get_function(int slot, CUfunction *pf, CUkernel k)
{
	__typeof__(&cuKernelGetFunction) real = FK_REAL(slot, cuKernelGetFunction);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(pf, k);
	if (rc == CUDA_SUCCESS && pf && !fk_cfg.disabled) {
		fk_fn *kn = fk_htab_get(&fk_funcs, (uintptr_t)k);
		if (kn)
			remember((uintptr_t)*pf, kn->name, FK_NAME_KERNEL_FUNC);
	}
	return rc;
}
