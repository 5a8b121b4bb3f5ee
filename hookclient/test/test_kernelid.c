/* test_kernelid.c — kernel IDs, graph names and task keys against the
 * vectors the Go package kernelid writes (kernelid/testdata). */
#include "check.h"
#include "kernelid.h"

#include <stdlib.h>
#include <string.h>

static void kernel_ids(void)
{
	FILE *f = check_open("kernelid/testdata/kernel_ids.tsv");
	static char line[1 << 16];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		char *fld[3];
		if (check_split(line, fld, 3, '\t') != 3) {
			CHECK(0, "bad line %.40s", line);
			continue;
		}
		uint64_t want = strtoull(fld[0], NULL, 16);
		uint32_t d[6];
		CHECK(sscanf(fld[1], "%u %u %u %u %u %u", &d[0], &d[1], &d[2], &d[3], &d[4], &d[5]) == 6, "dims %s",
		      fld[1]);
		long len = check_unescape(fld[2]);
		CHECK(len >= 0, "escape in %.40s", fld[2]);
		uint64_t got = fk_kid(fld[2], (size_t)len, d);
		CHECK(got == want, "%.60s %s: got %016llx want %016llx", fld[2], fld[1], (unsigned long long)got,
		      (unsigned long long)want);
		/* The hot path's split (cached name state + per-launch finish)
		 * is the same function. */
		CHECK(fk_kid_finish(fk_kid_name_state(fld[2], (size_t)len), d) == want, "split form differs");
		n++;
	}
	fclose(f);
	CHECK(n >= 20, "only %d kernel ID vectors", n);
}

static void task_keys(void)
{
	FILE *f = check_open("kernelid/testdata/task_keys.tsv");
	static char line[1 << 16];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#')
			continue;
		char *fld[512];
		int nf = check_split(line, fld, 512, '\t');
		if (nf < 2) {
			CHECK(0, "bad line %.40s", line);
			continue;
		}
		for (int i = 0; i < nf; i++)
			CHECK(check_unescape(fld[i]) >= 0, "escape in %.40s", fld[i]);
		char key[FK_TASK_KEY_MAX + 1];
		size_t len = fk_task_key_argv(key, nf - 1, fld + 1);
		CHECK(len == strlen(fld[0]) && !strcmp(key, fld[0]), "argv %.40s: got \"%s\" want \"%s\"", fld[1], key,
		      fld[0]);
		n++;
	}
	fclose(f);
	CHECK(n >= 10, "only %d task key vectors", n);
}

static void key_cut(void)
{
	char key[FK_TASK_KEY_MAX + 1], big[400];
	CHECK(fk_task_key_cut(key, "svc", 3) == 3 && !strcmp(key, "svc"), "short key changed");
	memset(big, 'a', 200);
	CHECK(fk_task_key_cut(key, big, 200) == 200 && !memcmp(key, big, 200), "200-byte key changed");
	memset(big, 'a', 201);
	/* Same as the argv form of one 201-byte argument (a vector above). */
	char *argv[] = {big};
	big[201] = '\0';
	char viaargv[FK_TASK_KEY_MAX + 1];
	fk_task_key_argv(viaargv, 1, argv);
	CHECK(fk_task_key_cut(key, big, 201) == 200 && !strcmp(key, viaargv) && key[183] == '~',
	      "override cut differs from argv cut: %s", key);
}

static void graph_names(void)
{
	uint64_t ids[] = {0x1a60b5313197dee7ULL, 0xf};
	char buf[128];
	size_t n = fk_graph_name(buf, sizeof buf, ids, 2);
	const char *want = "fikit.graph:1a60b5313197dee7,000000000000000f";
	CHECK(n == strlen(want) && !strcmp(buf, want), "graph name %s", buf);
	CHECK(fk_graph_name(NULL, 0, ids, 2) == n, "length-only call differs");
	char small[8];
	CHECK(fk_graph_name(small, sizeof small, ids, 2) == n && strlen(small) == 7, "truncation");
	/* The vector file's empty graph: "fikit.graph:" with zero dims. */
	uint32_t z[6] = {0};
	CHECK(fk_graph_name(buf, sizeof buf, NULL, 0) == 12 && fk_kid(buf, 12, z) == 0x9ce5a121c0633378ULL,
	      "empty graph ID");
}

static void self_key(int argc, char **argv)
{
	char a[FK_TASK_KEY_MAX + 1], b[FK_TASK_KEY_MAX + 1];
	fk_task_key_argv(a, argc, argv);
	fk_task_key_self(b);
	CHECK(!strcmp(a, b), "/proc/self/cmdline key \"%s\" differs from argv's \"%s\"", b, a);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	kernel_ids();
	task_keys();
	key_cut();
	graph_names();
	self_key(argc, argv);
	return check_done("test_kernelid");
}
