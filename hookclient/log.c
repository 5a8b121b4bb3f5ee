/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int fk_log_level = FK_LOG_WARN;

void fk_log_write(int level, const char *fmt, ...)
{
	static const char *const names[] = {"", "warning: ", "", "debug: "};
	char line[1024];
	int n = snprintf(line, sizeof line, "fikit-hook[%d]: %s", (int)getpid(), names[level & 3]);
	if (n < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w; /* nothing useful to do if stderr is gone */
}
