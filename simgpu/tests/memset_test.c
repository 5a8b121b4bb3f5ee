/*
 * memset_test.c — a memset is the context's work on the compute engine, as
 * on an H200 (docs/simgpu.md "Presets", tests/gpu/defaults.sh): after
 * another context's work it pays the switch itself and leaves its context
 * resident (the kernel after it pays none), and another context's memset
 * takes the engine from it like a kernel would.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWITCH_NS 140000LL /* the h200 preset's switch */

static CUcontext a, b;
static CUstream sa, sb;
static CUfunction fa, fb;
static CUdeviceptr ma, mb;

static void in(CUcontext c) { OK(cuCtxSetCurrent(c)); }

int main(void)
{
	char tl[64];
	snprintf(tl, sizeof tl, "/tmp/simgpu-memset-%d.jsonl", (int)getpid());
	unlink(tl);
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	setenv("FIKIT_SIMGPU_DEVICE", "h200", 1);
	t_unique_shm("memset");
	OK(cuInit(0));
	OK(cuCtxCreate_v2(&a, 0, 0));
	OK(cuStreamCreate(&sa, 0));
	fa = t_spin_function();
	OK(cuMemAlloc_v2(&ma, 4096));
	OK(cuCtxCreate_v2(&b, 0, 0));
	OK(cuStreamCreate(&sb, 0));
	fb = t_spin_function();
	OK(cuMemAlloc_v2(&mb, 4096));

	/* 1. B's kernel, then A's memset: the memset pays the switch. */
	in(b);
	OK(t_spin(fb, sb, 50000));
	OK(cuStreamSynchronize(sb));
	in(a);
	OK(cuMemsetD32Async(ma, 7, 1, sa));
	OK(cuStreamSynchronize(sa));
	/* 2. A's kernel right after its memset: resident, no switch. */
	OK(t_spin(fa, sa, 20000));
	OK(cuStreamSynchronize(sa));
	/* 3. B's memset only, then A's kernel: B's memset took the engine. */
	in(b);
	OK(cuMemsetD8_v2(mb, 1, 64));
	in(a);
	OK(t_spin(fa, sa, 20000));
	OK(cuStreamSynchronize(sa));
	/* The bytes are there. */
	unsigned v = 0;
	OK(cuMemcpyDtoH_v2(&v, ma, sizeof v));
	CHECK(v == 7, "memset wrote %u", v);

	OK(cuCtxDestroy_v2(b)); /* retires the work: its records are written */
	OK(cuCtxDestroy_v2(a));
	t_seg *s;
	int n = t_read_timeline(tl, &s);
	CHECK(n == 5, "%d timeline records, want 5 (B spin, A memset, A spin, B memset, A spin)", n);
	if (n == 5) {
		CHECK(strcmp(s[1].name, "[memset]") == 0 && strcmp(s[3].name, "[memset]") == 0,
		      "records 1 and 3 are %s and %s, want the memsets", s[1].name, s[3].name);
		long long g1 = s[1].start - s[0].end, g2 = s[2].start - s[1].end, g3 = s[4].start - s[3].end;
		printf("A's memset after B's kernel: +%.1f us; A's kernel after its memset: +%.1f us; "
		       "A's kernel after B's memset: +%.1f us\n", g1 / 1e3, g2 / 1e3, g3 / 1e3);
		CHECK(g1 >= SWITCH_NS, "A's memset started %lld ns after B's kernel: want the switch", g1);
		CHECK(s[2].start - s[2].arrive < SWITCH_NS / 2 && s[2].blocked < SWITCH_NS / 2,
		      "A's kernel after its own memset waited %lld ns: want no switch", s[2].start - s[2].arrive);
		CHECK(g3 >= SWITCH_NS, "A's kernel started %lld ns after B's memset: want the switch", g3);
		CHECK(s[3].blocked >= SWITCH_NS, "B's memset blocked %lld ns: want the switch", s[3].blocked);
	}
	free(s);
	unlink(tl);
	return t_done("memset_test");
}
