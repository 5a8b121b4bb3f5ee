/*
 * wait_test.c — precise host waits: a synchronize returns when the simulated
 * work is done, never before, and a few microseconds after at the median.
 * Measured for stream, event and context synchronization and a synchronous
 * device-to-host copy, against the event completion time the driver reports
 * (fikit_simgpu_event_time_ns). The bound asserted (p50 <= 50 us) is
 * generous because this machine's scheduler is shared; the real numbers are
 * printed (and simgpu-bench reports them too).
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <stdlib.h>
#include <time.h>

#define N 200

enum { BY_STREAM, BY_EVENT, BY_CTX, BY_COPY, BY_BLOCKING_EVENT };
static const char *names[] = {"stream sync", "event sync", "ctx sync", "sync DtoH copy", "blocking event"};

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void measure(int how, CUfunction f, CUstream s, CUdeviceptr d, void *h)
{
	int64_t late[N], cpu = 0, waited = 0;
	int early = 0, missing = 0;
	CUevent ev;
	OK(cuEventCreate(&ev, how == BY_BLOCKING_EVENT ? CU_EVENT_BLOCKING_SYNC : 0));
	srand(7 + how);
	for (int i = 0; i < N; i++) {
		uint64_t ns = 50000 + (uint64_t)(rand() % 450000); /* 50-500 us */
		OK(t_spin(f, s, ns));
		OK(cuEventRecord(ev, s));
		int64_t c0 = thread_cpu_ns(), w0 = t_now();
		switch (how) {
		case BY_STREAM: OK(cuStreamSynchronize(s)); break;
		case BY_EVENT: OK(cuEventSynchronize(ev)); break;
		case BY_CTX: OK(cuCtxSynchronize()); break;
		case BY_COPY: OK(cuMemcpyDtoH_v2(h, d, 8)); break; /* legacy stream: waits for s too */
		case BY_BLOCKING_EVENT: OK(cuEventSynchronize(ev)); break;
		}
		int64_t ret = t_now(), end = 0;
		cpu += thread_cpu_ns() - c0;
		waited += ret - w0;
		if (fikit_simgpu_event_time_ns((fikit_simgpu_event)ev, &end) != 0) {
			missing++;
			continue;
		}
		late[i - missing] = ret - end;
		early += ret < end;
	}
	int n = N - missing;
	CHECK(missing == 0, "%s: %d events without a completion time", names[how], missing);
	CHECK(early == 0, "%s: returned before the work was done %d times", names[how], early);
	int64_t p50 = t_percentile(late, n, 50), p99 = t_percentile(late, n, 99);
	printf("%-15s lateness p50 %6.2f us  p90 %7.2f us  p99 %8.2f us  max %8.2f us\n", names[how], p50 / 1e3,
	       t_percentile(late, n, 90) / 1e3, p99 / 1e3, late[n - 1] / 1e3);
	CHECK(p50 <= 50000 || how == BY_BLOCKING_EVENT, "%s: median lateness %lld ns", names[how], (long long)p50);
	printf("%-15s CPU while waiting: %.1f %% of the wait\n", names[how], 100.0 * (double)cpu / (double)waited);
	OK(cuEventDestroy_v2(ev));
}

/* The thread's CPU time over the wall time of waits for short kernels
 * (20-60 us: a precise wait spins through most of them), for a spinning
 * wait (share[0]) and a blocking-sync one (share[1]), alternated so that
 * whatever else the machine runs meanwhile slows both alike. */
static void cpu_shares(CUfunction f, CUstream s, double share[2])
{
	CUevent ev[2];
	OK(cuEventCreate(&ev[0], 0));
	OK(cuEventCreate(&ev[1], CU_EVENT_BLOCKING_SYNC));
	int64_t cpu[2] = {0, 0}, wall[2] = {0, 0};
	for (int i = 0; i < 2 * N; i++) {
		int k = i & 1;
		OK(t_spin(f, s, 20000 + (uint64_t)(rand() % 40000)));
		OK(cuEventRecord(ev[k], s));
		int64_t c0 = thread_cpu_ns(), w0 = t_now();
		OK(cuEventSynchronize(ev[k]));
		cpu[k] += thread_cpu_ns() - c0;
		wall[k] += t_now() - w0;
	}
	for (int k = 0; k < 2; k++) {
		OK(cuEventDestroy_v2(ev[k]));
		share[k] = (double)cpu[k] / (double)wall[k];
	}
}

int main(void)
{
	t_unique_shm("wait");
	OK(cuInit(0));
	CUcontext c;
	OK(cuCtxCreate_v2(&c, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	OK(cuStreamCreate(&s, 0)); /* blocking: the legacy-stream copy waits for it */
	CUdeviceptr d;
	char h[8];
	OK(cuMemAlloc_v2(&d, 8));
	for (int how = BY_STREAM; how <= BY_BLOCKING_EVENT; how++)
		measure(how, f, s, d, h);
	/* A blocking-sync event sleeps through: it spins on nothing. On a
	 * machine busy with other work a spinning waiter is descheduled too
	 * and its share falls: measured again, at most four times, a sleeping
	 * waiter that spins does so every time. A spinning wait here sleeps
	 * most of a 20-60 µs kernel away too ("Precise waits"), so the sleeper
	 * is judged at under two thirds of the spinner's share, not half: the
	 * two came close to half on a quiet VM (docs/simgpu.md). */
	double sh[2];
	for (int attempt = 1;; attempt++) {
		cpu_shares(f, s, sh);
		printf("waits for 20-60 us kernels: CPU %.0f %% of the wait spinning, %.0f %% with CU_EVENT_BLOCKING_SYNC\n",
		       100 * sh[0], 100 * sh[1]);
		if (3 * sh[1] < 2 * sh[0] || attempt == 5)
			break;
	}
	/* A sanitizer's interceptors cost the sleeping path's every call
	 * (futex, clock) a few µs of CPU: next to a short wait that is a large
	 * share of a CPU (docs/simgpu.md "Precise waits"). Host timing is judged
	 * in the plain build only (testutil.h). */
	CHECK(t_sanitized() || 3 * sh[1] < 2 * sh[0], "a blocking-sync wait used %.0f %% of a CPU, a spinning one %.0f %%", 100 * sh[1],
	      100 * sh[0]);
	OK(cuCtxDestroy_v2(c));
	return t_done("wait_test");
}
