/* log.h — the hook's one output channel: single lines on stderr, written
 * with one write(2) each so they never interleave with the service's output
 * mid-line and never touch the service's stdio buffers. */
#ifndef FIKIT_LOG_H
#define FIKIT_LOG_H

enum { FK_LOG_OFF = 0, FK_LOG_WARN = 1, FK_LOG_INFO = 2, FK_LOG_DEBUG = 3 };

extern int fk_log_level;

void fk_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The level test is inline so a disabled debug line costs one compare. */
#define fk_log(level, ...)                                                                         \
	do {                                                                                       \
		if ((level) <= fk_log_level)                                                       \
			fk_log_write((level), __VA_ARGS__);                                        \
	} while (0)

#endif
