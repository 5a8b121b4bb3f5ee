/* wire.c — msgpack for wire protocol v1, written in-house because the hook
 * links nothing but libc, and the one encoder and decoder, both driven by
 * the generated message table (wire_gen.h) as Go's codec is by its own.
 * Only the subset the protocol uses is produced; the decoder accepts every
 * integer encoding whose value fits (design) and skips any well-formed
 * object after the known fields. */
#define FK_WIRE_GEN_TABLE /* the table lives here */
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

/* ---- the table's members ---- */

static uint64_t get_u(const void *s, const fk_wire_field *f)
{
	const uint8_t *p = (const uint8_t *)s + f->off;
	switch (f->size) {
	case 1: return *p;
	case 4: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

static void set_u(void *s, const fk_wire_field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)s + f->off;
	switch (f->size) {
	case 1: *p = (uint8_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	default: *(uint64_t *)p = v; break;
	}
}

static size_t get_len(const void *s, const fk_wire_field *f)
{
	return *(const size_t *)((const uint8_t *)s + f->len_off);
}

static const void *get_ptr(const void *s, const fk_wire_field *f)
{
	return *(const void *const *)((const uint8_t *)s + f->off);
}

static const fk_wire_msg *msg_def(int type, int dir)
{
	if (type <= 0 || type >= FK_MSG_TYPES || !fk_wire_msgs[type].name || fk_wire_msgs[type].dir != dir)
		return NULL;
	return &fk_wire_msgs[type];
}

/* ---- encoding ---- */

static size_t uint_size(uint64_t v) { return v < 0x80 ? 1 : v <= 0xff ? 2 : v <= 0xffff ? 3 : v <= 0xffffffffu ? 5 : 9; }
static size_t str_size(size_t n) { return (n < 32 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5) + n; }
static size_t array_size(size_t n) { return n < 16 ? 1 : n <= 0xffff ? 3 : 5; }

static int zero(const void *s, const fk_wire_field *f)
{
	return f->kind == FK_K_STR ? get_len(s, f) == 0 : f->kind == FK_K_UINT ? get_u(s, f) == 0 : 0;
}

/* The fields an encoder writes: trailing optional fields that are zero are
 * left out, so a message that uses none is the same bytes as before they
 * were added. */
static uint8_t present(const fk_wire_msg *d, const void *s)
{
	uint8_t n = d->nfields;
	while (n > 0 && d->fields[n - 1].opt && zero(s, &d->fields[n - 1]))
		n--;
	return n;
}

static int in_range(const fk_wire_field *f, const void *s)
{
	if (f->kind == FK_K_UINT) {
		uint64_t v = get_u(s, f);
		return v >= f->lo && v <= f->hi;
	}
	if (f->elems) {
		const uint8_t *e = get_ptr(s, f);
		for (size_t i = 0, n = get_len(s, f); i < n; i++, e += f->elem_size)
			for (uint8_t j = 0; j < f->nelems; j++)
				if (!in_range(&f->elems[j], e))
					return 0;
	}
	return 1;
}

/* The encoded size of field f of s; str_len: the string's length to use. */
static size_t field_size(const fk_wire_field *f, const void *s, size_t str_len)
{
	switch (f->kind) {
	case FK_K_UINT:
		return uint_size(get_u(s, f));
	case FK_K_STR:
		return str_size(str_len);
	case FK_K_BIN16:
		return 2 + 16;
	case FK_K_TRIPLE: {
		const uint32_t *t = (const uint32_t *)((const uint8_t *)s + f->off);
		return 1 + uint_size(t[0]) + uint_size(t[1]) + uint_size(t[2]);
	}
	default: { /* arrays of elements */
		size_t n = get_len(s, f), sz = array_size(n);
		const uint8_t *e = get_ptr(s, f);
		for (size_t i = 0; i < n; i++, e += f->elem_size) {
			sz += array_size(f->nelems);
			for (uint8_t j = 0; j < f->nelems; j++)
				sz += uint_size(get_u(e, &f->elems[j]));
		}
		return sz;
	}
	}
}

static void put_field(fk_wbuf *w, const fk_wire_field *f, const void *s, size_t str_len)
{
	switch (f->kind) {
	case FK_K_UINT:
		fk_mp_uint(w, get_u(s, f));
		break;
	case FK_K_STR:
		fk_mp_str(w, get_ptr(s, f), str_len);
		break;
	case FK_K_BIN16:
		fk_mp_bin(w, (const uint8_t *)s + f->off, 16);
		break;
	case FK_K_TRIPLE: {
		const uint32_t *t = (const uint32_t *)((const uint8_t *)s + f->off);
		fk_mp_array(w, 3);
		for (int i = 0; i < 3; i++)
			fk_mp_uint(w, t[i]);
		break;
	}
	default: {
		size_t n = get_len(s, f);
		const uint8_t *e = get_ptr(s, f);
		fk_mp_array(w, (uint32_t)n);
		for (size_t i = 0; i < n; i++, e += f->elem_size) {
			fk_mp_array(w, f->nelems);
			for (uint8_t j = 0; j < f->nelems; j++)
				fk_mp_uint(w, get_u(e, &f->elems[j]));
		}
	}
	}
}

size_t fk_encode(void *buf, size_t cap, const fk_msg_out *m)
{
	const fk_wire_msg *d = msg_def(m->type, FK_DIR_TO_DAEMON);
	if (!d)
		return 0;
	uint8_t n = present(d, m);
	size_t total = array_size(2u + n) + 2, lens[256];
	int fit = -1;
	for (uint8_t i = 0; i < n; i++) {
		const fk_wire_field *f = &d->fields[i];
		if (!in_range(f, m))
			return 0;
		lens[i] = f->kind == FK_K_STR ? get_len(m, f) : 0;
		total += field_size(f, m, lens[i]);
		if (f->fit)
			fit = i;
	}
	if (total > cap && fit >= 0) {
		/* Cut the string so the datagram is exactly cap bytes where it
		 * can be: the string's header shrinks with it, hence the loop. */
		size_t rest = total - str_size(lens[fit]), len = lens[fit] > cap ? cap : lens[fit];
		while (len > 0 && rest + str_size(len) > cap)
			len--;
		lens[fit] = len;
	}
	fk_wbuf w = fk_wbuf_make(buf, cap);
	fk_mp_array(&w, 2u + n);
	fk_mp_uint(&w, FK_WIRE_VERSION);
	fk_mp_uint(&w, (uint64_t)m->type);
	for (uint8_t i = 0; i < n; i++)
		put_field(&w, &d->fields[i], m, lens[i]);
	return w.overflow ? 0 : fk_wbuf_len(&w);
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

static int get_bin16(rbuf *r, uint8_t *out)
{
	if (r->p >= r->end)
		return -1;
	uint8_t t = *r->p++;
	uint64_t len;
	if (t < 0xc4 || t > 0xc6 || getbe(r, 1 << (t - 0xc4), &len) || len != 16 || r->end - r->p < 16)
		return -1;
	memcpy(out, r->p, 16);
	r->p += 16;
	return 0;
}

/* One element of array f into e (NULL: only checked). */
static int get_elem(rbuf *r, const fk_wire_field *f, void *e)
{
	uint32_t n;
	uint64_t v;
	if (get_array(r, &n) || n < f->nelems)
		return -1;
	for (uint8_t j = 0; j < f->nelems; j++) {
		const fk_wire_field *ef = &f->elems[j];
		if (get_uint(r, ef->hi, &v) || v < ef->lo)
			return -1;
		if (e)
			set_u(e, ef, v);
	}
	for (uint32_t j = f->nelems; j < n; j++)
		if (skip_obj(r, 0))
			return -1;
	return 0;
}

/* One field of a daemon → hook message into m. */
static int get_field(rbuf *r, const fk_wire_field *f, fk_msg_in *m)
{
	uint64_t v;
	switch (f->kind) {
	case FK_K_UINT:
		if (get_uint(r, f->hi, &v) || v < f->lo)
			return -1;
		set_u(m, f, v);
		return 0;
	case FK_K_STR: {
		const char *s;
		size_t n;
		if (get_str(r, &s, &n))
			return -1;
		*(const char **)((uint8_t *)m + f->off) = s;
		*(size_t *)((uint8_t *)m + f->len_off) = n;
		return 0;
	}
	case FK_K_BIN16:
		return get_bin16(r, (uint8_t *)m + f->off);
	case FK_K_TRIPLE: {
		uint32_t n, *t = (uint32_t *)((uint8_t *)m + f->off);
		if (get_array(r, &n) || n != 3)
			return -1;
		for (int i = 0; i < 3; i++)
			if (get_u32(r, &t[i]))
				return -1;
		return 0;
	}
	}
	if (!f->elems)
		return -1;
	/* An array of elements: checked here (each an array of at least its
	 * fields, each in range, extra elements skipped), kept as the
	 * datagram's bytes for fk_decode_elems. */
	uint32_t n;
	if (get_array(r, &n))
		return -1;
	const uint8_t *start = r->p;
	for (uint32_t i = 0; i < n; i++)
		if (get_elem(r, f, NULL))
			return -1;
	*(const uint8_t **)((uint8_t *)m + f->off) = start;
	*(size_t *)((uint8_t *)m + f->len_off) = n;
	return 0;
}

size_t fk_decode_elems(const fk_msg_in *m, void *out, size_t cap)
{
	const fk_wire_msg *d = msg_def(m->type, FK_DIR_TO_HOOK);
	for (uint8_t i = 0; d && i < d->nfields; i++) {
		const fk_wire_field *f = &d->fields[i];
		if (!f->elems)
			continue;
		const uint8_t *p = *(const uint8_t *const *)((const uint8_t *)m + f->off);
		size_t n = *(const size_t *)((const uint8_t *)m + f->len_off), k = 0;
		/* The datagram was checked: its array ends within it (at most a
		 * datagram's bytes past its start). */
		rbuf r = {p, p + FK_MAX_DATAGRAM};
		for (; p && k < n && k < cap; k++)
			if (get_elem(&r, f, (uint8_t *)out + k * f->elem_size))
				break;
		return k;
	}
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
	const fk_wire_msg *d = msg_def((int)v, FK_DIR_TO_HOOK);
	if (!d || n < 2u + d->required)
		return -1; /* unknown, a hook → daemon type, or fields missing */
	m->type = (int)v;
	/* Optional fields absent from the datagram stay zero (design). */
	uint32_t known = n - 2 < d->nfields ? n - 2 : d->nfields;
	for (uint32_t i = 0; i < known; i++)
		if (get_field(&r, &d->fields[i], m))
			return -1;
	for (uint32_t i = 2 + known; i < n; i++)
		if (skip_obj(&r, 0))
			return -1;
	return r.p == r.end ? 0 : -1;
}
