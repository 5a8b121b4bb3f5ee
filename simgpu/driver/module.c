/*
 * module.c — modules (context-bound), libraries (context-independent) and
 * their functions/kernels. CUfunction and CUkernel are the same kind of
 * object (sg_func) with different handle types, and every call that takes a
 * CUfunction also accepts a CUkernel, as the real driver does.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Guards creating function objects and unloading (not sg_p.mu: contexts are
 * torn down, unloading their modules, while sg_p.mu is held). */
static pthread_mutex_t mod_mu = PTHREAD_MUTEX_INITIALIZER;

/* Read a whole file, NUL-terminated (PTX is text). */
static CUresult read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return errno == ENOENT ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_VALUE;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	while (b) {
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		cap *= 2;
		char *nb = realloc(b, cap + 1);
		if (!nb) {
			free(b);
			b = NULL;
		}
		b = nb;
	}
	fclose(f);
	if (!b)
		return CUDA_ERROR_OUT_OF_MEMORY;
	b[n] = '\0';
	*buf = b;
	*len = n;
	return CUDA_SUCCESS;
}

static CUresult load(const void *image, size_t maxlen, sg_ctx *c, int type, sg_module **out)
{
	sg_image img;
	CUresult r = sg_image_parse(image, maxlen, &img);
	if (r != CUDA_SUCCESS)
		return r;
	sg_module *m = sg_obj_new(type);
	if (!m) {
		sg_image_free(&img);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->ctx = c;
	m->img = img;
	m->funcs = calloc((size_t)(img.nentries ? img.nentries : 1), sizeof *m->funcs);
	m->kerns = calloc((size_t)(img.nentries ? img.nentries : 1), sizeof *m->kerns);
	if (!m->funcs || !m->kerns) {
		free(m->funcs);
		free(m->kerns);
		sg_image_free(&m->img);
		sg_obj_free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sg_obj_publish(m);
	*out = m;
	return CUDA_SUCCESS;
}

static void unload(sg_module *m)
{
	pthread_mutex_lock(&mod_mu);
	for (int i = 0; i < m->img.nentries; i++) {
		if (m->funcs[i])
			sg_obj_free(m->funcs[i]);
		if (m->kerns[i])
			sg_obj_free(m->kerns[i]);
	}
	free(m->funcs);
	free(m->kerns);
	m->funcs = m->kerns = NULL;
	sg_image_free(&m->img);
	sg_obj_free(m);
	pthread_mutex_unlock(&mod_mu);
}

static int unload_if_of(void *obj, void *arg)
{
	sg_module *m = obj;
	if (m->ctx == arg)
		unload(m);
	return 0;
}

void sg_modules_unload_ctx(sg_ctx *c)
{
	sg_obj_each(SG_T_MOD, unload_if_of, c);
}

/* The function object of entry i (type SG_T_FUNC or SG_T_KERN), made once. */
static sg_func *func_of_entry(sg_module *m, int i, int type)
{
	sg_func **slot = type == SG_T_KERN ? &m->kerns[i] : &m->funcs[i];
	pthread_mutex_lock(&mod_mu);
	if (!*slot) {
		sg_func *f = sg_obj_new(type);
		if (f) {
			f->mod = m;
			f->e = &m->img.entries[i];
		}
		*slot = f;
	}
	sg_func *f = *slot;
	pthread_mutex_unlock(&mod_mu);
	return f;
}

static int find_entry(const sg_module *m, const char *name)
{
	for (int i = 0; i < m->img.nentries; i++)
		if (!strcmp(m->img.entries[i].name->name, name))
			return i;
	return -1;
}

CUresult sg_func_of(CUfunction hf, sg_func **out)
{
	uint64_t h = (uint64_t)(uintptr_t)hf;
	sg_func *f = sg_lookup(h, SG_T_FUNC);
	if (!f)
		f = sg_lookup(h, SG_T_KERN);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = f;
	return CUDA_SUCCESS;
}

/* ---- modules -------------------------------------------------------------- */

static CUresult module_load(CUmodule *module, const void *image, size_t maxlen)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	sg_module *m;
	if ((r = load(image, maxlen, c, SG_T_MOD, &m)) != CUDA_SUCCESS)
		return r;
	*module = (CUmodule)(uintptr_t)sg_handle(m);
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return module_load(module, image, 0);
}

/* JIT options with outputs get empty answers: no logs, no compile time. */
static void jit_outputs(unsigned n, CUjit_option *opt, void **val)
{
	for (unsigned i = 0; opt && val && i < n; i++) {
		switch (opt[i]) {
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
			val[i] = (void *)(uintptr_t)0;
			break;
		case CU_JIT_WALL_TIME: {
			float z = 0;
			memcpy(&val[i], &z, sizeof z);
			break;
		}
		default:
			break;
		}
	}
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
			    void **optionValues)
{
	if (numOptions && (!options || !optionValues))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = module_load(module, image, 0);
	if (r == CUDA_SUCCESS)
		jit_outputs(numOptions, options, optionValues);
	return r;
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return module_load(module, fatCubin, 0);
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	SG_CHECK_INIT();
	if (!module || !fname)
		return CUDA_ERROR_INVALID_VALUE;
	char *buf;
	size_t len;
	CUresult r = read_file(fname, &buf, &len);
	if (r != CUDA_SUCCESS)
		return r;
	r = module_load(module, buf, len);
	free(buf);
	return r;
}

CUresult cuModuleUnload(CUmodule hmod)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)hmod, SG_T_MOD);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	unload(m);
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	SG_CHECK_INIT();
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	sg_module *m = sg_lookup((uintptr_t)hmod, SG_T_MOD);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	int i = find_entry(m, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	sg_func *f = func_of_entry(m, i, SG_T_FUNC);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*hfunc = (CUfunction)(uintptr_t)sg_handle(f);
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule hmod)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)hmod, SG_T_MOD);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = (unsigned)m->img.nentries;
	return CUDA_SUCCESS;
}

CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule hmod)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)hmod, SG_T_MOD);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!functions && numFunctions)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < numFunctions && (int)i < m->img.nentries; i++) {
		sg_func *f = func_of_entry(m, (int)i, SG_T_FUNC);
		if (!f)
			return CUDA_ERROR_OUT_OF_MEMORY;
		functions[i] = (CUfunction)(uintptr_t)sg_handle(f);
	}
	return CUDA_SUCCESS;
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	SG_CHECK_INIT();
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = CU_MODULE_EAGER_LOADING;
	return CUDA_SUCCESS;
}

/* ---- libraries ------------------------------------------------------------ */

static CUresult library_load(CUlibrary *library, const void *code, size_t maxlen, unsigned numJit,
			     CUjit_option *jitOptions, void **jitValues, unsigned numLib)
{
	SG_CHECK_INIT();
	if (!library || !code || (numJit && (!jitOptions || !jitValues)))
		return CUDA_ERROR_INVALID_VALUE;
	(void)numLib; /* library options (CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE…) do not matter here */
	sg_module *m;
	CUresult r = load(code, maxlen, NULL, SG_T_LIB, &m);
	if (r != CUDA_SUCCESS)
		return r;
	jit_outputs(numJit, jitOptions, jitValues);
	*library = (CUlibrary)(uintptr_t)sg_handle(m);
	return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
			   void **libraryOptionValues, unsigned int numLibraryOptions)
{
	(void)libraryOptions;
	(void)libraryOptionValues;
	return library_load(library, code, 0, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions);
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
			       void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
			       void **libraryOptionValues, unsigned int numLibraryOptions)
{
	(void)libraryOptions;
	(void)libraryOptionValues;
	SG_CHECK_INIT();
	if (!fileName)
		return CUDA_ERROR_INVALID_VALUE;
	char *buf;
	size_t len;
	CUresult r = read_file(fileName, &buf, &len);
	if (r != CUDA_SUCCESS)
		return r;
	r = library_load(library, buf, len, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions);
	free(buf);
	return r;
}

CUresult cuLibraryUnload(CUlibrary library)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)library, SG_T_LIB);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	unload(m);
	return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	SG_CHECK_INIT();
	if (!pKernel || !name)
		return CUDA_ERROR_INVALID_VALUE;
	sg_module *m = sg_lookup((uintptr_t)library, SG_T_LIB);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	int i = find_entry(m, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	sg_func *f = func_of_entry(m, i, SG_T_KERN);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pKernel = (CUkernel)(uintptr_t)sg_handle(f);
	return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)lib, SG_T_LIB);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = (unsigned)m->img.nentries;
	return CUDA_SUCCESS;
}

CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
	SG_CHECK_INIT();
	sg_module *m = sg_lookup((uintptr_t)lib, SG_T_LIB);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!kernels && numKernels)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < numKernels && (int)i < m->img.nentries; i++) {
		sg_func *f = func_of_entry(m, (int)i, SG_T_KERN);
		if (!f)
			return CUDA_ERROR_OUT_OF_MEMORY;
		kernels[i] = (CUkernel)(uintptr_t)sg_handle(f);
	}
	return CUDA_SUCCESS;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	sg_ctx *c;
	CUresult r = sg_current_ctx(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	sg_func *k = sg_lookup((uintptr_t)kernel, SG_T_KERN);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	sg_func *f = func_of_entry(k->mod, (int)(k->e - k->mod->img.entries), SG_T_FUNC);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pFunc = (CUfunction)(uintptr_t)sg_handle(f);
	return CUDA_SUCCESS;
}

/* ---- names and attributes -------------------------------------------------- */

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	SG_CHECK_INIT();
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	sg_func *f;
	CUresult r = sg_func_of(hfunc, &f);
	if (r != CUDA_SUCCESS)
		return r;
	*name = f->e->name->name;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	SG_CHECK_INIT();
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	sg_func *f = sg_lookup((uintptr_t)hfunc, SG_T_KERN);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->e->name->name;
	return CUDA_SUCCESS;
}

static CUresult func_attribute(int *pi, CUfunction_attribute attrib, const sg_func *f)
{
	if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 232448; break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = -1; break;
	default: *pi = 0; break; /* shared/const/local sizes: the spin kernels use none */
	}
	(void)f;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	SG_CHECK_INIT();
	sg_func *f;
	CUresult r = sg_func_of(hfunc, &f);
	if (r != CUDA_SUCCESS)
		return r;
	return func_attribute(pi, attrib, f);
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
	SG_CHECK_INIT();
	sg_func *f = sg_lookup((uintptr_t)kernel, SG_T_KERN);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev < 0 || dev >= sg_p.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return func_attribute(pi, attrib, f);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	SG_CHECK_INIT();
	sg_func *f;
	CUresult r = sg_func_of(hfunc, &f);
	if (r != CUDA_SUCCESS)
		return r;
	(void)value; /* accepted and ignored: nothing in the model depends on it */
	return (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
	SG_CHECK_INIT();
	(void)val;
	if (!sg_lookup((uintptr_t)kernel, SG_T_KERN))
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev < 0 || dev >= sg_p.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	SG_CHECK_INIT();
	sg_func *f;
	CUresult r = sg_func_of(hfunc, &f);
	if (r != CUDA_SUCCESS)
		return r;
	return (int)config < 0 || config > CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	SG_CHECK_INIT();
	if (!hmod)
		return CUDA_ERROR_INVALID_VALUE;
	sg_func *f = sg_lookup((uintptr_t)hfunc, SG_T_FUNC);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (f->mod->h.type != SG_T_MOD)
		return CUDA_ERROR_NOT_FOUND; /* a library kernel's function has no module */
	*hmod = (CUmodule)(uintptr_t)sg_handle(f->mod);
	return CUDA_SUCCESS;
}
