/* kerneltimes.h — a task's predicted kernel durations and in-flight bound,
 * as the daemon sends them (KernelTimes; docs/scheduler.md "The µs bound"):
 * a fixed open-addressing table written by the sender thread and read
 * without a lock by launching threads. An entry's key is written last; a
 * reader that finds the key finds its duration. The table is cleared at a
 * new registration (a new profile may follow), not freed: readers may be
 * inside it. */
#ifndef FIKIT_KERNELTIMES_H
#define FIKIT_KERNELTIMES_H

#include <stdatomic.h>
#include <stdint.h>

#define FK_KT_SLOTS 4096 /* a power of two; the daemon's table beyond it is dropped (bounded at the default) */

typedef struct fk_ktab {
	_Atomic uint64_t bound_ns;   /* 0: none (no table yet, or the daemon bounds nothing) */
	_Atomic uint64_t default_ns; /* a kernel not in the table */
	_Atomic uint32_t n;          /* entries */
	_Atomic uint32_t have;       /* the daemon sent a table (durations known) */
	struct {
		_Atomic uint64_t key; /* kernel ID + 1 (0: empty) */
		_Atomic uint32_t ns;
	} e[FK_KT_SLOTS];
} fk_ktab;

/* Sender thread: forget everything (a new registration). */
void fk_kt_clear(fk_ktab *k);
/* Sender thread: the bound and default, and entries to add (KernelTimes). */
void fk_kt_put(fk_ktab *k, uint64_t bound_ns, uint64_t default_ns, const uint64_t *ids, const uint32_t *ns, uint32_t n);
/* Any thread: the predicted duration of kernel id. */
uint64_t fk_kt_get(const fk_ktab *k, uint64_t id);

#endif
