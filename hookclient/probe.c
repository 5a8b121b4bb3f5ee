/* probe.c — the hook's own kernel (docs/scheduler.md "The switch,
 * measured"). A tiny spin kernel in an embedded PTX module, following
 * simgpu's spin convention (first parameter `.u64 *_ns`: its duration; on a
 * real GPU it spins on %globaltimer for that long, one thread). It is
 * loaded once per task, on the sender thread, in the task's context, the
 * first time it is needed, and launched with the driver's own cuLaunchKernel
 * on a private non-blocking stream: never a launch of the service (no seq,
 * no report, no board level, not named), never on the service's threads.
 * Its name, FK_PROBE_NAME, lets timelines, CUPTI readers and launch probes
 * leave it out of the service's launches, runs and interference.
 *
 * Calibration (Calibrate → Calibration): the probe is launched at t0, right
 * after another context ran (the daemon asks when a holder's run has just
 * ended); once it is seen done, again at t2, right after its own; events
 * after each. Host t2 − t0 minus device time between the two probes' ends is
 * the switch the first one paid. Polled from the sender's loop: nothing
 * here waits. Under MPS (CU_DEVICE_ATTRIBUTE_MPS_ENABLED) nothing is
 * launched: the answer is "MPS", no switch between clients. Issue 27's
 * warm-up launches the same kernel (fk_probe_launch). */
#include "hook.h"

#include <string.h>

static const char probe_ptx[] = "// fikit hook probe (hookclient/probe.c)\n"
				".version 7.0\n"
				".target sm_70\n"
				".address_size 64\n"
				".visible .entry " FK_PROBE_NAME "(\n"
				"\t.param .u64 " FK_PROBE_NAME "_ns\n"
				")\n"
				"{\n"
				"\t.reg .pred %p<2>;\n"
				"\t.reg .b64 %rd<5>;\n"
				"\tld.param.u64 %rd1, [" FK_PROBE_NAME "_ns];\n"
				"\tmov.u64 %rd2, %globaltimer;\n"
				"\tadd.s64 %rd3, %rd2, %rd1;\n"
				"$L__spin:\n"
				"\tmov.u64 %rd4, %globaltimer;\n"
				"\tsetp.lt.u64 %p1, %rd4, %rd3;\n"
				"\t@%p1 bra $L__spin;\n"
				"\tret;\n"
				"}\n";

/* A calibration in progress gives up after this long (a device that never
 * runs it: another context holding it for good, a dead context). */
#define CALIB_TIMEOUT_NS 1000000000ull

typedef struct probe {
	int ready; /* 0: not tried; 1: loaded; -1: cannot (or MPS: mps) */
	int mps;
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	CUevent e1, e2;
	/* the calibration under way (stage 0: none) */
	int stage;
	uint32_t seq;
	uint64_t probe_ns, t0, t2, started;
	/* What would spoil the sample: the task's launches, a better
	 * priority's launch (its kernels beside the probes), at the start. */
	uint32_t launches;
	uint64_t above;
} probe;

static probe probes[FK_MAX_TASKS]; /* sender thread only */

/* Load the module on the sender thread, in t's context (current). */
static void load(fk_task *t, probe *p)
{
	int mps = 0;
	if (fk_drv.cuDeviceGetAttribute &&
	    fk_drv.cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, t->dev) == CUDA_SUCCESS && mps) {
		p->mps = 1;
		p->ready = -1;
		return;
	}
	__typeof__(&cuModuleGetFunction) get = FK_REAL(FK_SLOT_cuModuleGetFunction, cuModuleGetFunction);
	p->ready = -1;
	if (!fk_drv.cuModuleLoadData || !fk_drv.cuStreamCreate || !fk_drv.cuEventCreate || !get ||
	    !FK_REAL(FK_SLOT_cuLaunchKernel, cuLaunchKernel))
		return;
	if (fk_drv.cuModuleLoadData(&p->mod, probe_ptx) != CUDA_SUCCESS)
		return;
	if (get(&p->fn, p->mod, FK_PROBE_NAME) != CUDA_SUCCESS ||
	    fk_drv.cuStreamCreate(&p->s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    fk_drv.cuEventCreate(&p->e1, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    fk_drv.cuEventCreate(&p->e2, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		fk_log(FK_LOG_INFO, "cannot set up the hook's probe kernel; the switch is not measured here");
		return;
	}
	p->ready = 1;
}

/* A context destroyed or reset (warm.c's handlers): its tasks get no
 * probe from then on — the module, stream and events died with it, and
 * their handles may name the application's next ones. Marked under
 * gone_mu, which every probe launch holds, so one under way finishes
 * first. */
static pthread_mutex_t gone_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int ctx_gone[FK_MAX_TASKS];

int fk_probe_ctx_gone(const fk_task *t) { return atomic_load_explicit(&ctx_gone[t->index], memory_order_acquire); }

void fk_probe_forget(CUcontext ctx, CUdevice dev, int by_dev)
{
	pthread_mutex_lock(&gone_mu);
	int n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++)
		if (by_dev ? fk_tasks[i].dev == dev : fk_tasks[i].ctx == ctx)
			atomic_store_explicit(&ctx_gone[i], 1, memory_order_release);
	pthread_mutex_unlock(&gone_mu);
}

static int launch_now(probe *p, uint64_t ns, CUevent ev);

/* One probe launch of ns nanoseconds, then ev (if any) recorded after it,
 * unless t's context is gone. */
static int launch(fk_task *t, probe *p, uint64_t ns, CUevent ev)
{
	pthread_mutex_lock(&gone_mu);
	int ok = !atomic_load(&ctx_gone[t->index]) && launch_now(p, ns, ev);
	pthread_mutex_unlock(&gone_mu);
	return ok;
}

static int launch_now(probe *p, uint64_t ns, CUevent ev)
{
	__typeof__(&cuLaunchKernel) real = FK_REAL(FK_SLOT_cuLaunchKernel, cuLaunchKernel);
	void *params[] = {&ns};
	return real(p->fn, 1, 1, 1, 32, 1, 1, 0, p->s, params, NULL) == CUDA_SUCCESS &&
	       (!ev || fk_drv.cuEventRecord(ev, p->s) == CUDA_SUCCESS);
}

int fk_probe_launch(fk_task *t, uint64_t ns)
{
	probe *p = &probes[t->index];
	if (!fk_drv.cuCtxSetCurrent || fk_drv.cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS)
		return 0;
	if (!p->ready)
		load(t, p);
	return p->ready > 0 && !p->stage && launch(t, p, ns, NULL);
}

/* The task's launch count and the board's latest better launch now. */
static void disturbances(fk_task *t, uint32_t *launches, uint64_t *above)
{
	fk_board *b = atomic_load_explicit(&t->board, memory_order_relaxed);
	fk_board_gpu *bg = atomic_load_explicit(&t->bgpu, memory_order_relaxed);
	*launches = atomic_load_explicit(&t->seq, memory_order_relaxed);
	*above = b && bg ? fk_board_above(b, bg, fk_cfg.priority, fk_now_ns()) : 0;
}

static void answer(fk_task *t, probe *p, uint64_t host, uint64_t device, uint8_t flags)
{
	p->stage = 0;
	fk_act a[4];
	int n = fk_ctl_step(&(fk_ev){.type = FK_EV_CALIBRATED, .task = t->index, .now = fk_now_ns(), .seq = p->seq,
				     .host_ns = host, .device_ns = device, .calib_flags = flags},
			    a, 4);
	for (int i = 0; i < n; i++)
		if (a[i].type == FK_ACT_SEND)
			fk_link_put(&a[i].msg);
}

void fk_probe_calibrate(fk_task *t, uint32_t seq, uint64_t probe_ns)
{
	probe *p = &probes[t->index];
	if (p->stage)
		return; /* one at a time; the daemon asks again later */
	p->seq = seq;
	p->probe_ns = probe_ns;
	if (fk_probe_ctx_gone(t) || !fk_drv.cuCtxSetCurrent || fk_drv.cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS) {
		answer(t, p, 0, 0, FK_CALIB_FAILED);
		return;
	}
	if (!p->ready)
		load(t, p);
	if (p->ready < 0) {
		answer(t, p, 0, 0, p->mps ? FK_CALIB_MPS : FK_CALIB_FAILED);
		return;
	}
	disturbances(t, &p->launches, &p->above);
	p->t0 = p->started = fk_now_ns();
	if (!launch(t, p, probe_ns, p->e1)) {
		answer(t, p, 0, 0, FK_CALIB_FAILED);
		return;
	}
	p->stage = 1;
}

int fk_probe_poll(void)
{
	int busy = 0, n = atomic_load(&fk_ntasks);
	for (int i = 0; i < n; i++) {
		probe *p = &probes[i];
		if (!p->stage)
			continue;
		fk_task *t = &fk_tasks[i];
		busy = 1;
		if (fk_now_ns() - p->started > CALIB_TIMEOUT_NS || fk_probe_ctx_gone(t) ||
		    fk_drv.cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS) {
			answer(t, p, 0, 0, FK_CALIB_FAILED);
			continue;
		}
		CUresult q = fk_drv.cuEventQuery(p->stage == 1 ? p->e1 : p->e2);
		if (q == CUDA_ERROR_NOT_READY)
			continue;
		if (q != CUDA_SUCCESS) {
			answer(t, p, 0, 0, FK_CALIB_FAILED);
			continue;
		}
		if (p->stage == 1) {
			/* The first ran; its context is the device's now: the same
			 * kernel again pays no switch. */
			p->t2 = fk_now_ns();
			if (!launch(t, p, p->probe_ns, p->e2))
				answer(t, p, 0, 0, FK_CALIB_FAILED);
			else
				p->stage = 2;
			continue;
		}
		float ms = 0;
		uint32_t launches;
		uint64_t above;
		disturbances(t, &launches, &above);
		if (launches != p->launches || above != p->above ||
		    fk_drv.cuEventElapsedTime(&ms, p->e1, p->e2) != CUDA_SUCCESS || ms < 0) {
			/* Its own kernels, or a better priority's, may have run
			 * beside the probes: the times mean nothing. */
			answer(t, p, 0, 0, FK_CALIB_FAILED);
			continue;
		}
		answer(t, p, p->t2 - p->t0, (uint64_t)((double)ms * 1e6), 0);
	}
	return busy;
}

void fk_probe_reset_child(void)
{
	memset(probes, 0, sizeof probes);
	pthread_mutex_init(&gone_mu, NULL); /* the parent's sender may have held it */
	for (int i = 0; i < FK_MAX_TASKS; i++)
		atomic_store(&ctx_gone[i], 0);
}
