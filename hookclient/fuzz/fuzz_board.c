/* fuzz_board.c — the board reader (board.h) on a board file of any
 * content: fk_board_map validates it (magic, version, layout, generation,
 * the section's GPU), and the launch path's read (fk_board_above) and a
 * waiter's read of its slot take whatever words a broken or hostile daemon
 * left there without a crash or a read outside the file. Input: one byte
 * choosing generation, section and priority, then the file's bytes (cut or
 * zero-padded to its size). Seeds: boards built from
 * udp/board/testdata/layout.txt. */
#include "board.h"
#include "config.h"
#include "fuzz.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

fk_config fk_cfg; /* the hook's (intercept.c): board on */

static char path[64];
static void remove_board(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0) {
		snprintf(path, sizeof path, "/dev/shm/fikit-fuzz-board-%d", (int)getpid());
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return 0;
		atexit(remove_board);
	}
	if (size < 1)
		return 0;
	uint8_t file[FK_BOARD_FILE_SIZE] = {0};
	size_t n = size - 1 < sizeof file ? size - 1 : sizeof file;
	memcpy(file, data + 1, n);
	/* Rewritten in place: a mapping the reader kept sees the new bytes. */
	if (pwrite(fd, file, sizeof file, 0) != (ssize_t)sizeof file)
		return 0;
	/* At most four generations, as from a daemon restarted thrice: the
	 * reader keeps a mapping per generation for the process's life. */
	uint64_t gen = 1 + (data[0] & 3);
	unsigned gpu = (data[0] >> 2) & 15;
	uint8_t uuid[16];
	memcpy(uuid, file + 64 + 128 * gpu, 16);
	fk_board *b = fk_board_map(path, strlen(path), gen, gpu, uuid);
	if (b) {
		uint64_t now = 0;
		memcpy(&now, file + 24, 8); /* around the heartbeat */
		now += (uint64_t)(data[0] >> 6) * 700000000ull;
		for (int prio = 0; prio < FK_BOARD_LEVELS; prio++) {
			uint64_t above = fk_board_above(b, &b->gpu[gpu], prio, now);
			if (prio == 0)
				FK_FUZZ_CHECK(above == 0, "priority 0 has something above it");
		}
		/* What a waiter reads of its slot. */
		for (int s = 0; s < FK_BOARD_SLOTS; s++) {
			fk_board_slot *sl = &b->slot[s];
			volatile uint64_t sink = atomic_load(&sl->task) + atomic_load(&sl->gen) +
						 atomic_load(&sl->grant_seq) + atomic_load(&sl->credit) +
						 atomic_load(&sl->seen_ns) + atomic_load(&sl->expires_ns) +
						 atomic_load(&sl->hold_ns);
			(void)sink;
		}
	}
	return 0;
}
