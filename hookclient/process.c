/* process.c — the process-wide state every part of the hook reads: the
 * environment, the real driver's entry points (both filled once by
 * intercept.c's init), and words that tell the parts about each other
 * without one calling the other. Data only: defining it here, under the
 * parts that read it, keeps the files' dependencies one-way. */
#include "hook.h"

_Atomic(void *) fk_real[FK_NSLOTS];
atomic_int fk_ready;
fk_config fk_cfg;
fk_driver fk_drv;
atomic_uint fk_generation; /* bumped in a forked child: per-thread state made before is stale */
atomic_int fk_blocked;     /* threads inside a host-blocking call: a time to read events (measure.c) */
atomic_ullong fk_own_wait_ns; /* application threads' waits for the hook's own work (sync.c) */
atomic_ullong fk_own_wait_lapses; /* sender iterations that left a waited-for run unshipped (sender.c) */
