// Command fikit-replay replays a kernel trace on a CUDA device: the real
// driver on a GPU machine, or simgpu's bin/simgpu/libcuda.so.1 (run it with
// LD_LIBRARY_PATH=bin/simgpu) anywhere else.
//
//	fikit-replay --trace FILE --runs N [--warmup N] [--cpu-ns NS] [--interval DUR [--burst N] | --poisson RATE] [--json]
//	fikit-replay gen --seed S [options] --out FILE
//	fikit-replay ptx --trace FILE
//
// It loads one PTX module with a spin kernel per distinct kernel name of the
// trace (simgpu/trace.PTX), then per run spends each kernel's host time busy
// and launches its spin kernel asynchronously with the kernel's duration, and
// synchronises the stream after the last launch. See package
// internal/replay for the loop and docs/trace-format.md for the trace formats.
//
// Runs start back to back by default (closed loop). --interval DUR makes an
// open loop with a run arriving every DUR, --poisson RATE one with Poisson
// arrivals (--seed); a run that arrives while the previous one is going
// waits. --burst N with --interval DUR sends bursts instead: N runs back to
// back, then DUR of idle host time after the burst's last run, then the next
// burst (the bench's bursty high-priority service).
//
// --change-at N makes the service drift from its profile from measured run
// N on: --change-duration F scales every kernel's duration (the same kernel
// IDs, as after a clock or driver change), --change-grid G multiplies every
// grid's x (new kernel IDs, as after a batch size change).
//
// Under fikit's hook the replayer calls the hook's fikit_flush() (found
// with dlsym, so it runs the same without the hook) after its last run and
// before it releases its context: a Go program's exit runs no atexit
// handler, and the hook's measurements of the last run were lost. It then
// ends through the C library's exit(3), which runs the hook's atexit
// handler: the hook says Goodbye, and the daemon does not take the end for
// a crash.
//
// Output with --json, one JSON object per line: per measured run
// {"run":i,"start_ns":…,"jct_ns":…,"kernels":…} (start_ns is CLOCK_MONOTONIC,
// the time base of simgpu's timeline; open-loop runs add "wait_ns", how long
// after its arrival the run could start; on simgpu "blocked_ns", its GPU
// interference; on Linux "runq_ns", how long the replay's thread waited for
// a CPU during the run (the host's load); under fikit's hook "hook_wait_ns",
// how long the run waited inside the hook for the hook's own work), then
// {"summary":{"runs":…,"p50_ns":…,"p90_ns":…,"p99_ns":…,"mean_ns":…,"cv":…,"min_ns":…,"max_ns":…}}
// (nearest-rank percentiles; cv is the standard deviation over the mean).
// Without --json: a two-line human summary with the analytic JCT beside the
// measured one. Progress and errors go to stderr.
//
// The CUDA binding (cuda.go) opens libcuda.so.1 with dlopen and calls cuInit
// only when a replay opens its device: --help, `gen` and `ptx` start where no
// driver is installed and create no simgpu device. The logic lives in
// internal/replay, tested with a fake device, and tests/replay_test.go runs
// the binary on simgpu. Exit status: 0 success, 2 usage error, 1 any
// other error (unreadable trace, CUDA error).
package main
