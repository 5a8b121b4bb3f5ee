/*
 * bench.c — simgpu-bench: what simgpu itself costs, for `fikit bench` and
 * the docs.
 *
 *   launch      host time of one simulated kernel launch (lock, advance,
 *               enqueue, unlock), uncontended, amortized over many launches
 *   event       host time of one cuEventRecord (the hook brackets launches
 *               with two of them when profiling)
 *   wait        how late cuStreamSynchronize returns after the simulated
 *               work completed (p50/p90/p99/max)
 *
 * Usage: simgpu-bench [--json] [--launches N] [--waits N]
 * Uses a segment of its own unless FIKIT_SIMGPU_SHM is set.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void die(const char *what, CUresult r)
{
	fprintf(stderr, "simgpu-bench: %s: %s\n", what, t_errname(r));
	exit(1);
}

#define TRY(call)                                \
	do {                                     \
		CUresult r_ = (call);            \
		if (r_ != CUDA_SUCCESS)          \
			die(#call, r_);          \
	} while (0)

int main(int argc, char **argv)
{
	int json = 0, launches = 200000, waits = 1000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
			launches = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--waits") && i + 1 < argc)
			waits = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: simgpu-bench [--json] [--launches N] [--waits N]\n");
			return 2;
		}
	}
	if (launches < 1000 || waits < 10) {
		fprintf(stderr, "simgpu-bench: need --launches >= 1000 and --waits >= 10\n");
		return 2;
	}
	char shm[64] = "";
	if (!getenv("FIKIT_SIMGPU_SHM")) {
		snprintf(shm, sizeof shm, "/fikit-simgpu-bench-%d", (int)getpid());
		setenv("FIKIT_SIMGPU_SHM", shm, 1);
	}
	TRY(cuInit(0));
	CUcontext c;
	TRY(cuCtxCreate_v2(&c, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	TRY(cuStreamCreate(&s, 0));

	/* launch cost: zero-length kernels, so the device keeps up and the ring never fills */
	for (int i = 0; i < 1000; i++)
		TRY(t_spin(f, s, 0));
	TRY(cuStreamSynchronize(s));
	int64_t t0 = t_now();
	for (int i = 0; i < launches; i++)
		TRY(t_spin(f, s, 0));
	double launch_ns = (double)(t_now() - t0) / launches;
	TRY(cuStreamSynchronize(s));

	CUevent ev;
	TRY(cuEventCreate(&ev, 0));
	t0 = t_now();
	for (int i = 0; i < launches; i++)
		TRY(cuEventRecord(ev, s));
	double event_ns = (double)(t_now() - t0) / launches;
	TRY(cuStreamSynchronize(s));

	/* wait precision */
	int64_t *late = malloc(sizeof(int64_t) * (size_t)waits);
	int n = 0;
	srand(1);
	for (int i = 0; i < waits; i++) {
		TRY(t_spin(f, s, 20000 + (uint64_t)(rand() % 480000)));
		TRY(cuEventRecord(ev, s));
		TRY(cuStreamSynchronize(s));
		int64_t ret = t_now(), end;
		if (fikit_simgpu_event_time_ns((fikit_simgpu_event)ev, &end) == 0)
			late[n++] = ret - end;
	}
	int64_t p50 = t_percentile(late, n, 50), p90 = t_percentile(late, n, 90), p99 = t_percentile(late, n, 99),
		mx = late[n - 1];
	if (json)
		printf("{\"launch_ns\":%.1f,\"event_record_ns\":%.1f,\"wait_p50_ns\":%lld,\"wait_p90_ns\":%lld,"
		       "\"wait_p99_ns\":%lld,\"wait_max_ns\":%lld,\"waits\":%d,\"launches\":%d}\n",
		       launch_ns, event_ns, (long long)p50, (long long)p90, (long long)p99, (long long)mx, n, launches);
	else
		printf("simgpu launch:       %8.1f ns per launch (%d launches)\n"
		       "simgpu event record: %8.1f ns per record\n"
		       "simgpu wait:         p50 %.2f us, p90 %.2f us, p99 %.2f us, max %.2f us late (%d waits)\n",
		       launch_ns, launches, event_ns, p50 / 1e3, p90 / 1e3, p99 / 1e3, mx / 1e3, n);
	free(late);
	TRY(cuCtxDestroy_v2(c));
	if (shm[0])
		shm_unlink(shm);
	return 0;
}
