// Package scheduler is fikit's scheduling core: a pure, single-threaded state
// machine in the style of etcd-io/raft's RawNode. Events go in through Step
// (a task registered or left, a holder's launch notification, a waiter's
// launch request, measurement records, a run end, a heartbeat, a tick that
// carries the time); decisions come out of Ready (register acks, grants,
// holds, role/phase/credit changes, finished profiles to persist, dropped
// tasks, and the time at which the core wants its next tick). The core has no
// goroutines, sockets or clock: the daemon (`fikit serve`) and the
// discrete-event simulator (package sim) own those, and the same event
// sequence always yields the same decisions.
//
// # Shape
//
// Whether a waiting kernel may go now is a list of gates (gate.go: the
// switch calibration, the pre-switch, a place held after a restart, a
// profiling holder, a waiter's profiling run), applied in one place; a
// fill policy (policy.go) only ranks the kernels the gates admitted, the
// skip limit judged once. Each feature keeps its state in a type of its
// own embedded in task (state.go), reports when time alone next changes
// its decisions, and owns its counters and their /metrics rows
// (features.go); the next tick is the least over the features and the
// gates. Settings (settings.go) are the users' knobs; ablations
// (ablations.go) are configuration only variants set (bench/variant).
//
// # Policy (per GPU, each GPU independent; paper §3.2, Algorithms 1–2)
//
//   - Ten priority levels, 0 highest. The holders of a GPU are its live tasks
//     of the best priority among those active within HolderTTL (so an idle
//     high-priority service eventually lets a lower one hold). Holders launch
//     freely and notify after the fact; everyone else waits for grants in
//     per-priority FIFO queues.
//   - Gap filling (FIKIT + BestPrioFit): on each holder launch of kernel k the
//     predicted idle gap after it is SG[k] from the holder's profile, starting
//     SK[k] after the launch. Gaps under MinGap are not filled. Repeatedly the
//     waiting kernel of the highest non-empty priority with the longest
//     predicted duration that still fits the remaining gap is granted and the
//     gap shrinks; filling stops when nothing fits. A kernel without a profile
//     uses its task's p90 duration, else DefaultKernel.
//   - Early stopping: the holder's next launch closes the gap at once.
//   - Low-priority in-flight work is bounded: the predicted low-priority GPU
//     time outstanding never exceeds InflightBudget.
//   - Holder idle: after IdleAlpha × the holder's typical gap without a launch
//     (and its predicted device work done), lower priorities run freely within
//     the in-flight budget, with credit (launches without a round trip); the
//     holder's return revokes credit and holds them again (Fig. 11 case A).
//     Inside a run (first launch to run end) the silence must also last
//     RunIdle: launch reports arrive in bursts, and a run's own gaps are
//     filled from its profile.
//   - Launch times: a launch report may say when the launch happened (hooks
//     on the daemon's machine stamp them); predictions start from that time,
//     not from the report's arrival.
//   - Equal priorities at the top are all holders and share the device in
//     launch order (Fig. 11 case C); waiters of one priority are served in
//     arrival order when they all fit.
//   - Fair shares among equals (fair.go; the default policy row
//     fair-prio-fit): each task's virtual time is its GPU time used over
//     its weight, and none runs more than FairLag ahead of the slowest
//     active task of its priority. Waiters of one priority fill by turns
//     (a turn passes once its task is the lag ahead: a context switch per
//     2·FairLag, not per kernel), BestPrioFit within a turn; a holder the
//     lag ahead is throttled, a waiter until the others catch up.
//   - Accounting: every task's GPU time used (predicted from its profile,
//     measured while profiling) and granted; removed tasks' accounts go out
//     in Ready.Accounts.
//   - Anti-starvation: a waiting kernel passed over more than SkipLimit times
//     goes first into the next gap it fits or the next idle period; in an
//     idle period whose GPU had no low-priority work for IdleStarve, the
//     first waiting kernel goes although it does not fit the cap.
//   - Context switches cost GPU time: every window of low-priority work makes
//     the holder's next kernel pay a switch back. Each holder run has a delay
//     budget (DelayBudget × its mean JCT); a window is filled only while the
//     expected delay charged to the run stays within it.
//   - Prediction feedback: when the holder's next launch arrives the predicted
//     time of that launch is compared with the actual one (Stats); with
//     GapEWMA > 0 (the default) the gap prediction — by position, or by
//     kernel ID — is corrected online, a gap shorter than predicted weighing
//     at least 1/2.
//   - Inter-run gaps (time from a run end to the holder's next launch) are
//     learned online and filled like kernel gaps when they are long enough.
//   - A task silent for DeadAfter is dropped; its requests, credit and holder
//     role go with it.
//   - Profiling: a task without a finished profile measures its runs. While it
//     profiles, tasks of its own or lower priority are held (the paper's
//     choice); a run during which any other task's work was on the GPU is
//     discarded rather than counted, decided on the truth (other tasks'
//     run ends) where it comes within 250 ms; every discard has a reason.
//     Every committed run is a ProfileUpdate to persist.
//   - Drift (drift.go): a sharing task's runs are checked against its
//     profile — kernel IDs it lacks, every run; kernel durations, the runs its
//     hook samples — and DriftRuns consecutive mismatches start its next
//     profile version, built in the sharing phase without holding anyone.
package scheduler
