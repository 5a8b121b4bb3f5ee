/* board.c — mapping the daemon's board (board.h). Called from the sender
 * thread when a RegisterAck names a board; never on a launch path. */
#include "hook.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MAPS 4

static struct {
	uint64_t gen;
	fk_board *b;
} maps[MAX_MAPS];
static pthread_mutex_t maps_mu = PTHREAD_MUTEX_INITIALIZER;

static fk_board *map_fd(int fd, const char *path, uint64_t gen);

static fk_board *map_file(const char *path, uint64_t gen)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fk_log(FK_LOG_INFO, "board %s: cannot open (%m); gating by UDP only", path);
		return NULL;
	}
	return map_fd(fd, path, gen);
}

/* map_fd maps and checks the board open on fd, and closes fd. */
static fk_board *map_fd(int fd, const char *path, uint64_t gen)
{
	struct stat st;
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= FK_BOARD_FILE_SIZE)
		p = mmap(NULL, FK_BOARD_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fk_log(FK_LOG_INFO, "board %s: not a board file; gating by UDP only", path);
		return NULL;
	}
	fk_board *b = p;
	if (atomic_load_explicit(&b->magic, memory_order_acquire) != FK_BOARD_MAGIC ||
	    b->version != FK_BOARD_VERSION || b->gpus != FK_BOARD_GPUS ||
	    atomic_load_explicit(&b->generation, memory_order_relaxed) != gen) {
		fk_log(FK_LOG_INFO, "board %s: another daemon's, or another layout; gating by UDP only", path);
		munmap(p, FK_BOARD_FILE_SIZE);
		return NULL;
	}
	return b;
}

static fk_board *map_cached(const char *name, int fd, uint64_t gen, unsigned gpu, const uint8_t uuid[16]);

fk_board *fk_board_map_fd(int fd, uint64_t gen, unsigned gpu, const uint8_t uuid[16])
{
	if (fd < 0)
		return NULL;
	if (fk_cfg.board_off || gpu >= FK_BOARD_GPUS || !gen) {
		close(fd);
		return NULL;
	}
	return map_cached(FK_BOARD_IN_ANSWER, fd, gen, gpu, uuid);
}

fk_board *fk_board_map(const char *path, size_t len, uint64_t gen, unsigned gpu, const uint8_t uuid[16])
{
	if (fk_cfg.board_off || !len || len >= 4096 || gpu >= FK_BOARD_GPUS || !gen)
		return NULL;
	char name[4096];
	memcpy(name, path, len);
	name[len] = '\0';
	if (memchr(name, '\0', len))
		return NULL;
	return map_cached(name, -1, gen, gpu, uuid);
}

/* map_cached maps the board of generation gen once: by name, or from fd
 * (taken: closed here whatever happens). */
static fk_board *map_cached(const char *name, int fd, uint64_t gen, unsigned gpu, const uint8_t uuid[16])
{
	pthread_mutex_lock(&maps_mu);
	fk_board *b = NULL;
	int free_slot = -1;
	for (int i = 0; i < MAX_MAPS && !b; i++) {
		if (maps[i].b && maps[i].gen == gen)
			b = maps[i].b;
		else if (!maps[i].b && free_slot < 0)
			free_slot = i;
	}
	if (!b && (b = fd >= 0 ? map_fd(fd, name, gen) : map_file(name, gen))) {
		/* A daemon restarted more often than MAX_MAPS: the oldest mapping
		 * stays (a task may still point into it); the newest replaces
		 * slot 0's record only, never unmapping. */
		int i = free_slot >= 0 ? free_slot : 0;
		maps[i].gen = gen;
		maps[i].b = b;
	} else if (fd >= 0 && b) {
		close(fd); /* this generation is mapped already */
	}
	pthread_mutex_unlock(&maps_mu);
	if (b && memcmp(b->gpu[gpu].uuid, uuid, 16) != 0) {
		fk_log(FK_LOG_INFO, "board %s: section %u is another GPU's; gating by UDP only", name, gpu);
		return NULL;
	}
	return b;
}

