/* test_auth.c — SHA-256 and HMAC-SHA256 against FIPS 180-4 and RFC 4231
 * examples, and the datagram MACs against udp/testdata/auth.txt (which the
 * Go side checks too). */
#include "auth.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hex32(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void sha(const char *msg, const char *want)
{
	fk_sha256 s;
	uint8_t out[32];
	char got[65];
	fk_sha256_init(&s);
	fk_sha256_update(&s, msg, strlen(msg));
	fk_sha256_final(&s, out);
	hex32(out, 32, got);
	CHECK(!strcmp(got, want), "sha256(\"%s\") = %s", msg, got);
}

static void hmac_case(const uint8_t *key, size_t klen, const char *msg, const char *want)
{
	fk_hmac k;
	uint8_t out[32];
	char got[65];
	fk_hmac_init(&k, key, klen);
	fk_hmac_sum(&k, msg, strlen(msg), "", 0, out);
	hex32(out, 32, got);
	CHECK(!strcmp(got, want), "hmac(%zu-byte key, \"%.20s\") = %s", klen, msg, got);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	sha("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

	/* Any split of the input gives the same digest. */
	uint8_t msg[200], one[32], split[32];
	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = (uint8_t)(i * 7 + 1);
	fk_sha256 s;
	fk_sha256_init(&s);
	fk_sha256_update(&s, msg, sizeof msg);
	fk_sha256_final(&s, one);
	for (size_t cut = 0; cut <= sizeof msg; cut++) {
		fk_sha256_init(&s);
		fk_sha256_update(&s, msg, cut);
		fk_sha256_update(&s, msg + cut, sizeof msg - cut);
		fk_sha256_final(&s, split);
		CHECK(!memcmp(one, split, 32), "split at %zu", cut);
	}

	/* RFC 4231 test cases 1, 2 and 6 (a key longer than a block). */
	uint8_t k1[20], k6[131];
	memset(k1, 0x0b, sizeof k1);
	memset(k6, 0xaa, sizeof k6);
	hmac_case(k1, sizeof k1, "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	hmac_case((const uint8_t *)"Jefe", 4, "what do ya want for nothing?",
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	hmac_case(k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First",
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

	FILE *f = check_open("udp/testdata/auth.txt");
	char line[8192];
	int seen = 0;
	while (fgets(line, sizeof line, f)) {
		char name[64], dir[16], khex[512], mhex[3000], dhex[3000];
		uint8_t key[256], m[1500], d[1500], buf[1500];
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%63s %15s %511s %2999s %2999s", name, dir, khex, mhex, dhex) != 5) {
			CHECK(0, "bad line %s", line);
			continue;
		}
		seen++;
		long kl = check_unhex(khex, key, sizeof key), ml = check_unhex(mhex, m, sizeof m),
		     dl = check_unhex(dhex, d, sizeof d);
		CHECK(kl >= FK_KEY_MIN && ml > 0 && dl > 0, "%s: hex", name);
		if (kl < FK_KEY_MIN || ml <= 0 || dl <= 0)
			continue;
		int direction = !strcmp(dir, "to_hook") ? FK_TO_HOOK : FK_TO_DAEMON;
		fk_hmac k;
		fk_hmac_init(&k, key, (size_t)kl);
		size_t opened = fk_auth_open(&k, direction, d, (size_t)dl);
		if (!strncmp(name, "bad_", 4)) {
			CHECK(opened == 0, "%s: opened", name);
			continue;
		}
		CHECK(opened == (size_t)ml && !memcmp(d, m, (size_t)ml), "%s: opened %zu bytes", name, opened);
		memcpy(buf, m, (size_t)ml);
		size_t sealed = fk_auth_seal(&k, direction, buf, (size_t)ml, sizeof buf);
		CHECK(sealed == (size_t)dl && !memcmp(buf, d, (size_t)dl), "%s: sealed %zu bytes", name, sealed);
		CHECK(fk_auth_seal(&k, direction, buf, (size_t)ml, (size_t)ml + FK_MAC_TRAILER - 1) == 0,
		      "%s: sealed without room", name);
	}
	fclose(f);
	CHECK(seen >= 10, "auth.txt has %d lines", seen);

	/* Key files: trailing white space is not part of the key. */
	char path[] = "/tmp/fikit-test-key-XXXXXX", err[256];
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd >= 0) {
		uint8_t key[FK_KEY_FILE_MAX];
		int loose;
		CHECK(write(fd, "0123456789abcdef\r\n", 18) == 18, "write");
		CHECK(fk_read_key_file(path, key, sizeof key, &loose, err, sizeof err) == 16 && !loose, "key: %s", err);
		CHECK(ftruncate(fd, 17) == 0, "truncate");
		CHECK(fk_read_key_file(path, key, sizeof key, &loose, err, sizeof err) == 16, "key: %s", err);
		CHECK(ftruncate(fd, 15) == 0, "truncate");
		CHECK(fk_read_key_file(path, key, sizeof key, &loose, err, sizeof err) == -1 && strstr(err, "at least"),
		      "short key: %s", err);
		CHECK(ftruncate(fd, FK_KEY_FILE_MAX + 1) == 0, "truncate");
		CHECK(fk_read_key_file(path, key, sizeof key, &loose, err, sizeof err) == -1 && strstr(err, "more than"),
		      "long key: %s", err);
		CHECK(fk_read_key_file("/nonexistent/key", key, sizeof key, &loose, err, sizeof err) == -1, "missing");
		CHECK(fk_read_key_file("/tmp", key, sizeof key, &loose, err, sizeof err) == -1, "directory");
		close(fd);
		unlink(path);
	}
	return check_done("test_auth");
}
