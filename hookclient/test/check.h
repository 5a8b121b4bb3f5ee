/* check.h — the C tests' few helpers: failures are counted and reported
 * with file:line, the vector files are found from the repository root
 * (argv[1]) and their escapes (design: \\ \t \n \xHH) decoded. */
#ifndef FIKIT_CHECK_H
#define FIKIT_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int check_failures;
extern const char *check_root;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

/* Open root/rel for reading; exits the test with a clear message if absent. */
FILE *check_open(const char *rel);
/* Decode the design's escapes in place; returns the decoded length, or -1. */
long check_unescape(char *s);
/* Split line (modified) at tabs into at most max fields; returns the count. */
int check_split(char *line, char **fields, int max, char sep);
/* Hex string to bytes; returns the length or -1. */
long check_unhex(const char *hex, uint8_t *out, size_t cap);
int check_done(const char *name);
void check_init(int argc, char **argv);

#endif
