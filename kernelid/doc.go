// Package kernelid computes the identities fikit schedules by: the kernel ID
// (a hash of mangled name, grid and block), the task key of a service, and the
// display names of kernels. It is the Go twin of the C code in hookclient/;
// both are checked against the vectors in testdata/. See docs/design.md.
//
// # Kernel ID
//
// A kernel ID is FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3) over the bytes of the kernel's mangled name, one 0x00 byte,
// and the 24 bytes of grid x, y, z and block x, y, z as little-endian uint32,
// finalised with the splitmix64 mixer:
//
//	h ^= h >> 30; h *= 0xbf58476d1ce4e5b9
//	h ^= h >> 27; h *= 0x94d049bb133111eb
//	h ^= h >> 31
//
// The name part depends on the name only, so it is computed once per kernel
// ([HashName]) and finished per launch ([NameHash.ID]), as the hook does per
// function handle. A graph launch is named by [GraphName] and hashed with
// zero grid and block ([GraphID]).
//
// # Task key
//
// [TaskKey] builds the key of a service from its argv: the part of argv[0]
// after its last '/', then every further argument, joined by single spaces.
// [TruncateKey] cuts keys longer than [MaxTaskKeyLen] bytes to a prefix and
// an FNV-1a 64 hash of the whole key; an override (FIKIT_TASK_KEY, fikit run
// --task-key) goes through [TruncateKey] too ([ResolveTaskKey]).
//
// # Vector files
//
// testdata/kernel_ids.tsv and testdata/task_keys.tsv are the one truth shared
// with the C tests. Strings in them use the escapes of [Escape]: \\, \t, \n
// and \xHH for every byte outside printable ASCII. Regenerate them with
//
//	go test ./kernelid -run TestVectors -rewrite
//
// after changing the vector lists in vectors_test.go; the algorithm itself is
// pinned by independently computed values in the tests.
package kernelid
