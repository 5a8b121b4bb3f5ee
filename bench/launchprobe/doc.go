// Package launchprobe counts kernel launches where they reach the CUDA driver, with eBPF uprobes
// on the launch entry points of a libcuda.so (the real driver or simgpu's).
//
// It is fikit's independent witness for the hook: a uprobe fires on every call into the
// driver's cuLaunchKernel*, however the caller found the function (symbol, dlsym,
// cuGetProcAddress), so comparing its per-process counts with the launches the daemon was told
// about shows whether the hook saw — and forwarded exactly once — every launch. It works
// unchanged on a GPU machine, pointed at the real libcuda.so.1.
//
// Attaching needs root (CAP_BPF and CAP_PERFMON) and a kernel with uprobe support; Open returns
// ErrUnsupported wrapped with the reason otherwise. The eBPF program is assembled in Go (no
// clang, no object file): per (process, entry point) it adds one to a hash-map counter and
// records the process name on first sight.
package launchprobe
