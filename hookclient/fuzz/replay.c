/* replay.c — the fuzz targets' main where clang's libFuzzer is not there
 * (docs/operations.md "Fuzzing"): every input file named or found in the
 * directories named, then -runs=N inputs mutated from them (bit flips,
 * byte changes, insertions, deletions, truncation, splices) by a fixed
 * PRNG, so a run is repeatable and bounded in executions. An input that
 * breaks a property aborts, after its bytes are written to
 * -artifact_prefix=P (P + "crash-<n>"). Flags libFuzzer takes and this
 * does not understand are ignored. Built with gcc's ASan and UBSan. */
#include "fuzz.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

typedef struct {
	uint8_t *p;
	size_t n;
} input;

static input *corpus;
static size_t ncorpus, capcorpus;
static const char *artifact = "./";
static const uint8_t *current;
static size_t current_n;
static unsigned long executed;

static void add(uint8_t *p, size_t n)
{
	if (ncorpus == capcorpus) {
		capcorpus = capcorpus ? 2 * capcorpus : 64;
		corpus = realloc(corpus, capcorpus * sizeof *corpus);
		if (!corpus)
			abort();
	}
	corpus[ncorpus++] = (input){p, n};
}

static void load_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return;
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	add(buf, n);
}

static void load(const char *path)
{
	struct stat st;
	if (stat(path, &st))
		return;
	if (!S_ISDIR(st.st_mode)) {
		load_file(path);
		return;
	}
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", path, e->d_name);
		load_file(p);
	}
	if (d)
		closedir(d);
}

/* On abort (a property or a sanitizer report), keep the input. */
static void on_abort(int sig)
{
	char p[4096];
	snprintf(p, sizeof p, "%scrash-%lu", artifact, executed);
	FILE *f = fopen(p, "wb");
	if (f) {
		fwrite(current, 1, current_n, f);
		fclose(f);
		fprintf(stderr, "replay: input %lu written to %s\n", executed, p);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void run(const uint8_t *p, size_t n)
{
	current = p;
	current_n = n;
	uint8_t *copy = fk_fuzz_copy(p, n);
	LLVMFuzzerTestOneInput(copy, n);
	free(copy);
	executed++;
}

static size_t mutate(uint8_t *buf, size_t n, size_t cap)
{
	for (int k = 1 + (int)(next() % 4); k > 0; k--) {
		switch (next() % 7) {
		case 0: /* flip a bit */
			if (n)
				buf[next() % n] ^= (uint8_t)(1u << (next() % 8));
			break;
		case 1: /* an interesting byte */
			if (n) {
				static const uint8_t v[] = {0, 1, 0x7f, 0x80, 0xc0, 0xc1, 0xcc, 0xcf, 0xd9, 0xdc, 0xdd, 0xff};
				buf[next() % n] = v[next() % sizeof v];
			}
			break;
		case 2: /* insert a byte */
			if (n < cap) {
				size_t at = next() % (n + 1);
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = (uint8_t)next();
				n++;
			}
			break;
		case 3: /* delete a range */
			if (n) {
				size_t at = next() % n, len = 1 + next() % (n - at);
				memmove(buf + at, buf + at + len, n - at - len);
				n -= len;
			}
			break;
		case 4: /* truncate */
			if (n)
				n = next() % n;
			break;
		case 5: { /* splice another input in */
			const input *o = &corpus[next() % ncorpus];
			if (o->n) {
				size_t from = next() % o->n, len = 1 + next() % (o->n - from), at = next() % (n + 1);
				if (len > cap - n)
					len = cap - n;
				memmove(buf + at + len, buf + at, n - at);
				memcpy(buf + at, o->p + from, len);
				n += len;
			}
			break;
		}
		default: /* a random byte */
			if (n)
				buf[next() % n] = (uint8_t)next();
		}
	}
	return n;
}

int main(int argc, char **argv)
{
	unsigned long runs = 0;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "-runs=", 6))
			runs = strtoul(argv[i] + 6, NULL, 10);
		else if (!strncmp(argv[i], "-artifact_prefix=", 17))
			artifact = argv[i] + 17;
		else if (argv[i][0] != '-')
			load(argv[i]);
	}
	signal(SIGABRT, on_abort);
	if (!ncorpus)
		add(calloc(1, 1), 0);
	for (size_t i = 0; i < ncorpus; i++)
		run(corpus[i].p, corpus[i].n);
	size_t cap = 8192;
	uint8_t *buf = malloc(cap);
	for (unsigned long r = 0; r < runs; r++) {
		const input *in = &corpus[next() % ncorpus];
		size_t n = in->n < cap ? in->n : cap;
		memcpy(buf, in->p, n);
		n = mutate(buf, n, cap);
		run(buf, n);
	}
	fprintf(stderr, "replay: %zu corpus inputs and %lu mutations run, no failure\n", ncorpus, runs);
	return 0;
}
