/* handlers.h — the implementations behind the wrappers of hooks.def. Each
 * takes the slot of the symbol it was called through (which real entry point
 * to call, and whether it is a per-thread-default-stream variant). */
#ifndef FIKIT_HANDLERS_H
#define FIKIT_HANDLERS_H

#include "hook.h"

/* launch.c */
CUresult fk_on_launch(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
		      unsigned bz, unsigned shm, CUstream hs, void **kp, void **extra);
CUresult fk_on_launch_ex(int slot, const CUlaunchConfig *cfg, CUfunction f, void **kp, void **extra);
CUresult fk_on_launch_coop(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			   unsigned by, unsigned bz, unsigned shm, CUstream hs, void **kp);
CUresult fk_on_graph_launch(int slot, CUgraphExec ge, CUstream hs);

/* graph.c */
CUresult fk_on_graph_inst5(int slot, CUgraphExec *ph, CUgraph g, CUgraphNode *err, char *log, size_t logsz);
CUresult fk_on_graph_inst_flags(int slot, CUgraphExec *ph, CUgraph g, unsigned long long flags);
CUresult fk_on_graph_inst_params(int slot, CUgraphExec *ph, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p);
CUresult fk_on_graph_update_v1(int slot, CUgraphExec ge, CUgraph g, CUgraphNode *err,
			       CUgraphExecUpdateResult *res);
CUresult fk_on_graph_update_v2(int slot, CUgraphExec ge, CUgraph g, CUgraphExecUpdateResultInfo *info);
CUresult fk_on_capture_begin1(int slot, CUstream hs);
CUresult fk_on_capture_begin2(int slot, CUstream hs, CUstreamCaptureMode mode);
CUresult fk_on_capture_to_graph(int slot, CUstream hs, CUgraph g, const CUgraphNode *deps,
				const CUgraphEdgeData *edata, size_t ndeps, CUstreamCaptureMode mode);
CUresult fk_on_capture_end(int slot, CUstream hs, CUgraph *pg);

/* naming.c */
CUresult fk_on_module_get_function(int slot, CUfunction *pf, CUmodule mod, const char *name);
CUresult fk_on_library_get_kernel(int slot, CUkernel *pk, CUlibrary lib, const char *name);
CUresult fk_on_kernel_get_function(int slot, CUfunction *pf, CUkernel k);

/* intercept.c */
CUresult fk_on_get_proc_address_v1(int slot, const char *sym, void **pfn, int ver, cuuint64_t flags);
CUresult fk_on_get_proc_address_v2(int slot, const char *sym, void **pfn, int ver, cuuint64_t flags,
				   CUdriverProcAddressQueryResult *status);

/* sync.c */
CUresult fk_on_stream_sync(int slot, CUstream hs);
CUresult fk_on_ctx_sync(int slot);
CUresult fk_on_event_sync(int slot, CUevent ev);
CUresult fk_on_memcpy_dtoh(int slot, void *dst, CUdeviceptr src, size_t n);
CUresult fk_on_memcpy(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n);

/* warm.c */
CUresult fk_on_ctx_destroy(int slot, CUcontext ctx);
CUresult fk_on_primary_reset(int slot, CUdevice dev);

#endif
