package main

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// The driver entry points the replayer calls, by cuda.h's names. They are
// looked up in libcuda.so.1 when a device is first opened, not linked: a
// binary linked with -lcuda cannot even print its --help where no driver is
// installed, and one whose start calls cuInit (gorgonia.org/cu's package init
// did) creates simgpu's shared segment for every command. dlsym goes through
// fikit's hook when it is preloaded (hookclient/intercept.c "dlsym"), as it
// does for libcudart, so the hook still sees every launch.
#define FK_CU_FUNCS(X) \
	X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
	X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamDestroy) \
	X(cuStreamSynchronize) X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) \
	X(cuLaunchKernel) X(cuStreamBeginCapture) X(cuStreamEndCapture) \
	X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy) \
	X(cuMemAlloc) X(cuMemsetD8) X(cuMemFree)

// cuda.h maps some names to versioned symbols (cuMemAlloc is cuMemAlloc_v2):
// FK_SYM is the symbol a program compiled against it would call.
#define FK_STR(x) #x
#define FK_SYM(x) FK_STR(x)

static struct {
#define X(f) __typeof__(&f) f;
	FK_CU_FUNCS(X)
#undef X
} fk_cu;

static char fk_cu_err[512];
static const char *fk_cu_error(void) { return fk_cu_err; }

// fk_cu_load opens libcuda.so.1 and finds every entry point: 0, or -1 with
// the reason in fk_cu_err. Called once (sync.Once on the Go side).
static int fk_cu_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(fk_cu_err, sizeof fk_cu_err, "%s", dlerror());
		return -1;
	}
#define X(f)                                                                                      \
	fk_cu.f = (__typeof__(&f))dlsym(h, FK_SYM(f));                                             \
	if (!fk_cu.f) {                                                                           \
		snprintf(fk_cu_err, sizeof fk_cu_err, "libcuda.so.1 has no %s", FK_SYM(f));        \
		return -1;                                                                        \
	}
	FK_CU_FUNCS(X)
#undef X
	return 0;
}

// Calls through the table (cgo cannot call a function pointer).
static CUresult fk_init(void) { return fk_cu.cuInit(0); }
static CUresult fk_error_name(CUresult r, const char **name) { return fk_cu.cuGetErrorName(r, name); }
static CUresult fk_device_get(CUdevice *d, int ordinal) { return fk_cu.cuDeviceGet(d, ordinal); }
static CUresult fk_primary_retain(CUcontext *c, CUdevice d) { return fk_cu.cuDevicePrimaryCtxRetain(c, d); }
static CUresult fk_primary_release(CUdevice d) { return fk_cu.cuDevicePrimaryCtxRelease(d); }
static CUresult fk_ctx_set_current(CUcontext c) { return fk_cu.cuCtxSetCurrent(c); }
static CUresult fk_stream_create(CUstream *s) { return fk_cu.cuStreamCreate(s, CU_STREAM_NON_BLOCKING); }
static CUresult fk_stream_destroy(CUstream s) { return fk_cu.cuStreamDestroy(s); }
static CUresult fk_stream_sync(CUstream s) { return fk_cu.cuStreamSynchronize(s); }
static CUresult fk_module_load(CUmodule *m, const char *image) { return fk_cu.cuModuleLoadData(m, image); }
static CUresult fk_module_function(CUfunction *f, CUmodule m, const char *name) { return fk_cu.cuModuleGetFunction(f, m, name); }
static CUresult fk_module_unload(CUmodule m) { return fk_cu.cuModuleUnload(m); }
static CUresult fk_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			  CUstream s, void **params)
{
	return fk_cu.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, 0, s, params, NULL);
}
static CUresult fk_begin_capture(CUstream s) { return fk_cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static CUresult fk_end_capture(CUstream s, CUgraph *g) { return fk_cu.cuStreamEndCapture(s, g); }
static CUresult fk_instantiate(CUgraphExec *e, CUgraph g) { return fk_cu.cuGraphInstantiateWithFlags(e, g, 0); }
static CUresult fk_graph_launch(CUgraphExec e, CUstream s) { return fk_cu.cuGraphLaunch(e, s); }
static CUresult fk_graph_destroy(CUgraph g) { return fk_cu.cuGraphDestroy(g); }
static CUresult fk_graph_exec_destroy(CUgraphExec e) { return fk_cu.cuGraphExecDestroy(e); }
static CUresult fk_mem_alloc(CUdeviceptr *p, size_t n) { return fk_cu.cuMemAlloc(p, n); }
static CUresult fk_memset_d8(CUdeviceptr p, unsigned char v, size_t n) { return fk_cu.cuMemsetD8(p, v, n); }
static CUresult fk_mem_free(CUdeviceptr p) { return fk_cu.cuMemFree(p); }

// simgpu's extension (simgpu/driver/simgpu.h), looked up at run time: a real
// libcuda.so.1 does not have it.
typedef struct fk_totals { uint64_t kernels; int64_t busy_ns; int64_t blocked_ns; } fk_totals;
typedef int (*fk_totals_fn)(fk_totals *);

// The hook's flush (hookclient/README.md "Flush"), found at run time: 0
// flushed, -1 not confirmed, -2 no hook.
typedef int (*fk_flush_fn)(void);

static int fk_flush(void)
{
	fk_flush_fn fn = (fk_flush_fn)dlsym(RTLD_DEFAULT, "fikit_flush");
	return fn ? fn() : -2;
}

// The hook's own waits so far and their lapses (hookclient/README.md "Own
// waits"), found at run time: -1 without the hook.
typedef unsigned long long (*fk_own_wait_fn)(void);

static int fk_own_wait(unsigned long long *ns, unsigned long long *lapses)
{
	static fk_own_wait_fn fn, fl;
	static int looked;
	if (!looked) {
		fn = (fk_own_wait_fn)dlsym(RTLD_DEFAULT, "fikit_own_wait_ns");
		fl = (fk_own_wait_fn)dlsym(RTLD_DEFAULT, "fikit_own_wait_lapses");
		looked = 1;
	}
	if (!fn || !fl)
		return -1;
	*ns = fn();
	*lapses = fl();
	return 0;
}

static int fk_ctx_totals(fk_totals *out)
{
	static fk_totals_fn fn;
	static int looked;
	if (!looked) {
		fn = (fk_totals_fn)dlsym(RTLD_DEFAULT, "fikit_simgpu_ctx_totals_get");
		looked = 1;
	}
	return fn ? fn(out) : -1;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/fikit/fikit/cmd/fikit-replay/internal/replay"
)

// cudaDevice replays on the primary context of one CUDA device, on a stream
// of its own.
type cudaDevice struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	mod    C.CUmodule
	loaded bool
	stream C.CUstream
	fns    []C.CUfunction
	// The launch's one parameter (the duration in ns) and the parameter
	// array pointing at it, in C memory: the driver keeps no Go pointer,
	// and a launch allocates nothing.
	param  *C.uint64_t
	params *unsafe.Pointer
	graph  C.CUgraphExec // the captured run (--graph), nil before
	mem    C.CUdeviceptr // the reserved footprint (--footprint-mb), 0 if none
}

// errNoDriver wraps a failure to load the driver library or its entry
// points.
var errNoDriver = errors.New("cannot load the CUDA driver")

var (
	loadOnce sync.Once
	loadErr  error
)

// loadDriver opens libcuda.so.1 and initializes the driver, once.
func loadDriver() error {
	loadOnce.Do(func() {
		if C.fk_cu_load() != 0 {
			loadErr = fmt.Errorf("%w: %s", errNoDriver, C.GoString(C.fk_cu_error()))
			return
		}
		loadErr = cudaErr("cuInit", C.fk_init())
	})
	return loadErr
}

// cudaErr names the failed call and the CUDA error by its enum name (nil on
// success).
func cudaErr(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	var name *C.char
	if C.fk_error_name(r, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("%s: %w", call, cuError(r))
	}
	return fmt.Errorf("%s: %s (%w)", call, C.GoString(name), cuError(r))
}

// openCUDA loads the driver, retains device ordinal's primary context, makes
// it current on the calling (locked) thread and creates a non-blocking
// stream.
func openCUDA(ordinal int) (replay.Device, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	d := &cudaDevice{}
	if err := cudaErr("cuDeviceGet", C.fk_device_get(&d.dev, C.int(ordinal))); err != nil {
		return nil, err
	}
	if err := cudaErr("cuDevicePrimaryCtxRetain", C.fk_primary_retain(&d.ctx, d.dev)); err != nil {
		return nil, err
	}
	if err := cudaErr("cuCtxSetCurrent", C.fk_ctx_set_current(d.ctx)); err != nil {
		_ = C.fk_primary_release(d.dev)
		return nil, err
	}
	if err := cudaErr("cuStreamCreate", C.fk_stream_create(&d.stream)); err != nil {
		_ = C.fk_primary_release(d.dev)
		return nil, err
	}
	d.param = (*C.uint64_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uint64_t(0)))))
	d.params = (*unsafe.Pointer)(C.malloc(C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
	*d.params = unsafe.Pointer(d.param)
	return d, nil
}

func (d *cudaDevice) Load(ptx string, entries []string) error {
	image := C.CString(ptx)
	defer C.free(unsafe.Pointer(image))
	if err := cudaErr("cuModuleLoadData", C.fk_module_load(&d.mod, image)); err != nil {
		return err
	}
	d.loaded = true
	d.fns = make([]C.CUfunction, len(entries))
	for i, e := range entries {
		name := C.CString(e)
		err := cudaErr(fmt.Sprintf("cuModuleGetFunction %q", shorten(e, 96)), C.fk_module_function(&d.fns[i], d.mod, name))
		C.free(unsafe.Pointer(name))
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *cudaDevice) Launch(fn int, grid, block [3]uint32, durationNs uint64) error {
	*d.param = C.uint64_t(durationNs)
	return cudaErr("cuLaunchKernel", C.fk_launch(d.fns[fn], C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), d.stream, d.params))
}

// CaptureGraph records the launches into a graph by stream capture and
// instantiates it.
func (d *cudaDevice) CaptureGraph(ls []replay.GraphLaunch) error {
	if err := cudaErr("cuStreamBeginCapture", C.fk_begin_capture(d.stream)); err != nil {
		return err
	}
	var g C.CUgraph
	for i, l := range ls {
		if err := d.Launch(l.Fn, l.Grid, l.Block, l.DurationNs); err != nil {
			_ = C.fk_end_capture(d.stream, &g)
			if g != nil {
				C.fk_graph_destroy(g)
			}
			return fmt.Errorf("capturing kernel %d: %w", i, err)
		}
	}
	if err := cudaErr("cuStreamEndCapture", C.fk_end_capture(d.stream, &g)); err != nil {
		return err
	}
	defer C.fk_graph_destroy(g)
	if d.graph != nil {
		C.fk_graph_exec_destroy(d.graph)
		d.graph = nil
	}
	return cudaErr("cuGraphInstantiate", C.fk_instantiate(&d.graph, g))
}

func (d *cudaDevice) LaunchGraph() error {
	return cudaErr("cuGraphLaunch", C.fk_graph_launch(d.graph, d.stream))
}

// Reserve allocates bytes of device memory, writes it once and keeps it
// until Close.
func (d *cudaDevice) Reserve(bytes uint64) error {
	if err := cudaErr("cuMemAlloc", C.fk_mem_alloc(&d.mem, C.size_t(bytes))); err != nil {
		return err
	}
	return cudaErr("cuMemsetD8", C.fk_memset_d8(d.mem, 0x5a, C.size_t(bytes)))
}

func (d *cudaDevice) Synchronize() error {
	return cudaErr("cuStreamSynchronize", C.fk_stream_sync(d.stream))
}

func (d *cudaDevice) Close() error {
	var errs []error
	errs = append(errs, cudaErr("cuStreamSynchronize", C.fk_stream_sync(d.stream)))
	if d.graph != nil {
		errs = append(errs, cudaErr("cuGraphExecDestroy", C.fk_graph_exec_destroy(d.graph)))
	}
	if d.mem != 0 {
		errs = append(errs, cudaErr("cuMemFree", C.fk_mem_free(d.mem)))
	}
	errs = append(errs, cudaErr("cuStreamDestroy", C.fk_stream_destroy(d.stream)))
	if d.loaded {
		errs = append(errs, cudaErr("cuModuleUnload", C.fk_module_unload(d.mod)))
	}
	errs = append(errs, cudaErr("cuDevicePrimaryCtxRelease", C.fk_primary_release(d.dev)))
	C.free(unsafe.Pointer(d.params))
	C.free(unsafe.Pointer(d.param))
	d.params, d.param = nil, nil
	return errors.Join(errs...)
}

// exitProcess ends the process with the C library's exit, which runs the
// atexit handlers: fikit's hook (LD_PRELOAD) ships the last measurements
// and says Goodbye in its handler. Go's own exit skips them, and the
// daemon logged every replay's normal end as a task that exited without
// one.
func exitProcess(code int) {
	C.exit(C.int(code))
}

// cuError is a CUresult as an error.
type cuError int

func (e cuError) Error() string { return fmt.Sprintf("CUDA error %d", int(e)) }

// shorten cuts s to at most n bytes for messages.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Totals reads simgpu's fikit_simgpu_ctx_totals_get for the current context;
// false on a real driver, which has no such function.
func (d *cudaDevice) Totals() (replay.DeviceTotals, bool) {
	var t C.fk_totals
	if C.fk_ctx_totals(&t) != 0 {
		return replay.DeviceTotals{}, false
	}
	return replay.DeviceTotals{Kernels: uint64(t.kernels), BusyNs: int64(t.busy_ns), BlockedNs: int64(t.blocked_ns)}, true
}

// HookWaits reads the hook's fikit_own_wait_ns and fikit_own_wait_lapses;
// false without the hook.
func (d *cudaDevice) HookWaits() (replay.HookWaits, bool) {
	var ns, lapses C.ulonglong
	if C.fk_own_wait(&ns, &lapses) != 0 {
		return replay.HookWaits{}, false
	}
	return replay.HookWaits{Ns: int64(ns), Lapses: int64(lapses)}, true
}

// Flush asks fikit's hook, when it is loaded (LD_PRELOAD), to ship what it
// measured and wait for the daemon to have it: this process ends with Go's
// exit, which runs no atexit handler.
func (d *cudaDevice) Flush() (hooked, ok bool) {
	switch C.fk_flush() {
	case -2:
		return false, false
	case 0:
		return true, true
	}
	return true, false
}
