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

#define N 200

enum { BY_STREAM, BY_EVENT, BY_CTX, BY_COPY };
static const char *names[] = {"stream sync", "event sync", "ctx sync", "sync DtoH copy"};

static void measure(int how, CUfunction f, CUstream s, CUdeviceptr d, void *h)
{
	int64_t late[N];
	int early = 0, missing = 0;
	CUevent ev;
	OK(cuEventCreate(&ev, 0));
	srand(7 + how);
	for (int i = 0; i < N; i++) {
		uint64_t ns = 50000 + (uint64_t)(rand() % 450000); /* 50-500 us */
		OK(t_spin(f, s, ns));
		OK(cuEventRecord(ev, s));
		switch (how) {
		case BY_STREAM: OK(cuStreamSynchronize(s)); break;
		case BY_EVENT: OK(cuEventSynchronize(ev)); break;
		case BY_CTX: OK(cuCtxSynchronize()); break;
		case BY_COPY: OK(cuMemcpyDtoH_v2(h, d, 8)); break; /* legacy stream: waits for s too */
		}
		int64_t ret = t_now(), end = 0;
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
	CHECK(p50 <= 50000, "%s: median lateness %lld ns", names[how], (long long)p50);
	OK(cuEventDestroy_v2(ev));
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
	for (int how = BY_STREAM; how <= BY_COPY; how++)
		measure(how, f, s, d, h);
	OK(cuCtxDestroy_v2(c));
	return t_done("wait_test");
}
