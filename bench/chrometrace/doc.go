// Package chrometrace lays simgpu's ground-truth timeline (every executed
// kernel segment) beside the daemon's decision record (`fikit serve
// --record`) for people to look at: Write produces Chrome trace-event JSON
// (the "JSON Object Format" that Perfetto and chrome://tracing open) and
// PNG draws a span of it with gonum/plot. `fikit trace` and the bench use it.
//
// In the JSON, each OS process is a trace process named by its task key and
// priority (from the decision record's registrations), each of its streams
// a track, each kernel segment a complete event coloured by priority, with
// the time it was blocked by other contexts as a "blocked" slice before it.
// The daemon's decisions are a "fikit daemon" process: predicted windows
// and idle periods as slices, grants, holds, state changes and early stops
// as instant events, the prediction error as a counter; each task's runs
// are a track of its own process.
package chrometrace
