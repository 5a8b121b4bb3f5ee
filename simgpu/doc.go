// Package simgpu is a simulated NVIDIA GPU for running and testing fikit on
// machines without one. It has three parts:
//
//   - simgpu/driver (C): bin/simgpu/libcuda.so.1, a CUDA driver API library
//     built against NVIDIA's real cuda.h. Real driver-API programs, the trace
//     replayer and the LD_PRELOAD hook run on it unchanged. One simulated GPU
//     per machine is shared by all processes through POSIX shared memory and
//     a robust process-shared mutex; simulated time is CLOCK_MONOTONIC.
//   - simgpu/devmodel (C + Go): the pure device model the driver keeps in
//     shared memory, also used through Go by the discrete-event simulator.
//   - simgpu/trace (Go): trace formats and the analytic model of a replay.
//
// simgpu/tests holds the C tests (make test-simgpu) and simgpu-bench, which
// prints the cost of a simulated launch and the precision of host waits.
// docs/simgpu.md documents the model, its assumptions, the environment
// variables, the spin-kernel convention and the timeline format.
package simgpu
