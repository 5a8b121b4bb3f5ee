/*
 * handles.c — process-local driver objects behind encoded handles.
 *
 * A CUstream, CUfunction, … is not a pointer but an encoded value
 * (tag, type, generation, index) into per-type tables of objects that are
 * recycled, never freed. A stale, foreign or garbage handle therefore decodes
 * to NULL and the call returns CUDA_ERROR_INVALID_HANDLE instead of crashing,
 * and a lookup costs a few loads with no lock (objects never move: tables
 * grow by fixed-size chunks whose addresses never change).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define H_TAG 0x5BULL
#define CHUNK 1024u
#define MAX_CHUNKS 4096u /* 4M objects per type */

typedef struct table {
	pthread_mutex_t mu;
	uint32_t n;          /* indices [1, n) handed out; read without the lock */
	uint32_t nfree, capfree;
	uint32_t *freelist;
	char *chunks[MAX_CHUNKS];
} table;

static table tables[SG_T_NTYPES];

static size_t obj_size(int type)
{
	switch (type) {
	case SG_T_CTX: return sizeof(sg_ctx);
	case SG_T_MOD: case SG_T_LIB: return sizeof(sg_module);
	case SG_T_FUNC: case SG_T_KERN: return sizeof(sg_func);
	case SG_T_STREAM: return sizeof(sg_stream);
	case SG_T_EVENT: return sizeof(sg_event);
	case SG_T_GRAPH: return sizeof(sg_graph);
	case SG_T_GNODE: return sizeof(sg_gnode);
	case SG_T_GEXEC: return sizeof(sg_gexec);
	}
	return 0;
}

__attribute__((constructor)) static void tables_init(void)
{
	for (int i = 0; i < SG_T_NTYPES; i++) {
		pthread_mutex_init(&tables[i].mu, NULL);
		tables[i].n = 1; /* index 0 is never a valid handle */
	}
}

static inline void *at(table *t, int type, uint32_t idx)
{
	char *c = __atomic_load_n(&t->chunks[idx / CHUNK], __ATOMIC_ACQUIRE);
	return c ? c + (size_t)(idx % CHUNK) * obj_size(type) : NULL;
}

void *sg_obj_new(int type)
{
	table *t = &tables[type];
	size_t sz = obj_size(type);
	pthread_mutex_lock(&t->mu);
	uint32_t idx;
	if (t->nfree) {
		idx = t->freelist[--t->nfree];
	} else {
		idx = t->n;
		if (idx / CHUNK >= MAX_CHUNKS) {
			pthread_mutex_unlock(&t->mu);
			return NULL;
		}
		if (!t->chunks[idx / CHUNK]) {
			char *c = calloc(CHUNK, sz);
			if (!c) {
				pthread_mutex_unlock(&t->mu);
				return NULL;
			}
			__atomic_store_n(&t->chunks[idx / CHUNK], c, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&t->n, idx + 1, __ATOMIC_RELEASE);
	}
	sg_hdr *h = at(t, type, idx);
	uint32_t gen = h->gen + 1;
	memset(h, 0, sz);
	h->gen = gen & 0xFFFFFFu;
	h->type = (uint16_t)type;
	h->idx = idx;
	__atomic_store_n(&h->live, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->mu);
	return h;
}

void sg_obj_free(void *obj)
{
	sg_hdr *h = obj;
	table *t = &tables[h->type];
	pthread_mutex_lock(&t->mu);
	if (h->live) {
		__atomic_store_n(&h->published, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&h->live, 0, __ATOMIC_RELEASE);
		if (t->nfree == t->capfree) {
			uint32_t cap = t->capfree ? t->capfree * 2 : 64;
			uint32_t *f = realloc(t->freelist, cap * sizeof *f);
			if (!f) { /* leak the slot rather than fail a destroy */
				pthread_mutex_unlock(&t->mu);
				return;
			}
			t->freelist = f;
			t->capfree = cap;
		}
		t->freelist[t->nfree++] = h->idx;
	}
	pthread_mutex_unlock(&t->mu);
}

uint64_t sg_handle(const void *obj)
{
	const sg_hdr *h = obj;
	return (H_TAG << 56) | ((uint64_t)h->type << 48) | ((uint64_t)(h->gen & 0xFFFFFFu) << 24) | h->idx;
}

int sg_handle_type(uint64_t h)
{
	if ((h >> 56) != H_TAG)
		return 0;
	int type = (int)((h >> 48) & 0xFF);
	return type > 0 && type < SG_T_NTYPES ? type : 0;
}

void *sg_lookup(uint64_t hv, int type)
{
	if (sg_handle_type(hv) != type)
		return NULL;
	table *t = &tables[type];
	uint32_t idx = (uint32_t)(hv & 0xFFFFFFu);
	if (idx == 0 || idx >= __atomic_load_n(&t->n, __ATOMIC_ACQUIRE))
		return NULL;
	sg_hdr *h = at(t, type, idx);
	if (!h || !__atomic_load_n(&h->live, __ATOMIC_ACQUIRE) || h->gen != ((hv >> 24) & 0xFFFFFFu))
		return NULL;
	return h;
}

void sg_obj_publish(void *obj)
{
	sg_hdr *h = obj;
	__atomic_store_n(&h->published, 1, __ATOMIC_RELEASE);
}

void sg_obj_each(int type, int (*fn)(void *obj, void *arg), void *arg)
{
	table *t = &tables[type];
	pthread_mutex_lock(&t->mu);
	uint32_t n = t->n, k = 0;
	void **live = malloc(sizeof(void *) * (n ? n : 1));
	for (uint32_t i = 1; live && i < n; i++) {
		sg_hdr *h = at(t, type, i);
		if (h && __atomic_load_n(&h->published, __ATOMIC_ACQUIRE))
			live[k++] = h;
	}
	pthread_mutex_unlock(&t->mu);
	for (uint32_t i = 0; i < k; i++)
		if (fn(live[i], arg))
			break;
	free(live);
}

/* ---- interned kernel names ------------------------------------------- */

static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static sg_name *names[1024];

static char *json_quote(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n * 6 + 3), *o = out;
	if (!out)
		return NULL;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			static const char hex[] = "0123456789abcdef";
			memcpy(o, "\\u00", 4);
			o[4] = hex[*p >> 4];
			o[5] = hex[*p & 15];
			o += 6;
		} else {
			*o++ = (char)*p; /* UTF-8 passes through as is */
		}
	}
	*o++ = '"';
	*o = '\0';
	return out;
}

const sg_name *sg_intern(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	sg_name **b = &names[h % 1024];
	pthread_mutex_lock(&names_mu);
	for (sg_name *x = *b; x; x = x->next) {
		if (!strcmp(x->name, name)) {
			pthread_mutex_unlock(&names_mu);
			return x;
		}
	}
	sg_name *x = calloc(1, sizeof *x);
	char *dup = strdup(name);
	char *json = json_quote(name);
	if (!x || !dup || !json) {
		free(x);
		free(dup);
		free(json);
		pthread_mutex_unlock(&names_mu);
		return NULL;
	}
	x->name = dup;
	x->json = json;
	x->next = *b;
	*b = x;
	pthread_mutex_unlock(&names_mu);
	return x;
}
