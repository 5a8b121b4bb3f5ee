// Package store keeps task profiles (package profiler) by GPU model and task
// key, across daemon restarts (docs/design.md "Profiles").
//
// Store is the interface; Badger is the implementation the daemon uses,
// Memory one for tests, and RemoteStore one that reaches a daemon holding
// the Badger directory through Handler. The package test suite in storetest
// runs against all three.
//
// # Badger layout (version 1)
//
// One key per profile:
//
//	v1/profile/<GPU model>\x00<task key>
//
// where the GPU model is the device name the hook reports (it contains no
// NUL byte; the key is split at the first one) and the task key is as in
// docs/design.md. The value is the profile in the msgpack layout of
// profiler.Profile.MarshalBinary, which carries its own format version. A
// change of key layout changes the "v1/" prefix; other prefixes are
// reserved for other kinds of records and ignored by List.
//
// Badger is opened with SyncWrites, so a Put that returned survives the
// process being killed; with small memtables, value-log files and caches
// (see badger.go), since its defaults reserve gigabytes of address space;
// and with its informational log dropped. Badger lets one process open a
// directory: OpenBadger returns an error wrapping ErrLocked when another
// holds it, and callers then use Remote on the daemon's socket.
//
// # HTTP API
//
// Handler serves a Store as JSON over HTTP (the daemon serves it on
// <data dir>/fikit.sock):
//
//	GET    /v1/profiles                 → 200 [{"task_key", "gpu", "phase", "runs", "kernels"}, …]
//	GET    /v1/profiles/{model}/{key}   → 200 profile (profiler export format)
//	PUT    /v1/profiles                 ← profile (profiler export format) → 204
//	DELETE /v1/profiles/{model}/{key}   → 204
//
// {model} and {key} are single path segments escaped as url.PathEscape
// does, so "/" is %2F; RemoteStore also writes a segment "." or ".." as %2E
// or %2E%2E, which http.ServeMux does not clean away. Errors are
// {"error": "…", "code": "…"} with code not_found (404), invalid_key or
// invalid_profile (400), closed (503), internal (500) or no_route (404 or
// 405: not an endpoint of the API); RemoteStore turns the codes back into
// ErrNotFound, ErrInvalidKey, profiler.ErrInvalid and ErrClosed.
package store
