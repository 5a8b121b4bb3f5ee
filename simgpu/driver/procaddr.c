/*
 * procaddr.c — cuGetProcAddress and cuGetProcAddress_v2, driven by the same
 * table (entries.def) that defines what the library exports.
 *
 * For (symbol, cudaVersion, flags) the answer is the row of that base name
 * with the highest version <= cudaVersion; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the _ptsz/_ptds rows take
 * part too and win a tie. A known name whose rows are all newer than
 * cudaVersion is CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <cudaProfiler.h>
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

/* Compile-time check that every row's symbol has the prototype NVIDIA's
 * typedef for that (base, version, variant) says. */
#define CU_ENTRY(base, sym, ver, sfx, pfn)                                                     \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&sym), pfn), #sym " is not " #pfn);
#define CU_ALIAS CU_ENTRY
#define CU_EXPORT_ONLY(sym)
#include "entries.def"
#undef CU_ENTRY
#undef CU_ALIAS
#undef CU_EXPORT_ONLY

typedef struct row {
	const char *base;
	void *fn;
	int version;
	int per_thread;
} row;

static row rows[] = {
#define CU_ENTRY(base, sym, ver, sfx, pfn) {#base, (void *)&sym, ver, sizeof(#sfx) > 1},
#define CU_ALIAS CU_ENTRY
#define CU_EXPORT_ONLY(sym)
#include "entries.def"
#undef CU_ENTRY
#undef CU_ALIAS
#undef CU_EXPORT_ONLY
};

#define NROWS (sizeof rows / sizeof rows[0])

static int by_base(const void *a, const void *b)
{
	return strcmp(((const row *)a)->base, ((const row *)b)->base);
}

static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static void sort_rows(void)
{
	qsort(rows, NROWS, sizeof rows[0], by_base);
}

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	if (pfn)
		*pfn = NULL;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&sorted_once, sort_rows);
	int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	size_t lo = 0, hi = NROWS;
	while (lo < hi) { /* first row with base >= symbol */
		size_t mid = (lo + hi) / 2;
		if (strcmp(rows[mid].base, symbol) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	const row *best = NULL;
	int known = 0;
	for (size_t i = lo; i < NROWS && !strcmp(rows[i].base, symbol); i++) {
		const row *r = &rows[i];
		known = 1;
		if (r->version > cudaVersion || (r->per_thread && !pt))
			continue;
		if (!best || r->version > best->version || (r->version == best->version && r->per_thread))
			best = r;
	}
	if (!best) {
		if (status)
			*status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = best->fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

/* Both work before cuInit: the CUDA runtime looks up cuInit itself this way. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus)
{
	return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
