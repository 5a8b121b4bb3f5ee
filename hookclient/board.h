/* board.h — the board a daemon shares with the hooks on its host
 * (docs/design.md "Board"; layout: udp/board/layout.go).
 * The daemon writes the header and its heartbeat; hooks write, per GPU and
 * priority level, the time of the level's latest launch (a holder's) or
 * launch request, so that a lower-priority permission is seen to be stale
 * in the time of a cache miss, not of a round trip. */
#ifndef FIKIT_BOARD_H
#define FIKIT_BOARD_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The layout: structs, sizes and checked offsets, generated from
 * udp/board/layout.go. */
#include "board_gen.h"

/* A board whose heartbeat is older than this is a dead daemon's: ignored. */
#define FK_BOARD_STALE_NS 1000000000ull

/* A waiter slot (udp/board/board.go): task t's is slot t % FK_BOARD_SLOTS,
 * while its task word is t. One thread of the task waits in it at a time:
 * it writes the seq it asks for into wait_seq before the LaunchRequest goes,
 * and the daemon answers that request here — grant_seq (written last)
 * with credit and gate, or hold_ns — bumping gen, the futex word it wakes. */

/* The latest launch of a priority better than prio (0 if none, or if the
 * daemon behind the board is gone). */
static inline uint64_t fk_board_above(const fk_board *b, const fk_board_gpu *g, int prio, uint64_t now)
{
	uint64_t hb = atomic_load_explicit(&b->heartbeat_ns, memory_order_relaxed);
	if (now > hb + FK_BOARD_STALE_NS)
		return 0;
	uint64_t m = 0;
	for (int p = 0; p < prio; p++) {
		uint64_t v = atomic_load_explicit(&g->level_ns[p], memory_order_relaxed);
		m = v > m ? v : m;
	}
	return m;
}

/* Level prio launched (or asked to) at now: the word only moves forward. */
static inline void fk_board_note(fk_board_gpu *g, int prio, uint64_t now)
{
	_Atomic uint64_t *w = &g->level_ns[prio];
	uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
	while (cur < now && !atomic_compare_exchange_weak_explicit(w, &cur, now, memory_order_release,
								     memory_order_relaxed))
		;
}

/* Whether the daemon behind the board is alive at now. */
static inline int fk_board_alive(const fk_board *b, uint64_t now)
{
	return now <= atomic_load_explicit(&b->heartbeat_ns, memory_order_relaxed) + FK_BOARD_STALE_NS;
}

/* Level prio's run ended at now (a host sync returned): the word only moves
 * forward. Threads of lower priorities sleeping on the GPU's wake word (a
 * waiter that may resume) are woken: one syscall, only when one sleeps. */
static inline void fk_board_run_end(fk_board_gpu *g, int prio, uint64_t now)
{
	_Atomic uint64_t *w = &g->run_end_ns[prio];
	uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
	while (cur < now && !atomic_compare_exchange_weak_explicit(w, &cur, now, memory_order_seq_cst,
								     memory_order_relaxed))
		;
	/* After the run end is visible: a sleeper counted itself before it
	 * looked at the run ends (waiter.c), so one of us sees the other. */
	if (atomic_load_explicit(&g->sleepers, memory_order_seq_cst)) {
		atomic_fetch_add_explicit(&g->wake, 1, memory_order_seq_cst);
		syscall(SYS_futex, &g->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
}

/* Whether a priority better than prio is inside a run: launched (or asked
 * to) since its latest run end. A launch at the very time of a run end
 * starts the next. */
static inline int fk_board_better_in_run(const fk_board_gpu *g, int prio)
{
	for (int p = 0; p < prio; p++) {
		uint64_t l = atomic_load_explicit(&g->level_ns[p], memory_order_relaxed);
		if (l && l >= atomic_load_explicit(&g->run_end_ns[p], memory_order_relaxed))
			return 1;
	}
	return 0;
}

/* Map the board at path (len bytes, not NUL-terminated) if it is the one of
 * generation gen and its section gpu is the GPU uuid; NULL otherwise (the
 * hook then goes by UDP alone). Mappings are kept and shared per
 * generation. */
fk_board *fk_board_map(const char *path, size_t len, uint64_t gen, unsigned gpu, const uint8_t uuid[16]);
/* The RegisterAck's board name when the board's descriptor came with it
 * (SCM_RIGHTS, a daemon on a unix socket: udp.BoardInAnswer). */
#define FK_BOARD_IN_ANSWER "fd:scm_rights"
/* fk_board_map for a descriptor (-1: none came: NULL); it takes fd. */
fk_board *fk_board_map_fd(int fd, uint64_t gen, unsigned gpu, const uint8_t uuid[16]);

#endif
