/*
 * graph.c — CUDA graphs of kernel nodes, built explicitly or by stream
 * capture, instantiated and launched.
 *
 * Scope (documented in docs/simgpu.md): only kernel nodes; edges are accepted
 * but a launched graph enqueues its kernel nodes in node (creation) order on
 * the launch stream, one op each, so it runs exactly like the same kernels
 * launched one by one. Capture covers kernel launches (and graph launches,
 * flattened) on the capturing stream; event records and waits inside a
 * capture are ordering markers only and add no node.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static uint64_t capture_ids;

/* ---- graphs and nodes ----------------------------------------------------- */

static CUresult add_node(sg_graph *g, sg_gnode *n)
{
	if (g->nnodes == g->cap) {
		int cap = g->cap ? g->cap * 2 : 16;
		sg_gnode **v = realloc(g->nodes, sizeof *v * (size_t)cap);
		if (!v)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->nodes = v;
		g->cap = cap;
	}
	g->nodes[g->nnodes++] = n;
	n->graph = g;
	return CUDA_SUCCESS;
}

/* A kernel node holding its parameters by value, as the real driver does. */
static CUresult kernel_node(sg_graph *g, sg_func *f, uint64_t fh, const uint32_t grid[3], const uint32_t block[3],
			    unsigned shmem, int64_t dur, void **kp, sg_gnode **out)
{
	sg_gnode *n = sg_obj_new(SG_T_GNODE);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->func = fh;
	n->name = f->e->name;
	memcpy(n->grid, grid, sizeof n->grid);
	memcpy(n->block, block, sizeof n->block);
	n->shmem = shmem;
	n->duration_ns = dur;
	const sg_entry *e = f->e;
	if (kp && e->nparams > 0) {
		n->pbuf = malloc(e->param_bytes ? e->param_bytes : 1);
		n->kparams = calloc((size_t)e->nparams, sizeof(void *));
		if (!n->pbuf || !n->kparams) {
			free(n->pbuf);
			free(n->kparams);
			sg_obj_free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (int i = 0; i < e->nparams; i++) {
			char *dst = (char *)n->pbuf + e->params[i].offset;
			if (kp[i])
				memcpy(dst, kp[i], e->params[i].size);
			else
				memset(dst, 0, e->params[i].size);
			n->kparams[i] = dst;
		}
	}
	CUresult r = add_node(g, n);
	if (r != CUDA_SUCCESS) {
		free(n->pbuf);
		free(n->kparams);
		sg_obj_free(n);
		return r;
	}
	*out = n;
	return CUDA_SUCCESS;
}

static void node_free(sg_gnode *n)
{
	free(n->pbuf);
	free(n->kparams);
	sg_obj_free(n);
}

static void graph_free(sg_graph *g)
{
	for (int i = 0; i < g->nnodes; i++)
		node_free(g->nodes[i]);
	free(g->nodes);
	g->nodes = NULL;
	sg_obj_free(g);
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	SG_CHECK_INIT();
	if (!phGraph || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	sg_graph *g = sg_obj_new(SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (CUgraph)(uintptr_t)sg_handle(g);
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	SG_CHECK_INIT();
	sg_graph *g = sg_lookup((uintptr_t)hGraph, SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_HANDLE;
	graph_free(g);
	return CUDA_SUCCESS;
}

static CUresult add_kernel_node(CUgraphNode *phNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
				CUfunction fh, const uint32_t grid[3], const uint32_t block[3], unsigned shmem,
				void **kp, void **extra)
{
	SG_CHECK_INIT();
	if (!phNode || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	sg_graph *g = sg_lookup((uintptr_t)hGraph, SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++) {
		sg_gnode *d = sg_lookup((uintptr_t)deps[i], SG_T_GNODE);
		if (!d || d->graph != g)
			return CUDA_ERROR_INVALID_VALUE;
	}
	sg_func *f;
	if (sg_func_of(fh, &f) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	if (kp && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2])
		return CUDA_ERROR_INVALID_VALUE;
	sg_gnode *n;
	CUresult r = kernel_node(g, f, (uintptr_t)fh, grid, block, shmem, sg_spin_duration(f->e, kp, extra), kp, &n);
	if (r == CUDA_SUCCESS)
		*phNode = (CUgraphNode)(uintptr_t)sg_handle(n);
	return r;
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	const uint32_t g[3] = {p->gridDimX, p->gridDimY, p->gridDimZ}, b[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
	return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, p->func, g, b, p->sharedMemBytes,
			       p->kernelParams, p->extra);
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	const uint32_t g[3] = {p->gridDimX, p->gridDimY, p->gridDimZ}, b[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
	CUfunction f = p->func ? p->func : (CUfunction)(void *)p->kern;
	return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, f, g, b, p->sharedMemBytes,
			       p->kernelParams, p->extra);
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	SG_CHECK_INIT();
	sg_graph *g = sg_lookup((uintptr_t)hGraph, SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	if (!numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!nodes) {
		*numNodes = (size_t)g->nnodes;
		return CUDA_SUCCESS;
	}
	size_t n = *numNodes, k = 0;
	for (; k < n && k < (size_t)g->nnodes; k++)
		nodes[k] = (CUgraphNode)(uintptr_t)sg_handle(g->nodes[k]);
	for (size_t i = k; i < n; i++)
		nodes[i] = NULL;
	*numNodes = k;
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	SG_CHECK_INIT();
	if (!type)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sg_lookup((uintptr_t)hNode, SG_T_GNODE))
		return CUDA_ERROR_INVALID_VALUE;
	*type = CU_GRAPH_NODE_TYPE_KERNEL;
	return CUDA_SUCCESS;
}

static sg_gnode *node_params(CUgraphNode h, CUfunction *func, unsigned *dims, unsigned *shmem, void ***kp, void ***extra)
{
	sg_gnode *n = sg_lookup((uintptr_t)h, SG_T_GNODE);
	if (!n)
		return NULL;
	*func = (CUfunction)(uintptr_t)n->func;
	for (int i = 0; i < 3; i++) {
		dims[i] = n->grid[i];
		dims[3 + i] = n->block[i];
	}
	*shmem = n->shmem;
	*kp = n->kparams;
	*extra = NULL;
	return n;
}

CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	SG_CHECK_INIT();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned d[6];
	if (!node_params(hNode, &p->func, d, &p->sharedMemBytes, &p->kernelParams, &p->extra))
		return CUDA_ERROR_INVALID_VALUE;
	p->gridDimX = d[0], p->gridDimY = d[1], p->gridDimZ = d[2];
	p->blockDimX = d[3], p->blockDimY = d[4], p->blockDimZ = d[5];
	return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
	SG_CHECK_INIT();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned d[6];
	if (!node_params(hNode, &p->func, d, &p->sharedMemBytes, &p->kernelParams, &p->extra))
		return CUDA_ERROR_INVALID_VALUE;
	p->gridDimX = d[0], p->gridDimY = d[1], p->gridDimZ = d[2];
	p->blockDimX = d[3], p->blockDimY = d[4], p->blockDimZ = d[5];
	p->kern = NULL;
	p->ctx = NULL;
	return CUDA_SUCCESS;
}

/* ---- instantiate and launch ------------------------------------------------ */

static CUresult instantiate(CUgraphExec *phExec, CUgraph hGraph)
{
	SG_CHECK_INIT();
	if (!phExec)
		return CUDA_ERROR_INVALID_VALUE;
	sg_graph *g = sg_lookup((uintptr_t)hGraph, SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	sg_gexec *x = sg_obj_new(SG_T_GEXEC);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->ops = malloc(sizeof *x->ops * (size_t)(g->nnodes ? g->nnodes : 1));
	if (!x->ops) {
		sg_obj_free(x);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < g->nnodes; i++) {
		const sg_gnode *n = g->nodes[i];
		x->ops[i].name = n->name;
		memcpy(x->ops[i].grid, n->grid, sizeof n->grid);
		memcpy(x->ops[i].block, n->block, sizeof n->block);
		x->ops[i].duration_ns = n->duration_ns;
	}
	x->n = g->nnodes;
	*phExec = (CUgraphExec)(uintptr_t)sg_handle(x);
	return CUDA_SUCCESS;
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			    size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize)
{
	return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	if (flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
		return CUDA_ERROR_INVALID_VALUE;
	return instantiate(phGraphExec, hGraph);
}

static CUresult instantiate_params(CUgraphExec *phExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = instantiate(phExec, hGraph);
	p->hErrNode_out = NULL;
	p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
	return r; /* an upload (FLAG_UPLOAD) has nothing to do: launches cost the same */
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
					   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	SG_CHECK_INIT();
	sg_gexec *x = sg_lookup((uintptr_t)hGraphExec, SG_T_GEXEC);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	free(x->ops);
	x->ops = NULL;
	sg_obj_free(x);
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec h, CUstream hs, int pt)
{
	SG_CHECK_INIT();
	sg_gexec *x = sg_lookup((uintptr_t)h, SG_T_GEXEC);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
		const sg_kop *k = &x->ops[i];
		if (s->capture) { /* captured graph launch: its kernels become nodes */
			sg_gnode *n = sg_obj_new(SG_T_GNODE);
			if (!n)
				return CUDA_ERROR_OUT_OF_MEMORY;
			n->name = k->name;
			memcpy(n->grid, k->grid, sizeof n->grid);
			memcpy(n->block, k->block, sizeof n->block);
			n->duration_ns = k->duration_ns;
			if ((r = add_node(s->capture, n)) != CUDA_SUCCESS)
				sg_obj_free(n);
		} else {
			r = sg_launch(k->name, k->grid, k->block, s, k->duration_ns);
		}
	}
	return r;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) { return graph_launch(hGraphExec, hStream, 0); }
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) { return graph_launch(hGraphExec, hStream, 1); }

static CUresult graph_upload(CUgraphExec h, CUstream hs, int pt)
{
	SG_CHECK_INIT();
	if (!sg_lookup((uintptr_t)h, SG_T_GEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	return sg_stream_resolve(hs, pt, &s);
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) { return graph_upload(hGraphExec, hStream, 0); }
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) { return graph_upload(hGraphExec, hStream, 1); }

/* ---- stream capture --------------------------------------------------------- */

CUresult sg_capture_kernel(sg_stream *s, sg_func *f, const uint32_t grid[3], const uint32_t block[3],
			   unsigned shmem, int64_t duration_ns, void **kernelParams, void **extra)
{
	(void)extra;
	sg_gnode *n;
	return kernel_node(s->capture, f, sg_handle(f), grid, block, shmem, duration_ns, kernelParams, &n);
}

static CUresult begin_capture(CUstream hs, int mode, int pt)
{
	SG_CHECK_INIT();
	if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->sid == DM_LEGACY_STREAM)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (s->capture)
		return CUDA_ERROR_ILLEGAL_STATE;
	sg_graph *g = sg_obj_new(SG_T_GRAPH);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->capture_mode = mode;
	s->capture_id = __atomic_add_fetch(&capture_ids, 1, __ATOMIC_RELAXED);
	s->capture = g;
	return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream hStream) { return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0); }
CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) { return begin_capture(hStream, mode, 0); }
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream hs, CUgraph *phGraph, int pt)
{
	SG_CHECK_INIT();
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!s->capture)
		return CUDA_ERROR_ILLEGAL_STATE;
	*phGraph = (CUgraph)(uintptr_t)sg_handle(s->capture);
	s->capture = NULL;
	return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) { return end_capture(hStream, phGraph, 0); }
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) { return end_capture(hStream, phGraph, 1); }

static CUresult is_capturing(CUstream hs, CUstreamCaptureStatus *st, int pt)
{
	SG_CHECK_INIT();
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	sg_stream *s;
	CUresult r = sg_stream_resolve(hs, pt, &s);
	if (r != CUDA_SUCCESS)
		return r;
	*st = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, captureStatus, 0);
}
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, captureStatus, 1);
}

/* The capture's last node is the dependency set of the next captured node. */
static CUresult capture_info(CUstream hs, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
			     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, int pt)
{
	static __thread CUgraphNode last;
	CUresult r = is_capturing(hs, st, pt);
	if (r != CUDA_SUCCESS)
		return r;
	sg_stream *s;
	sg_stream_resolve(hs, pt, &s);
	sg_graph *g = s->capture;
	if (id && g)
		*id = s->capture_id;
	if (graph)
		*graph = g ? (CUgraph)(uintptr_t)sg_handle(g) : NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = g && g->nnodes ? 1 : 0;
	if (deps) {
		last = g && g->nnodes ? (CUgraphNode)(uintptr_t)sg_handle(g->nodes[g->nnodes - 1]) : NULL;
		*deps = last ? &last : NULL;
	}
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(hStream, st, id, NULL, NULL, NULL, NULL, 0);
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(hStream, st, id, NULL, NULL, NULL, NULL, 1);
}
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
				   const CUgraphNode **deps, size_t *ndeps)
{
	return capture_info(hStream, st, id, graph, deps, NULL, ndeps, 0);
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
					const CUgraphNode **deps, size_t *ndeps)
{
	return capture_info(hStream, st, id, graph, deps, NULL, ndeps, 1);
}
CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
				   const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	return capture_info(hStream, st, id, graph, deps, edges, ndeps, 0);
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *st, cuuint64_t *id,
					CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
					size_t *ndeps)
{
	return capture_info(hStream, st, id, graph, deps, edges, ndeps, 1);
}
