/* wire.h — wire protocol v1 (docs/design.md "Wire protocol v1"; udp/doc.go):
 * in-house msgpack, encoders for what the hook sends (types 1–7, 13, 14), a
 * decoder for what it receives (8–12). No allocation: encoders write into a
 * caller's buffer, the decoder points into the datagram. */
#ifndef FIKIT_WIRE_H
#define FIKIT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define FK_WIRE_VERSION 1
#define FK_MAX_DATAGRAM 1400
#define FK_BOARD_GPUS 16 /* GPU sections of a board: udp.BoardGPUs */

enum fk_msg_type {
	FK_MSG_REGISTER = 1,
	FK_MSG_LAUNCH_NOTIFY = 2,
	FK_MSG_LAUNCH_REQUEST = 3,
	FK_MSG_MEASUREMENTS = 4,
	FK_MSG_RUN_END = 5,
	FK_MSG_HEARTBEAT = 6,
	FK_MSG_GOODBYE = 7,
	FK_MSG_REGISTER_ACK = 8,
	FK_MSG_GRANT = 9,
	FK_MSG_HOLD = 10,
	FK_MSG_STATE = 11,
	FK_MSG_ERROR = 12,
	FK_MSG_KERNEL_INFO = 13,
	FK_MSG_LAUNCH_BATCH = 14,
};

enum { FK_ROLE_HOLDER = 1, FK_ROLE_WAITER = 2 };
enum { FK_PHASE_PROFILING = 1, FK_PHASE_SHARING = 2 };
enum { FK_MEAS_GAP_SPANS_RUN_END = 1, FK_MEAS_OVERLAPPED = 2 };
enum {
	FK_RUN_END_STREAM_SYNC = 1,
	FK_RUN_END_CTX_SYNC = 2,
	FK_RUN_END_EVENT_SYNC = 3,
	FK_RUN_END_DTOH_COPY = 4,
	FK_RUN_END_EXPLICIT = 5,
};
enum { FK_ERR_UNKNOWN_TASK = 1, FK_ERR_VERSION = 2, FK_ERR_MALFORMED = 3, FK_ERR_INVALID = 4, FK_ERR_OVERLOADED = 5 };

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

typedef struct fk_register {
	uint32_t seq;
	const char *task_key;
	size_t task_key_len;
	uint32_t pid;
	uint8_t priority;
	uint8_t uuid[16];
	const char *device_name;
	size_t device_name_len;
	uint32_t hook_flags;
	uint32_t weight; /* 0: left out (the daemon's default, 1) */
} fk_register;

typedef struct fk_meas_rec {
	uint64_t kernel_id, duration_ns, gap_ns;
	uint8_t flags;
} fk_meas_rec;

/* Register's hook_flags: the hook sends its RegisterAck's token on every
 * message about the task (udp.HookSendsToken). */
#define FK_HOOK_SENDS_TOKEN 1u

/* Whom a message is about: the task's ID and its registration's token (0:
 * none; the optional last field is then left out). */
typedef struct fk_who {
	uint32_t id;
	uint64_t token;
} fk_who;

/* Encoders return the datagram length, or 0 if it did not fit in cap. */
size_t fk_enc_register(void *buf, size_t cap, const fk_register *m);
size_t fk_enc_launch(void *buf, size_t cap, int type, fk_who who, uint32_t seq, uint64_t kid);
size_t fk_enc_measurements(void *buf, size_t cap, fk_who who, uint32_t run, const fk_meas_rec *r, size_t n);
size_t fk_enc_run_end(void *buf, size_t cap, fk_who who, uint32_t run, uint32_t kernels, uint64_t run_ns,
		      uint8_t reason, uint32_t last_seq);
size_t fk_enc_task_only(void *buf, size_t cap, int type, fk_who who); /* Heartbeat, Goodbye */
size_t fk_enc_kernel_info(void *buf, size_t cap, fk_who who, uint64_t kid, const char *name, size_t name_len,
			  const uint32_t dims[6]);

/* LaunchBatch: launches seq, seq+1, … of one task; launch i at base_ns +
 * off[i] on CLOCK_MONOTONIC. FK_BATCH_MAX worst-case launches always fit. */
size_t fk_enc_launch_batch(void *buf, size_t cap, fk_who who, uint32_t seq, uint64_t base_ns, const uint64_t *kid,
			   const uint32_t *off, size_t n);
#define FK_BATCH_MAX 91 /* (1400 - 34) / 15: fixarray + uint64 + uint32 per launch */

/* Bytes one Measurements record takes at most, and the fixed part (with
 * the token). */
#define FK_MEAS_REC_MAX 29 /* fixarray + 3 × uint64 + flags (≤ 3: fixint) */
#define FK_MEAS_HEAD_MAX 25

typedef struct fk_msg_in {
	int type;
	uint32_t seq, task_id, credit, profile_runs, heartbeat_ms;
	uint8_t role, phase, code;
	const char *message; /* Error: points into the datagram, not NUL-terminated */
	size_t message_len;
	uint64_t seen_ns, expires_ns; /* Grant, State: the permission's gate (0: none) */
	const char *board;            /* RegisterAck: board path, as message */
	size_t board_len;
	uint64_t board_gen;
	uint8_t board_gpu;
	uint64_t token; /* RegisterAck: the registration's token (0: none) */
} fk_msg_in;

/* Decode a daemon → hook datagram. Returns 0 on success, -1 if it is not a
 * valid v1 message of types 8–12 (design: wrong version, unknown type,
 * missing field, value out of range, trailing bytes). */
int fk_decode(const void *buf, size_t len, fk_msg_in *out);

#endif
