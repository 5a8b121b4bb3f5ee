/* htab.h — named units and the per-handle cache: open addressing with
 * lock-free lookups (the launch hot path), inserts and growth under a mutex
 * (first sight of a handle). Pure: no driver, so the C tests use it as is. */
#ifndef FIKIT_HTAB_H
#define FIKIT_HTAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifndef FK_UNLIKELY
#define FK_LIKELY(x) __builtin_expect(!!(x), 1)
#define FK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#endif

/* A named unit: a function handle's kernel or an instantiated graph. Never
 * freed while the process runs (handles are few; a reader may still hold an
 * old one): one replaced by a rename goes on its table's retired list. */
typedef struct fk_fn {
	uint64_t state; /* kernel-ID steps 1–2 over the name */
	const char *name;
	uint32_t len;
	uint8_t path;
	atomic_uchar logged;
	struct fk_fn *retired; /* next on the table's retired list */
} fk_fn;

/* Open addressing, lock-free lookups; inserts and growth under a mutex. */
typedef struct fk_htab_arr {
	struct fk_htab_arr *prev; /* the array this one replaced (kept: readers) */
	size_t mask;
	_Atomic uintptr_t *keys;
	_Atomic(fk_fn *) *vals;
} fk_htab_arr;
typedef struct fk_htab {
	_Atomic(fk_htab_arr *) arr;
	size_t count;
	pthread_mutex_t mu;
	fk_fn *retired; /* entries replaced or not stored: kept, readers may hold them */
} fk_htab;

/* Handles are pointers (real driver) or encoded indices (simgpu): mix all
 * bits so neither alignment nor small indices cluster. */
static inline size_t fk_hash_ptr(uintptr_t k)
{
	uint64_t x = k;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x;
}

static inline fk_fn *fk_htab_get(fk_htab *t, uintptr_t key)
{
	fk_htab_arr *a = atomic_load_explicit(&t->arr, memory_order_acquire);
	if (FK_UNLIKELY(!a))
		return NULL;
	for (size_t i = fk_hash_ptr(key) & a->mask;; i = (i + 1) & a->mask) {
		uintptr_t k = atomic_load_explicit(&a->keys[i], memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&a->vals[i], memory_order_acquire);
		if (k == 0)
			return NULL;
	}
}
/* Insert or replace; returns the stored entry (NULL if the table is full and
 * cannot grow: fn is then kept on the retired list, valid, unreachable by
 * key). Key 0 is never stored: fn is returned, still the caller's. */
fk_fn *fk_htab_put(fk_htab *t, uintptr_t key, fk_fn *fn);
fk_fn *fk_fn_new(const char *name, size_t len, int path);
void fk_htab_init(fk_htab *t);
/* Free the table, its entries, replaced arrays and retired entries. Only
 * where no reader can be left (tests). */
void fk_htab_free(fk_htab *t);

#endif
