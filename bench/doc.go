// Package bench is `fikit bench`: the paper's evaluation (FIKIT §4, Fig. 14–21
// and Table 3) run on the simulated GPU, every mode side by side in one
// invocation — exclusive (services one after another), default sharing (no
// scheduler, no hook: simgpu's time-slicing) and FIKIT (both services hooked
// under an in-process daemon) — over pairs of the shared Orion traces, with
// the discrete-event simulator's prediction beside each measured pair, the
// micro-benchmarks of the hook and the daemon, and a sensitivity pass over
// the device model's assumptions.
//
// Run measures (it starts real processes and takes minutes); Summarize,
// Check, WriteReport and WritePlots are pure functions of a Results value,
// so the report can be regenerated from a results file. docs/bench.md
// describes every scenario and every summary key.
package bench
