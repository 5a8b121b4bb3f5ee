// Package trace holds kernel traces: the ordered kernel launches of one
// inference request (one "run") with each kernel's name, GPU duration, launch
// geometry and, where recorded, the host time spent before its launch.
//
// It reads two formats (see docs/trace-format.md):
//
//   - Orion's kernel CSV (eth-easl/orion, benchmarking/model_kernels/), as in
//     ../shared/traces: Name,Profile,Memory_footprint,SM_usage,Duration[,Block,Grid]
//     with durations in nanoseconds. It records no host time.
//   - fikit's own CSV, first line "# fikit-trace v1", which can also carry the
//     host time before each launch and all three grid and block dimensions.
//     Write produces it; reading it back gives the same trace.
//
// Grid and block come from the trace where it records them; otherwise they are
// derived from SM usage: grid = (max(1, SM_usage), 1, 1), block = (256, 1, 1).
// Broken input gives a *ParseError naming the file, line, column and field.
//
// Besides the readers the package offers: the ten Orion traces of
// ../shared/traces embedded in the binary (Embedded, Load "h100/resnet50_4_fwd"),
// a seeded synthetic trace generator with the repeating layer structure of real
// models (Gen), the analytic job completion time of one run alone on a fifo
// device (AnalyticJCT), and the PTX module of spin kernels the replayer loads
// (PTX). The package is pure Go and has no CUDA dependency.
package trace
