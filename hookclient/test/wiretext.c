/* wiretext.c — see wiretext.h. */
#include "wiretext.h"
#include "check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char arena[1 << 20];
static size_t used;

void wt_reset(void) { used = 0; }

static void *alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (used + n > sizeof arena) {
		fprintf(stderr, "wiretext: arena full\n");
		exit(2);
	}
	void *p = arena + used;
	used += n;
	return p;
}

int wt_type(const char *name)
{
	for (int t = 1; t < FK_MSG_TYPES; t++)
		if (fk_wire_msgs[t].name && !strcmp(fk_wire_msgs[t].name, name))
			return t;
	return -1;
}

static const fk_wire_field *field_of(const fk_wire_msg *d, const char *name)
{
	for (uint8_t i = 0; i < d->nfields; i++)
		if (!strcmp(d->fields[i].name, name))
			return &d->fields[i];
	return NULL;
}

static void set_u(void *s, const fk_wire_field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)s + f->off;
	if (f->size == 1)
		*p = (uint8_t)v;
	else if (f->size == 4)
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = v;
}

static uint64_t get_u(const void *s, const fk_wire_field *f)
{
	const uint8_t *p = (const uint8_t *)s + f->off;
	return f->size == 1 ? *p : f->size == 4 ? *(const uint32_t *)p : *(const uint64_t *)p;
}

/* "[[a,b,…];[…]]" of elements of f into arena storage. */
static int parse_elems(const char *v, void *m, const fk_wire_field *f)
{
	size_t n = 0;
	for (const char *p = v; *p; p++)
		n += *p == '[' && p != v;
	uint8_t *e = alloc(n * f->elem_size + 1), *first = e;
	memset(e, 0, n * f->elem_size);
	const char *p = v + 1;
	size_t got = 0;
	while (*p == '[') {
		p++;
		for (uint8_t j = 0; j < f->nelems; j++) {
			char *end;
			uint64_t x = strtoull(p, &end, 10);
			if (end == p)
				return -1;
			set_u(e, &f->elems[j], x);
			p = end + (*end == ',');
		}
		if (*p != ']')
			return -1;
		p++;
		p += *p == ';';
		e += f->elem_size;
		got++;
	}
	if (strcmp(p, "]") || got != n)
		return -1;
	*(const void **)((uint8_t *)m + f->off) = first;
	*(size_t *)((uint8_t *)m + f->len_off) = n;
	return 0;
}

static int parse_value(void *m, const fk_wire_field *f, char *v)
{
	char *end;
	switch (f->kind) {
	case FK_K_UINT: {
		uint64_t x = strtoull(v, &end, 10);
		if (end == v || *end || x < f->lo || x > f->hi)
			return -1;
		set_u(m, f, x);
		return 0;
	}
	case FK_K_STR: {
		size_t n = strlen(v);
		if (n < 2 || v[0] != '"' || v[n - 1] != '"')
			return -1;
		char *s = alloc(n);
		memcpy(s, v + 1, n - 2);
		s[n - 2] = '\0';
		long len = check_unescape(s);
		if (len < 0)
			return -1;
		*(const char **)((uint8_t *)m + f->off) = s;
		*(size_t *)((uint8_t *)m + f->len_off) = (size_t)len;
		return 0;
	}
	case FK_K_BIN16:
		return strncmp(v, "hex:", 4) || check_unhex(v + 4, (uint8_t *)m + f->off, 16) != 16 ? -1 : 0;
	case FK_K_TRIPLE: {
		uint32_t *t = (uint32_t *)((uint8_t *)m + f->off);
		int used = 0;
		return sscanf(v, "[%" SCNu32 ",%" SCNu32 ",%" SCNu32 "]%n", &t[0], &t[1], &t[2], &used) == 3 &&
				       v[used] == '\0'
			       ? 0
			       : -1;
	}
	default:
		return parse_elems(v, m, f);
	}
}

int wt_parse(char *text, void *m)
{
	char *p = text;
	while (*p == ' ')
		p++;
	char *name = p;
	p += strcspn(p, " ");
	if (*p)
		*p++ = '\0';
	int type = wt_type(name);
	if (type < 0) {
		fprintf(stderr, "wiretext: unknown type %s\n", name);
		return -1;
	}
	const fk_wire_msg *d = &fk_wire_msgs[type];
	memset(m, 0, d->dir == FK_DIR_TO_DAEMON ? sizeof(fk_msg_out) : sizeof(fk_msg_in));
	if (d->dir == FK_DIR_TO_DAEMON)
		((fk_msg_out *)m)->type = type;
	else
		((fk_msg_in *)m)->type = type;
	unsigned seen = 0;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		char *key = p, *eq = strchr(p, '=');
		if (!eq) {
			fprintf(stderr, "wiretext: %s: %s is not field=value\n", name, key);
			return -1;
		}
		*eq = '\0';
		char *v = eq + 1;
		if (*v == '"') {
			char *close = strchr(v + 1, '"');
			if (!close)
				return -1;
			p = close + 1;
		} else {
			p = v + strcspn(v, " ");
		}
		if (*p)
			*p++ = '\0';
		const fk_wire_field *f = field_of(d, key);
		if (!f || parse_value(m, f, v)) {
			fprintf(stderr, "wiretext: %s: bad field %s=%s\n", name, key, v);
			return -1;
		}
		seen |= 1u << (f - d->fields);
	}
	for (uint8_t i = 0; i < d->required; i++)
		if (!(seen & 1u << i)) {
			fprintf(stderr, "wiretext: %s: %s missing\n", name, d->fields[i].name);
			return -1;
		}
	return type;
}

static size_t len_of(const void *m, const fk_wire_field *f) { return *(const size_t *)((const uint8_t *)m + f->len_off); }

void wt_format(char *buf, size_t cap, int type, const void *m)
{
	const fk_wire_msg *d = &fk_wire_msgs[type];
	size_t at = 0;
#define OUT(...) (at += (size_t)snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0, __VA_ARGS__))
	OUT("%s", d->name);
	uint8_t n = d->nfields;
	while (n > 0 && d->fields[n - 1].opt &&
	       (d->fields[n - 1].kind == FK_K_STR ? len_of(m, &d->fields[n - 1]) == 0 : get_u(m, &d->fields[n - 1]) == 0))
		n--;
	for (uint8_t i = 0; i < n; i++) {
		const fk_wire_field *f = &d->fields[i];
		const uint8_t *p = (const uint8_t *)m + f->off;
		OUT(" %s=", f->name);
		switch (f->kind) {
		case FK_K_UINT:
			OUT("%" PRIu64, get_u(m, f));
			break;
		case FK_K_STR: {
			const unsigned char *s = *(const unsigned char *const *)p;
			OUT("\"");
			for (size_t j = 0, l = len_of(m, f); j < l; j++) {
				unsigned char c = s[j];
				if (c == '\\')
					OUT("\\\\");
				else if (c == '\t')
					OUT("\\t");
				else if (c == '\n')
					OUT("\\n");
				else if (c < 0x20 || c > 0x7e || c == '"')
					OUT("\\x%02x", c);
				else
					OUT("%c", c);
			}
			OUT("\"");
			break;
		}
		case FK_K_BIN16:
			OUT("hex:");
			for (int j = 0; j < 16; j++)
				OUT("%02x", p[j]);
			break;
		case FK_K_TRIPLE: {
			const uint32_t *t = (const uint32_t *)p;
			OUT("[%" PRIu32 ",%" PRIu32 ",%" PRIu32 "]", t[0], t[1], t[2]);
			break;
		}
		default: {
			const uint8_t *e = *(const uint8_t *const *)p;
			OUT("[");
			for (size_t j = 0, l = len_of(m, f); j < l; j++, e += f->elem_size) {
				OUT("%s[", j ? ";" : "");
				for (uint8_t k = 0; k < f->nelems; k++)
					OUT("%s%" PRIu64, k ? "," : "", get_u(e, &f->elems[k]));
				OUT("]");
			}
			OUT("]");
		}
		}
	}
#undef OUT
}
