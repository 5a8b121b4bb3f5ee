/*
 * stubs.c — every entry point of entries.def as a WEAK function returning
 * CUDA_ERROR_NOT_SUPPORTED (801). The driver's real definitions are strong
 * and replace them at link time, so whatever simgpu does not implement is
 * still exported and returns an error instead of failing to resolve.
 *
 * This file deliberately does not include cuda.h: a stub ignores its
 * arguments, and with the C calling convention (caller-cleaned, arguments in
 * registers/stack) a function taking none can stand in for any prototype.
 */
#define SG_STUB(sym)                                                          \
	__attribute__((weak, visibility("default"))) int sym(void);          \
	int sym(void)                                                         \
	{                                                                     \
		return 801; /* CUDA_ERROR_NOT_SUPPORTED */                    \
	}
#define CU_ENTRY(base, sym, ver, sfx, pfn) SG_STUB(sym)
#define CU_ALIAS(base, sym, ver, sfx, pfn)
#define CU_EXPORT_ONLY(sym) SG_STUB(sym)
#include "entries.def"
