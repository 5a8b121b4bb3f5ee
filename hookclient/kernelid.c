/* kernelid.c — graph unit names and task keys (the per-launch kernel ID is
 * inline in kernelid.h). See docs/design.md "Kernel ID" and "Task key". */
#include "kernelid.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const char hexdig[] = "0123456789abcdef";

size_t fk_graph_name(char *out, size_t cap, const uint64_t *ids, size_t n)
{
	static const char prefix[] = "fikit.graph:";
	size_t len = 0;
#define PUT(c)                                                                                     \
	do {                                                                                       \
		if (len + 1 < cap)                                                                 \
			out[len] = (c);                                                            \
		len++;                                                                             \
	} while (0)
	for (const char *p = prefix; *p; p++)
		PUT(*p);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			PUT(',');
		for (int s = 60; s >= 0; s -= 4)
			PUT(hexdig[(ids[i] >> s) & 0xf]);
	}
#undef PUT
	if (cap > 0)
		out[len < cap ? len : cap - 1] = '\0';
	return len;
}

/* A key is built piece by piece: the first FK_TASK_KEY_MAX bytes are kept,
 * every byte goes into the FNV-1a hash that names a cut key. */
struct keybuf {
	char buf[FK_TASK_KEY_MAX + 1];
	size_t len; /* full length, may exceed FK_TASK_KEY_MAX */
	uint64_t hash;
};

static void kb_put(struct keybuf *kb, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (kb->len < FK_TASK_KEY_MAX)
			kb->buf[kb->len] = p[i];
		kb->len++;
	}
	kb->hash = fk_fnv_bytes(kb->hash, p, n);
}

static size_t kb_finish(struct keybuf *kb, char out[FK_TASK_KEY_MAX + 1])
{
	size_t n = kb->len;
	if (n <= FK_TASK_KEY_MAX) {
		memcpy(out, kb->buf, n);
		out[n] = '\0';
		return n;
	}
	memcpy(out, kb->buf, FK_TASK_KEY_KEEP);
	out[FK_TASK_KEY_KEEP] = '~';
	for (int i = 0; i < 16; i++)
		out[FK_TASK_KEY_KEEP + 1 + i] = hexdig[(kb->hash >> (60 - 4 * i)) & 0xf];
	out[FK_TASK_KEY_MAX] = '\0';
	return FK_TASK_KEY_MAX;
}

size_t fk_task_key_cut(char out[FK_TASK_KEY_MAX + 1], const char *key, size_t len)
{
	struct keybuf kb = {.hash = FK_FNV_OFFSET};
	kb_put(&kb, key, len);
	return kb_finish(&kb, out);
}

size_t fk_task_key_argv(char out[FK_TASK_KEY_MAX + 1], int argc, char *const argv[])
{
	struct keybuf kb = {.hash = FK_FNV_OFFSET};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (i == 0) {
			const char *slash = strrchr(a, '/');
			if (slash)
				a = slash + 1;
		} else {
			kb_put(&kb, " ", 1);
		}
		kb_put(&kb, a, strlen(a));
	}
	return kb_finish(&kb, out);
}

size_t fk_task_key_self(char out[FK_TASK_KEY_MAX + 1])
{
	/* /proc/self/cmdline can be long (JVM-style command lines); read it into
	 * a bounded buffer and split on NULs. Arguments past 64 KiB are not part
	 * of the key (the hook never allocates unboundedly). Called once, from
	 * the one-time setup, so a static buffer is safe. */
	static char cmd[65536];
	size_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		for (;;) {
			ssize_t r = read(fd, cmd + n, sizeof cmd - 1 - n);
			if (r <= 0)
				break;
			n += (size_t)r;
			if (n == sizeof cmd - 1)
				break;
		}
		close(fd);
	}
	cmd[n] = '\0';
	if (n > 0 && cmd[n - 1] == '\0')
		n--; /* the last argument's terminator */
	char *argv[4096];
	int argc = 0;
	if (n > 0) {
		char *p = cmd, *end = cmd + n;
		while (argc < (int)(sizeof argv / sizeof argv[0])) {
			argv[argc++] = p;
			char *z = memchr(p, '\0', (size_t)(end - p));
			if (!z)
				break;
			p = z + 1;
			if (p > end)
				break;
		}
	}
	return fk_task_key_argv(out, argc, argv);
}
