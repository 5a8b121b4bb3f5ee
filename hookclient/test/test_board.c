/* test_board.c — the board's C layout against
 * udp/board/testdata/layout.txt (which the Go side checks too),
 * and the two operations a launch makes on it. */
#include "board.h"
#include "check.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	long off, size;
} fields[] = {
	{"magic", offsetof(fk_board, magic), 8},
	{"version", offsetof(fk_board, version), 4},
	{"gpus", offsetof(fk_board, gpus), 4},
	{"generation", offsetof(fk_board, generation), 8},
	{"heartbeat_ns", offsetof(fk_board, heartbeat_ns), 8},
	{"header_size", offsetof(fk_board, gpu), 0},
	{"gpu_stride", sizeof(fk_board_gpu), 0},
	{"gpu.uuid", offsetof(fk_board_gpu, uuid), 16},
	{"gpu.level_ns", offsetof(fk_board_gpu, level_ns), 8 * FK_BOARD_LEVELS},
	{"gpu.registered", offsetof(fk_board_gpu, registered), 8},
	{"gpu.run_end_ns", offsetof(fk_board_gpu, run_end_ns), 8 * FK_BOARD_LEVELS},
	{"gpu.next_ns", offsetof(fk_board_gpu, next_ns), 8},
	{"gpu.switch_ns", offsetof(fk_board_gpu, switch_ns), 8},
	{"gpu.resume_task", offsetof(fk_board_gpu, resume_task), 4},
	{"gpu.flags", offsetof(fk_board_gpu, flags), 4},
	{"gpu.wake", offsetof(fk_board_gpu, wake), 4},
	{"gpu.sleepers", offsetof(fk_board_gpu, sleepers), 4},
	{"gpu.next_late_ns", offsetof(fk_board_gpu, next_late_ns), 8},
	{"gpu.cursor_ns", offsetof(fk_board_gpu, cursor_ns), 8},
	{"gpu.fill_until_ns", offsetof(fk_board_gpu, fill_until_ns), 8},
	{"gpu.bound_ns", offsetof(fk_board_gpu, bound_ns), 8},
	{"slots_offset", offsetof(fk_board, slot), 0},
	{"slot_stride", sizeof(fk_board_slot), 0},
	{"slots", FK_BOARD_SLOTS, 0},
	{"slot.task", offsetof(fk_board_slot, task), 4},
	{"slot.gen", offsetof(fk_board_slot, gen), 4},
	{"slot.wait_seq", offsetof(fk_board_slot, wait_seq), 4},
	{"slot.grant_seq", offsetof(fk_board_slot, grant_seq), 4},
	{"slot.credit", offsetof(fk_board_slot, credit), 4},
	{"slot.seen_ns", offsetof(fk_board_slot, seen_ns), 8},
	{"slot.expires_ns", offsetof(fk_board_slot, expires_ns), 8},
	{"slot.hold_ns", offsetof(fk_board_slot, hold_ns), 8},
	{"file_size", FK_BOARD_FILE_SIZE, 0},
};

int main(int argc, char **argv)
{
	check_init(argc, argv);
	FILE *f = check_open("udp/board/testdata/layout.txt");
	char line[512];
	int seen = 0;
	while (fgets(line, sizeof line, f)) {
		char name[64];
		unsigned long long a, b;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%63s %llu %llu", name, &a, &b) != 3) {
			CHECK(0, "bad line %s", line);
			continue;
		}
		seen++;
		if (!strcmp(name, "magic_value")) {
			CHECK(a == FK_BOARD_MAGIC, "magic %llu", a);
			continue;
		}
		int found = 0;
		for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
			if (!strcmp(fields[i].name, name)) {
				found = 1;
				CHECK(fields[i].off == (long)a && fields[i].size == (long)b, "%s: C %ld %ld, layout.txt %llu %llu",
				      name, fields[i].off, fields[i].size, a, b);
			}
		CHECK(found, "layout.txt field %s unknown to C", name);
	}
	fclose(f);
	CHECK(seen == (int)(sizeof fields / sizeof fields[0]) + 1, "layout.txt has %d fields", seen);
	CHECK(!memcmp(&(uint64_t){FK_BOARD_MAGIC}, "FIKITBD1", 8), "magic bytes");

	/* A level only moves forward; what is above a priority is the newest
	 * of the better levels, and nothing once the heartbeat is stale. */
	fk_board *b = calloc(1, sizeof *b);
	fk_board_gpu *g = &b->gpu[2];
	b->heartbeat_ns = 5000000000ull;
	fk_board_note(g, 0, 100);
	fk_board_note(g, 0, 50);
	fk_board_note(g, 3, 300);
	fk_board_note(g, 7, 700);
	CHECK(g->level_ns[0] == 100, "level 0 went back to %llu", (unsigned long long)g->level_ns[0]);
	CHECK(fk_board_above(b, g, 0, 5000000000ull) == 0, "nothing is above priority 0");
	CHECK(fk_board_above(b, g, 3, 5000000000ull) == 100, "above 3");
	CHECK(fk_board_above(b, g, 4, 5000000000ull) == 300, "above 4");
	CHECK(fk_board_above(b, g, 9, 5000000000ull) == 700, "above 9");
	CHECK(fk_board_above(b, g, 9, 5000000000ull + FK_BOARD_STALE_NS + 1) == 0, "a stale board shows nothing");

	/* Run ends move forward too; a priority launched since its latest run
	 * end is inside a run (a launch at the run end's very time starts the
	 * next one); one never launched is not. */
	fk_board_run_end(g, 0, 150);
	fk_board_run_end(g, 0, 120);
	CHECK(g->run_end_ns[0] == 150, "run end went back to %llu", (unsigned long long)g->run_end_ns[0]);
	CHECK(!fk_board_better_in_run(g, 3), "level 0 ended its run at 150 after launching at 100");
	CHECK(fk_board_better_in_run(g, 4), "level 3 launched at 300 and ended no run");
	fk_board_note(g, 0, 150);
	CHECK(fk_board_better_in_run(g, 1), "a launch at the run end's time is the next run");
	CHECK(!fk_board_better_in_run(g, 0), "nothing is better than 0");
	/* A run end wakes sleepers only when there are some (a syscall). */
	fk_board_run_end(g, 0, 200);
	CHECK(g->wake == 0, "woke with no sleeper");
	g->sleepers = 1;
	fk_board_run_end(g, 0, 210);
	CHECK(g->wake == 1, "a sleeper was not woken");
	free(b);
	return check_done("test_board");
}
