// Package fairbench measures fair shares among equal priorities on simgpu
// (`fikit bench fair`, tests/fair_e2e_test.go; docs/scheduler.md
// "Equals"): two continuous low-priority services of one priority, one of
// short kernels (2–60 µs) and one of long ones (150–900 µs), beside a
// high-priority service with a request every 10 ms, under each policy in
// the same run, on one simgpu preset. The GPU time each got is simgpu's
// timeline (ground truth) within the high-priority service's span; the
// high-priority service's GPU interference is its runs' blocked time
// over its JCT alone.
package fairbench
