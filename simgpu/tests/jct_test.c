/*
 * jct_test.c — one process alone on the device: the job completion time of
 * a sequence of launches matches the analytic model
 *     start_i = max(launch_i + launch latency, end_{i-1}),  end_i = start_i + d_i
 * within 3 %, for a launch-bound sequence (host time between launches exceeds
 * the kernels) and a device-bound one (kernels queue up), and every kernel
 * runs exactly its spin duration on the timeline. The JCT compared is the
 * device's (first launch to last kernel end, from the timeline); the host's
 * synchronize must not return before it, and its lateness is wait_test's job.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <stdlib.h>
#include <unistd.h>

#define N 300

static char tl[64];

static void sequence(const char *what, CUfunction f, CUstream s, const int64_t *dur, int64_t host_ns)
{
	int64_t launch[N];
	truncate(tl, 0);
	int64_t t0 = t_now();
	for (int i = 0; i < N; i++) {
		if (host_ns)
			t_spin_for(host_ns);
		launch[i] = t_now();
		OK(t_spin(f, s, (uint64_t)dur[i]));
	}
	OK(cuStreamSynchronize(s));
	int64_t jct = t_now() - t0;
	int64_t end = 0;
	for (int i = 0; i < N; i++) {
		int64_t start = launch[i] + 4000 > end ? launch[i] + 4000 : end;
		end = start + dur[i];
	}
	int64_t analytic = end - t0;

	fikit_simgpu_timeline_flush();
	t_seg *v;
	int n = t_read_timeline(tl, &v);
	CHECK(n == N, "%s: %d timeline records", what, n);
	if (n != N)
		return;
	/* The device side is the model: it must match the analytic JCT. */
	int64_t device = v[n - 1].end - t0;
	double err = (double)(device - analytic) / (double)analytic;
	printf("%s: device JCT %.3f ms, analytic %.3f ms, error %+.3f%%; host saw %.3f ms\n", what, device / 1e6,
	       analytic / 1e6, err * 100, jct / 1e6);
	CHECK(err > -0.03 && err < 0.03, "%s: JCT %lld ns vs analytic %lld ns", what, (long long)device,
	      (long long)analytic);
	/* The host's synchronize never returns early; how late it is depends on this
	 * machine's scheduler (wait_test measures it), so the bound here is generous. */
	CHECK(jct >= device && jct - device < analytic * 3 / 100 + 20000000, "%s: sync returned %lld ns after the end",
	      what, (long long)(jct - device));
	int exact = 0, late = 0;
	for (int i = 0; i < n; i++) {
		exact += v[i].end - v[i].start == dur[i] && v[i].last && v[i].seg == 0;
		/* the device never starts a kernel before its launch + latency */
		late += v[i].start < launch[i] + 4000;
	}
	CHECK(exact == N, "%s: %d of %d kernels ran exactly their duration in one segment", what, exact, N);
	CHECK(late == 0, "%s: %d kernels started before launch + latency", what, late);
	CHECK(t_overlaps(v, n) == 0);
	int blocked = 0;
	for (int i = 0; i < n; i++)
		blocked += v[i].blocked != 0 || v[i].arrive < launch[i] + 4000 || v[i].arrive > v[i].start;
	CHECK(blocked == 0, "%s: %d kernels alone on the device blocked, or arrived off their launch", what, blocked);
	free(v);
}

/* A kernel of a second context that arrives while the first context's long
 * kernel runs is blocked for the rest of it plus the switch: its record's
 * blocked_ns says so, and so do its context's totals. */
static void contended(CUcontext a, CUfunction fa, CUstream sa)
{
	truncate(tl, 0);
	CUcontext b;
	OK(cuCtxCreate_v2(&b, 0, 0));
	CUfunction fb = t_spin_function();
	fikit_simgpu_ctx_totals before;
	CHECK(fikit_simgpu_ctx_totals_get(&before) == 0 && before.kernels == 0 && before.blocked_ns == 0);
	OK(cuCtxSetCurrent(a));
	OK(t_spin(fa, sa, 2000000));
	t_spin_for(100000);
	OK(cuCtxSetCurrent(b));
	int64_t launch = t_now();
	OK(t_spin(fb, NULL, 100000));
	OK(cuCtxSynchronize());
	fikit_simgpu_ctx_totals tb;
	CHECK(fikit_simgpu_ctx_totals_get(&tb) == 0);
	fikit_simgpu_timeline_flush();
	t_seg *v;
	int n = t_read_timeline(tl, &v);
	CHECK(n == 2, "contended: %d timeline records", n);
	if (n == 2) {
		t_seg *k = &v[1]; /* b's kernel starts second */
		CHECK(k->arrive >= launch + 4000 && k->blocked == k->start - k->arrive && k->blocked >= 25000,
		      "contended: b's kernel arrived %lld, started %lld, blocked %lld", k->arrive, k->start, k->blocked);
		CHECK(v[0].blocked == 0, "contended: a's kernel blocked %lld", v[0].blocked);
		CHECK(tb.kernels == 1 && tb.blocked_ns == k->blocked && tb.busy_ns == 100000,
		      "contended: b's totals kernels %llu busy %lld blocked %lld", (unsigned long long)tb.kernels,
		      (long long)tb.busy_ns, (long long)tb.blocked_ns);
	}
	free(v);
	OK(cuCtxDestroy_v2(b));
	OK(cuCtxSetCurrent(a));
}

int main(void)
{
	t_unique_shm("jct");
	snprintf(tl, sizeof tl, "/tmp/simgpu-jct-%d.jsonl", (int)getpid());
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	/* The expectations are the legacy preset's (4 us launch latency, a
	 * 25 us switch): pinned, whatever the default preset is. */
	setenv("FIKIT_SIMGPU_DEVICE", "legacy", 1);
	setenv("FIKIT_SIMGPU_LAUNCH_US", "4", 1);
	OK(cuInit(0));
	CUcontext c;
	OK(cuCtxCreate_v2(&c, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	OK(cuStreamCreate(&s, 0));
	int64_t dur[N];
	srand(42);
	for (int i = 0; i < N; i++)
		dur[i] = 10000 + rand() % 20000; /* 10-30 us kernels */
	sequence("launch-bound (60 us host time per launch)", f, s, dur, 60000);
	for (int i = 0; i < N; i++)
		dur[i] = 50000 + rand() % 100000; /* 50-150 us kernels */
	sequence("device-bound (back-to-back launches)", f, s, dur, 0);
	for (int i = 0; i < N; i++)
		dur[i] = (i % 3 == 0) ? 200000 : 5000; /* a layer pattern: long, short, short */
	sequence("mixed (40 us host time per launch)", f, s, dur, 40000);
	contended(c, f, s);
	OK(cuCtxDestroy_v2(c));
	unlink(tl);
	return t_done("jct_test");
}
