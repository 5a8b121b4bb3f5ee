/* test_wire.c — the C msgpack against the shared protocol vectors, every
 * message read by the generated table (wire_gen.h): udp/testdata/vectors.txt
 * (encode each message the hook sends and compare the bytes; decode each one
 * it receives and compare the fields), decode_only.txt (non-minimal
 * encodings a decoder must accept) and invalid.txt (every defect must be
 * rejected). */
#include "check.h"
#include "wire.h"
#include "wiretext.h"

#include <stdlib.h>
#include <string.h>

/* "<name> <text> | <hex>": the hex follows the last " | " (a string value
 * may hold " | " itself). */
static int split_vec(char *line, char **name, char **text, uint8_t *hex, long *hexlen, size_t cap)
{
	char *bar = NULL;
	for (char *p = strstr(line, " | "); p; p = strstr(p + 1, " | "))
		bar = p;
	char *sp = strchr(line, ' ');
	if (!bar || !sp || sp > bar)
		return -1;
	*bar = '\0';
	*sp = '\0';
	*name = line;
	*text = sp + 1;
	*hexlen = check_unhex(bar + 3, hex, cap);
	return *hexlen < 0 ? -1 : 0;
}

static int encoded = 0, decoded = 0;
static int seen_types[FK_MSG_TYPES];

/* The vector's fields, parsed by the generated table, must encode to its
 * bytes (hook → daemon) or be what its bytes decode to (daemon → hook). */
static void check_vec(const char *name, char *text, const uint8_t *hex, long hexlen, int encode)
{
	static char want[1 << 16], got[1 << 16];
	union {
		fk_msg_out out;
		fk_msg_in in;
	} m;
	wt_reset();
	int type = wt_parse(text, &m);
	if (type < 0) {
		CHECK(0, "%s: unparsable fields", name);
		return;
	}
	seen_types[type] = 1;
	if (fk_wire_msgs[type].dir == FK_DIR_TO_DAEMON) {
		if (!encode)
			return;
		static uint8_t buf[4096];
		size_t n = fk_encode(buf, FK_MAX_DATAGRAM, &m.out);
		encoded++;
		CHECK(n == (size_t)hexlen && memcmp(buf, hex, n) == 0, "%s: encoding differs (%zu vs %ld bytes)", name, n,
		      hexlen);
		return;
	}
	decoded++;
	fk_msg_in in;
	if (fk_decode(hex, (size_t)hexlen, &in) != 0 || in.type != type) {
		CHECK(0, "%s: not decoded as %s", name, fk_wire_msgs[type].name);
		return;
	}
	/* A decoded array is the datagram's bytes of its elements: read them
	 * (fk_decode_elems) into structs, as the vector's text has them. */
	static uint8_t elems[FK_MAX_DATAGRAM * 16];
	const fk_wire_msg *d = &fk_wire_msgs[type];
	for (uint8_t i = 0; i < d->nfields; i++) {
		const fk_wire_field *f = &d->fields[i];
		if (!f->elems)
			continue;
		size_t n = *(size_t *)((uint8_t *)&in + f->len_off);
		size_t k = fk_decode_elems(&in, elems, sizeof elems / f->elem_size);
		CHECK(k == n, "%s: %zu of %zu elements read back", name, k, n);
		*(const uint8_t **)((uint8_t *)&in + f->off) = elems;
	}
	wt_format(want, sizeof want, type, &m.in); /* canonical: trailing optional zeros left out */
	wt_format(got, sizeof got, type, &in);
	CHECK(strcmp(got, want) == 0, "%s: decodes to\n  %s\nwant\n  %s", name, got, want);
}

static void run_file(const char *rel, int encode)
{
	FILE *f = check_open(rel);
	static char line[65536];
	static uint8_t hex[4096];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		char *name, *text;
		long hexlen;
		if (split_vec(line, &name, &text, hex, &hexlen, sizeof hex)) {
			CHECK(0, "%s: unparsable line: %.60s", rel, line);
			continue;
		}
		check_vec(name, text, hex, hexlen, encode);
	}
	fclose(f);
}

static void invalid(void)
{
	FILE *f = check_open("udp/testdata/invalid.txt");
	static char line[65536];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		char *fields[3];
		if (check_split(line, fields, 3, '|') != 3) {
			CHECK(0, "invalid.txt: unparsable line %.60s", line);
			continue;
		}
		char *hex = fields[1];
		while (*hex == ' ')
			hex++;
		hex[strcspn(hex, " ")] = '\0';
		static uint8_t buf[8192];
		long len = check_unhex(hex, buf, sizeof buf);
		CHECK(len >= 0, "invalid.txt: bad hex in %s", fields[0]);
		fk_msg_in m;
		CHECK(fk_decode(buf, (size_t)len, &m) != 0, "%s accepted", fields[0]);
		n++;
	}
	fclose(f);
	CHECK(n > 50, "only %d invalid vectors", n);
}

/* Round trip through the encoder's own bounds: a datagram that does not fit
 * is refused (0), never truncated silently; a value out of range too. */
static void overflow(void)
{
	uint8_t buf[8];
	fk_msg_out m = {.type = FK_MSG_LAUNCH_NOTIFY, .task_id = 1, .seq = 1, .kernel_id = UINT64_MAX};
	CHECK(fk_encode(buf, sizeof buf, &m) == 0, "overflow not reported");
	static uint8_t big[FK_MAX_DATAGRAM];
	CHECK(fk_encode(big, sizeof big, &(fk_msg_out){.type = FK_MSG_REGISTER, .priority = 10}) == 0,
	      "priority 10 encoded");
	CHECK(fk_encode(big, sizeof big, &(fk_msg_out){.type = FK_MSG_GRANT}) == 0, "a daemon → hook type encoded");
	/* The sender packs (1400 - FK_MEAS_HEAD_MAX) / FK_MEAS_REC_MAX records:
	 * that many worst-case records must fit, one more must not. */
	enum { PER = (FK_MAX_DATAGRAM - FK_MEAS_HEAD_MAX) / FK_MEAS_REC_MAX };
	fk_meas_rec r[PER + 1];
	for (int i = 0; i <= PER; i++)
		r[i] = (fk_meas_rec){UINT64_MAX, UINT64_MAX, UINT64_MAX, 3};
	fk_msg_out ms = {.type = FK_MSG_MEASUREMENTS, .task_id = UINT32_MAX, .token = UINT64_MAX, .run = UINT32_MAX,
			 .records = r, .records_n = PER};
	CHECK(fk_encode(big, sizeof big, &ms) > 0, "%d records must fit", PER);
	ms.records_n = PER + 1;
	CHECK(fk_encode(big, sizeof big, &ms) == 0, "%d records fit", PER + 1);
	r[0].flags = 4;
	ms.records_n = 1;
	CHECK(fk_encode(big, sizeof big, &ms) == 0, "record flags 4 encoded");
	/* The sender packs FK_BATCH_MAX launches: worst case they fit, one more not. */
	static fk_launch l[FK_BATCH_MAX + 1];
	for (int i = 0; i <= FK_BATCH_MAX; i++)
		l[i] = (fk_launch){UINT64_MAX, UINT32_MAX};
	fk_msg_out lb = {.type = FK_MSG_LAUNCH_BATCH, .task_id = UINT32_MAX, .token = UINT64_MAX, .seq = UINT32_MAX,
			 .base_ns = UINT64_MAX, .launches = l, .launches_n = FK_BATCH_MAX};
	CHECK(fk_encode(big, sizeof big, &lb) > 0, "%d launches must fit", FK_BATCH_MAX);
	lb.launches_n = FK_BATCH_MAX + 1;
	CHECK(fk_encode(big, sizeof big, &lb) == 0, "%d launches fit", FK_BATCH_MAX + 1);
	/* A name too long for the room left is cut so the datagram fills it. */
	static char name[3000];
	memset(name, 'n', sizeof name);
	fk_msg_out ki = {.type = FK_MSG_KERNEL_INFO, .task_id = 1, .kernel_id = 2, .name = name, .name_len = sizeof name};
	CHECK(fk_encode(big, 1382, &ki) == 1382, "KernelInfo not cut to the room");
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	run_file("udp/testdata/vectors.txt", 1);
	int enc = encoded, dec = decoded;
	CHECK(enc >= 40, "only %d encode vectors", enc);
	CHECK(dec >= 20, "only %d decode vectors", dec);
	for (int t = 1; t < FK_MSG_TYPES; t++)
		CHECK(!fk_wire_msgs[t].name || seen_types[t], "no vector of %s", fk_wire_msgs[t].name);
	run_file("udp/testdata/decode_only.txt", 0);
	CHECK(decoded > dec, "no decode-only vectors for the hook's types");
	invalid();
	overflow();
	printf("test_wire: %d encoded, %d decoded\n", encoded, decoded);
	return check_done("test_wire");
}
