/* wire.c — msgpack for wire protocol v1, written in-house because the hook
 * links nothing but libc. Only the subset the protocol uses is produced;
 * the decoder accepts every integer encoding whose value fits (design) and
 * skips any well-formed object after the known fields. */
#include "wire.h"

#include <string.h>

static inline void put1(fk_wbuf *w, uint8_t b)
{
	if (w->p < w->end)
		*w->p++ = b;
	else
		w->overflow = 1;
}

static void putbe(fk_wbuf *w, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		put1(w, (uint8_t)(v >> (8 * i)));
}

static void putraw(fk_wbuf *w, const void *b, size_t n)
{
	if ((size_t)(w->end - w->p) < n) {
		w->overflow = 1;
		w->p = w->end;
		return;
	}
	memcpy(w->p, b, n);
	w->p += n;
}

/* The smallest encoding of an unsigned value (design). */
void fk_mp_uint(fk_wbuf *w, uint64_t v)
{
	if (v < 0x80) {
		put1(w, (uint8_t)v);
	} else if (v <= 0xff) {
		put1(w, 0xcc);
		putbe(w, v, 1);
	} else if (v <= 0xffff) {
		put1(w, 0xcd);
		putbe(w, v, 2);
	} else if (v <= 0xffffffffu) {
		put1(w, 0xce);
		putbe(w, v, 4);
	} else {
		put1(w, 0xcf);
		putbe(w, v, 8);
	}
}

void fk_mp_str(fk_wbuf *w, const char *s, size_t n)
{
	if (n < 32) {
		put1(w, (uint8_t)(0xa0 | n));
	} else if (n <= 0xff) {
		put1(w, 0xd9);
		putbe(w, n, 1);
	} else if (n <= 0xffff) {
		put1(w, 0xda);
		putbe(w, n, 2);
	} else {
		put1(w, 0xdb);
		putbe(w, n, 4);
	}
	putraw(w, s, n);
}

void fk_mp_bin(fk_wbuf *w, const void *b, size_t n)
{
	if (n <= 0xff) {
		put1(w, 0xc4);
		putbe(w, n, 1);
	} else if (n <= 0xffff) {
		put1(w, 0xc5);
		putbe(w, n, 2);
	} else {
		put1(w, 0xc6);
		putbe(w, n, 4);
	}
	putraw(w, b, n);
}

void fk_mp_array(fk_wbuf *w, uint32_t n)
{
	if (n < 16) {
		put1(w, (uint8_t)(0x90 | n));
	} else if (n <= 0xffff) {
		put1(w, 0xdc);
		putbe(w, n, 2);
	} else {
		put1(w, 0xdd);
		putbe(w, n, 4);
	}
}

static void head(fk_wbuf *w, uint32_t nfields, int type)
{
	fk_mp_array(w, 2 + nfields);
	fk_mp_uint(w, FK_WIRE_VERSION);
	fk_mp_uint(w, (uint64_t)type);
}

static size_t done(const fk_wbuf *w) { return w->overflow ? 0 : fk_wbuf_len(w); }

/* The token, the optional last field of every message about a task. */
static size_t done_who(fk_wbuf *w, fk_who who)
{
	if (who.token)
		fk_mp_uint(w, who.token);
	return done(w);
}

size_t fk_enc_register(void *buf, size_t cap, const fk_register *m)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 7 + !!m->weight, FK_MSG_REGISTER);
	fk_mp_uint(&w, m->seq);
	fk_mp_str(&w, m->task_key, m->task_key_len);
	fk_mp_uint(&w, m->pid);
	fk_mp_uint(&w, m->priority);
	fk_mp_bin(&w, m->uuid, 16);
	fk_mp_str(&w, m->device_name, m->device_name_len);
	fk_mp_uint(&w, m->hook_flags);
	if (m->weight) /* optional: older daemons read a Register without it */
		fk_mp_uint(&w, m->weight);
	return done(&w);
}

size_t fk_enc_launch(void *buf, size_t cap, int type, fk_who who, uint32_t seq, uint64_t kid)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 3 + !!who.token, type);
	fk_mp_uint(&w, who.id);
	fk_mp_uint(&w, seq);
	fk_mp_uint(&w, kid);
	return done_who(&w, who);
}

size_t fk_enc_measurements(void *buf, size_t cap, fk_who who, uint32_t run, const fk_meas_rec *r, size_t n)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 3 + !!who.token, FK_MSG_MEASUREMENTS);
	fk_mp_uint(&w, who.id);
	fk_mp_uint(&w, run);
	fk_mp_array(&w, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		fk_mp_array(&w, 4);
		fk_mp_uint(&w, r[i].kernel_id);
		fk_mp_uint(&w, r[i].duration_ns);
		fk_mp_uint(&w, r[i].gap_ns);
		fk_mp_uint(&w, r[i].flags);
	}
	return done_who(&w, who);
}

size_t fk_enc_launch_batch(void *buf, size_t cap, fk_who who, uint32_t seq, uint64_t base_ns, const uint64_t *kid,
			   const uint32_t *off, size_t n)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 4 + !!who.token, FK_MSG_LAUNCH_BATCH);
	fk_mp_uint(&w, who.id);
	fk_mp_uint(&w, seq);
	fk_mp_uint(&w, base_ns);
	fk_mp_array(&w, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		fk_mp_array(&w, 2);
		fk_mp_uint(&w, kid[i]);
		fk_mp_uint(&w, off[i]);
	}
	return done_who(&w, who);
}

size_t fk_enc_run_end(void *buf, size_t cap, fk_who who, uint32_t run, uint32_t kernels, uint64_t run_ns,
		      uint8_t reason, uint32_t last_seq)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 6 + !!who.token, FK_MSG_RUN_END);
	fk_mp_uint(&w, who.id);
	fk_mp_uint(&w, run);
	fk_mp_uint(&w, kernels);
	fk_mp_uint(&w, run_ns);
	fk_mp_uint(&w, reason);
	fk_mp_uint(&w, last_seq);
	return done_who(&w, who);
}

size_t fk_enc_task_only(void *buf, size_t cap, int type, fk_who who)
{
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 1 + !!who.token, type);
	fk_mp_uint(&w, who.id);
	return done_who(&w, who);
}

static size_t uint_size(uint64_t v) { return v < 0x80 ? 1 : v <= 0xff ? 2 : v <= 0xffff ? 3 : v <= 0xffffffffu ? 5 : 9; }
static size_t str_head(size_t n) { return n < 32 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5; }

size_t fk_enc_kernel_info(void *buf, size_t cap, fk_who who, uint64_t kid, const char *name, size_t name_len,
			  const uint32_t dims[6])
{
	/* A name that would not fit is cut so the datagram is exactly cap bytes
	 * (design; the ID keeps the full name). The msgpack string header
	 * shrinks with the name, hence the loop. */
	size_t fixed = 3 + uint_size(who.id) + uint_size(kid) + 2 + (who.token ? uint_size(who.token) : 0);
	for (int i = 0; i < 6; i++)
		fixed += uint_size(dims[i]);
	if (name_len > cap)
		name_len = cap;
	while (name_len > 0 && fixed + str_head(name_len) + name_len > cap)
		name_len--;
	fk_wbuf w = fk_wbuf_make(buf, cap);
	head(&w, 5 + !!who.token, FK_MSG_KERNEL_INFO);
	fk_mp_uint(&w, who.id);
	fk_mp_uint(&w, kid);
	fk_mp_str(&w, name, name_len);
	for (int t = 0; t < 2; t++) {
		fk_mp_array(&w, 3);
		for (int i = 0; i < 3; i++)
			fk_mp_uint(&w, dims[3 * t + i]);
	}
	return done_who(&w, who);
}

/* ---- decoding ---- */

typedef struct rbuf {
	const uint8_t *p, *end;
} rbuf;

static int getbe(rbuf *r, int bytes, uint64_t *v)
{
	if (r->end - r->p < bytes)
		return -1;
	uint64_t x = 0;
	for (int i = 0; i < bytes; i++)
		x = x << 8 | *r->p++;
	*v = x;
	return 0;
}

/* Any msgpack integer whose value is within [0, max]. */
static int get_uint(rbuf *r, uint64_t max, uint64_t *v)
{
	if (r->p >= r->end)
		return -1;
	uint8_t t = *r->p++;
	uint64_t x;
	if (t < 0x80) {
		x = t;
	} else if (t >= 0xe0) {
		return -1; /* negative fixint */
	} else if (t >= 0xcc && t <= 0xcf) {
		if (getbe(r, 1 << (t - 0xcc), &x))
			return -1;
	} else if (t >= 0xd0 && t <= 0xd3) {
		int bytes = 1 << (t - 0xd0);
		if (getbe(r, bytes, &x))
			return -1;
		if (x >> (8 * bytes - 1) & 1)
			return -1; /* negative */
	} else {
		return -1;
	}
	if (x > max)
		return -1;
	*v = x;
	return 0;
}

static int get_u32(rbuf *r, uint32_t *v)
{
	uint64_t x;
	if (get_uint(r, UINT32_MAX, &x))
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int get_u8(rbuf *r, uint8_t lo, uint8_t hi, uint8_t *v)
{
	uint64_t x;
	if (get_uint(r, hi, &x) || x < lo)
		return -1;
	*v = (uint8_t)x;
	return 0;
}

static int get_str(rbuf *r, const char **s, size_t *n)
{
	if (r->p >= r->end)
		return -1;
	uint8_t t = *r->p++;
	uint64_t len;
	if ((t & 0xe0) == 0xa0)
		len = t & 0x1f;
	else if (t >= 0xd9 && t <= 0xdb) {
		if (getbe(r, 1 << (t - 0xd9), &len))
			return -1;
	} else
		return -1;
	if ((uint64_t)(r->end - r->p) < len)
		return -1;
	*s = (const char *)r->p;
	*n = (size_t)len;
	r->p += len;
	return 0;
}

static int get_array(rbuf *r, uint32_t *n)
{
	if (r->p >= r->end)
		return -1;
	uint8_t t = *r->p++;
	uint64_t x;
	if ((t & 0xf0) == 0x90)
		x = t & 0x0f;
	else if (t == 0xdc || t == 0xdd) {
		if (getbe(r, t == 0xdc ? 2 : 4, &x))
			return -1;
	} else
		return -1;
	*n = (uint32_t)x;
	return 0;
}

static int skip_n(rbuf *r, uint64_t n)
{
	if ((uint64_t)(r->end - r->p) < n)
		return -1;
	r->p += n;
	return 0;
}

/* Skip one well-formed object (ignored extra fields). depth bounds the
 * recursion so a hostile datagram cannot exhaust the stack. */
static int skip_obj(rbuf *r, int depth)
{
	if (depth > 32 || r->p >= r->end)
		return -1;
	uint8_t t = *r->p++;
	uint64_t n;
	if (t < 0x80 || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3)
		return 0;
	if ((t & 0xe0) == 0xa0)
		return skip_n(r, t & 0x1f);
	if ((t & 0xf0) == 0x90 || (t & 0xf0) == 0x80) {
		uint64_t items = (uint64_t)(t & 0x0f) * ((t & 0xf0) == 0x80 ? 2 : 1);
		for (uint64_t i = 0; i < items; i++)
			if (skip_obj(r, depth + 1))
				return -1;
		return 0;
	}
	switch (t) {
	case 0xcc: case 0xd0: return skip_n(r, 1);
	case 0xcd: case 0xd1: return skip_n(r, 2);
	case 0xce: case 0xd2: case 0xca: return skip_n(r, 4);
	case 0xcf: case 0xd3: case 0xcb: return skip_n(r, 8);
	case 0xd4: return skip_n(r, 2);
	case 0xd5: return skip_n(r, 3);
	case 0xd6: return skip_n(r, 5);
	case 0xd7: return skip_n(r, 9);
	case 0xd8: return skip_n(r, 17);
	case 0xc4: case 0xd9: return getbe(r, 1, &n) ? -1 : skip_n(r, n);
	case 0xc5: case 0xda: return getbe(r, 2, &n) ? -1 : skip_n(r, n);
	case 0xc6: case 0xdb: return getbe(r, 4, &n) ? -1 : skip_n(r, n);
	case 0xc7: return getbe(r, 1, &n) ? -1 : skip_n(r, n + 1);
	case 0xc8: return getbe(r, 2, &n) ? -1 : skip_n(r, n + 1);
	case 0xc9: return getbe(r, 4, &n) ? -1 : skip_n(r, n + 1);
	case 0xdc: case 0xde:
	case 0xdd: case 0xdf: {
		if (getbe(r, (t == 0xdc || t == 0xde) ? 2 : 4, &n))
			return -1;
		uint64_t items = (t >= 0xde) ? 2 * n : n;
		for (uint64_t i = 0; i < items; i++)
			if (skip_obj(r, depth + 1))
				return -1;
		return 0;
	}
	}
	return -1; /* 0xc1, never used */
}

/* The optional seen_ns and expires_ns of Grant and State, after the need
 * fields already read. */
static int get_gate(rbuf *r, uint32_t n, uint32_t *need, fk_msg_in *m)
{
	if (n > 2 + *need && ++*need && get_uint(r, UINT64_MAX, &m->seen_ns))
		return -1;
	if (n > 2 + *need && ++*need && get_uint(r, UINT64_MAX, &m->expires_ns))
		return -1;
	return 0;
}

int fk_decode(const void *buf, size_t len, fk_msg_in *m)
{
	rbuf r = {(const uint8_t *)buf, (const uint8_t *)buf + len};
	uint32_t n;
	uint64_t v;
	memset(m, 0, sizeof *m);
	if (len > FK_MAX_DATAGRAM || get_array(&r, &n) || n < 2)
		return -1;
	if (get_uint(&r, UINT64_MAX, &v) || v != FK_WIRE_VERSION)
		return -1;
	if (get_uint(&r, 255, &v))
		return -1;
	m->type = (int)v;
	uint32_t need;
	int bad = 0;
	switch (m->type) {
	case FK_MSG_REGISTER_ACK:
		need = 6;
		if (n < 2 + need)
			return -1;
		bad = get_u32(&r, &m->seq) || get_u32(&r, &m->task_id) ||
		      get_u8(&r, FK_ROLE_HOLDER, FK_ROLE_WAITER, &m->role) ||
		      get_u8(&r, FK_PHASE_PROFILING, FK_PHASE_SHARING, &m->phase) ||
		      get_u32(&r, &m->profile_runs) || get_u32(&r, &m->heartbeat_ms);
		/* optional (design: absent reads as zero) */
		if (!bad && n > 2 + need && ++need)
			bad = get_str(&r, &m->board, &m->board_len);
		if (!bad && n > 2 + need && ++need)
			bad = get_uint(&r, UINT64_MAX, &m->board_gen);
		if (!bad && n > 2 + need && ++need)
			bad = get_u8(&r, 0, FK_BOARD_GPUS - 1, &m->board_gpu);
		if (!bad && n > 2 + need && ++need)
			bad = get_uint(&r, UINT64_MAX, &m->token);
		break;
	case FK_MSG_GRANT:
		need = 3;
		if (n < 2 + need)
			return -1;
		bad = get_u32(&r, &m->task_id) || get_u32(&r, &m->seq) || get_u32(&r, &m->credit) ||
		      get_gate(&r, n, &need, m);
		break;
	case FK_MSG_HOLD:
		need = 2;
		if (n < 2 + need)
			return -1;
		bad = get_u32(&r, &m->task_id) || get_u32(&r, &m->seq);
		break;
	case FK_MSG_STATE:
		need = 4;
		if (n < 2 + need)
			return -1;
		bad = get_u32(&r, &m->task_id) || get_u8(&r, FK_ROLE_HOLDER, FK_ROLE_WAITER, &m->role) ||
		      get_u8(&r, FK_PHASE_PROFILING, FK_PHASE_SHARING, &m->phase) || get_u32(&r, &m->credit) ||
		      get_gate(&r, n, &need, m);
		break;
	case FK_MSG_ERROR:
		need = 3;
		if (n < 2 + need)
			return -1;
		bad = get_u8(&r, FK_ERR_UNKNOWN_TASK, FK_ERR_OVERLOADED, &m->code) || get_u32(&r, &m->task_id) ||
		      get_str(&r, &m->message, &m->message_len);
		break;
	default:
		return -1; /* unknown, or a hook → daemon type */
	}
	if (bad)
		return -1;
	for (uint32_t i = 2 + need; i < n; i++)
		if (skip_obj(&r, 0))
			return -1;
	return r.p == r.end ? 0 : -1;
}
