/* wire.h — wire protocol v1 (docs/design.md "Wire protocol v1"): in-house
 * msgpack, and one encoder and one decoder driven by the message table that
 * wire_gen.h holds, generated from udp's Go table (`go generate ./udp`).
 * No allocation: the encoder writes into a caller's buffer, the decoder
 * points into the datagram. */
#ifndef FIKIT_WIRE_H
#define FIKIT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "wire_gen.h"

/* A bounded writer: on overflow it stops writing and remembers, so encoders
 * need one check at the end. */
typedef struct fk_wbuf {
	uint8_t *p, *end, *start;
	int overflow;
} fk_wbuf;

static inline fk_wbuf fk_wbuf_make(void *buf, size_t cap)
{
	fk_wbuf w = {(uint8_t *)buf, (uint8_t *)buf + cap, (uint8_t *)buf, 0};
	return w;
}
static inline size_t fk_wbuf_len(const fk_wbuf *w) { return (size_t)(w->p - w->start); }

void fk_mp_uint(fk_wbuf *w, uint64_t v);
void fk_mp_str(fk_wbuf *w, const char *s, size_t n);
void fk_mp_bin(fk_wbuf *w, const void *b, size_t n);
void fk_mp_array(fk_wbuf *w, uint32_t n);

/* Whom a message is about: the task's ID and its registration's token (0:
 * none; the optional last field is then left out). */
typedef struct fk_who {
	uint32_t id;
	uint64_t token;
} fk_who;

/* Encode a hook → daemon message (m->type and the fields of that type) in
 * the smallest msgpack forms, leaving out trailing optional fields that are
 * zero. Returns the datagram's length, or 0 if it did not fit in cap, the
 * type is not one the hook sends, or a value is outside its field's range.
 * The string the table marks fit (a KernelInfo's name) is cut so that the
 * datagram is exactly cap bytes instead (the ID keeps the full name). */
size_t fk_encode(void *buf, size_t cap, const fk_msg_out *m);

/* LaunchBatch: FK_BATCH_MAX worst-case launches always fit. */
#define FK_BATCH_MAX 91 /* (1400 - 34) / 15: fixarray + uint64 + uint32 per launch */
/* Bytes one Measurements record takes at most, and the fixed part (with
 * the token). */
#define FK_MEAS_REC_MAX 29 /* fixarray + 3 × uint64 + flags (≤ 3: fixint) */
#define FK_MEAS_HEAD_MAX 25

/* Decode a daemon → hook datagram. Returns 0 on success, -1 if it is not a
 * valid v1 message of a daemon → hook type (design: wrong version, unknown
 * type, missing field, value out of range, trailing bytes). */
int fk_decode(const void *buf, size_t len, fk_msg_in *out);

/* The elements of a decoded message's array (KernelTimes' kernels), as
 * their structs into out (at most cap): how many. They stay in the datagram
 * until read, so its buffer must still hold it. */
size_t fk_decode_elems(const fk_msg_in *m, void *out, size_t cap);

#endif
