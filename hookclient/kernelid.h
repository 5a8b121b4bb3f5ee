/* kernelid.h — kernel ID, graph name and task key (docs/design.md "Kernel ID",
 * "Task key"). The C twin of the Go package kernelid; both are checked against
 * the TSV files in kernelid/testdata. */
#ifndef FIKIT_KERNELID_H
#define FIKIT_KERNELID_H

#include <stddef.h>
#include <stdint.h>

#define FK_FNV_OFFSET 0xcbf29ce484222325ULL
#define FK_FNV_PRIME 0x100000001b3ULL
#define FK_TASK_KEY_MAX 200 /* longer keys are cut (design) */
#define FK_TASK_KEY_KEEP 183

static inline uint64_t fk_fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FK_FNV_PRIME;
	}
	return h;
}

/* Steps 1–2: depends on the name only, so the hook caches it per handle. */
static inline uint64_t fk_kid_name_state(const char *name, size_t len)
{
	uint64_t h = fk_fnv_bytes(FK_FNV_OFFSET, name, len);
	h ^= 0; /* the terminating 0x00 byte */
	return h * FK_FNV_PRIME;
}

/* Steps 3–4, the whole per-launch cost: 24 bytes of FNV-1a and the mixer.
 * Written out (not via fk_fnv_bytes on a packed array) so the compiler keeps
 * everything in registers; x86-64 is little-endian as the design requires. */
static inline uint64_t fk_kid_finish(uint64_t h, const uint32_t dims[6])
{
	for (int i = 0; i < 6; i++) {
		uint32_t v = dims[i];
		for (int j = 0; j < 4; j++) {
			h ^= (v >> (8 * j)) & 0xff;
			h *= FK_FNV_PRIME;
		}
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h;
}

static inline uint64_t fk_kid(const char *name, size_t len, const uint32_t dims[6])
{
	return fk_kid_finish(fk_kid_name_state(name, len), dims);
}

/* The graph unit name: "fikit.graph:" + lowercase 16-hex kernel IDs joined by
 * ','. Writes at most cap-1 bytes plus a NUL; returns the full length (like
 * snprintf), so a caller can size a buffer with a first call. */
size_t fk_graph_name(char *out, size_t cap, const uint64_t *ids, size_t n);

/* The task key from argv (design): basename(argv[0]) and each further argument,
 * joined by single spaces, cut to 183 bytes + '~' + 16 hex digits of the
 * FNV-1a of the full key when longer than 200 bytes. out needs
 * FK_TASK_KEY_MAX+1 bytes. Returns the key length. */
size_t fk_task_key_argv(char out[FK_TASK_KEY_MAX + 1], int argc, char *const argv[]);

/* Cut an explicit key (FIKIT_TASK_KEY) the same way. */
size_t fk_task_key_cut(char out[FK_TASK_KEY_MAX + 1], const char *key, size_t len);

/* The task key of this process from /proc/self/cmdline (NUL-separated argv). */
size_t fk_task_key_self(char out[FK_TASK_KEY_MAX + 1]);

#endif
