/* fuzz.h — shared by the C fuzz targets (hookclient/fuzz/): libFuzzer's
 * entry point, a failed property as a crash (so libFuzzer keeps the input),
 * and exact-size copies of inputs. Built with clang's libFuzzer where
 * there is one, else with replay.c's main (docs/operations.md "Fuzzing"). */
#ifndef FIKIT_FUZZ_H
#define FIKIT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FK_MAX_FUZZ_DATAGRAM 2048

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FK_FUZZ_CHECK(cond, ...)                                                                   \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static inline uint8_t *fk_fuzz_copy(const uint8_t *data, size_t n)
{
	uint8_t *p = calloc(1, n ? n : 1);
	if (!p)
		abort();
	if (n)
		memcpy(p, data, n);
	return p;
}

static inline void fk_fuzz_free(uint8_t *p) { free(p); }

#endif
