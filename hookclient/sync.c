/* sync.c — run boundaries. A run ends at a host-blocking synchronization
 * after at least one kernel (design: stream, context or event sync, a
 * synchronous device-to-host copy) or at fikit_run_end(). RunEnd is sent in
 * every phase: the scheduler learns inter-run gaps from it. Blocking calls
 * may make a syscall (unlike launches): before blocking, the sender is woken
 * so the run's notifications leave while the service waits anyway. */
#include "handlers.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long a profiling run's end waits for the sender to have shipped the
 * run before it. */
#define FK_SHIP_WAIT_NS 2000000

static fk_task *current_task_if_any(void)
{
	if (!atomic_load_explicit(&fk_ready, memory_order_acquire) || fk_cfg.disabled)
		return NULL;
	fk_task *t = atomic_load_explicit(&fk_single_task, memory_order_acquire);
	if (t)
		return t;
	if (atomic_load_explicit(&fk_ntasks, memory_order_relaxed) == 0)
		return NULL; /* nothing launched yet: no run to end */
	return fk_task_slow();
}

/* While the service blocks, the sender ships the run's notifications and
 * reads earlier runs' events (measure.c waits for such moments). */
static void before_block(fk_task *t)
{
	if (!t)
		return;
	atomic_fetch_add_explicit(&fk_blocked, 1, memory_order_relaxed);
	if ((atomic_load_explicit(&t->run_kernels, memory_order_relaxed) > 0 && fk_ring_maybe_nonempty(&fk_q)) ||
	    (atomic_load_explicit(&t->mode, memory_order_relaxed) & FK_MODE_MEASURE))
		fk_sender_wake();
}

/* The service resumes (and will launch): the sender stops reading events
 * at its next record, before it could delay the coming launches. */
static void after_block(fk_task *t)
{
	atomic_store_explicit(&t->last_launch_ns, fk_now_ns(), memory_order_relaxed);
	atomic_fetch_sub_explicit(&fk_blocked, 1, memory_order_relaxed);
}

/* A profiling run ends: the run before it must have been shipped, so that
 * a process that ends without the hook's exit handler (_exit, Go's
 * os.Exit) and without fikit_flush() loses at most its last run. The
 * sender read that run as soon as it ended (measure.c) and has had this
 * run's launches and synchronization to ship it; a sender that lags (a
 * busy host) is waited for, at most FK_SHIP_WAIT_NS. */
static void wait_shipped(fk_task *t)
{
	uint32_t want = atomic_load_explicit(&t->runs_ended, memory_order_relaxed);
	uint32_t got = atomic_load_explicit(&t->runs_shipped, memory_order_acquire);
	if ((int32_t)(got - want) >= 0)
		return;
	uint64_t began = fk_now_ns(), until = began + FK_SHIP_WAIT_NS;
	/* The thread blocks here as in a synchronization, and is counted so:
	 * the sender, which holds back reading events while the service may
	 * launch (measure.c, quiet), must not hold back the very run this
	 * thread waits for until the wait runs out. */
	atomic_fetch_add_explicit(&fk_blocked, 1, memory_order_relaxed);
	atomic_fetch_add(&t->ship_waiters, 1);
	fk_sender_wake();
	for (;;) {
		got = atomic_load_explicit(&t->runs_shipped, memory_order_acquire);
		uint64_t now = fk_now_ns();
		if ((int32_t)(got - want) >= 0 || now >= until)
			break;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(until - now)};
		syscall(SYS_futex, &t->runs_shipped, FUTEX_WAIT_PRIVATE, got, &ts, NULL, 0);
	}
	atomic_fetch_sub(&t->ship_waiters, 1);
	atomic_fetch_sub_explicit(&fk_blocked, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&fk_own_wait_ns, fk_now_ns() - began, memory_order_relaxed);
}

void fk_run_end(fk_task *t, int reason)
{
	if (!t)
		return;
	unsigned k = atomic_exchange_explicit(&t->run_kernels, 0, memory_order_relaxed);
	if (k == 0)
		return;
	if (atomic_load_explicit(&t->mode, memory_order_relaxed) & FK_MODE_MEASURE)
		wait_shipped(t);
	atomic_store_explicit(&t->sampling, 0, memory_order_relaxed); /* the next run decides anew */
	uint64_t start = atomic_load_explicit(&t->run_start_ns, memory_order_relaxed);
	uint64_t now = fk_now_ns();
	/* The sync returned: the task's work is done (the one completion the
	 * µs bound sees without waiting for it), and lower priorities see on
	 * the board that the run ended (board resume). */
	fk_us_done(t, now);
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	if (bg)
		fk_board_run_end(bg, fk_cfg.priority, now);
	fk_rec r = {.kind = FK_REC_RUN_END,
		    .task = (uint16_t)t->index,
		    .seq = (uint32_t)reason,
		    .kid = now > start ? now - start : 0,
		    .t_ns = atomic_load_explicit(&t->seq, memory_order_relaxed),
		    .ev = k};
	/* Not woken: the service resumes now, and a sender woken here would
	 * compete with it (for a core, or for the driver) just as the next run
	 * starts; its next poll (≤ 1 ms) ships the RunEnd. */
	if (fk_ring_push(&fk_q, &r)) /* release: a sender that counts it finds it in the ring */
		atomic_fetch_add_explicit(&t->runs_ended, 1, memory_order_release);
}

void fk_run_end_all(int reason)
{
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++)
		fk_run_end(&fk_tasks[i], reason);
}

/* Exported (hookclient/README.md "Own waits"): how long, in ns, the
 * process's threads have waited so far inside intercepted calls for the
 * hook's own work (a profiling run's end for the sender to ship the run
 * before it), not for the scheduler (a grant, the bounds: waits it means).
 * A service alone should hardly ever wait so: tests/overhead_test.go
 * judges the hook's cost by it, a figure the host's load barely moves. */
FK_EXPORT unsigned long long fikit_own_wait_ns(void)
{
	return atomic_load_explicit(&fk_own_wait_ns, memory_order_relaxed);
}

/* Exported (hookclient/README.md "Own waits"): how often the sender went
 * through a whole iteration while a thread waited for it and left a run
 * that had ended before it began unshipped — never, unless the hook holds
 * back the very work it waits for (issue 37), or the device has not run
 * that run's kernels yet (a synchronization of another stream): a sender
 * starved of a CPU makes waits long, not lapses. */
FK_EXPORT unsigned long long fikit_own_wait_lapses(void)
{
	return atomic_load_explicit(&fk_own_wait_lapses, memory_order_relaxed);
}

/* Exported: a service (or a harness) can mark a run end explicitly. */
FK_EXPORT void fikit_run_end(void)
{
	if (atomic_load_explicit(&fk_ready, memory_order_acquire) && !fk_cfg.disabled)
		fk_run_end_all(FK_RUN_END_EXPLICIT);
}

/* The errors after which the driver refuses every further call of the
 * process (CUDA driver API: "This leaves the process in an inconsistent
 * state and any further CUDA work will return the same error"). */
static const char *fatal_name(CUresult rc)
{
	switch (rc) {
	case CUDA_ERROR_ECC_UNCORRECTABLE: return "CUDA_ERROR_ECC_UNCORRECTABLE";
	case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case CUDA_ERROR_LAUNCH_TIMEOUT: return "CUDA_ERROR_LAUNCH_TIMEOUT";
	case CUDA_ERROR_ASSERT: return "CUDA_ERROR_ASSERT";
	case CUDA_ERROR_HARDWARE_STACK_ERROR: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
	case CUDA_ERROR_ILLEGAL_INSTRUCTION: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
	case CUDA_ERROR_MISALIGNED_ADDRESS: return "CUDA_ERROR_MISALIGNED_ADDRESS";
	case CUDA_ERROR_INVALID_ADDRESS_SPACE: return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
	case CUDA_ERROR_INVALID_PC: return "CUDA_ERROR_INVALID_PC";
	case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
	default: return NULL;
	}
}

void fk_task_check_fatal(fk_task *t, CUresult rc)
{
	const char *name = fatal_name(rc);
	if (!t || !name)
		return;
	if (fk_task_leave(t))
		fk_log(FK_LOG_WARN, "the driver reported %s (%d), which it returns for every later call of this "
				    "process: task %u leaves the scheduler, its CUDA calls pass through",
		       name, (int)rc, (unsigned)atomic_load(&t->task_id));
}

#define SYNC_BODY(task, call, reason)                                                              \
	fk_task *t_ = (task);                                                                      \
	before_block(t_);                                                                          \
	CUresult rc = (call);                                                                      \
	if (t_)                                                                                    \
		after_block(t_);                                                                   \
	if (rc == CUDA_SUCCESS)                                                                    \
		fk_run_end(t_, (reason));                                                          \
	else                                                                                       \
		fk_task_check_fatal(t_, rc);                                                       \
	return rc

CUresult fk_on_stream_sync(int slot, CUstream hs)
{
	__typeof__(&cuStreamSynchronize) real = FK_REAL(slot, cuStreamSynchronize);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	SYNC_BODY(current_task_if_any(), real(hs), FK_RUN_END_STREAM_SYNC);
}

CUresult fk_on_ctx_sync(int slot)
{
	__typeof__(&cuCtxSynchronize) real = FK_REAL(slot, cuCtxSynchronize);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	SYNC_BODY(current_task_if_any(), real(), FK_RUN_END_CTX_SYNC);
}

CUresult fk_on_event_sync(int slot, CUevent ev)
{
	__typeof__(&cuEventSynchronize) real = FK_REAL(slot, cuEventSynchronize);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	SYNC_BODY(current_task_if_any(), real(ev), FK_RUN_END_EVENT_SYNC);
}

CUresult fk_on_memcpy_dtoh(int slot, void *dst, CUdeviceptr src, size_t n)
{
	__typeof__(&cuMemcpyDtoH_v2) real = FK_REAL(slot, cuMemcpyDtoH_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	SYNC_BODY(current_task_if_any(), real(dst, src, n), FK_RUN_END_DTOH_COPY);
}

static int is_device_ptr(CUdeviceptr p)
{
	unsigned int type = 0;
	return fk_drv.cuPointerGetAttribute &&
	       fk_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_DEVICE;
}

/* cuMemcpy (unified addressing) ends a run only when it copies device →
 * host; the direction is asked only when a run is open. */
CUresult fk_on_memcpy(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	__typeof__(&cuMemcpy) real = FK_REAL(slot, cuMemcpy);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	fk_task *t = current_task_if_any();
	if (t && (atomic_load_explicit(&t->run_kernels, memory_order_relaxed) == 0 || !is_device_ptr(src) ||
		  is_device_ptr(dst)))
		t = NULL;
	SYNC_BODY(t, real(dst, src, n), FK_RUN_END_DTOH_COPY);
}
