/* table.h — the hooked-symbol table generated from hooks.def, without the
 * wrappers, so the cuGetProcAddress variant selection can be unit-tested in a
 * program that does not interpose anything. */
#ifndef FIKIT_TABLE_H
#define FIKIT_TABLE_H

#include <stdint.h>

enum fk_slot {
#define FK_HOOK(sym, base, version, pt, handler, ret, params, args) FK_SLOT_##sym,
#define FK_ALIAS(base, version, pt, sym)
#include "hooks.def"
#undef FK_HOOK
#undef FK_ALIAS
	FK_NSLOTS
};

/* One cuGetProcAddress lookup row: base name, version, pt → slot. */
typedef struct fk_proc_row {
	const char *base;
	int version;
	int pt;
	int slot;
} fk_proc_row;

extern const char *const fk_slot_name[FK_NSLOTS];
extern const unsigned char fk_slot_pt[FK_NSLOTS];
extern const fk_proc_row fk_proc_rows[];
extern const int fk_nproc_rows;

/* The slot of the variant the driver returns for cuGetProcAddress(symbol,
 * cudaVersion, flags), or -1 if symbol is not a hooked base (or no hooked
 * variant is old enough: the call is then left alone). per_thread: flags
 * carry CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. */
int fk_proc_select(const char *symbol, int cuda_version, int per_thread);

/* The slot of an exported symbol name (dlsym), or -1. */
int fk_slot_of(const char *name);

#endif
