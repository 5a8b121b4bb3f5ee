/*
 * graph_test.c — graphs of kernels: built with cuGraphAddKernelNode (v1 and
 * v2), captured from a stream, instantiated every way the API offers, and
 * launched; a launch enqueues the kernel nodes in node order, with the
 * parameters the nodes captured by value.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tl[64];

static CUDA_KERNEL_NODE_PARAMS_v1 params(CUfunction f, void **kp)
{
	CUDA_KERNEL_NODE_PARAMS_v1 p;
	memset(&p, 0, sizeof p);
	p.func = f;
	p.gridDimX = 4, p.gridDimY = 1, p.gridDimZ = 1;
	p.blockDimX = 128, p.blockDimY = 1, p.blockDimZ = 1;
	p.kernelParams = kp;
	return p;
}

/* The timeline since the last call: durations of the kernels in order. */
static int durations(long long *out, int max)
{
	fikit_simgpu_timeline_flush();
	t_seg *v;
	int n = t_read_timeline(tl, &v);
	truncate(tl, 0);
	for (int i = 0; i < n && i < max; i++)
		out[i] = v[i].last && v[i].seg == 0 ? v[i].end - v[i].start : -1;
	free(v);
	return n;
}

int main(void)
{
	t_unique_shm("graph");
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1);
	snprintf(tl, sizeof tl, "/tmp/simgpu-graph-%d.jsonl", (int)getpid());
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	OK(cuInit(0));
	CUcontext c;
	OK(cuCtxCreate_v2(&c, 0, 0));
	CUfunction f = t_spin_function();
	CUstream s;
	OK(cuStreamCreate(&s, 0));
	truncate(tl, 0);

	/* built explicitly: a chain of three nodes */
	CUgraph g;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(&g, 1));
	OK(cuGraphCreate(&g, 0));
	uint64_t ns = 1000000;
	void *kp[] = {&ns};
	CUDA_KERNEL_NODE_PARAMS_v1 p = params(f, kp);
	CUgraphNode n1, n2, n3;
	OK(cuGraphAddKernelNode(&n1, g, NULL, 0, &p));
	ns = 2000000; /* nodes hold their parameters by value */
	OK(cuGraphAddKernelNode(&n2, g, &n1, 1, &p));
	CUDA_KERNEL_NODE_PARAMS p2;
	memset(&p2, 0, sizeof p2);
	memcpy(&p2, &p, sizeof p); /* v2 extends v1 */
	p2.kern = NULL;
	p2.ctx = NULL;
	ns = 3000000;
	OK(cuGraphAddKernelNode_v2(&n3, g, &n2, 1, &p2));
	CUDA_KERNEL_NODE_PARAMS_v1 bad = params((CUfunction)0x55, kp);
	CUgraphNode nb;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&nb, g, NULL, 0, &bad));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&nb, g, NULL, 1, &p));

	size_t count = 0;
	OK(cuGraphGetNodes(g, NULL, &count));
	CHECK(count == 3);
	CUgraphNode nodes[4];
	count = 4;
	OK(cuGraphGetNodes(g, nodes, &count));
	CHECK(count == 3 && nodes[0] == n1 && nodes[2] == n3 && nodes[3] == NULL);
	CUgraphNodeType type;
	OK(cuGraphNodeGetType(n2, &type));
	CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL);
	CUDA_KERNEL_NODE_PARAMS_v1 got;
	OK(cuGraphKernelNodeGetParams(n2, &got));
	uint64_t v2 = 0;
	if (got.kernelParams)
		memcpy(&v2, got.kernelParams[0], sizeof v2);
	CHECK(got.func == f && got.gridDimX == 4 && got.blockDimX == 128 && v2 == 2000000, "node 2 params %llu",
	      (unsigned long long)v2);
	CUDA_KERNEL_NODE_PARAMS gotv2;
	OK(cuGraphKernelNodeGetParams_v2(n3, &gotv2));
	CHECK(gotv2.func == f && gotv2.blockDimX == 128);

	CUgraphExec x1, x2, x3;
	OK(cuGraphInstantiateWithFlags(&x1, g, 0));
	CUgraphNode err;
	char log[16];
	OK(cuGraphInstantiate_v2(&x2, g, &err, log, sizeof log));
	CUDA_GRAPH_INSTANTIATE_PARAMS ip;
	memset(&ip, 0, sizeof ip);
	OK(cuGraphInstantiateWithParams(&x3, g, &ip));
	CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(&x1, (CUgraph)0x42, 0));
	OK(cuGraphLaunch(x1, s));
	OK(cuGraphLaunch(x3, s));
	OK(cuStreamSynchronize(s));
	long long d[8];
	int nd = durations(d, 8);
	CHECK(nd == 6, "%d kernels from two graph launches", nd);
	const long long want[6] = {1000000, 2000000, 3000000, 1000000, 2000000, 3000000};
	for (int i = 0; i < nd && i < 6; i++)
		CHECK(d[i] == want[i], "graph kernel %d ran %lld ns, want %lld", i, d[i], want[i]);

	/* captured from a stream: nothing runs until the graph is launched */
	CUstreamCaptureStatus st;
	CHECK_CU(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUgraph cg;
	CHECK_CU(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s, &cg));
	OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CHECK_CU(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	OK(cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	OK(t_spin(f, s, 500000));
	CUevent ev;
	OK(cuEventCreate(&ev, 0));
	OK(cuEventRecord(ev, s)); /* an ordering marker inside a capture */
	OK(t_spin(f, s, 700000));
	OK(cuGraphLaunch(x2, s)); /* a graph launched into a capture: its kernels join */
	cuuint64_t id = 0;
	OK(cuStreamGetCaptureInfo(s, &st, &id));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0);
	CHECK_CU(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s));
	OK(cuStreamEndCapture(s, &cg));
	OK(cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
	OK(cuCtxSynchronize());
	CHECK(durations(d, 8) == 0, "captured kernels ran before the graph was launched");
	OK(cuGraphGetNodes(cg, NULL, &count));
	CHECK(count == 5, "captured graph has %zu nodes", count);
	CUgraphExec cx;
	OK(cuGraphInstantiateWithFlags(&cx, cg, 0));
	OK(cuGraphLaunch_ptsz(cx, s));
	OK(cuStreamSynchronize(s));
	nd = durations(d, 8);
	const long long want2[5] = {500000, 700000, 1000000, 2000000, 3000000};
	CHECK(nd == 5, "%d kernels from the captured graph", nd);
	for (int i = 0; i < nd && i < 5; i++)
		CHECK(d[i] == want2[i], "captured kernel %d ran %lld ns, want %lld", i, d[i], want2[i]);

	OK(cuGraphExecDestroy(x1));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(x1, s));
	OK(cuGraphExecDestroy(x2));
	OK(cuGraphExecDestroy(x3));
	OK(cuGraphExecDestroy(cx));
	OK(cuGraphDestroy(g));
	OK(cuGraphDestroy(cg));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphDestroy(g));
	OK(cuCtxDestroy_v2(c));
	unlink(tl);
	return t_done("graph_test");
}
