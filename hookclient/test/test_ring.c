/* test_ring.c — the launch ring: several producer threads, one consumer;
 * nothing lost or duplicated below capacity, drops counted (never a wait)
 * when full, per-producer order kept. */
#include "check.h"
#include "ring.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

typedef struct item {
	uint32_t producer, n;
	uint64_t pad[6]; /* the real record's size: 56 bytes */
} item;

FK_RING_DEFINE(tring, item)

#define PRODUCERS 4
#define PER 50000

static tring q;
static atomic_int go;

static void *produce(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	while (!atomic_load(&go))
		;
	for (uint32_t i = 0; i < PER; i++) {
		item it = {.producer = id, .n = i};
		while (!tring_push(&q, &it))
			sched_yield(); /* only in this test: retry so that every item arrives */
	}
	return NULL;
}

static void concurrent(void)
{
	CHECK(tring_init(&q, 1024) == 0, "init");
	pthread_t th[PRODUCERS];
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&th[i], NULL, produce, (void *)(uintptr_t)i);
	atomic_store(&go, 1);
	uint32_t next[PRODUCERS] = {0};
	long got = 0;
	int order_ok = 1;
	while (got < (long)PRODUCERS * PER) {
		item it;
		if (!tring_pop(&q, &it))
			continue;
		if (it.producer >= PRODUCERS || it.n != next[it.producer])
			order_ok = 0;
		else
			next[it.producer]++;
		got++;
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	item extra;
	CHECK(order_ok, "an item was lost, duplicated or reordered within its producer");
	CHECK(!tring_pop(&q, &extra), "more items than pushed");
	/* Retries above count as drops: a full ring never waits. */
	printf("test_ring: %ld items through a 1024-slot ring, %llu pushes found it full\n", got,
	       (unsigned long long)atomic_load(&q.dropped));
	free(q.cells);
}

/* Below capacity nothing is dropped, whatever the interleaving. */
static void *produce_once(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	while (!atomic_load(&go))
		;
	for (uint32_t i = 0; i < 256; i++) {
		item it = {.producer = id, .n = i};
		tring_push(&q, &it);
	}
	return NULL;
}

static void below_capacity(void)
{
	CHECK(tring_init(&q, 1024) == 0, "init");
	atomic_store(&go, 0);
	pthread_t th[PRODUCERS];
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&th[i], NULL, produce_once, (void *)(uintptr_t)i);
	atomic_store(&go, 1);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&q.dropped) == 0, "dropped %llu below capacity", (unsigned long long)atomic_load(&q.dropped));
	uint32_t next[PRODUCERS] = {0};
	item it;
	int n = 0;
	while (tring_pop(&q, &it)) {
		CHECK(it.producer < PRODUCERS && it.n == next[it.producer], "order");
		if (it.producer < PRODUCERS)
			next[it.producer]++;
		n++;
	}
	CHECK(n == PRODUCERS * 256, "got %d of %d", n, PRODUCERS * 256);
	free(q.cells);
	atomic_store(&go, 0);
}

static void full(void)
{
	tring r;
	CHECK(tring_init(&r, 8) == 0, "init");
	item it = {0};
	int ok = 0;
	for (int i = 0; i < 20; i++) {
		it.n = (uint32_t)i;
		ok += tring_push(&r, &it);
	}
	CHECK(ok == 8, "pushed %d into 8 slots", ok);
	CHECK(atomic_load(&r.dropped) == 12, "dropped %llu, want 12", (unsigned long long)atomic_load(&r.dropped));
	for (uint32_t i = 0; i < 8; i++)
		CHECK(tring_pop(&r, &it) && it.n == i, "item %u", i);
	CHECK(!tring_pop(&r, &it), "empty ring popped");
	CHECK(!tring_maybe_nonempty(&r), "empty ring looks non-empty");
	/* Wrap around many times. */
	for (uint32_t i = 0; i < 100; i++) {
		it.n = i;
		CHECK(tring_push(&r, &it), "push %u", i);
		CHECK(tring_pop(&r, &it) && it.n == i, "pop %u", i);
	}
	free(r.cells);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	full();
	below_capacity();
	concurrent();
	return check_done("test_ring");
}
