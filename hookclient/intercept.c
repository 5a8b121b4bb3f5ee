/* intercept.c — the interposition itself: the wrappers generated from
 * hooks.def, finding the real driver once, and the two ways an application
 * can look an entry point up behind our back (dlsym and cuGetProcAddress),
 * both answered with our wrapper for hooked symbols. */
#include "hook.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
typedef void *(*dlsym_fn)(void *, const char *);
/* Set by whichever comes first: init, or a dlsym call before it (a
 * sanitizer runtime's, during its own initialization). */
static _Atomic(dlsym_fn) real_dlsym;
static void *libcuda;

static void init_slow(void);
static inline void fk_init(void)
{
	if (FK_UNLIKELY(!atomic_load_explicit(&fk_ready, memory_order_acquire)))
		init_slow();
}

/* ---- the wrappers: each runs the init, then its handler ---- */

#include "handlers.h"

#define FK_ALIAS(base, version, pt, sym)

#define FK_HOOK(sym, base, version, pt, handler, ret, params, args)                                \
	FK_EXPORT ret sym params                                                                   \
	{                                                                                          \
		enum { S = FK_SLOT_##sym };                                                        \
		fk_init();                                                                         \
		return handler args;                                                               \
	}
#include "hooks.def"
#undef FK_HOOK

void *const fk_wrapper[FK_NSLOTS] = {
#define FK_HOOK(sym, base, version, pt, handler, ret, params, args) [FK_SLOT_##sym] = (void *)&sym,
#include "hooks.def"
#undef FK_HOOK
};
#undef FK_ALIAS

/* ---- finding the real driver ---- */

/* Code that runs inside a sanitizer runtime's initialization (its
 * interceptors are resolved with dlsym(RTLD_NEXT, …), which is ours) must
 * not be instrumented: no shadow memory and no thread state exist yet, and
 * an instrumented access there crashed every process of `make test-asan`.
 * docs/operations.md "Sanitizers". */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define FK_NO_SANITIZE __attribute__((disable_sanitizer_instrumentation))
#else
#define FK_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
#endif

FK_NO_SANITIZE static dlsym_fn find_real_dlsym(void)
{
	/* dlsym is ours, so the real one is found by version: GLIBC_2.34 since
	 * libdl merged into libc, GLIBC_2.2.5 before (x86-64's base version). */
	void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!p)
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	dlsym_fn f = (dlsym_fn)p;
	if (f)
		atomic_store_explicit(&real_dlsym, f, memory_order_release);
	return f;
}

/* Remember p as the real entry point of slot unless one is known (or p is
 * our own wrapper: that would make the hook call itself). */
static void fk_real_offer(int slot, void *p)
{
	if (!p || p == fk_wrapper[slot])
		return;
	void *expected = NULL;
	atomic_compare_exchange_strong_explicit(&fk_real[slot], &expected, p, memory_order_acq_rel,
						memory_order_acquire);
}

static const char *env_get(const char *name) { return getenv(name); }
static void env_report(const char *line) { fk_log(FK_LOG_WARN, "%s", line); }

static void at_fork_prepare(void);
static void at_fork_parent(void);
static void at_fork_child(void);

static void init_once_fn(void)
{
	/* Bad values are reported at the default level (warn): FIKIT_LOG is
	 * only in force once the whole environment has been read. */
	fk_config_load(&fk_cfg, env_get, env_report);
	fk_log_level = fk_cfg.log_level;
	if (fk_cfg.disabled)
		fk_log(FK_LOG_INFO, "FIKIT_DISABLE set: passing every call through");
	dlsym_fn rdlsym = atomic_load_explicit(&real_dlsym, memory_order_acquire);
	if (!rdlsym)
		rdlsym = find_real_dlsym();
	if (!rdlsym) {
		fk_log(FK_LOG_WARN, "cannot find the C library's dlsym; the hook is disabled");
		fk_cfg.disabled = 1;
		return;
	}
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!libcuda)
		libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!libcuda) {
		fk_log(FK_LOG_WARN, "cannot load libcuda.so.1 (%s); the hook is disabled", dlerror());
		fk_cfg.disabled = 1;
		return;
	}
	for (int s = 0; s < FK_NSLOTS; s++)
		fk_real_offer(s, rdlsym(libcuda, fk_slot_name[s]));
#define X(name) fk_drv.name = (__typeof__(&name))rdlsym(libcuda, #name);
	FK_DRIVER_FUNCS(X)
#undef X
	fk_htab_init(&fk_funcs);
	fk_htab_init(&fk_graphs);
	if (fk_ring_init(&fk_q, 1 << 14)) {
		fk_log(FK_LOG_WARN, "out of memory; the hook is disabled");
		fk_cfg.disabled = 1;
	}
	pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
}

static void init_once_done(void)
{
	pthread_once(&init_once, init_once_fn);
	atomic_store_explicit(&fk_ready, 1, memory_order_release);
}

static void init_slow(void) { init_once_done(); }

/* ---- fork: the child is a new process to the scheduler ---- */

static void at_fork_prepare(void)
{
	pthread_mutex_lock(&fk_funcs.mu);
	pthread_mutex_lock(&fk_graphs.mu);
	fk_ctl_lock(); /* before the tasks' locks, as control.c takes them */
	for (int i = 0; i < FK_MAX_TASKS; i++)
		pthread_mutex_lock(&fk_tasks[i].mu);
}

static void at_fork_parent(void)
{
	for (int i = FK_MAX_TASKS - 1; i >= 0; i--)
		pthread_mutex_unlock(&fk_tasks[i].mu);
	fk_ctl_unlock();
	pthread_mutex_unlock(&fk_graphs.mu);
	pthread_mutex_unlock(&fk_funcs.mu);
}

static void at_fork_child(void)
{
	for (int i = FK_MAX_TASKS - 1; i >= 0; i--)
		pthread_mutex_unlock(&fk_tasks[i].mu);
	pthread_mutex_unlock(&fk_graphs.mu);
	pthread_mutex_unlock(&fk_funcs.mu);
	/* The child has no sender thread, and sockets it would share with the
	 * parent (the daemon would see one peer): it starts over at its next
	 * launch, a new process to the scheduler. */
	fk_sender_reset_child();
	fk_link_reset_child();
	fk_tasks_reset_child();
	fk_ctl_reset_child();
	fk_ring_reset(&fk_q);
	atomic_fetch_add(&fk_generation, 1);
}

/* ---- dlsym ---- */

/* libcudart dlopens libcuda and looks entry points up with dlsym (and then
 * cuGetProcAddress): answer hooked names with our wrapper. RTLD_NEXT is
 * resolved relative to this library, not to the caller (the caller's return
 * address is not passed through), which is what a caller below us in the
 * search order would get anyway for every symbol but our own wrappers. */
static void *dlsym_cu(void *p, const char *name);

/* Not instrumented, and touching nothing instrumented for other names than
 * cu*: a sanitizer runtime (first in LD_PRELOAD) calls it before it has set
 * itself up. Its RTLD_NEXT is answered relative to us, right after it: the
 * same answer for every symbol it looks up (we define only cu*, dlsym and
 * fikit_run_end). */
FK_NO_SANITIZE FK_EXPORT void *dlsym(void *handle, const char *name)
{
	dlsym_fn rdlsym = atomic_load_explicit(&real_dlsym, memory_order_acquire);
	if (FK_UNLIKELY(!rdlsym)) {
		rdlsym = find_real_dlsym(); /* before init: idempotent */
		if (!rdlsym)
			return NULL;
	}
	void *p = rdlsym(handle, name);
	if (!p || name[0] != 'c' || name[1] != 'u')
		return p;
	return dlsym_cu(p, name);
}

/* A cu* name: the application's lookup of a driver entry point. */
static void *dlsym_cu(void *p, const char *name)
{
	int slot = fk_slot_of(name);
	if (slot < 0 || p == fk_wrapper[slot])
		return p;
	fk_real_offer(slot, p);
	return fk_wrapper[slot];
}

/* ---- cuGetProcAddress ---- */

static void proc_answer(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	if (!symbol || !pfn || !*pfn)
		return;
	int slot = fk_proc_select(symbol, ver, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
	if (slot < 0 || *pfn == fk_wrapper[slot])
		return;
	/* Where our table's choice is contradicted by the pointer identity of
	 * another variant of the same base (exported addresses resolved at
	 * init), trust the driver. */
	void *known = atomic_load_explicit(&fk_real[slot], memory_order_acquire);
	if (known && known != *pfn) {
		for (int i = 0; i < fk_nproc_rows; i++) {
			const fk_proc_row *r = &fk_proc_rows[i];
			if (r->slot != slot && !strcmp(r->base, symbol) &&
			    atomic_load_explicit(&fk_real[r->slot], memory_order_acquire) == *pfn) {
				slot = r->slot;
				break;
			}
		}
	}
	fk_log(FK_LOG_DEBUG, "cuGetProcAddress(%s, %d, %#llx) -> %s", symbol, ver, (unsigned long long)flags,
	       fk_slot_name[slot]);
	fk_real_offer(slot, *pfn);
	*pfn = fk_wrapper[slot];
}

CUresult fk_on_get_proc_address_v1(int slot, const char *sym, void **pfn, int ver, cuuint64_t flags)
{
	__typeof__(&cuGetProcAddress) real = FK_REAL(slot, cuGetProcAddress);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(sym, pfn, ver, flags);
	if (rc == CUDA_SUCCESS && !fk_cfg.disabled)
		proc_answer(sym, pfn, ver, flags);
	return rc;
}

CUresult fk_on_get_proc_address_v2(int slot, const char *sym, void **pfn, int ver, cuuint64_t flags,
				   CUdriverProcAddressQueryResult *status)
{
	__typeof__(&cuGetProcAddress_v2) real = FK_REAL(slot, cuGetProcAddress_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(sym, pfn, ver, flags, status);
	if (rc == CUDA_SUCCESS && !fk_cfg.disabled)
		proc_answer(sym, pfn, ver, flags);
	return rc;
}
