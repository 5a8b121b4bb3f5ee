/*
 * testutil.h — tiny harness for simgpu's C tests: checks that count instead
 * of aborting, a unique shared segment per test program, the spin-kernel PTX,
 * and a reader for the JSON-lines timeline.
 */
#ifndef FIKIT_SIMGPU_TESTUTIL_H
#define FIKIT_SIMGPU_TESTUTIL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>

extern int t_pass, t_fail;

void t_check(int ok, const char *file, int line, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#define CHECK(cond, ...) t_check(!!(cond), __FILE__, __LINE__, #cond, " " __VA_ARGS__)
/* A driver call must return `want`. */
#define CHECK_CU(want, call)                                                             \
	do {                                                                             \
		CUresult r_ = (call);                                                    \
		t_check(r_ == (want), __FILE__, __LINE__, #call, "returned %d (%s), want %d", \
			(int)r_, t_errname(r_), (int)(want));                          \
	} while (0)
#define OK(call) CHECK_CU(CUDA_SUCCESS, call)

const char *t_errname(CUresult r);
/* Print "<name>: N passed, N failed" and return the exit status. */
int t_done(const char *name);
/* Use a shared segment of our own: /fikit-simgpu-test-<tag>-<pid>, unlinked at exit. */
void t_unique_shm(const char *tag);
int64_t t_now(void);
/* Under a sanitizer (make test-asan / test-tsan set FIKIT_TEST_SANITIZED):
 * host calls run several times slower, so checks of host-side timing are
 * off; the model's own times are checked all the same. */
int t_sanitized(void);
void t_spin_for(int64_t ns); /* busy host time, like framework overhead */

/* PTX with spin(u64 spin_ns) and plain(u64 x, u32 y) entries. */
extern const char t_ptx[];
/* Load t_ptx in the current context and return the spin function. */
CUfunction t_spin_function(void);
/* Launch spin for ns on stream s. */
CUresult t_spin(CUfunction f, CUstream s, uint64_t ns);

typedef struct t_seg {
	int pid, dev, ctx, seg, last, dropped;
	unsigned stream;
	unsigned long long seq;
	char name[256];
	unsigned grid[3], block[3];
	long long start, end;
	long long arrive, blocked; /* arrive_ns, blocked_ns */
} t_seg;

/* Read a timeline file; returns the number of records (sorted by start), -1 on error. */
int t_read_timeline(const char *path, t_seg **out);

/* Sort (by start) and check no two segments overlap; returns the number of overlaps. */
int t_overlaps(t_seg *v, int n);

/* Percentile (0..100) of n int64 values (sorts them). */
int64_t t_percentile(int64_t *v, int n, double p);

#endif
