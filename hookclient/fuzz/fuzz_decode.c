/* fuzz_decode.c — the hook's decoder of the daemon's answers (fk_decode,
 * wire.h) on any bytes: no crash, no read outside the datagram, and what it
 * accepts is a daemon → hook message whose fields are in range and whose
 * strings lie inside the datagram. Seeds: udp/testdata (vectors.txt,
 * decode_only.txt, invalid.txt). */
#include "fuzz.h"
#include "board_gen.h"
#include "wire.h"

#include <string.h>

static int inside(const uint8_t *buf, size_t len, const char *p, size_t n)
{
	return n == 0 || (p >= (const char *)buf && n <= len && p + n <= (const char *)buf + len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fk_msg_in m;
	/* A copy of exactly size bytes: ASan then sees any read past the end. */
	uint8_t *buf = fk_fuzz_copy(data, size);
	int rc = fk_decode(buf, size, &m);
	if (rc == 0) {
		FK_FUZZ_CHECK(size <= FK_MAX_DATAGRAM, "accepted %zu bytes", size);
		FK_FUZZ_CHECK(m.type >= FK_MSG_REGISTER_ACK && m.type <= FK_MSG_ERROR, "accepted type %d", m.type);
		FK_FUZZ_CHECK(inside(buf, size, m.message, m.message_len), "Error message outside the datagram");
		FK_FUZZ_CHECK(inside(buf, size, m.board, m.board_len), "board path outside the datagram");
		if (m.type == FK_MSG_REGISTER_ACK || m.type == FK_MSG_STATE) {
			FK_FUZZ_CHECK(m.role == FK_ROLE_HOLDER || m.role == FK_ROLE_WAITER, "role %u", m.role);
			FK_FUZZ_CHECK(m.phase == FK_PHASE_PROFILING || m.phase == FK_PHASE_SHARING, "phase %u", m.phase);
		}
		FK_FUZZ_CHECK(m.board_gpu < FK_BOARD_GPUS, "board gpu %u", m.board_gpu);
		if (m.type == FK_MSG_ERROR)
			FK_FUZZ_CHECK(m.code >= FK_ERR_UNKNOWN_TASK && m.code <= FK_ERR_OVERLOADED, "code %u", m.code);
		/* Any strict prefix is not a whole message. */
		if (size > 0) {
			fk_msg_in p;
			FK_FUZZ_CHECK(fk_decode(buf, size - 1, &p) != 0, "a %zu-byte prefix decoded too", size - 1);
		}
	}
	fk_fuzz_free(buf);
	return 0;
}
