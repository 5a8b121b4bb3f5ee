/*
 * multiproc_test.c — two processes share the one simulated GPU. On the
 * timeline both make progress, kernels never overlap on the device, each
 * stream runs in order, each kernel's segments add up to its duration, a
 * switch between processes always leaves switch_ns of idle device, and in
 * the timeslice model the long kernels of one process are preempted at slice
 * expiry (segments with last=false) while in fifo they never are.
 *
 * The workers are this program re-executed with a role argument; each says
 * it is set up on a second pipe, and they start together when the parent,
 * having heard both, closes the pipe they block on (no sleep that a loaded
 * host, or a sanitizer, could outlast).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define KERNELS 40

/* worker: `long` launches KERNELS x 3 ms with 0.5 ms of host time after each,
 * `short` KERNELS x 300 us with 1 ms after each, alternating two streams;
 * both are set up before they start, so their launches overlap in time. */
static int worker(const char *role, int startfd, int readyfd)
{
	if (cuInit(0) != CUDA_SUCCESS)
		return 3;
	CUcontext c;
	if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS)
		return 4;
	CUfunction f = t_spin_function();
	CUstream s[2];
	cuStreamCreate(&s[0], 0);
	cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING);
	int is_long = !strcmp(role, "long");
	uint64_t ns = is_long ? 3000000 : 300000;
	char b = 1;
	if (write(readyfd, &b, 1) != 1)
		return 2;
	close(readyfd);
	if (read(startfd, &b, 1) < 0)
		return 2;
	for (int i = 0; i < KERNELS; i++) {
		if (t_spin(f, s[i % 2], ns) != CUDA_SUCCESS)
			return 5;
		t_spin_for(is_long ? 500000 : 1000000);
	}
	if (cuCtxSynchronize() != CUDA_SUCCESS)
		return 6;
	return cuCtxDestroy_v2(c) == CUDA_SUCCESS ? 0 : 7;
}

static pid_t spawn(const char *self, const char *role, int fd, int wfd, int readyfd)
{
	char fds[16], rfds[16];
	snprintf(fds, sizeof fds, "%d", fd);
	snprintf(rfds, sizeof rfds, "%d", readyfd);
	pid_t p = fork();
	if (p == 0) {
		close(wfd); /* only the parent may hold the write end, or no EOF comes */
		execl(self, self, role, fds, rfds, (char *)NULL);
		_exit(127);
	}
	return p;
}

static void scenario(const char *self, const char *model)
{
	char tl[64], shm[96];
	snprintf(tl, sizeof tl, "/tmp/simgpu-mp-%s-%d.jsonl", model, (int)getpid());
	snprintf(shm, sizeof shm, "/fikit-simgpu-test-mp-%s-%d", model, (int)getpid());
	unlink(tl);
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	setenv("FIKIT_SIMGPU_SHM", shm, 1);
	setenv("FIKIT_SIMGPU_MODEL", model, 1);
	setenv("FIKIT_SIMGPU_DEVICE", "legacy", 1); /* the expectations' switch and slice */
	int pfd[2], rfd[2];
	if (pipe(pfd) != 0 || pipe(rfd) != 0)
		return;
	pid_t a = spawn(self, "long", pfd[0], pfd[1], rfd[1]), b = spawn(self, "short", pfd[0], pfd[1], rfd[1]);
	close(pfd[0]);
	close(rfd[1]);
	char ready[2];
	size_t got = 0; /* both set up (or gone: EOF), then both go */
	for (ssize_t r; got < sizeof ready && (r = read(rfd[0], ready + got, sizeof ready - got)) > 0;)
		got += (size_t)r;
	close(rfd[0]);
	CHECK(got == sizeof ready, "%s: %zu of 2 workers set up", model, got);
	close(pfd[1]);
	int sa, sb;
	waitpid(a, &sa, 0);
	waitpid(b, &sb, 0);
	CHECK(WIFEXITED(sa) && WEXITSTATUS(sa) == 0, "%s: long worker status %d", model, sa);
	CHECK(WIFEXITED(sb) && WEXITSTATUS(sb) == 0, "%s: short worker status %d", model, sb);

	t_seg *v;
	int n = t_read_timeline(tl, &v);
	CHECK(n >= 2 * KERNELS, "%s: %d records", model, n);
	if (n < 2 * KERNELS)
		return;
	CHECK(t_overlaps(v, n) == 0, "%s: kernels overlap on the device", model);
	int kernels[2] = {0, 0}, preempted = 0, badsum = 0, disorder = 0, badgap = 0;
	long long first_end[2] = {0, 0}, last_end[2] = {0, 0};
	for (int i = 0; i < n; i++) {
		int w = v[i].pid == a ? 0 : v[i].pid == b ? 1 : -1;
		CHECK(w >= 0, "%s: a record of pid %d", model, v[i].pid);
		if (w < 0)
			continue;
		if (!v[i].last)
			preempted++;
		if (v[i].last) {
			kernels[w]++;
			/* all segments of this kernel add up to its duration */
			long long sum = 0;
			for (int j = 0; j <= i; j++)
				if (v[j].pid == v[i].pid && v[j].ctx == v[i].ctx && v[j].seq == v[i].seq)
					sum += v[j].end - v[j].start;
			badsum += sum != (w == 0 ? 3000000 : 300000);
			if (!first_end[w])
				first_end[w] = v[i].end;
			last_end[w] = v[i].end;
		}
		/* stream order: a later segment of the same stream has a later seq (or is the same kernel) */
		for (int j = i - 1; j >= 0; j--) {
			if (v[j].pid == v[i].pid && v[j].stream == v[i].stream) {
				disorder += v[j].seq > v[i].seq;
				break;
			}
		}
		if (i > 0 && v[i - 1].pid != v[i].pid)
			badgap += v[i].start - v[i - 1].end < 25000; /* the switch cost */
	}
	CHECK(kernels[0] == KERNELS && kernels[1] == KERNELS, "%s: %d and %d kernels completed", model, kernels[0],
	      kernels[1]);
	CHECK(badsum == 0, "%s: %d kernels whose segments do not add up", model, badsum);
	CHECK(disorder == 0, "%s: %d stream-order violations", model, disorder);
	CHECK(badgap == 0, "%s: %d process switches without the switch gap", model, badgap);
	/* both progress: each finished a kernel before the other finished all of its own */
	CHECK(first_end[0] < last_end[1] && first_end[1] < last_end[0], "%s: one process ran only after the other", model);
	if (!strcmp(model, "timeslice"))
		CHECK(preempted > 0, "timeslice: no 3 ms kernel was ever preempted while the other process waited");
	else
		CHECK(preempted == 0, "fifo: %d kernels were preempted", preempted);
	printf("%s: %d segments, %d preemptions, long done at %.1f ms, short done at %.1f ms\n", model, n, preempted,
	       (last_end[0] - v[0].start) / 1e6, (last_end[1] - v[0].start) / 1e6);
	free(v);
	unlink(tl);
	shm_unlink(shm);
}

int main(int argc, char **argv)
{
	if (argc == 4)
		return worker(argv[1], atoi(argv[2]), atoi(argv[3]));
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1); /* the workers check the shared model at every unlock */
	scenario(argv[0], "timeslice");
	scenario(argv[0], "fifo");
	return t_done("multiproc_test");
}
