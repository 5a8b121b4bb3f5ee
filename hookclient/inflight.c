/* inflight.c — the in-flight bound (docs/design.md "Board"). A holder of
 * worse priority than one registered on its GPU (the better one idled past
 * its TTL) keeps at most FIKIT_INFLIGHT of its kernels queued or running: a
 * launch beyond that waits, on this thread, for the oldest to finish. A
 * waiter needs no bound of its own: its credit is sized by the daemon to
 * the gap it fills, and the gate stops it. The gate decides whether a kernel may
 * start now; this bounds what a better task that returns finds ahead of it
 * (a lower holder of a GPU whose better task idled past its TTL queued a
 * whole run: 33 ms ahead of the better task's first kernel).
 *
 * Completion is an event recorded after each bounded launch on the
 * launch's stream, waited for with cuEventSynchronize on a blocking-sync
 * event (the driver sleeps rather than spins: the better task's host
 * threads need the CPU). Waiters were bounded too at first: on a 2-core
 * host the waits took CPU from the better task's host thread (its host
 * part of the slowdown grew in the bench) for nothing the credit's sizing
 * did not already bound. Only
 * tasks with a better one registered pay for it; a task of the best
 * priority never does. */
#include "hook.h"

/* Pop the finished launches off the head; with mu held. */
static void reap(fk_task *t)
{
	while (t->infl_head != t->infl_tail &&
	       fk_drv.cuEventQuery(t->infl_ev[t->infl_head % FK_INFLIGHT_MAX]) != CUDA_ERROR_NOT_READY)
		t->infl_head++;
}

void fk_inflight_wait(fk_task *t)
{
	pthread_mutex_lock(&t->infl_mu);
	if (!t->infl_ready) {
		/* Made on the launching thread: its context is the task's. */
		int ok = fk_drv.cuEventCreate && fk_drv.cuEventQuery && fk_drv.cuEventSynchronize;
		for (int i = 0; ok && i < FK_INFLIGHT_MAX; i++)
			ok = fk_drv.cuEventCreate(&t->infl_ev[i], CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) ==
			     CUDA_SUCCESS;
		t->infl_ready = ok ? 1 : -1;
		if (!ok)
			fk_log(FK_LOG_WARN, "cannot create events for the in-flight bound; kernels go unbounded");
	}
	if (t->infl_ready > 0) {
		reap(t);
		while (t->infl_tail - t->infl_head >= (uint32_t)fk_cfg.inflight) {
			fk_drv.cuEventSynchronize(t->infl_ev[t->infl_head % FK_INFLIGHT_MAX]);
			t->infl_head++;
			reap(t);
		}
	}
	pthread_mutex_unlock(&t->infl_mu);
}

void fk_inflight_push(fk_task *t, CUstream s)
{
	pthread_mutex_lock(&t->infl_mu);
	if (t->infl_ready > 0 && t->infl_tail - t->infl_head < FK_INFLIGHT_MAX &&
	    fk_drv.cuEventRecord(t->infl_ev[t->infl_tail % FK_INFLIGHT_MAX], s) == CUDA_SUCCESS)
		t->infl_tail++;
	pthread_mutex_unlock(&t->infl_mu);
}
