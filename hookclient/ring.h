/* ring.h — bounded lock-free multi-producer queue (D. Vyukov's bounded MPMC
 * queue). Launching threads are the producers; the sender thread consumes.
 * A full queue makes the producer drop and count, never wait: the holder
 * path must not block (design, "Hook"). Each cell carries its own sequence
 * number, so a producer only touches the shared enqueue position (one CAS)
 * and its own cell: no lock, no syscall, no allocation.
 *
 * FK_RING_DEFINE(name, T) defines a queue of T; T is copied in and out. */
#ifndef FIKIT_RING_H
#define FIKIT_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define FK_CACHELINE 64

#define FK_RING_DEFINE(name, T)                                                                    \
	typedef struct name##_cell {                                                               \
		_Atomic size_t turn;                                                               \
		T val;                                                                             \
	} name##_cell;                                                                             \
	typedef struct name {                                                                      \
		_Alignas(FK_CACHELINE) _Atomic size_t head; /* next to enqueue */                  \
		_Alignas(FK_CACHELINE) _Atomic size_t tail; /* next to dequeue */                  \
		_Alignas(FK_CACHELINE) _Atomic uint64_t dropped;                                   \
		size_t mask;                                                                       \
		name##_cell *cells;                                                                \
	} name;                                                                                    \
	/* Only when no thread uses the queue (init, or the child after fork). */                  \
	static inline void name##_reset(name *q)                                                   \
	{                                                                                          \
		for (size_t i = 0; i <= q->mask; i++)                                              \
			atomic_store_explicit(&q->cells[i].turn, i, memory_order_relaxed);         \
		atomic_store_explicit(&q->head, 0, memory_order_relaxed);                          \
		atomic_store_explicit(&q->tail, 0, memory_order_relaxed);                          \
		atomic_store_explicit(&q->dropped, 0, memory_order_relaxed);                       \
	}                                                                                          \
	/* cap must be a power of two. Returns 0, or -1 if out of memory. */                       \
	static inline int name##_init(name *q, size_t cap)                                         \
	{                                                                                          \
		q->cells = aligned_alloc(FK_CACHELINE,                                             \
					 (cap * sizeof(name##_cell) + FK_CACHELINE - 1) /                  \
						 FK_CACHELINE * FK_CACHELINE);                             \
		if (!q->cells)                                                                     \
			return -1;                                                                 \
		q->mask = cap - 1;                                                                 \
		name##_reset(q);                                                                   \
		return 0;                                                                          \
	}                                                                                          \
	/* Returns 1 if enqueued, 0 if full (counted in dropped). */                               \
	static inline int name##_push(name *q, const T *v)                                         \
	{                                                                                          \
		size_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);                 \
		for (;;) {                                                                         \
			name##_cell *c = &q->cells[pos & q->mask];                                 \
			size_t turn = atomic_load_explicit(&c->turn, memory_order_acquire);        \
			intptr_t dif = (intptr_t)turn - (intptr_t)pos;                             \
			if (dif == 0) {                                                            \
				if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, \
									  memory_order_relaxed,    \
									  memory_order_relaxed)) { \
					c->val = *v;                                               \
					atomic_store_explicit(&c->turn, pos + 1,                   \
							      memory_order_release);               \
					return 1;                                                  \
				}                                                                  \
			} else if (dif < 0) {                                                      \
				atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);   \
				return 0;                                                          \
			} else {                                                                   \
				pos = atomic_load_explicit(&q->head, memory_order_relaxed);        \
			}                                                                          \
		}                                                                                  \
	}                                                                                          \
	/* Returns 1 and fills *v, or 0 if empty. Safe with several consumers. */                 \
	static inline int name##_pop(name *q, T *v)                                                \
	{                                                                                          \
		size_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);                 \
		for (;;) {                                                                         \
			name##_cell *c = &q->cells[pos & q->mask];                                 \
			size_t turn = atomic_load_explicit(&c->turn, memory_order_acquire);        \
			intptr_t dif = (intptr_t)turn - (intptr_t)(pos + 1);                       \
			if (dif == 0) {                                                            \
				if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, \
									  memory_order_relaxed,    \
									  memory_order_relaxed)) { \
					*v = c->val;                                               \
					atomic_store_explicit(&c->turn, pos + q->mask + 1,         \
							      memory_order_release);               \
					return 1;                                                  \
				}                                                                  \
			} else if (dif < 0) {                                                      \
				return 0;                                                          \
			} else {                                                                   \
				pos = atomic_load_explicit(&q->tail, memory_order_relaxed);        \
			}                                                                          \
		}                                                                                  \
	}                                                                                          \
	/* A racy hint for the sender's "anything to do?" check. */                                \
	static inline int name##_maybe_nonempty(name *q)                                           \
	{                                                                                          \
		return atomic_load_explicit(&q->head, memory_order_relaxed) !=                     \
		       atomic_load_explicit(&q->tail, memory_order_relaxed);                       \
	}

#endif
