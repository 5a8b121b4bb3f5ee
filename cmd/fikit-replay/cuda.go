package main

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>

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

// Stream capture and graph launch (gorgonia.org/cu has neither): calls into
// the driver the loader found, so an LD_PRELOAD hook sees them.
static CUresult fk_begin_capture(CUstream s) { return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }
static CUresult fk_end_capture(CUstream s, CUgraph *g) { return cuStreamEndCapture(s, g); }
static CUresult fk_instantiate(CUgraphExec *e, CUgraph g) { return cuGraphInstantiateWithFlags(e, g, 0); }

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
	"reflect"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fikit/fikit/cmd/fikit-replay/internal/replay"
)

// cudaDevice replays on the primary context of one CUDA device through
// gorgonia.org/cu, on a stream of its own.
type cudaDevice struct {
	dev    cu.Device
	ctx    cu.CUContext
	mod    cu.Module
	loaded bool
	stream cu.Stream
	fns    []cu.Function
	param  uint64           // the launch's one parameter, the duration in ns
	params []unsafe.Pointer // {&param}, built once: no allocation per launch
	graph  C.CUgraphExec    // the captured run (--graph), nil before
	mem    cu.DevicePtr     // the reserved footprint (--footprint-mb), 0 if none
}

// cudaErr names the failed call and the CUDA error by its enum name.
func cudaErr(call string, err error) error {
	if err == nil {
		return nil
	}
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Int {
		return fmt.Errorf("%s: %w", call, err)
	}
	code := C.CUresult(v.Int())
	var name *C.char
	if C.cuGetErrorName(code, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("%s: CUDA error %d (%w)", call, v.Int(), err)
	}
	return fmt.Errorf("%s: %s (%w)", call, C.GoString(name), err)
}

// openCUDA retains device ordinal's primary context, makes it current on the
// calling (locked) thread and creates a non-blocking stream.
func openCUDA(ordinal int) (replay.Device, error) {
	d := &cudaDevice{}
	var err error
	if d.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, cudaErr("cuDeviceGet", err)
	}
	if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		return nil, cudaErr("cuDevicePrimaryCtxRetain", err)
	}
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		_ = d.dev.ReleasePrimaryCtx()
		return nil, cudaErr("cuCtxSetCurrent", err)
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		_ = d.dev.ReleasePrimaryCtx()
		return nil, cudaErr("cuStreamCreate", err)
	}
	d.params = []unsafe.Pointer{unsafe.Pointer(&d.param)}
	return d, nil
}

func (d *cudaDevice) Load(ptx string, entries []string) error {
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return cudaErr("cuModuleLoadData", err)
	}
	d.mod, d.loaded = mod, true
	d.fns = make([]cu.Function, len(entries))
	for i, e := range entries {
		if d.fns[i], err = mod.Function(e); err != nil {
			return cudaErr(fmt.Sprintf("cuModuleGetFunction %q", shorten(e, 96)), err)
		}
	}
	return nil
}

func (d *cudaDevice) Launch(fn int, grid, block [3]uint32, durationNs uint64) error {
	d.param = durationNs
	err := d.fns[fn].Launch(int(grid[0]), int(grid[1]), int(grid[2]),
		int(block[0]), int(block[1]), int(block[2]), 0, d.stream, d.params)
	return cudaErr("cuLaunchKernel", err)
}

// cstream is the replay's stream as this package's cgo type.
func (d *cudaDevice) cstream() C.CUstream { return C.CUstream(unsafe.Pointer(d.stream.C())) }

// CaptureGraph records the launches into a graph by stream capture and
// instantiates it.
func (d *cudaDevice) CaptureGraph(ls []replay.GraphLaunch) error {
	if err := cudaErr("cuStreamBeginCapture", cuResult(C.fk_begin_capture(d.cstream()))); err != nil {
		return err
	}
	var g C.CUgraph
	for i, l := range ls {
		if err := d.Launch(l.Fn, l.Grid, l.Block, l.DurationNs); err != nil {
			_ = C.fk_end_capture(d.cstream(), &g)
			if g != nil {
				C.cuGraphDestroy(g)
			}
			return fmt.Errorf("capturing kernel %d: %w", i, err)
		}
	}
	if err := cudaErr("cuStreamEndCapture", cuResult(C.fk_end_capture(d.cstream(), &g))); err != nil {
		return err
	}
	defer C.cuGraphDestroy(g)
	if d.graph != nil {
		C.cuGraphExecDestroy(d.graph)
		d.graph = nil
	}
	return cudaErr("cuGraphInstantiate", cuResult(C.fk_instantiate(&d.graph, g)))
}

func (d *cudaDevice) LaunchGraph() error {
	return cudaErr("cuGraphLaunch", cuResult(C.cuGraphLaunch(d.graph, d.cstream())))
}

// Reserve allocates bytes of device memory, writes it once and keeps it
// until Close.
func (d *cudaDevice) Reserve(bytes uint64) error {
	p, err := cu.MemAlloc(int64(bytes))
	if err != nil {
		return cudaErr("cuMemAlloc", err)
	}
	d.mem = p
	return cudaErr("cuMemsetD8", cu.MemsetD8(p, 0x5a, int64(bytes)))
}

func (d *cudaDevice) Synchronize() error {
	return cudaErr("cuStreamSynchronize", d.stream.Synchronize())
}

func (d *cudaDevice) Close() error {
	var errs []error
	errs = append(errs, cudaErr("cuStreamSynchronize", d.stream.Synchronize()))
	if d.graph != nil {
		errs = append(errs, cudaErr("cuGraphExecDestroy", cuResult(C.cuGraphExecDestroy(d.graph))))
	}
	if d.mem != 0 {
		errs = append(errs, cudaErr("cuMemFree", cu.MemFree(d.mem)))
	}
	errs = append(errs, cudaErr("cuStreamDestroy", d.stream.Destroy()))
	if d.loaded {
		errs = append(errs, cudaErr("cuModuleUnload", d.mod.Unload()))
	}
	errs = append(errs, cudaErr("cuDevicePrimaryCtxRelease", d.dev.ReleasePrimaryCtx()))
	return errors.Join(errs...)
}

// cuResult is a driver call's result as an error (nil on success), named by
// cudaErr like gorgonia's.
func cuResult(r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return cuError(r)
}

// cuError is a CUresult that cudaErr can name (an int kind, as gorgonia's).
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
