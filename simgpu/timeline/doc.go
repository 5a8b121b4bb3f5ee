// Package timeline reads simgpu's ground-truth timeline (FIKIT_SIMGPU_TIMELINE,
// one JSON object per executed kernel segment; docs/simgpu.md) and computes
// what the tools judge the scheduler by: device time per process within a
// span, and the GPU interference a run suffered (Σ blocked_ns of its kernels).
//
// It is the one reader of the format in Go: the harness behind `fikit demo`
// and `fikit bench`, `fikit trace` and the end-to-end tests all use it.
package timeline
