/* warm.c — the pre-switch's warm-up (docs/scheduler.md "The pre-switch"),
 * and what stops it. Ahead of a holder's predicted request the daemon asks
 * (Warm) for one launch of the hook's own kernel (probe.c) in the task's
 * context, on the probe's private non-blocking stream, from the sender
 * thread: the GPU then switches to the context while it would idle anyway,
 * and the request finds it resident. The core (core.c) decides whether it
 * may go from what this file and the launch path see; this file checks the
 * same again just before the launch, which never waits for the device.
 *
 * A context the application destroys (cuCtxDestroy) or resets
 * (cuDevicePrimaryCtxReset) gets no warm-up or calibration probe from then
 * on: the probe's module, stream and events died with it, and their handles
 * may name the application's next ones. The handlers tell probe.c before
 * the real call (fk_probe_forget), which lets a launch under way finish
 * first. Exit and fork
 * stop warm-ups through the core (its tasks leave, or start over). */
#include "hook.h"

int fk_warm_in_run(fk_task *t) { return atomic_load_explicit(&t->run_kernels, memory_order_relaxed) > 0; }

int fk_warm_launch(fk_task *t, uint64_t ns)
{
	int ok = !fk_probe_ctx_gone(t) && !fk_warm_in_run(t) && !atomic_load(&fk_capturing) && fk_probe_launch(t, ns);
	fk_log(FK_LOG_DEBUG, "warm-up of task %u: %s", atomic_load(&t->task_id), ok ? "launched" : "not launched");
	return ok;
}

CUresult fk_on_ctx_destroy(int slot, CUcontext ctx)
{
	__typeof__(&cuCtxDestroy_v2) real = FK_REAL(slot, cuCtxDestroy_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	fk_probe_forget(ctx, 0, 0);
	return real(ctx);
}

CUresult fk_on_primary_reset(int slot, CUdevice dev)
{
	__typeof__(&cuDevicePrimaryCtxReset_v2) real = FK_REAL(slot, cuDevicePrimaryCtxReset_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	fk_probe_forget(NULL, dev, 1);
	return real(dev);
}
