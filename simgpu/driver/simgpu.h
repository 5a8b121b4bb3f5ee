/*
 * simgpu.h — the few functions the simulated libcuda.so.1 exports beyond the
 * CUDA driver API. They exist for simgpu's own tests and benchmark (and for
 * any tool that wants the device's counters); a real libcuda has none of them,
 * so portable programs must look them up with dlsym and cope with NULL.
 */
#ifndef FIKIT_SIMGPU_H
#define FIKIT_SIMGPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counters of device dev (after cuInit). Returns 0, or -1 if dev is invalid. */
typedef struct fikit_simgpu_stats {
	uint64_t kernels;      /* kernels completed */
	uint64_t segments;     /* kernel segments executed (preemption splits kernels) */
	uint64_t switches;     /* context switches */
	uint64_t preemptions;  /* kernels cut at a time-slice expiry */
	int64_t busy_ns;       /* kernel engine busy time */
	int64_t switch_ns;     /* time spent switching */
	uint64_t repairs;      /* lock recoveries after a holder died (all devices) */
	uint64_t reaped;       /* contexts of dead processes dropped (all devices) */
} fikit_simgpu_stats;

int fikit_simgpu_get_stats(int dev, fikit_simgpu_stats *out);

/* What the calling thread's current context got from the device since it was
 * created (counted up to now). blocked_ns is the time its kernels were ready
 * but waited for other contexts' kernels or context switches: the ground
 * truth of interference (docs/simgpu.md). Returns 0, or -1 with no current
 * context (or before cuInit). */
typedef struct fikit_simgpu_ctx_totals {
	uint64_t kernels;      /* kernels completed */
	int64_t busy_ns;       /* device time its kernels ran */
	int64_t blocked_ns;    /* ready but blocked by other contexts */
} fikit_simgpu_ctx_totals;

int fikit_simgpu_ctx_totals_get(fikit_simgpu_ctx_totals *out);

/* The CLOCK_MONOTONIC time (ns) at which a recorded event completed on the
 * simulated device. Returns 0; -1 if e is not an event or was never recorded;
 * 1 if it has not completed yet. For measuring wait precision: the time a
 * synchronize returns minus this is how late it was. */
typedef struct CUevent_st *fikit_simgpu_event;
int fikit_simgpu_event_time_ns(fikit_simgpu_event e, int64_t *ns);

/* With FIKIT_SIMGPU_TIMELINE set, write every kernel segment this process's
 * contexts finished up to now before returning (a background thread otherwise
 * writes them within about 20 ms, and exit writes the rest). 0, -1 before cuInit. */
int fikit_simgpu_timeline_flush(void);

/* TEST ONLY: take the machine-wide lock and return holding it, so a test can
 * kill the process while it holds the lock. Returns 0, -1 before cuInit. */
int fikit_simgpu_test_hold_lock(void);

#ifdef __cplusplus
}
#endif
#endif
