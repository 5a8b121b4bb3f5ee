/* graph.c — a CUDA graph launch is one schedulable unit (design "Kernel
 * ID"): its name is "fikit.graph:" and the kernel IDs of its kernel nodes in
 * node order, grid and block zero. A CUgraphExec does not expose its nodes,
 * so the name is computed when the graph is instantiated (or updated) and
 * kept per exec handle. Child-graph nodes contribute their kernels in place,
 * depth first.
 *
 * Also stream capture: kernels launched into a capturing stream are not run
 * (they become graph nodes), so launches check the stream while any capture
 * is open; outside captures that costs one load. */
#include "handlers.h"

#include <stdlib.h>

typedef struct idvec {
	uint64_t *v;
	size_t n, cap;
} idvec;

static void idvec_push(idvec *iv, uint64_t id)
{
	if (iv->n == iv->cap) {
		size_t cap = iv->cap ? iv->cap * 2 : 64;
		uint64_t *v = realloc(iv->v, cap * sizeof *v);
		if (!v)
			return;
		iv->v = v;
		iv->cap = cap;
	}
	iv->v[iv->n++] = id;
}

static void walk(CUgraph g, idvec *iv, int depth)
{
	size_t n = 0;
	if (depth > 8 || fk_drv.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || n == 0)
		return;
	CUgraphNode *nodes = malloc(n * sizeof *nodes);
	if (!nodes || fk_drv.cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS) {
		free(nodes);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		CUgraphNodeType type;
		if (fk_drv.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
			continue;
		if (type == CU_GRAPH_NODE_TYPE_KERNEL && fk_drv.cuGraphKernelNodeGetParams_v2) {
			CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
			if (fk_drv.cuGraphKernelNodeGetParams_v2(nodes[i], &p) != CUDA_SUCCESS)
				continue;
			CUfunction f = p.func ? p.func : (CUfunction)p.kern;
			uint32_t dims[6] = {p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ};
			idvec_push(iv, fk_kid_finish(fk_name_of(f)->state, dims));
		} else if (type == CU_GRAPH_NODE_TYPE_GRAPH && fk_drv.cuGraphChildGraphNodeGetGraph) {
			CUgraph child;
			if (fk_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS)
				walk(child, iv, depth + 1);
		}
	}
	free(nodes);
}

static void remember_graph(CUgraphExec ge, CUgraph g)
{
	if (fk_cfg.disabled || !ge || !fk_drv.cuGraphGetNodes || !fk_drv.cuGraphNodeGetType)
		return;
	idvec iv = {0};
	walk(g, &iv, 0);
	size_t len = fk_graph_name(NULL, 0, iv.v, iv.n);
	char *name = malloc(len + 1);
	if (name) {
		fk_graph_name(name, len + 1, iv.v, iv.n);
		fk_htab_put(&fk_graphs, (uintptr_t)ge, fk_fn_new(name, len, FK_NAME_GRAPH));
		fk_log(FK_LOG_DEBUG, "graph exec %p: %zu kernel nodes", (void *)ge, iv.n);
	}
	free(name);
	free(iv.v);
}

CUresult fk_on_graph_inst5(int slot, CUgraphExec *ph, CUgraph g, CUgraphNode *err, char *log, size_t logsz)
{
	__typeof__(&cuGraphInstantiate) real = FK_REAL(slot, cuGraphInstantiate);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(ph, g, err, log, logsz);
	if (rc == CUDA_SUCCESS && ph)
		remember_graph(*ph, g);
	return rc;
}

CUresult fk_on_graph_inst_flags(int slot, CUgraphExec *ph, CUgraph g, unsigned long long flags)
{
	__typeof__(&cuGraphInstantiateWithFlags) real = FK_REAL(slot, cuGraphInstantiateWithFlags);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(ph, g, flags);
	if (rc == CUDA_SUCCESS && ph)
		remember_graph(*ph, g);
	return rc;
}

CUresult fk_on_graph_inst_params(int slot, CUgraphExec *ph, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	__typeof__(&cuGraphInstantiateWithParams) real = FK_REAL(slot, cuGraphInstantiateWithParams);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(ph, g, p);
	if (rc == CUDA_SUCCESS && ph)
		remember_graph(*ph, g);
	return rc;
}

CUresult fk_on_graph_update_v1(int slot, CUgraphExec ge, CUgraph g, CUgraphNode *err, CUgraphExecUpdateResult *res)
{
	__typeof__(&cuGraphExecUpdate) real = FK_REAL(slot, cuGraphExecUpdate);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(ge, g, err, res);
	if (rc == CUDA_SUCCESS)
		remember_graph(ge, g);
	return rc;
}

CUresult fk_on_graph_update_v2(int slot, CUgraphExec ge, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
	__typeof__(&cuGraphExecUpdate_v2) real = FK_REAL(slot, cuGraphExecUpdate_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(ge, g, info);
	if (rc == CUDA_SUCCESS)
		remember_graph(ge, g);
	return rc;
}

atomic_int fk_capturing;

/* Capture counting: +1 on a successful begin, -1 on any end. A capture
 * abandoned without an end leaves the count high, which only costs launches
 * a cuStreamIsCapturing call each. */
static void capture_begun(CUresult rc)
{
	if (rc == CUDA_SUCCESS)
		atomic_fetch_add(&fk_capturing, 1);
}

CUresult fk_on_capture_begin1(int slot, CUstream hs)
{
	__typeof__(&cuStreamBeginCapture) real = FK_REAL(slot, cuStreamBeginCapture);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(hs);
	capture_begun(rc);
	return rc;
}

CUresult fk_on_capture_begin2(int slot, CUstream hs, CUstreamCaptureMode mode)
{
	__typeof__(&cuStreamBeginCapture_v2) real = FK_REAL(slot, cuStreamBeginCapture_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(hs, mode);
	capture_begun(rc);
	return rc;
}

CUresult fk_on_capture_to_graph(int slot, CUstream hs, CUgraph g, const CUgraphNode *deps,
				const CUgraphEdgeData *edata, size_t ndeps, CUstreamCaptureMode mode)
{
	__typeof__(&cuStreamBeginCaptureToGraph) real = FK_REAL(slot, cuStreamBeginCaptureToGraph);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(hs, g, deps, edata, ndeps, mode);
	capture_begun(rc);
	return rc;
}

CUresult fk_on_capture_end(int slot, CUstream hs, CUgraph *pg)
{
	__typeof__(&cuStreamEndCapture) real = FK_REAL(slot, cuStreamEndCapture);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult rc = real(hs, pg);
	int c = atomic_load(&fk_capturing);
	while (c > 0 && !atomic_compare_exchange_weak(&fk_capturing, &c, c - 1))
		;
	return rc;
}
