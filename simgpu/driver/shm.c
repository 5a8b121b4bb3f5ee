/*
 * shm.c — the one simulated GPU per machine: a POSIX shared-memory segment
 * holding every device's model, guarded by one robust process-shared mutex.
 *
 * Creation race: every process takes flock(LOCK_EX) on the segment's fd while
 * it checks or initialises the header, and the creator writes the magic last.
 * A segment of another layout (an older build) or a half-initialised one (its
 * creator died) is unlinked and replaced; the flock holder first re-opens the
 * name and checks it still names the same inode, so two processes never both
 * replace one segment.
 *
 * Dead owners: a process killed while holding the lock leaves it EOWNERDEAD;
 * the next locker repairs every device model (dm_repair) and marks the mutex
 * consistent. Contexts whose owner process is gone (kill(pid,0) == ESRCH, or
 * a zombie) are dropped so their queued work stops occupying the device.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

sg_shm *sg_shared;

#define REAP_PERIOD_NS 50000000LL /* how often some process looks for dead owners */

static size_t shm_size(uint32_t ndev)
{
	return sizeof(sg_shm) + (size_t)ndev * sizeof(sg_shdev);
}

static int init_segment(int fd, const sg_env *e)
{
	size_t size = shm_size((uint32_t)e->p.devices);
	if (ftruncate(fd, (off_t)size) != 0)
		return -1;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	sg_shm *s = p;
	/* ftruncate of a fresh object gives zeroed pages; only headers are written. */
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->lock, &a);
	pthread_mutexattr_destroy(&a);
	s->params = e->p;
	s->ndev = (uint32_t)e->p.devices;
	s->size = size;
	s->layout = SG_SHM_LAYOUT;
	int64_t now = sg_now();
	for (uint32_t i = 0; i < s->ndev; i++)
		dm_init(&s->dev[i].dm, &e->p.model, now);
	__atomic_store_n(&s->magic, SG_SHM_MAGIC, __ATOMIC_RELEASE);
	sg_shared = s;
	return 0;
}

/* Is the segment behind fd (size st_size) one this build can use? */
static sg_shm *map_existing(int fd, off_t st_size)
{
	if ((size_t)st_size < sizeof(sg_shm))
		return NULL;
	sg_shm *h = mmap(NULL, sizeof(sg_shm), PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	int ok = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == SG_SHM_MAGIC && h->layout == SG_SHM_LAYOUT &&
		 h->ndev >= 1 && h->ndev <= SG_MAX_DEVICES && h->size == shm_size(h->ndev) &&
		 (size_t)st_size == h->size;
	size_t size = ok ? h->size : 0;
	munmap(h, sizeof(sg_shm));
	if (!ok)
		return NULL;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

int sg_shm_attach(const sg_env *e)
{
	for (int attempt = 0; attempt < 50; attempt++) {
		int fd = shm_open(e->shm_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr, "simgpu: shm_open %s: %s\n", e->shm_name, strerror(errno));
			return CUDA_ERROR_OPERATING_SYSTEM;
		}
		if (flock(fd, LOCK_EX) != 0) {
			close(fd);
			return CUDA_ERROR_OPERATING_SYSTEM;
		}
		/* The name may have been replaced while we waited for the flock. */
		struct stat a, b;
		int fd2 = shm_open(e->shm_name, O_RDWR | O_CLOEXEC, 0600);
		int same = fd2 >= 0 && fstat(fd, &a) == 0 && fstat(fd2, &b) == 0 && a.st_ino == b.st_ino &&
			   a.st_dev == b.st_dev;
		if (fd2 >= 0)
			close(fd2);
		if (!same) {
			close(fd);
			continue;
		}
		if (a.st_size == 0) {
			int rc = init_segment(fd, e);
			flock(fd, LOCK_UN);
			close(fd);
			return rc == 0 ? 0 : CUDA_ERROR_OPERATING_SYSTEM;
		}
		sg_shm *s = map_existing(fd, a.st_size);
		if (s) {
			flock(fd, LOCK_UN);
			close(fd);
			sg_shared = s;
			sg_env_compare(&e->p, &s->params, sg_env_explicit);
			return 0;
		}
		fprintf(stderr,
			"simgpu: replacing shared segment %s of another layout (an older build, or its creator "
			"died); processes still using it no longer share a device with new ones\n",
			e->shm_name);
		shm_unlink(e->shm_name);
		flock(fd, LOCK_UN);
		close(fd);
	}
	fprintf(stderr, "simgpu: could not attach shared segment %s\n", e->shm_name);
	return CUDA_ERROR_OPERATING_SYSTEM;
}

/* The previous holder died mid-update: make every model consistent again. */
static void recover(void)
{
	sg_shm *s = sg_shared;
	for (uint32_t i = 0; i < s->ndev; i++) {
		sg_shdev *d = &s->dev[i];
		dm_repair(&d->dm);
		for (int c = 0; c < DM_MAX_CTX; c++) {
			sg_ctxlog *l = &d->log[c];
			if (l->tail < l->head || l->tail - l->head > SG_SEGLOG)
				l->head = l->tail;
		}
	}
	s->repairs++;
	s->next_reap_ns = 0; /* the dead holder's contexts go at once */
}

void sg_lock(void)
{
	int r = pthread_mutex_lock(&sg_shared->lock);
	if (__builtin_expect(r == EOWNERDEAD, 0)) {
		recover();
		pthread_mutex_consistent(&sg_shared->lock);
	} else if (__builtin_expect(r != 0, 0)) {
		/* ENOTRECOVERABLE cannot happen (we always mark the mutex consistent);
		 * anything else is memory corruption. Do not run unlocked. */
		fprintf(stderr, "simgpu: shared lock failed: %s\n", strerror(r));
		abort();
	}
}

/* FIKIT_SIMGPU_VALIDATE=1 (tests): check every model's invariants before each
 * unlock and abort at the first violation, naming it. */
static void validate_all(void)
{
	for (uint32_t i = 0; i < sg_shared->ndev; i++) {
		int v = dm_validate(&sg_shared->dev[i].dm);
		if (v != 0) {
			fprintf(stderr, "simgpu: FIKIT_SIMGPU_VALIDATE: device %u invariant %d violated\n", i, v);
			abort();
		}
	}
}

void sg_unlock(void)
{
	if (__builtin_expect(sg_p.env.validate, 0))
		validate_all();
	pthread_mutex_unlock(&sg_shared->lock);
}

int sg_lock_timed(int64_t timeout_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + timeout_ns;
	ts.tv_sec = t / 1000000000LL;
	ts.tv_nsec = t % 1000000000LL;
	int r = pthread_mutex_timedlock(&sg_shared->lock, &ts);
	if (r == EOWNERDEAD) {
		recover();
		pthread_mutex_consistent(&sg_shared->lock);
		return 0;
	}
	return r;
}

/* 1 if pid no longer runs (gone, or a zombie waiting to be reaped). */
static int owner_dead(uint32_t pid)
{
	if (pid == 0)
		return 1;
	if (kill((pid_t)pid, 0) != 0)
		return errno == ESRCH;
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the command name may contain spaces */
	return p && (p[2] == 'Z' || p[2] == 'X');
}

void sg_reap_maybe(int64_t now, int force)
{
	sg_shm *s = sg_shared;
	if (!force && now < s->next_reap_ns)
		return;
	s->next_reap_ns = now + REAP_PERIOD_NS;
	for (uint32_t i = 0; i < s->ndev; i++) {
		sg_shdev *d = &s->dev[i];
		for (int c = 0; c < DM_MAX_CTX; c++) {
			uint32_t pid = dm_ctx_owner(&d->dm, c);
			if (!dm_ctx_gen(&d->dm, c) || pid == sg_p.pid)
				continue;
			/* Idle contexts only take a slot: a cheap kill() check is enough for
			 * them; zombies are looked for only where work is queued. */
			int dead;
			if (d->dm.pending_mask & (1ULL << c))
				dead = owner_dead(pid);
			else
				dead = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
			if (!dead)
				continue;
			dm_ctx_close(&d->dm, c, now, sg_sink, d);
			d->log[c].want = 0;
			d->log[c].head = d->log[c].tail;
			s->reaped++;
		}
	}
}

/* ---- extensions (simgpu.h) --------------------------------------------- */

#include "simgpu.h"

SG_EXPORT int fikit_simgpu_get_stats(int dev, fikit_simgpu_stats *out)
{
	if (!sg_shared || !out || dev < 0 || (uint32_t)dev >= sg_shared->ndev)
		return -1;
	sg_enter(dev);
	const dm_stats *s = &sg_dm(dev)->stats;
	out->kernels = s->kernels;
	out->segments = s->segments;
	out->switches = s->switches;
	out->preemptions = s->preemptions;
	out->busy_ns = s->busy_ns;
	out->switch_ns = s->switch_ns;
	out->repairs = sg_shared->repairs;
	out->reaped = sg_shared->reaped;
	sg_unlock();
	return 0;
}

SG_EXPORT int fikit_simgpu_ctx_totals_get(fikit_simgpu_ctx_totals *out)
{
	sg_ctx *c;
	if (!sg_shared || !out || sg_current_ctx(&c) != CUDA_SUCCESS || c->dmctx < 0)
		return -1;
	sg_enter(c->dev);
	dm_totals t;
	int r = dm_ctx_gen(sg_dm(c->dev), c->dmctx) == c->dmgen ? dm_ctx_totals(sg_dm(c->dev), c->dmctx, &t) : -1;
	sg_unlock();
	if (r != 0)
		return -1;
	out->kernels = t.kernels;
	out->busy_ns = t.busy_ns;
	out->blocked_ns = t.blocked_ns;
	return 0;
}

SG_EXPORT int fikit_simgpu_test_hold_lock(void)
{
	if (!sg_shared)
		return -1;
	sg_lock();
	return 0;
}
