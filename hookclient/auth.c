/* auth.c — see auth.h. */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += hh;
}

void fk_sha256_init(fk_sha256 *s)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, iv, sizeof iv);
	s->len = 0;
	s->n = 0;
}

void fk_sha256_update(fk_sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	s->len += n;
	if (s->n) {
		size_t take = 64 - s->n < n ? 64 - s->n : n;
		memcpy(s->buf + s->n, p, take);
		s->n += take;
		p += take;
		n -= take;
		if (s->n < 64)
			return;
		block(s->h, s->buf);
		s->n = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		block(s->h, p);
	memcpy(s->buf, p, n);
	s->n = n;
}

void fk_sha256_final(fk_sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = {0x80};
	size_t padn = (s->n < 56 ? 56 : 120) - s->n;
	for (int i = 0; i < 8; i++)
		pad[padn + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	fk_sha256_update(s, pad, padn + 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
}

void fk_hmac_init(fk_hmac *k, const uint8_t *key, size_t len)
{
	uint8_t kb[64] = {0}, pad[64];
	if (len > 64) {
		fk_sha256 s;
		fk_sha256_init(&s);
		fk_sha256_update(&s, key, len);
		fk_sha256_final(&s, kb);
	} else {
		memcpy(kb, key, len);
	}
	for (int i = 0; i < 64; i++)
		pad[i] = kb[i] ^ 0x36;
	fk_sha256_init(&k->inner);
	fk_sha256_update(&k->inner, pad, 64);
	for (int i = 0; i < 64; i++)
		pad[i] = kb[i] ^ 0x5c;
	fk_sha256_init(&k->outer);
	fk_sha256_update(&k->outer, pad, 64);
}

void fk_hmac_sum(const fk_hmac *k, const void *p1, size_t n1, const void *p2, size_t n2, uint8_t out[32])
{
	fk_sha256 s = k->inner;
	uint8_t ih[32];
	fk_sha256_update(&s, p1, n1);
	fk_sha256_update(&s, p2, n2);
	fk_sha256_final(&s, ih);
	s = k->outer;
	fk_sha256_update(&s, ih, sizeof ih);
	fk_sha256_final(&s, out);
}

static const char label_to_daemon[] = "fikit hook->daemon v1"; /* with its NUL */
static const char label_to_hook[] = "fikit daemon->hook v1";

static void tag(const fk_hmac *k, int dir, const uint8_t *msg, size_t len, uint8_t out[32])
{
	if (dir == FK_TO_HOOK)
		fk_hmac_sum(k, label_to_hook, sizeof label_to_hook, msg, len, out);
	else
		fk_hmac_sum(k, label_to_daemon, sizeof label_to_daemon, msg, len, out);
}

size_t fk_auth_seal(const fk_hmac *k, int dir, uint8_t *buf, size_t len, size_t cap)
{
	uint8_t t[32];
	if (len == 0 || cap < FK_MAC_TRAILER || len > cap - FK_MAC_TRAILER)
		return 0;
	tag(k, dir, buf, len, t);
	buf[len] = 0xc4;
	buf[len + 1] = FK_MAC_SIZE;
	memcpy(buf + len + 2, t, FK_MAC_SIZE);
	return len + FK_MAC_TRAILER;
}

size_t fk_auth_open(const fk_hmac *k, int dir, const uint8_t *buf, size_t len)
{
	uint8_t t[32], diff = 0;
	if (len <= FK_MAC_TRAILER)
		return 0;
	size_t n = len - FK_MAC_TRAILER;
	if (buf[n] != 0xc4 || buf[n + 1] != FK_MAC_SIZE)
		return 0;
	tag(k, dir, buf, n, t);
	for (int i = 0; i < FK_MAC_SIZE; i++) /* in constant time */
		diff |= (uint8_t)(t[i] ^ buf[n + 2 + (size_t)i]);
	return diff ? 0 : n;
}

long fk_read_key_file(const char *path, uint8_t *key, size_t cap, int *loose, char *err, size_t errcap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	long n = 0;
	*loose = 0;
	if (fd < 0) {
		snprintf(err, errcap, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errcap, "%s is not a regular file", path);
		close(fd);
		return -1;
	}
	if (st.st_size > (off_t)cap) {
		snprintf(err, errcap, "%s holds more than %zu bytes", path, cap);
		close(fd);
		return -1;
	}
	while (n < (long)st.st_size) {
		ssize_t r = read(fd, key + n, (size_t)st.st_size - (size_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break; /* cut while we read: what was there is the key */
		n += r;
	}
	close(fd);
	while (n > 0 && (key[n - 1] == ' ' || key[n - 1] == '\t' || key[n - 1] == '\r' || key[n - 1] == '\n'))
		n--;
	if (n < FK_KEY_MIN) {
		snprintf(err, errcap, "%s holds %ld bytes (after trailing white space); want at least %d", path, n,
			 FK_KEY_MIN);
		return -1;
	}
	*loose = (st.st_mode & 077) != 0;
	return n;
}
