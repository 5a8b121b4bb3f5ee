package kernelid

import "strings"

// MaxTaskKeyLen is the longest task key in bytes; [TruncateKey] cuts longer
// ones.
const MaxTaskKeyLen = 200

// truncatedPrefixLen is how many bytes of an over-long key are kept, leaving
// room for '~' and 16 hex digits.
const truncatedPrefixLen = MaxTaskKeyLen - 1 - 16

// TaskKey returns the default task key of a process started with argv: the
// part of argv[0] after its last '/', followed by each further argument,
// separated by single spaces, cut by [TruncateKey]. An empty argv gives "".
func TaskKey(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	var b strings.Builder
	base := argv[0][strings.LastIndexByte(argv[0], '/')+1:]
	n := len(base)
	for _, a := range argv[1:] {
		n += 1 + len(a)
	}
	b.Grow(n)
	b.WriteString(base)
	for _, a := range argv[1:] {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	return TruncateKey(b.String())
}

// TruncateKey returns key unchanged if it is at most MaxTaskKeyLen bytes long;
// otherwise its first 183 bytes, '~' and the 16 lowercase hex digits of the
// FNV-1a 64 hash (no finaliser) of the whole key, 200 bytes in all. The cut is
// by bytes and may split a UTF-8 sequence.
func TruncateKey(key string) string {
	if len(key) <= MaxTaskKeyLen {
		return key
	}
	h := uint64(fnvOffset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= fnvPrime64
	}
	out := make([]byte, 0, MaxTaskKeyLen)
	out = append(out, key[:truncatedPrefixLen]...)
	out = append(out, '~')
	out = appendHex16(out, h)
	return string(out)
}

// ResolveTaskKey returns the task key of a service: override cut by
// [TruncateKey] if it is not empty (FIKIT_TASK_KEY, fikit run --task-key),
// else [TaskKey] of argv. An empty override counts as unset.
func ResolveTaskKey(override string, argv []string) string {
	if override != "" {
		return TruncateKey(override)
	}
	return TaskKey(argv)
}
