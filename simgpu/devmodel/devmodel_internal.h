/*
 * devmodel_internal.h — definitions shared by the devmodel C files only.
 */
#ifndef FIKIT_SIMGPU_DEVMODEL_INTERNAL_H
#define FIKIT_SIMGPU_DEVMODEL_INTERNAL_H

#include "devmodel.h"

#define DM_MAGIC 0x3130646d74696b66ULL /* "fkitdm01" little-endian */

/* Slot states. FREE slots are outside [head, tail); a QUEUED kernel may have
 * run segments already (preempted); RUNNING is the engine's current op. */
enum { DM_S_FREE = 0, DM_S_QUEUED = 1, DM_S_RUNNING = 2, DM_S_DONE = 3 };

/* Internal slot flag: the op completed because its context was dropped. */
#define DM_F_DROPPED 0x100u

static inline dm_slot *slot_of(dm_context *c, uint64_t seq)
{
	return &c->ring[seq & (DM_RING - 1)];
}

/* 1 if op (ctx, seq) of context generation gen is done or can no longer be waited for. */
int dm_target_done(const dm_device *d, int ctx, uint32_t gen, uint64_t seq);
/* End of the running kernel segment (completion or slice expiry). */
int64_t dm_seg_end(const dm_device *d);
/* Report one segment of kernel s (context ci) to sink; its blocked time
 * goes with it (and restarts from 0 for the next segment). */
void dm_report(dm_sink sink, void *arg, int ci, dm_slot *s, int64_t start, int64_t end, int last,
	       int dropped);

#endif
