/*
 * ptx.c — what simgpu needs from a module image: its kernel entries, their
 * parameter layout, and whether each follows the spin-kernel convention.
 *
 * PTX text: every `.entry NAME (params)` (with any `.visible`/`.weak` before
 * it). Spin-kernel convention: if the FIRST parameter is declared
 * `.param .u64 NAME` with NAME ending in `_ns`, a launch runs for that many
 * nanoseconds (capped at SG_MAX_SPIN_NS); otherwise for the configured default.
 *
 * Binary images: a cubin (ELF) names its kernels in `.text.NAME` sections; a
 * fatbin is searched for the cubins it embeds. Their parameter layout is not
 * read (nparams = -1) and they run the default duration.
 */
#include "internal.h"

#include <ctype.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
	sg_image img;
	int cap;
} builder;

static int add_entry(builder *b, const char *name, size_t len, int spin, int nparams, sg_param *params,
		     uint32_t bytes)
{
	char buf[4096];
	if (len == 0 || len >= sizeof buf) {
		free(params);
		return 0;
	}
	memcpy(buf, name, len);
	buf[len] = '\0';
	const sg_name *nm = sg_intern(buf);
	for (int i = 0; i < b->img.nentries; i++) {
		if (b->img.entries[i].name == nm) { /* the same kernel twice (several cubins) */
			free(params);
			return 0;
		}
	}
	if (!nm) {
		free(params);
		return -1;
	}
	if (b->img.nentries == b->cap) {
		int cap = b->cap ? b->cap * 2 : 8;
		sg_entry *e = realloc(b->img.entries, sizeof *e * (size_t)cap);
		if (!e) {
			free(params);
			return -1;
		}
		b->img.entries = e;
		b->cap = cap;
	}
	sg_entry *e = &b->img.entries[b->img.nentries++];
	e->name = nm;
	e->spin = spin;
	e->nparams = nparams;
	e->params = params;
	e->param_bytes = bytes;
	return 0;
}

/* ---- PTX ---------------------------------------------------------------- */

/* Copy of the text with comments blanked out (string literals do not occur
 * where it matters: PTX has none around entry declarations). */
static char *strip_comments(const char *src, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	memcpy(s, src, n);
	s[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
			while (i < n && s[i] != '\n')
				s[i++] = ' ';
		} else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
			s[i] = s[i + 1] = ' ';
			i += 2;
			for (; i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/'); i++)
				if (s[i] != '\n') /* keep lines: nothing depends on it, but it reads better */
					s[i] = ' ';
			if (i + 1 < n) {
				s[i] = s[i + 1] = ' ';
				i++;
			}
		}
	}
	return s;
}

static int is_name_char(char c)
{
	return c && !isspace((unsigned char)c) && !strchr("(),;{}[]", c);
}

static const char *skip_ws(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

static uint32_t type_size(const char *t, size_t n)
{
	/* .u8 .s16 .b32 .f64 .pred … : the digits are the bit width */
	if (n == 5 && !strncmp(t, ".pred", 5))
		return 1;
	if (n < 3 || !strchr("usbf", t[1]))
		return 0;
	int bits = atoi(t + 2);
	return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (uint32_t)bits / 8 : 0;
}

/* Parse one parameter declaration [p, end): fills size/align and, for the
 * first parameter, whether it is `.u64 *_ns`. Returns 0 on success. */
static int parse_param(const char *p, const char *end, uint32_t *size, uint32_t *align, int *spin)
{
	uint32_t tsz = 0, alignv = 0, count = 1;
	int is_u64 = 0;
	const char *name = NULL;
	size_t name_len = 0;
	while (p < end) {
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p >= end)
			break;
		const char *t = p;
		while (p < end && !isspace((unsigned char)*p) && *p != '[')
			p++;
		size_t n = (size_t)(p - t);
		if (t[0] == '.') {
			if (n == 6 && !strncmp(t, ".align", 6)) {
				while (p < end && isspace((unsigned char)*p))
					p++;
				alignv = (uint32_t)strtoul(p, NULL, 10);
				while (p < end && isdigit((unsigned char)*p))
					p++;
			} else if (type_size(t, n)) {
				tsz = type_size(t, n);
				is_u64 = n == 4 && !strncmp(t, ".u64", 4);
			} /* .param .ptr .global .const …: qualifiers */
		} else {
			name = t;
			name_len = n;
		}
		if (p < end && *p == '[') {
			count = (uint32_t)strtoul(p + 1, NULL, 10);
			while (p < end && *p != ']')
				p++;
			if (p < end)
				p++;
			is_u64 = 0;
		}
	}
	if (!tsz || !name)
		return -1;
	*size = tsz * (count ? count : 1);
	*align = alignv ? alignv : tsz;
	*spin = is_u64 && name_len > 3 && !strncmp(name + name_len - 3, "_ns", 3);
	return 0;
}

static int parse_ptx(const char *text, size_t n, builder *b)
{
	char *s = strip_comments(text, n);
	if (!s)
		return -1;
	for (char *p = s; (p = strstr(p, ".entry")) != NULL;) {
		char before = p == s ? ' ' : p[-1];
		p += 6;
		if (!isspace((unsigned char)before) || !isspace((unsigned char)*p))
			continue;
		const char *name = skip_ws(p);
		const char *q = name;
		while (is_name_char(*q))
			q++;
		size_t name_len = (size_t)(q - name);
		q = skip_ws(q);
		int spin = 0, np = 0;
		uint32_t off = 0;
		sg_param *params = NULL;
		if (*q == '(') {
			const char *close = strchr(q, ')');
			if (!close)
				break;
			int cap = 0;
			for (const char *a = q + 1; a < close;) {
				const char *comma = memchr(a, ',', (size_t)(close - a));
				const char *pe = comma ? comma : close;
				if (skip_ws(a) < pe) {
					uint32_t sz, al;
					int sp;
					if (parse_param(a, pe, &sz, &al, &sp) == 0) {
						if (np == cap) {
							cap = cap ? cap * 2 : 8;
							sg_param *np2 = realloc(params, sizeof *params * (size_t)cap);
							if (!np2)
								break;
							params = np2;
						}
						off = (off + al - 1) / al * al;
						params[np].size = sz;
						params[np].offset = off;
						off += sz;
						if (np == 0)
							spin = sp;
						np++;
					}
				}
				a = pe + 1;
			}
			p = (char *)close;
		}
		if (add_entry(b, name, name_len, spin, np, params, off) != 0) {
			free(s);
			return -1;
		}
	}
	free(s);
	return 0;
}

/* ---- ELF cubins and fatbins ------------------------------------------------ */

static int parse_elf(const unsigned char *img, size_t avail, builder *b)
{
	if (avail < sizeof(Elf64_Ehdr))
		return -1;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
	    eh->e_shstrndx >= eh->e_shnum)
		return -1;
	size_t end = eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr);
	if (end > avail || end < eh->e_shoff)
		return -1;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
	if (strs->sh_offset + strs->sh_size > avail)
		return -1;
	const char *names = (const char *)img + strs->sh_offset;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_name >= strs->sh_size)
			continue;
		const char *nm = names + sh[i].sh_name;
		size_t max = strs->sh_size - sh[i].sh_name;
		size_t len = strnlen(nm, max);
		if (len > 6 && len < max && !strncmp(nm, ".text.", 6))
			if (add_entry(b, nm + 6, len - 6, 0, -1, NULL, 0) != 0)
				return -1;
	}
	return 0;
}

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xBA55ED50u

static int parse_fatbin(const unsigned char *img, builder *b)
{
	uint32_t magic;
	memcpy(&magic, img, 4);
	if (magic == FATBIN_WRAPPER_MAGIC) { /* { magic, version, const void *data, … } */
		const void *data;
		memcpy(&data, img + 8, sizeof data);
		if (!data)
			return -1;
		img = data;
		memcpy(&magic, img, 4);
	}
	if (magic != FATBIN_MAGIC)
		return -1;
	uint16_t hsize;
	uint64_t fsize;
	memcpy(&hsize, img + 6, 2);
	memcpy(&fsize, img + 8, 8);
	size_t total = (size_t)hsize + fsize;
	if (fsize > (1ULL << 32))
		return -1;
	for (size_t off = hsize; off + sizeof(Elf64_Ehdr) <= total; off += 8)
		if (!memcmp(img + off, ELFMAG, SELFMAG))
			parse_elf(img + off, total - off, b);
	return 0;
}

CUresult sg_image_parse(const void *image, size_t maxlen, sg_image *out)
{
	builder b;
	memset(&b, 0, sizeof b);
	const unsigned char *img = image;
	int rc;
	uint32_t magic;
	memcpy(&magic, img, 4);
	if (!memcmp(img, ELFMAG, SELFMAG)) {
		rc = parse_elf(img, maxlen ? maxlen : (size_t)1 << 30, &b);
		if (rc != 0) {
			sg_image_free(&b.img);
			return CUDA_ERROR_INVALID_IMAGE;
		}
	} else if (magic == FATBIN_WRAPPER_MAGIC || magic == FATBIN_MAGIC) {
		if (parse_fatbin(img, &b) != 0) {
			sg_image_free(&b.img);
			return CUDA_ERROR_INVALID_IMAGE;
		}
	} else {
		size_t n = maxlen ? strnlen((const char *)img, maxlen) : strlen((const char *)img);
		const char *t = (const char *)img;
		/* Not a binary image: it must look like PTX. */
		if (!memmem(t, n, ".version", 8) && !memmem(t, n, ".entry", 6)) {
			sg_image_free(&b.img);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		if (parse_ptx(t, n, &b) != 0) {
			sg_image_free(&b.img);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	*out = b.img;
	return CUDA_SUCCESS;
}

void sg_image_free(sg_image *img)
{
	for (int i = 0; i < img->nentries; i++)
		free(img->entries[i].params);
	free(img->entries);
	img->entries = NULL;
	img->nentries = 0;
}

int64_t sg_spin_duration(const sg_entry *e, void **kernelParams, void **extra)
{
	if (!e->spin)
		return -1;
	uint64_t v;
	if (kernelParams) {
		if (!kernelParams[0])
			return -1;
		memcpy(&v, kernelParams[0], sizeof v);
	} else if (extra) {
		const void *buf = NULL;
		size_t size = sizeof v;
		for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
				memcpy(&size, extra[i + 1], sizeof size);
		}
		if (!buf || size < sizeof v)
			return -1;
		memcpy(&v, buf, sizeof v);
	} else {
		return -1;
	}
	return v > (uint64_t)SG_MAX_SPIN_NS ? SG_MAX_SPIN_NS : (int64_t)v;
}
