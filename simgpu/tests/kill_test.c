/*
 * kill_test.c — a process that dies does not wedge the others.
 *
 * 1. A worker takes the machine-wide lock (test hook) and is SIGKILLed while
 *    holding it; the survivor, blocked on the lock meanwhile, finishes its
 *    work right after the kill (robust mutex: EOWNERDEAD, repair).
 * 2. In fifo, a worker queues seconds of kernels ahead of the survivor's and
 *    is SIGKILLed mid-run; its context is dropped and the survivor's kernel
 *    runs within a bound far below the dead worker's queue. Once with the
 *    worker reaped (gone) and once left a zombie (not yet waited for).
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int worker(const char *role, int readyfd)
{
	if (cuInit(0) != CUDA_SUCCESS)
		return 3;
	CUcontext c;
	if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS)
		return 4;
	CUfunction f = t_spin_function();
	if (!strcmp(role, "holder")) {
		OK(t_spin(f, NULL, 1000000));
		if (fikit_simgpu_test_hold_lock() != 0)
			return 5;
	} else { /* "queuer": 200 x 20 ms = 4 s of device time */
		for (int i = 0; i < 200; i++)
			if (t_spin(f, NULL, 20000000) != CUDA_SUCCESS)
				return 6;
	}
	if (write(readyfd, "r", 1) != 1)
		return 7;
	for (;;)
		pause();
}

static pid_t spawn(const char *self, const char *role, int *readfd)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		char fd[16];
		snprintf(fd, sizeof fd, "%d", p[1]);
		execl(self, self, role, fd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*readfd = p[0];
	return pid;
}

static int wait_ready(int fd)
{
	char b;
	int ok = read(fd, &b, 1) == 1;
	close(fd);
	return ok;
}

static CUfunction spinf;
static CUcontext ctx;

/* The survivor's work: one 1 ms kernel and a synchronize; returns its duration. */
static void *survive(void *arg)
{
	int64_t *took = arg;
	int64_t t0 = t_now();
	CUresult r = cuCtxSetCurrent(ctx); /* contexts are current per thread */
	if (r == CUDA_SUCCESS)
		r = t_spin(spinf, NULL, 1000000);
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(NULL);
	*took = r == CUDA_SUCCESS ? t_now() - t0 : -1;
	return NULL;
}

static void lock_holder(const char *self)
{
	int fd;
	pid_t w = spawn(self, "holder", &fd);
	CHECK(wait_ready(fd), "holder did not get ready");
	int64_t took = 0;
	pthread_t th;
	pthread_create(&th, NULL, survive, &took); /* blocks on the held lock */
	usleep(200000);
	int64_t killed = t_now();
	kill(w, SIGKILL);
	pthread_join(th, NULL);
	int64_t after = t_now() - killed;
	int st;
	waitpid(w, &st, 0);
	CHECK(WIFSIGNALED(st), "holder was not killed");
	CHECK(took > 0, "survivor failed");
	/* 1 ms of work plus whatever this loaded machine adds; a wedge never returns */
	CHECK(after < 2000000000LL, "survivor finished %lld ns after the kill", (long long)after);
	fikit_simgpu_stats s;
	CHECK(fikit_simgpu_get_stats(0, &s) == 0 && s.repairs >= 1, "no lock repair recorded");
	printf("lock holder killed: survivor done %.3f ms after the kill (repairs %llu)\n", after / 1e6,
	       (unsigned long long)s.repairs);
}

static void queuer(const char *self, int zombie)
{
	int fd;
	pid_t w = spawn(self, "queuer", &fd);
	CHECK(wait_ready(fd), "queuer did not get ready");
	fikit_simgpu_stats before;
	fikit_simgpu_get_stats(0, &before);
	kill(w, SIGKILL);
	int st;
	if (!zombie)
		waitpid(w, &st, 0);
	int64_t took = 0;
	survive(&took);
	if (zombie)
		waitpid(w, &st, 0);
	fikit_simgpu_stats after;
	fikit_simgpu_get_stats(0, &after);
	CHECK(took > 0, "survivor failed");
	/* The dead worker queued 4 s ahead of us in fifo order. */
	CHECK(took < 1500000000LL, "%s: survivor took %lld ns", zombie ? "zombie" : "reaped", (long long)took);
	CHECK(after.reaped > before.reaped, "%s: the dead context was not dropped", zombie ? "zombie" : "reaped");
	printf("queuer killed (%s): survivor's 1 ms kernel done after %.3f ms\n", zombie ? "left a zombie" : "reaped",
	       took / 1e6);
}

int main(int argc, char **argv)
{
	if (argc == 3)
		return worker(argv[1], atoi(argv[2]));
	t_unique_shm("kill");
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1);
	setenv("FIKIT_SIMGPU_MODEL", "fifo", 1);
	OK(cuInit(0));
	OK(cuCtxCreate_v2(&ctx, 0, 0));
	spinf = t_spin_function();
	lock_holder(argv[0]);
	queuer(argv[0], 0);
	queuer(argv[0], 1);
	OK(cuCtxDestroy_v2(ctx));
	return t_done("kill_test");
}
