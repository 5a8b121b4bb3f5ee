/* fuzz_auth.c — the MAC check on datagrams (auth.h). Input: direction
 * byte, key length byte, key, then a datagram. Opening the datagram never
 * reads outside it; a message sealed under the key opens to itself, and
 * with any one byte changed it does not; SHA-256 fed in pieces equals
 * SHA-256 fed at once. Seeds: udp/testdata/auth.txt. */
#include "auth.h"
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int dir = (data[0] & 1) ? FK_TO_HOOK : FK_TO_DAEMON;
	size_t klen = data[1];
	if (size < 2 + klen)
		return 0;
	const uint8_t *key = data + 2;
	size_t n = size - 2 - klen;
	uint8_t *dg = fk_fuzz_copy(data + 2 + klen, n);
	fk_hmac k;
	fk_hmac_init(&k, key, klen);

	size_t open = fk_auth_open(&k, dir, dg, n);
	FK_FUZZ_CHECK(open == 0 || open + FK_MAC_TRAILER == n, "opened to %zu of %zu bytes", open, n);

	/* Seal the datagram's bytes as a message, then open it. */
	uint8_t sealed[FK_MAX_FUZZ_DATAGRAM + FK_MAC_TRAILER];
	if (n > 0 && n <= FK_MAX_FUZZ_DATAGRAM) {
		memcpy(sealed, dg, n);
		size_t s = fk_auth_seal(&k, dir, sealed, n, sizeof sealed);
		FK_FUZZ_CHECK(s == n + FK_MAC_TRAILER, "sealed %zu bytes to %zu", n, s);
		FK_FUZZ_CHECK(fk_auth_open(&k, dir, sealed, s) == n, "a sealed message does not open");
		int other = dir == FK_TO_HOOK ? FK_TO_DAEMON : FK_TO_HOOK;
		FK_FUZZ_CHECK(fk_auth_open(&k, other, sealed, s) == 0, "opened in the other direction");
		size_t at = (size_t)data[0] % s;
		sealed[at] ^= 0x5a;
		FK_FUZZ_CHECK(fk_auth_open(&k, dir, sealed, s) == 0, "opened with byte %zu changed", at);
	}

	/* SHA-256 in pieces whose sizes the input chooses. */
	uint8_t whole[32], parts[32];
	fk_sha256 a, b;
	fk_sha256_init(&a);
	fk_sha256_update(&a, dg, n);
	fk_sha256_final(&a, whole);
	fk_sha256_init(&b);
	for (size_t off = 0, i = 0; off < n; i++) {
		size_t take = 1 + (size_t)key[i % (klen ? klen : 1)] % 97;
		if (!klen)
			take = 13;
		if (take > n - off)
			take = n - off;
		fk_sha256_update(&b, dg + off, take);
		off += take;
	}
	fk_sha256_final(&b, parts);
	FK_FUZZ_CHECK(!memcmp(whole, parts, 32), "SHA-256 in pieces differs");
	fk_fuzz_free(dg);
	return 0;
}
