/* test_wire.c — the C msgpack against the shared protocol vectors:
 * udp/testdata/vectors.txt (encode the messages the hook sends and compare
 * the bytes; decode the ones it receives and compare the fields),
 * decode_only.txt (non-minimal encodings a decoder must accept) and
 * invalid.txt (every defect must be rejected). */
#include "check.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define MAXF 16

typedef struct field {
	char *key, *val;
} field;

typedef struct vec {
	char *name, *type;
	field f[MAXF];
	int nf;
	uint8_t hex[4096];
	long hexlen;
} vec;

/* "<name> <Type> k=v ... | <hex>": the hex follows the last " | "; string
 * values are quoted with '"' escaped, so they may hold spaces and " | ". */
static int parse_vec(char *line, vec *v)
{
	char *bar = NULL;
	for (char *p = strstr(line, " | "); p; p = strstr(p + 1, " | "))
		bar = p;
	if (!bar)
		return -1;
	*bar = '\0';
	v->hexlen = check_unhex(bar + 3, v->hex, sizeof v->hex);
	char *p = line;
	v->name = p;
	p = strchr(p, ' ');
	if (!p)
		return -1;
	*p++ = '\0';
	v->type = p;
	p = strchr(p, ' ');
	v->nf = 0;
	while (p && *p) {
		*p++ = '\0';
		if (!*p)
			break;
		char *eq = strchr(p, '=');
		if (!eq || v->nf == MAXF)
			return -1;
		*eq = '\0';
		v->f[v->nf].key = p;
		char *val = eq + 1;
		if (*val == '"') {
			char *close = strchr(val + 1, '"');
			if (!close)
				return -1;
			*close = '\0';
			v->f[v->nf].val = val + 1;
			p = close + 1;
		} else {
			v->f[v->nf].val = val;
			p = strchr(val, ' ');
		}
		v->nf++;
	}
	return v->hexlen < 0 ? -1 : 0;
}

static const char *find(vec *v, const char *key)
{
	for (int i = 0; i < v->nf; i++)
		if (!strcmp(v->f[i].key, key))
			return v->f[i].val;
	return NULL;
}

static const char *get(vec *v, const char *key)
{
	const char *s = find(v, key);
	if (!s) {
		fprintf(stderr, "%s: no field %s\n", v->name, key);
		exit(2);
	}
	return s;
}

/* Optional fields (design: wire protocol) are absent from a vector when zero. */
static int optional(const char *key)
{
	static const char *const opt[] = {"seen_ns", "expires_ns", "board", "board_gen", "board_gpu", "token", "weight"};
	for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
		if (!strcmp(key, opt[i]))
			return 1;
	return 0;
}

static uint64_t num(vec *v, const char *key)
{
	const char *s = optional(key) ? find(v, key) : get(v, key);
	return s ? strtoull(s, NULL, 10) : 0;
}

static size_t str(vec *v, const char *key, char *out)
{
	strcpy(out, get(v, key));
	long n = check_unescape(out);
	if (n < 0) {
		fprintf(stderr, "%s: bad escape in %s\n", v->name, key);
		exit(2);
	}
	return (size_t)n;
}

static void triple(vec *v, const char *key, uint32_t *out)
{
	const char *s = get(v, key);
	if (sscanf(s, "[%u,%u,%u]", &out[0], &out[1], &out[2]) != 3) {
		fprintf(stderr, "%s: bad triple %s\n", v->name, s);
		exit(2);
	}
}

static size_t records(vec *v, fk_meas_rec *r, size_t max)
{
	const char *s = get(v, "records");
	size_t n = 0;
	if (strcmp(s, "[]") == 0)
		return 0;
	const char *p = s + 1;
	while (*p == '[' && n < max) {
		unsigned long long a, b, c;
		unsigned f;
		int used;
		if (sscanf(p, "[%llu,%llu,%llu,%u]%n", &a, &b, &c, &f, &used) != 4)
			break;
		r[n++] = (fk_meas_rec){a, b, c, (uint8_t)f};
		p += used;
		if (*p == ';')
			p++;
	}
	return n;
}

static size_t launches(vec *v, uint64_t *kid, uint32_t *off, size_t max)
{
	const char *s = get(v, "launches");
	size_t n = 0;
	if (strcmp(s, "[]") == 0)
		return 0;
	const char *p = s + 1;
	while (*p == '[' && n < max) {
		unsigned long long a;
		unsigned b;
		int used;
		if (sscanf(p, "[%llu,%u]%n", &a, &b, &used) != 2)
			break;
		kid[n] = a;
		off[n++] = b;
		p += used;
		if (*p == ';')
			p++;
	}
	return n;
}

static int encoded = 0, decoded = 0;

static void encode_check(vec *v)
{
	static uint8_t buf[4096];
	static char s1[8192], s2[8192];
	size_t n = 0;
	const char *t = v->type;
	if (!strcmp(t, "Register")) {
		fk_register m = {0};
		m.seq = (uint32_t)num(v, "seq");
		m.task_key_len = str(v, "task_key", s1);
		m.task_key = s1;
		m.pid = (uint32_t)num(v, "pid");
		m.priority = (uint8_t)num(v, "priority");
		CHECK(check_unhex(get(v, "device_uuid") + 4, m.uuid, 16) == 16, "%s uuid", v->name);
		m.device_name_len = str(v, "device_name", s2);
		m.device_name = s2;
		m.hook_flags = (uint32_t)num(v, "hook_flags");
		m.weight = (uint32_t)num(v, "weight");
		n = fk_enc_register(buf, FK_MAX_DATAGRAM, &m);
	}
	fk_who who = {0, 0};
	if (find(v, "task_id"))
		who = (fk_who){(uint32_t)num(v, "task_id"), num(v, "token")};
	if (!strcmp(t, "Register")) {
		/* encoded above */
	} else if (!strcmp(t, "LaunchNotify") || !strcmp(t, "LaunchRequest")) {
		n = fk_enc_launch(buf, FK_MAX_DATAGRAM, t[6] == 'N' ? FK_MSG_LAUNCH_NOTIFY : FK_MSG_LAUNCH_REQUEST,
				  who, (uint32_t)num(v, "seq"), num(v, "kernel_id"));
	} else if (!strcmp(t, "Measurements")) {
		static fk_meas_rec r[256];
		size_t nr = records(v, r, 256);
		n = fk_enc_measurements(buf, FK_MAX_DATAGRAM, who, (uint32_t)num(v, "run"), r, nr);
	} else if (!strcmp(t, "RunEnd")) {
		n = fk_enc_run_end(buf, FK_MAX_DATAGRAM, who, (uint32_t)num(v, "run"),
				   (uint32_t)num(v, "kernels"), num(v, "run_ns"), (uint8_t)num(v, "reason"),
				   (uint32_t)num(v, "last_seq"));
	} else if (!strcmp(t, "Heartbeat") || !strcmp(t, "Goodbye")) {
		n = fk_enc_task_only(buf, FK_MAX_DATAGRAM, t[0] == 'H' ? FK_MSG_HEARTBEAT : FK_MSG_GOODBYE, who);
	} else if (!strcmp(t, "LaunchBatch")) {
		static uint64_t kid[256];
		static uint32_t off[256];
		size_t nl = launches(v, kid, off, 256);
		n = fk_enc_launch_batch(buf, FK_MAX_DATAGRAM, who, (uint32_t)num(v, "seq"),
					num(v, "base_ns"), kid, off, nl);
	} else if (!strcmp(t, "KernelInfo")) {
		uint32_t dims[6];
		triple(v, "grid", dims);
		triple(v, "block", dims + 3);
		size_t len = str(v, "name", s1);
		n = fk_enc_kernel_info(buf, FK_MAX_DATAGRAM, who, num(v, "kernel_id"), s1, len, dims);
	} else {
		return;
	}
	encoded++;
	CHECK(n == (size_t)v->hexlen && memcmp(buf, v->hex, n) == 0, "%s: encoding differs (%zu vs %ld bytes)",
	      v->name, n, v->hexlen);
}

static void decode_check(vec *v)
{
	static const char *const names[] = {"RegisterAck", "Grant", "Hold", "State", "Error"};
	int type = 0;
	for (int i = 0; i < 5; i++)
		if (!strcmp(v->type, names[i]))
			type = FK_MSG_REGISTER_ACK + i;
	if (!type)
		return;
	decoded++;
	fk_msg_in m;
	if (fk_decode(v->hex, (size_t)v->hexlen, &m) != 0 || m.type != type) {
		CHECK(0, "%s: not decoded as %s", v->name, v->type);
		return;
	}
	switch (type) {
	case FK_MSG_REGISTER_ACK:
		CHECK(m.seq == num(v, "seq") && m.task_id == num(v, "task_id") && m.role == num(v, "role") &&
			      m.phase == num(v, "phase") && m.profile_runs == num(v, "profile_runs") &&
			      m.heartbeat_ms == num(v, "heartbeat_ms") && m.board_gen == num(v, "board_gen") &&
			      m.board_gpu == num(v, "board_gpu") && m.token == num(v, "token"),
		      "%s: fields differ", v->name);
		{
			static char b[4096];
			size_t len = find(v, "board") ? str(v, "board", b) : 0;
			CHECK(m.board_len == len && (!len || memcmp(m.board, b, len) == 0), "%s: board differs", v->name);
		}
		break;
	case FK_MSG_GRANT:
		CHECK(m.task_id == num(v, "task_id") && m.seq == num(v, "seq") && m.credit == num(v, "credit") &&
			      m.seen_ns == num(v, "seen_ns") && m.expires_ns == num(v, "expires_ns"),
		      "%s: fields differ", v->name);
		break;
	case FK_MSG_HOLD:
		CHECK(m.task_id == num(v, "task_id") && m.seq == num(v, "seq"), "%s: fields differ", v->name);
		break;
	case FK_MSG_STATE:
		CHECK(m.task_id == num(v, "task_id") && m.role == num(v, "role") && m.phase == num(v, "phase") &&
			      m.credit == num(v, "credit") && m.seen_ns == num(v, "seen_ns") &&
			      m.expires_ns == num(v, "expires_ns"),
		      "%s: fields differ", v->name);
		break;
	case FK_MSG_ERROR: {
		static char msg[4096];
		size_t len = str(v, "message", msg);
		CHECK(m.code == num(v, "code") && m.task_id == num(v, "task_id") && m.message_len == len &&
			      memcmp(m.message, msg, len) == 0,
		      "%s: fields differ", v->name);
		break;
	}
	}
}

static void run_file(const char *rel, int encode)
{
	FILE *f = check_open(rel);
	static char line[65536];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		vec v;
		if (parse_vec(line, &v)) {
			CHECK(0, "%s: unparsable line: %.60s", rel, line);
			continue;
		}
		if (encode)
			encode_check(&v);
		decode_check(&v);
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
 * is refused (0), never truncated silently. */
static void overflow(void)
{
	uint8_t buf[8];
	CHECK(fk_enc_launch(buf, sizeof buf, FK_MSG_LAUNCH_NOTIFY, (fk_who){1, 0}, 1, UINT64_MAX) == 0,
	      "overflow not reported");
	const fk_who most = {UINT32_MAX, UINT64_MAX}; /* the largest ID and token */
	/* The sender packs (1400 - FK_MEAS_HEAD_MAX) / FK_MEAS_REC_MAX records:
	 * that many worst-case records must fit, one more must not. */
	enum { PER = (FK_MAX_DATAGRAM - FK_MEAS_HEAD_MAX) / FK_MEAS_REC_MAX };
	fk_meas_rec r[PER + 1];
	for (int i = 0; i <= PER; i++)
		r[i] = (fk_meas_rec){UINT64_MAX, UINT64_MAX, UINT64_MAX, 3};
	static uint8_t big[FK_MAX_DATAGRAM];
	CHECK(fk_enc_measurements(big, sizeof big, most, UINT32_MAX, r, PER) > 0, "%d records must fit", PER);
	CHECK(fk_enc_measurements(big, sizeof big, most, UINT32_MAX, r, PER + 1) == 0, "%d records fit",
	      PER + 1);
	/* The sender packs FK_BATCH_MAX launches: worst case they fit, one more not. */
	static uint64_t kid[FK_BATCH_MAX + 1];
	static uint32_t off[FK_BATCH_MAX + 1];
	for (int i = 0; i <= FK_BATCH_MAX; i++)
		kid[i] = UINT64_MAX, off[i] = UINT32_MAX;
	CHECK(fk_enc_launch_batch(big, sizeof big, most, UINT32_MAX, UINT64_MAX, kid, off, FK_BATCH_MAX) > 0,
	      "%d launches must fit", FK_BATCH_MAX);
	CHECK(fk_enc_launch_batch(big, sizeof big, most, UINT32_MAX, UINT64_MAX, kid, off, FK_BATCH_MAX + 1) == 0,
	      "%d launches fit", FK_BATCH_MAX + 1);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	run_file("udp/testdata/vectors.txt", 1);
	int enc = encoded, dec = decoded;
	CHECK(enc >= 40, "only %d encode vectors", enc);
	CHECK(dec >= 20, "only %d decode vectors", dec);
	run_file("udp/testdata/decode_only.txt", 0);
	CHECK(decoded > dec, "no decode-only vectors for the hook's types");
	invalid();
	overflow();
	printf("test_wire: %d encoded, %d decoded\n", encoded, decoded);
	return check_done("test_wire");
}
