/* test_cache.c — the per-handle cache: lookups find what was stored (for
 * pointer-like and small encoded handles), a handle can be renamed, the
 * table grows, and readers running concurrently with inserts and growth
 * never see a wrong entry. */
#include "check.h"
#include "htab.h"
#include "kernelid.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fk_fn *named(uintptr_t k)
{
	char name[64];
	int n = snprintf(name, sizeof name, "k%lx", (unsigned long)k);
	return fk_fn_new(name, (size_t)n, 1);
}

static int matches(const fk_fn *fn, uintptr_t k)
{
	char name[64];
	snprintf(name, sizeof name, "k%lx", (unsigned long)k);
	return fn && !strcmp(fn->name, name) && fn->state == fk_kid_name_state(name, strlen(name));
}

static void basic(void)
{
	fk_htab t;
	fk_htab_init(&t);
	/* Encoded handles differ in low bits; pointers in high ones. */
	for (uintptr_t i = 1; i <= 20000; i++) {
		fk_htab_put(&t, i, named(i));
		fk_htab_put(&t, 0x7f0000000000 + i * 64, named(0x7f0000000000 + i * 64));
	}
	int bad = 0;
	for (uintptr_t i = 1; i <= 20000; i++)
		bad += !matches(fk_htab_get(&t, i), i) ||
		       !matches(fk_htab_get(&t, 0x7f0000000000 + i * 64), 0x7f0000000000 + i * 64);
	CHECK(bad == 0, "%d lookups wrong", bad);
	CHECK(fk_htab_get(&t, 20001) == NULL && fk_htab_get(&t, 0x1234567) == NULL, "absent handle found");
	CHECK(t.count == 40000, "count %zu", t.count);
	fk_fn *renamed = fk_fn_new("other", 5, 2);
	fk_htab_put(&t, 7, renamed);
	CHECK(fk_htab_get(&t, 7) == renamed && t.count == 40000, "rename");
	fk_fn *zero = named(0);
	CHECK(fk_htab_put(&t, 0, zero) == zero && fk_htab_get(&t, 0) == NULL, "key 0 must not be stored");
	free(zero); /* not stored: still ours */
	fk_htab_free(&t); /* the renamed-away entry is on the retired list: freed (LeakSanitizer) */
}

static fk_htab shared;
static atomic_int stop;
static atomic_long reader_errors, reader_hits;

#define WRITES 50000

static void *reader(void *arg)
{
	(void)arg;
	unsigned seed = 1;
	while (!atomic_load(&stop)) {
		uintptr_t k = (uintptr_t)(rand_r(&seed) % WRITES) + 1;
		fk_fn *fn = fk_htab_get(&shared, k * 16);
		if (fn) {
			atomic_fetch_add(&reader_hits, 1);
			if (!matches(fn, k * 16))
				atomic_fetch_add(&reader_errors, 1);
		}
	}
	return NULL;
}

static void concurrent(void)
{
	fk_htab_init(&shared);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	for (uintptr_t k = 1; k <= WRITES; k++)
		fk_htab_put(&shared, k * 16, named(k * 16));
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&reader_errors) == 0, "%ld wrong entries seen by readers", atomic_load(&reader_errors));
	CHECK(atomic_load(&reader_hits) > 0, "readers never hit (test did not overlap)");
	int missing = 0;
	for (uintptr_t k = 1; k <= WRITES; k++)
		missing += !matches(fk_htab_get(&shared, k * 16), k * 16);
	CHECK(missing == 0, "%d entries missing after growth", missing);
	/* Replaced arrays are chained behind the current one, not lost. */
	int arrays = 0;
	for (fk_htab_arr *a = atomic_load(&shared.arr); a; a = a->prev)
		arrays++;
	CHECK(arrays > 1, "%d arrays after growing past 1024 entries", arrays);
	fk_htab_free(&shared);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	basic();
	concurrent();
	return check_done("test_cache");
}
