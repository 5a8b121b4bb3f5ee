/* kerneltimes.c — see kerneltimes.h. */
#include "kerneltimes.h"

static uint32_t slot_of(uint64_t id)
{
	/* Kernel IDs are already hashes (kernelid.c): their low bits spread. */
	return (uint32_t)(id ^ id >> 32) & (FK_KT_SLOTS - 1);
}

void fk_kt_clear(fk_ktab *k)
{
	atomic_store_explicit(&k->bound_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&k->have, 0, memory_order_release);
	atomic_store_explicit(&k->n, 0, memory_order_relaxed);
	for (uint32_t i = 0; i < FK_KT_SLOTS; i++)
		atomic_store_explicit(&k->e[i].key, 0, memory_order_release);
}

void fk_kt_put(fk_ktab *k, uint64_t bound_ns, uint64_t default_ns, const uint64_t *ids, const uint32_t *ns, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		uint64_t key = ids[j] + 1;
		if (!key)
			continue; /* an ID of all ones cannot be stored: it takes the default */
		uint32_t i = slot_of(ids[j]);
		for (uint32_t probe = 0; probe < FK_KT_SLOTS; probe++, i = (i + 1) & (FK_KT_SLOTS - 1)) {
			uint64_t cur = atomic_load_explicit(&k->e[i].key, memory_order_relaxed);
			if (cur == key) {
				atomic_store_explicit(&k->e[i].ns, ns[j], memory_order_relaxed);
				break;
			}
			if (cur == 0) {
				/* Keep a quarter free: probes stay short. */
				if (atomic_load_explicit(&k->n, memory_order_relaxed) >= FK_KT_SLOTS / 4 * 3)
					break;
				atomic_store_explicit(&k->e[i].ns, ns[j], memory_order_relaxed);
				atomic_store_explicit(&k->e[i].key, key, memory_order_release);
				atomic_fetch_add_explicit(&k->n, 1, memory_order_relaxed);
				break;
			}
		}
	}
	atomic_store_explicit(&k->default_ns, default_ns, memory_order_relaxed);
	atomic_store_explicit(&k->bound_ns, bound_ns, memory_order_release);
	atomic_store_explicit(&k->have, 1, memory_order_release);
}

uint64_t fk_kt_get(const fk_ktab *k, uint64_t id)
{
	uint64_t key = id + 1;
	uint32_t i = slot_of(id);
	for (uint32_t probe = 0; key && probe < FK_KT_SLOTS; probe++, i = (i + 1) & (FK_KT_SLOTS - 1)) {
		uint64_t cur = atomic_load_explicit(&k->e[i].key, memory_order_acquire);
		if (cur == key)
			return atomic_load_explicit(&k->e[i].ns, memory_order_relaxed);
		if (cur == 0)
			break;
	}
	return atomic_load_explicit(&k->default_ns, memory_order_relaxed);
}
