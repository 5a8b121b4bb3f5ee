// Package replay is everything of cmd/fikit-replay except the CUDA binding:
// the command line, the replay loop and its pacing, arrivals, statistics and
// output. The loop drives a Device; cmd/fikit-replay supplies one on the
// CUDA driver (cgo, kept in the command), and the tests supply a fake.
//
// One run replays a trace once: optional pre-processing host time, then for
// each kernel its host time, busy (spinning on the clock, like framework
// overhead), followed by an asynchronous launch of its spin kernel; after the
// last launch the stream is synchronised. A run's JCT is the time from its
// start to the synchronisation's return.
//
// Pacing: kernel i is launched host_i after kernel i-1's launch call began
// (the first one host_0 after the pre-processing ends), so the cost of a
// launch call counts as part of the host time, as it does in the framework
// overhead a trace records, and the replay matches trace.AnalyticJCT. A launch
// that comes late (the process was descheduled) shifts the rest of the run: the
// replay never catches up by shortening later host times.
package replay
