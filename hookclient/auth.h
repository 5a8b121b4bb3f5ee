/* auth.h — MACs on datagrams to and from a daemon on another host
 * (docs/security.md "Remote hooks"; udp/auth.go is the Go side and
 * udp/testdata/auth.txt pins the bytes for both):
 *
 *     message | c4 10 | first 16 bytes of HMAC-SHA256(key, label | message)
 *
 * label "fikit hook->daemon v1\0" or "fikit daemon->hook v1\0". SHA-256 is
 * here (FIPS 180-4) because the hook links nothing but libc. */
#ifndef FIKIT_AUTH_H
#define FIKIT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define FK_MAC_SIZE 16
#define FK_MAC_TRAILER (2 + FK_MAC_SIZE)
#define FK_KEY_MIN 16
#define FK_KEY_FILE_MAX 4096

enum { FK_TO_DAEMON = 1, FK_TO_HOOK = 2 };

typedef struct fk_sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	size_t n;
} fk_sha256;

void fk_sha256_init(fk_sha256 *s);
void fk_sha256_update(fk_sha256 *s, const void *p, size_t n);
void fk_sha256_final(fk_sha256 *s, uint8_t out[32]);

/* An HMAC-SHA256 key, its inner and outer states computed once. */
typedef struct fk_hmac {
	fk_sha256 inner, outer;
} fk_hmac;

void fk_hmac_init(fk_hmac *k, const uint8_t *key, size_t len);
void fk_hmac_sum(const fk_hmac *k, const void *p1, size_t n1, const void *p2, size_t n2, uint8_t out[32]);

/* Append the trailer to the message buf[0:len] (cap bytes of room) sent in
 * direction dir; returns the datagram's length, or 0 if it does not fit. */
size_t fk_auth_seal(const fk_hmac *k, int dir, uint8_t *buf, size_t len, size_t cap);
/* The message's length in datagram buf[0:len] from direction dir, or 0 if
 * its MAC is missing or wrong. */
size_t fk_auth_open(const fk_hmac *k, int dir, const uint8_t *buf, size_t len);

/* Read a key file as the daemon does (udp.ReadKeyFile): its bytes without
 * trailing white space, FK_KEY_MIN to FK_KEY_FILE_MAX of them. Returns the
 * key's length, or -1 with why in err. *loose is set when other users may
 * read the file. */
long fk_read_key_file(const char *path, uint8_t *key, size_t cap, int *loose, char *err, size_t errcap);

#endif
