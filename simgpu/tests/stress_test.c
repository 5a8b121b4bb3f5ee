/*
 * stress_test.c — many threads in two processes at once, with the shared
 * model checked at every unlock (FIKIT_SIMGPU_VALIDATE=1): each thread
 * launches on its own stream or on its per-thread default stream, records
 * events, makes other threads' streams wait on them, queries and
 * synchronizes. More ops are in flight than a context's ring holds, so
 * launches block on a full ring too. Every kernel must appear once on the
 * timeline, whole, with no two kernels overlapping.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define LAUNCHES 1500

static CUcontext ctx;
static CUfunction spin;
static CUevent events[THREADS];
static int failures;

static void *thread_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned seed = (unsigned)id * 7919u + (unsigned)getpid();
	if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	CUstream s = CU_STREAM_PER_THREAD;
	if (id % 2 == 0 && cuStreamCreate(&s, id == 0 ? CU_STREAM_NON_BLOCKING : 0) != CUDA_SUCCESS)
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < LAUNCHES; i++) {
		CUresult r = t_spin(spin, s, 1000 + rand_r(&seed) % 20000);
		int k = rand_r(&seed) % 100;
		if (r == CUDA_SUCCESS && k < 10)
			r = cuEventRecord(events[id], s);
		else if (r == CUDA_SUCCESS && k < 20)
			r = cuStreamWaitEvent(s, events[rand_r(&seed) % THREADS], 0);
		else if (r == CUDA_SUCCESS && k < 22)
			r = cuStreamSynchronize(s);
		else if (r == CUDA_SUCCESS && k < 30) {
			r = cuStreamQuery(s);
			if (r == CUDA_ERROR_NOT_READY)
				r = CUDA_SUCCESS;
		}
		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "thread %d op %d: %s\n", id, i, t_errname(r));
			__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	if (cuStreamSynchronize(s) != CUDA_SUCCESS)
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
	if (id % 2 == 0)
		cuStreamDestroy_v2(s);
	return NULL;
}

static int run_process(void)
{
	if (cuInit(0) != CUDA_SUCCESS || cuCtxCreate_v2(&ctx, 0, 0) != CUDA_SUCCESS)
		return 3;
	spin = t_spin_function();
	for (int i = 0; i < THREADS; i++)
		if (cuEventCreate(&events[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
			return 4;
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	if (cuCtxSynchronize() != CUDA_SUCCESS)
		return 5;
	return failures ? 6 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "worker"))
		return run_process();
	t_unique_shm("stress");
	char tl[64];
	snprintf(tl, sizeof tl, "/tmp/simgpu-stress-%d.jsonl", (int)getpid());
	unlink(tl);
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1);
	pid_t p[2];
	for (int i = 0; i < 2; i++) {
		p[i] = fork();
		if (p[i] == 0) {
			execl(argv[0], argv[0], "worker", (char *)NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < 2; i++) {
		int st;
		waitpid(p[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d status %d", i, st);
	}
	t_seg *v;
	int n = t_read_timeline(tl, &v);
	int kernels = 0, bad = 0;
	for (int i = 0; i < n; i++) {
		kernels += v[i].last;
		bad += v[i].start > v[i].end;
	}
	CHECK(kernels == 2 * THREADS * LAUNCHES, "%d kernels on the timeline, want %d", kernels, 2 * THREADS * LAUNCHES);
	CHECK(bad == 0);
	CHECK(t_overlaps(v, n) == 0, "kernels overlap");
	printf("stress: %d kernels in %d segments from %d threads in 2 processes, span %.1f ms\n", kernels, n,
	       THREADS, n ? (v[n - 1].end - v[0].start) / 1e6 : 0.0);
	free(v);
	unlink(tl);
	return t_done("stress_test");
}
