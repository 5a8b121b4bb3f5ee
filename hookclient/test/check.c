/* check.c — see check.h. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

int check_failures;
const char *check_root = ".";

void check_init(int argc, char **argv)
{
	if (argc > 1)
		check_root = argv[1];
}

FILE *check_open(const char *rel)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", check_root, rel);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "cannot open %s: the shared vector file is missing\n", path);
		exit(2);
	}
	return f;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long check_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (*r != '\\') {
			*w++ = *r;
			continue;
		}
		r++;
		switch (*r) {
		case '\\': *w++ = '\\'; break;
		case 't': *w++ = '\t'; break;
		case 'n': *w++ = '\n'; break;
		case '"': *w++ = '"'; break;
		case 'x': {
			int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);
			if (hi < 0 || lo < 0)
				return -1;
			*w++ = (char)(hi << 4 | lo);
			r += 2;
			break;
		}
		default:
			return -1;
		}
	}
	*w = '\0';
	return (long)(w - s);
}

int check_split(char *line, char **fields, int max, char sep)
{
	int n = 0;
	char *p = line;
	while (n < max) {
		fields[n++] = p;
		char *t = strchr(p, sep);
		if (!t)
			break;
		*t = '\0';
		p = t + 1;
	}
	return n;
}

long check_unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

int check_done(const char *name)
{
	if (check_failures) {
		fprintf(stderr, "%s: %d failure(s)\n", name, check_failures);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}
