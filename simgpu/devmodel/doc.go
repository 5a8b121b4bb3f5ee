// Package devmodel is the device model of simgpu: a pure state machine of one
// simulated GPU, written in C (devmodel.h; devmodel.c, dm_engine.c, dm_query.c) so that the
// simulated CUDA driver (simgpu/driver) can keep it in POSIX shared memory,
// and wrapped here for Go so that the discrete-event simulator
// (bench/sim) runs the very same model.
//
// The model has no clock: every call takes the current time in nanoseconds
// (any time base, as long as it never goes backwards). It holds up to 64
// contexts, each with a ring of 2048 ops (kernels, event records, stream
// waits, copies) on up to 1024 streams; one kernel runs at a time, copies run
// on one copy engine beside the kernels, and the kernel engine is shared
// either round-robin by time slices between contexts (Timeslice, the default,
// like NVIDIA's time-sliced sharing between processes) or in arrival order
// (FIFO). A context switch costs Config.Switch of idle device time.
// docs/simgpu.md describes every rule and which numbers are assumptions.
//
// A Device is not safe for concurrent use.
package devmodel
