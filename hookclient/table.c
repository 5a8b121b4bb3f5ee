/* table.c — data generated from hooks.def and the pure lookups over it. */
#include "table.h"

#include <string.h>

const char *const fk_slot_name[FK_NSLOTS] = {
#define FK_HOOK(sym, base, version, pt, handler, ret, params, args) [FK_SLOT_##sym] = #sym,
#define FK_ALIAS(base, version, pt, sym)
#include "hooks.def"
#undef FK_HOOK
#undef FK_ALIAS
};

const unsigned char fk_slot_pt[FK_NSLOTS] = {
#define FK_HOOK(sym, base, version, pt, handler, ret, params, args) [FK_SLOT_##sym] = pt,
#define FK_ALIAS(base, version, pt, sym)
#include "hooks.def"
#undef FK_HOOK
#undef FK_ALIAS
};

const fk_proc_row fk_proc_rows[] = {
#define FK_HOOK(sym, base, version, pt, handler, ret, params, args) {#base, version, pt, FK_SLOT_##sym},
#define FK_ALIAS(base, version, pt, sym) {#base, version, pt, FK_SLOT_##sym},
#include "hooks.def"
#undef FK_HOOK
#undef FK_ALIAS
};

const int fk_nproc_rows = (int)(sizeof fk_proc_rows / sizeof fk_proc_rows[0]);

int fk_proc_select(const char *symbol, int cuda_version, int per_thread)
{
	int is_base = 0;
	/* The driver's rule: the newest variant not newer than cudaVersion, of
	 * the per-thread family when asked for and one exists, else legacy. */
	for (int want = per_thread ? 1 : 0; want >= 0; want--) {
		int best = -1, bestv = -1;
		for (int i = 0; i < fk_nproc_rows; i++) {
			const fk_proc_row *r = &fk_proc_rows[i];
			if (strcmp(r->base, symbol))
				continue;
			is_base = 1;
			if (r->pt == want && r->version <= cuda_version && r->version > bestv) {
				best = r->slot;
				bestv = r->version;
			}
		}
		if (best >= 0)
			return best;
	}
	if (is_base)
		return -1;
	/* A full versioned name ("cuLaunchKernel_ptsz") names its variant. */
	return fk_slot_of(symbol);
}

int fk_slot_of(const char *name)
{
	if (name[0] != 'c' || name[1] != 'u')
		return -1;
	for (int s = 0; s < FK_NSLOTS; s++)
		if (!strcmp(fk_slot_name[s], name))
			return s;
	return -1;
}
