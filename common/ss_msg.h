/* ss_msg.h - the wire codec: a protobuf-c header frame plus raw arrays.
 *
 * A message is [header][array frame]*; on a ROUTER socket one identity frame
 * comes first. Array frames are little-endian uint64 keys or float values;
 * their sizes follow from the header and ss_msg_check() verifies them, so a
 * handler may index frames without further checks. A packed message (header
 * field packed) carries all its arrays in one frame instead, at the offsets
 * ss_msg_pack_offsets() gives; ss_msg_check() splits it into the same
 * frames (views into it), so handlers read both forms alike. Every function here is
 * thread-safe; a socket is used only by the thread that owns it. */
#ifndef SS_MSG_H
#define SS_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "shadow.pb-c.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ShadowSync sends raw little-endian arrays; this host is big-endian"
#endif

#define SS_PROTO_VERSION 2
#define SS_MSG_MAX_FRAMES 4     /* array frames after the header */
#define SS_MSG_MAX_ID 256       /* longest ROUTER identity */
#define SS_MSG_MAX_GROUPS 4096  /* most (table, count) groups in a request */

/* A received message. Caller-allocated; ss_msg_close() frees its parts. */
struct ss_msg {
    Header *hdr;                          /* unpacked header, owned */
    size_t n_frames;                      /* array frames after the header */
    zmq_msg_t frames[SS_MSG_MAX_FRAMES];  /* array frames, owned; once a packed
                                           * message is checked, views into packed */
    size_t bytes;                         /* total bytes received */
    int has_packed;                       /* packed holds the one frame of a packed
                                           * message (set by ss_msg_check()) */
    zmq_msg_t packed;                     /* that frame, owned */
};

/* One array frame to send: borrowed for the duration of the send call. */
struct ss_frame {
    const void *data;  /* bytes, may be NULL when len is 0 */
    size_t len;        /* length in bytes */
};

/* Receive one whole message. When id is not NULL the first part is the
 * ROUTER identity, copied into id (SS_MSG_MAX_ID bytes) and *id_len.
 * flags: 0 or ZMQ_DONTWAIT. Returns 0; SS_E_TIMEOUT when nothing is there
 * (DONTWAIT or the socket's RCVTIMEO); SS_E_PROTO when the parts do not form
 * a message (all parts are consumed, err says why, and *id is still valid
 * so the caller can answer); SS_E_NET on a socket error. */
int ss_msg_recv(void *sock, int flags, uint8_t *id, size_t *id_len, struct ss_msg *msg,
                char *err, size_t err_len);

/* Finish receiving a message whose header frame the caller has already
 * received into hdr_part (to read its metadata first, e.g.): unpack it and
 * receive the array frames. hdr_part is closed whatever happens. Returns as
 * ss_msg_recv(). */
int ss_msg_recv_rest(void *sock, zmq_msg_t *hdr_part, struct ss_msg *msg, char *err,
                     size_t err_len);

/* Receive one part into part (initialized here; closed again on error).
 * flags: 0 or ZMQ_DONTWAIT. Returns 0; SS_E_TIMEOUT when nothing is there;
 * SS_E_STOPPED when the context ends or a signal interrupts; SS_E_NET. */
int ss_msg_recv_part(void *sock, zmq_msg_t *part, int flags);

/* Receive a later part of a message whose first part was read: ZeroMQ
 * delivers a message's parts together, so it is there, and a signal that
 * interrupts the call is retried (giving up would leave the rest of the
 * message to be read as the next one). Returns 0, SS_E_STOPPED when the
 * context ends, or SS_E_NET. */
int ss_msg_recv_next(void *sock, zmq_msg_t *part);

/* Release what ss_msg_recv() filled. Accepts a zeroed or closed msg. */
void ss_msg_close(struct ss_msg *msg);

/* Check a received message's frames against its header, for a request
 * (is_reply 0) or a reply. A packed message's one frame must be exactly as
 * long as the header implies; it is then split: msg->frames become views
 * into it, in the order of the unpacked form (so frames[i] is the same
 * array either way; the views stay valid when msg is copied as a struct,
 * as long as only one copy is closed). Checking a message twice is allowed.
 * Returns 0, or SS_E_PROTO (SS_E_VERSION for another protocol version,
 * SS_E_NOMEM when a small packed frame cannot be copied) with err naming
 * the problem ("PUSH: packed frame has 12 bytes, header implies 24"). */
int ss_msg_check(struct ss_msg *msg, int is_reply, char *err, size_t err_len);

/* Where each of n arrays of len[i] bytes (in the order of the unpacked
 * form) lies in a packed frame: off[i] bytes from its start. With two
 * arrays or more, the second (a push's floats) comes first, then the
 * others in order, each at a multiple of 8. Returns the frame's length.
 * Thread: any. */
size_t ss_msg_pack_offsets(const size_t *len, size_t n, size_t *off);

/* Send hdr and frames, preceded by the identity when id is not NULL.
 * Returns 0, SS_E_NOMEM, SS_E_TIMEOUT (the socket's queue is full and its
 * ZMQ_SNDTIMEO passed) or SS_E_NET. Borrows everything. */
int ss_msg_send(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                const struct ss_frame *frames, size_t n_frames);

/* Like ss_msg_send() but packed: the frames are copied into one frame (at
 * ss_msg_pack_offsets()) and the header is sent with packed set. Returns
 * as ss_msg_send(). Borrows everything. */
int ss_msg_send_packed(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                       const struct ss_frame *frames, size_t n_frames);

/* Like ss_msg_send() but the array frames are zmq messages whose ownership
 * passes to ZeroMQ (zero-copy for large buffers); they are closed on error
 * too. */
int ss_msg_send_zmsgs(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                      zmq_msg_t *frames, size_t n_frames);

/* Send an error reply for request type/req_id with status rc and text. */
int ss_msg_send_error(void *sock, const uint8_t *id, size_t id_len, int type, uint64_t req_id,
                      int rc, const char *text);

/* Sum of the counts of a LOOKUP/PUSH header (keys in the request). */
uint64_t ss_msg_n_keys(const Header *hdr);

/* Sum of the lookup_counts of a PUSH_LOOKUP header (keys it looks up). */
uint64_t ss_msg_n_lookup_keys(const Header *hdr);

/* Index of the first NaN or infinity in v[0..n), or n when all are finite. */
uint64_t ss_floats_first_nonfinite(const float *v, uint64_t n);

/* Index of the first value in v[0..n) that is NaN, infinite or of magnitude
 * above max_abs (a finite float >= 0), or n when there is none. */
uint64_t ss_floats_first_beyond(const float *v, uint64_t n, float max_abs);

/* Printable name of a message type ("LOOKUP"); "UNKNOWN" otherwise. */
const char *ss_msg_type_name(int type);

#endif
