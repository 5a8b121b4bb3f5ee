// Package profiler folds the measurement records of a task's profiling phase
// into per-kernel statistics (FIKIT paper §3.2, docs/design.md "Profiles").
// It is pure: no IO, no clock, no goroutines.
//
// # Statistics
//
// For each kernel ID j of a task, over the T committed runs t and the
// records i of each run (N_t records in run t):
//
//	SK_j = Σ_t Σ_i K_{t,i}·δ(ID_{t,i}, j) / Σ_t Σ_i δ(ID_{t,i}, j)
//	SG_j = Σ_t Σ_i G_{t,i}·δ(ID_{t,i}, j) / Σ_t Σ_i δ(ID_{t,i}, j)
//
// where K is the kernel's duration and G the idle time from its end to the
// start of the task's next kernel. The gap sums leave out records flagged
// FlagGapSpansRunEnd (the paper's i < N_t: the hook flags the last kernel of
// a run, and any other gap that a run end cuts). A record flagged
// FlagOverlapped (another kernel of the same task was running) is folded
// with its gap as reported, clamped to 0 by the hook. KernelStats.Duration.Mean
// is SK_j and KernelStats.Gap.Mean is SG_j. Means and population standard
// deviations use Welford's online update; quantiles come from a DDSketch
// (sketches-go) with 1 % relative accuracy, clamped to the exact minimum and
// maximum. The task-level Profile.Duration
// and Profile.Gap fold every record the same way; Profile.RunTime folds the
// job completion time of each committed run.
//
// # Clean measurement
//
// A Builder buffers each run's records and folds them only when the caller
// commits the run at EndRun. The daemon does not commit a run during which
// another task's work was on the GPU, and EndRun itself refuses a run whose
// number of records differs from the kernel count of its RunEnd (records
// lost to UDP, or duplicated). A refused run leaves no trace in the
// statistics; it only increments Profile.DiscardedRuns and, by its reason
// (DiscardReason: the caller's, with EndRunWhy, or EndRun's own),
// Profile.Discards. A run that launched no kernel is not counted.
//
// # Versions
//
// A profile is built again when the service drifts from it (the daemon's
// scheduler decides, docs/scheduler.md "Drift"): NewVersion starts version
// Version+1 with a Reason, and every completed version is appended to
// History (at most MaxHistory, the newest kept) with its runs, discards and
// mean run time; the daemon stamps its wall-clock time when it stores it. After T committed runs (DefaultProfileRuns,
// MinProfileRuns–MaxProfileRuns) the profile is in PhaseSharing and the
// Builder ignores further runs.
//
// # Storage layout (msgpack, version 1)
//
// Profile.MarshalBinary writes one msgpack array; integers use their
// smallest encoding, floats are float64:
//
//	profile = [1, task_key str, gpu str, phase uint (1 profiling, 2 sharing),
//	           runs uint, target_runs uint, discarded_runs uint,
//	           run_time dist, duration dist, gap dist, [kernel…],
//	           sequence, versions, discards, beside_runs uint]
//	sequence = [seq_runs uint, [[id uint, duration_ns float64, gap_ns float64]…]]
//	versions = [version uint, reason str,
//	            [[version uint, unix_ns int, reason str, runs uint, discarded uint, mean_run_ns float64]…]]
//	discards = [[reason str, count uint]…]
//	kernel  = [id uint, name str, [gx, gy, gz], [bx, by, bz], duration dist, gap dist]
//	dist    = [count uint, mean float64, m2 float64, min uint, max uint, zero_count uint,
//	           [index₀ int, count₀ uint, Δindex₁ uint, count₁ uint, …]]
//
// The last four elements came later within version 1: a reader takes a
// profile without them as version 1 with its discards unclassified and no
// runs beside others, and older readers skip them as any extra element
// (an older reader rejects a profile with runs beside others: its run
// times are fewer than its runs). Discard reasons are
// written by name (DiscardReason.String); a name the reader does not know
// counts as unclassified. Kernels are in increasing ID order. A sketch's bins are listed in
// increasing index order: the first index absolute, the others as the
// (positive) difference from the previous one. The decoder rejects another
// version, trailing bytes and inconsistent contents (ValidateProfile), and
// ignores extra elements after the known ones in every array.
//
// # Sketch bins
//
// Every sketch uses one index mapping, sketches-go's LogarithmicMapping with
// γ = (1+α)/(1−α), α = 0.01, index offset 0: a value v > 0 falls in bin
// ⌊ln v / ln γ⌋ (the bin for 1 ns is 0), and 0 is counted in zero_count. A
// bin's count is the number of values in it. Changing the mapping changes
// the format version.
//
// # Export format (JSON, version 1)
//
// Profile.MarshalJSON writes the export format of `fikit profile export`,
// read back exactly by DecodeJSON (`fikit profile import`):
//
//	{"format": "fikit-profile", "version": 1,
//	 "task_key": "…", "gpu": "NVIDIA H100 80GB HBM3",
//	 "phase": "sharing", "runs": 100, "target_runs": 100, "discarded_runs": 2,
//	 "run_time": dist, "duration": dist, "gap": dist,
//	 "kernels": [{"id": "9f86d081884c7d65", "name": "_Z6kernelPf",
//	              "grid": [1, 1, 1], "block": [256, 1, 1],
//	              "duration": dist, "gap": dist}, …],
//	 "sequence": {"runs": 100, "kernels": [{"id": …, "duration_ns": …, "gap_ns": …}, …]},
//	 "discards": {"overlap": 1, "hook_uncertain": 1}, "beside_runs": 0,
//	 "profile_version": 2, "reason": "drift: …",
//	 "versions": [{"version": 1, "unix_ns": …, "reason": "new service", "runs": 100,
//	               "discarded_runs": 2, "mean_run_ns": …}, …]}
//	dist = {"count": 100, "mean_ns": 1234.5, "m2": 6789.0, "min_ns": 1219, "max_ns": 1260,
//	        "stddev_ns": 8.2, "p50_ns": 1230.1, "p90_ns": 1241.3,
//	        "sketch": {"zero_count": 0, "bins": [[355, 40], [356, 60]]}}
//
// Kernel IDs are 16 lowercase hex digits; names are the mangled names the
// driver reports. Times are nanoseconds. mean_ns and m2 are written with
// the shortest decimal that reads back to the same float64, so import
// restores them exactly; stddev_ns, p50_ns and p90_ns are derived and
// ignored on import. Unknown members are ignored.
package profiler
