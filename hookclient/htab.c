/* htab.c — see htab.h. */
#include "htab.h"

#include "kernelid.h"

#include <stdlib.h>
#include <string.h>

static fk_htab_arr *arr_new(size_t cap)
{
	fk_htab_arr *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->keys = calloc(cap, sizeof *a->keys);
	a->vals = calloc(cap, sizeof *a->vals);
	if (!a->keys || !a->vals) {
		free(a->keys);
		free(a->vals);
		free(a);
		return NULL;
	}
	a->mask = cap - 1;
	return a;
}

void fk_htab_init(fk_htab *t)
{
	pthread_mutex_init(&t->mu, NULL);
	t->count = 0;
	t->retired = NULL;
	atomic_store(&t->arr, arr_new(1024));
}

void fk_htab_free(fk_htab *t)
{
	fk_htab_arr *a = atomic_exchange(&t->arr, NULL);
	for (size_t i = 0; a && i <= a->mask; i++)
		free(atomic_load_explicit(&a->vals[i], memory_order_relaxed));
	while (a) {
		fk_htab_arr *prev = a->prev;
		free(a->keys);
		free(a->vals);
		free(a);
		a = prev;
	}
	for (fk_fn *f = t->retired, *next; f; f = next) {
		next = f->retired;
		free(f);
	}
	t->retired = NULL;
	t->count = 0;
	pthread_mutex_destroy(&t->mu);
}

/* Under t->mu. Values are stored before keys (release), so a reader that
 * finds the key finds the value. */
static void arr_insert(fk_htab_arr *a, uintptr_t key, fk_fn *fn, size_t *count, fk_fn **retired)
{
	for (size_t i = fk_hash_ptr(key) & a->mask;; i = (i + 1) & a->mask) {
		uintptr_t k = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
		if (k == key) {
			fk_fn *old = atomic_exchange_explicit(&a->vals[i], fn, memory_order_acq_rel);
			if (retired && old && old != fn) { /* a rename: readers may still hold it */
				old->retired = *retired;
				*retired = old;
			}
			return;
		}
		if (k == 0) {
			atomic_store_explicit(&a->vals[i], fn, memory_order_release);
			atomic_store_explicit(&a->keys[i], key, memory_order_release);
			if (count)
				(*count)++;
			return;
		}
	}
}

fk_fn *fk_htab_put(fk_htab *t, uintptr_t key, fk_fn *fn)
{
	if (!fn || key == 0)
		return fn;
	pthread_mutex_lock(&t->mu);
	fk_htab_arr *a = atomic_load_explicit(&t->arr, memory_order_relaxed);
	if (a && (t->count + 1) * 2 > a->mask + 1) {
		/* Grow: readers keep using the old array until the new one is
		 * published; the old one is never freed (a reader may be in it),
		 * only chained behind the new one: their sum is below its size. */
		fk_htab_arr *b = arr_new((a->mask + 1) * 2);
		if (b) {
			for (size_t i = 0; i <= a->mask; i++) {
				uintptr_t k = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
				if (k)
					arr_insert(b, k, atomic_load_explicit(&a->vals[i], memory_order_relaxed),
						   NULL, NULL);
			}
			b->prev = a;
			atomic_store_explicit(&t->arr, b, memory_order_release);
			a = b;
		}
	}
	if (a && (t->count + 1) * 4 <= (a->mask + 1) * 3) {
		arr_insert(a, key, fn, &t->count, &t->retired);
	} else {
		/* Full and cannot grow: the caller names it again next time, and
		 * may use fn meanwhile. */
		fn->retired = t->retired;
		t->retired = fn;
		fn = NULL;
	}
	pthread_mutex_unlock(&t->mu);
	return fn;
}

fk_fn *fk_fn_new(const char *name, size_t len, int path)
{
	fk_fn *fn = calloc(1, sizeof *fn + len + 1);
	if (!fn)
		return NULL;
	char *copy = (char *)(fn + 1);
	memcpy(copy, name, len);
	copy[len] = '\0';
	fn->name = copy;
	fn->len = (uint32_t)len;
	fn->state = fk_kid_name_state(name, len);
	fn->path = (uint8_t)path;
	return fn;
}

