/* ss_msg.c - wire codec: multipart receive, size checks, send; the table of
 * message types (ss_msg_types.h) as data. */
#include "ss_msg.h"

#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_msg_types.h"

/* The table of ss_msg_types.h as data. */
static const struct ss_msg_type s_types[SS_MSG_N_TYPES] = {
#define SS_MSG_ROW(name, req, reply, ps, ps_fn, tr_fn, admin, ro, lat)                 \
    {SS_MSG_ROW_##name, MSG_TYPE__MSG_##name, #name, SS_MSG_F_##req, SS_MSG_F_##reply, \
     SS_MSG_PS_##ps, admin, ro, SS_MSG_LAT_##lat},
    SS_MSG_TYPES(SS_MSG_ROW)
#undef SS_MSG_ROW
};

const struct ss_msg_type *ss_msg_type_find(int type)
{
    switch (type) {  /* the compiler makes it a jump table */
#define SS_MSG_CASE(name, req, reply, ps, ps_fn, tr_fn, admin, ro, lat) \
    case MSG_TYPE__MSG_##name: return &s_types[SS_MSG_ROW_##name];
    SS_MSG_TYPES(SS_MSG_CASE)
#undef SS_MSG_CASE
    default: return NULL;
    }
}

const struct ss_msg_type *ss_msg_type_at(size_t i)
{
    ss_assert(i < SS_MSG_N_TYPES);
    return &s_types[i];
}

const char *ss_msg_lat_name(int lat)
{
    static const char *const names[SS_MSG_LAT_N] = {"lookup", "push", "push_lookup", "sync",
                                                    "other"};
    ss_assert(lat >= 0 && lat < SS_MSG_LAT_N);
    return names[lat];
}

const char *ss_msg_type_name(int type)
{
    const struct ss_msg_type *t = ss_msg_type_find(type);
    return t ? t->name : "UNKNOWN";
}

void ss_msg_close(struct ss_msg *msg)
{
    if (msg->hdr)
        header__free_unpacked(msg->hdr, NULL);
    msg->hdr = NULL;
    for (size_t i = 0; i < msg->n_frames; i++)
        zmq_msg_close(&msg->frames[i]);
    if (msg->has_packed)
        zmq_msg_close(&msg->packed);
    msg->has_packed = 0;
    msg->n_frames = 0;
    msg->bytes = 0;
}

/* True when another part of the current message is waiting. */
static int s_more(void *sock)
{
    int more = 0;
    size_t sz = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more;
}

/* Read and drop the remaining parts of a multipart message. */
static void s_drain(void *sock)
{
    int more = 1;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        int n = zmq_msg_recv(&part, sock, 0);
        zmq_msg_close(&part);
        if (n < 0)
            break;
        sz = sizeof more;
    }
}

int ss_msg_recv_part(void *sock, zmq_msg_t *part, int flags)
{
    zmq_msg_init(part);
    if (zmq_msg_recv(part, sock, flags) >= 0)
        return 0;
    int e = zmq_errno();
    zmq_msg_close(part);
    return (e == EAGAIN) ? SS_E_TIMEOUT : (e == ETERM || e == EINTR) ? SS_E_STOPPED : SS_E_NET;
}

int ss_msg_recv_next(void *sock, zmq_msg_t *part)
{
    for (;;) {
        zmq_msg_init(part);
        if (zmq_msg_recv(part, sock, 0) >= 0)
            return 0;
        int e = zmq_errno();
        zmq_msg_close(part);
        if (e != EINTR)
            return e == ETERM ? SS_E_STOPPED : SS_E_NET;
    }
}

static int s_recv_id(void *sock, int flags, uint8_t *id, size_t *id_len)
{
    zmq_msg_t part;
    int rc = ss_msg_recv_part(sock, &part, flags);
    if (rc)
        return rc;
    size_t n = zmq_msg_size(&part);
    *id_len = n > SS_MSG_MAX_ID ? SS_MSG_MAX_ID : n;
    memcpy(id, zmq_msg_data(&part), *id_len);
    zmq_msg_close(&part);
    return 0;
}

static void s_free_buf(void *data, void *hint)
{
    (void)hint;
    ss_free(data);
}

/* Array frames are read as uint64/float arrays: give a frame that ZeroMQ
 * delivered at an unaligned address (small or batched messages) its own
 * aligned copy. Returns 0 or SS_E_NOMEM. */
static int s_align(zmq_msg_t *f)
{
    size_t n = zmq_msg_size(f);
    if (n == 0 || ((uintptr_t)zmq_msg_data(f) & 7u) == 0)
        return 0;
    void *buf = ss_try_malloc(n);
    if (!buf)
        return SS_E_NOMEM;
    memcpy(buf, zmq_msg_data(f), n);
    zmq_msg_close(f);
    if (zmq_msg_init_data(f, buf, n, s_free_buf, NULL) != 0) {
        ss_free(buf);
        zmq_msg_init(f);
        return SS_E_NOMEM;
    }
    return 0;
}

int ss_msg_recv(void *sock, int flags, uint8_t *id, size_t *id_len, struct ss_msg *msg,
                char *err, size_t err_len)
{
    zmq_msg_t part;
    int rc;

    memset(msg, 0, sizeof *msg);
    if (id && (rc = s_recv_id(sock, flags, id, id_len)) != 0)
        return rc;
    if (id && !s_more(sock)) {
        snprintf(err, err_len, "message has no header frame");
        return SS_E_PROTO;
    }
    rc = id ? ss_msg_recv_next(sock, &part) : ss_msg_recv_part(sock, &part, flags);
    if (rc)
        return rc;
    return ss_msg_recv_rest(sock, &part, msg, err, err_len);
}

int ss_msg_recv_rest(void *sock, zmq_msg_t *hdr_part, struct ss_msg *msg, char *err,
                     size_t err_len)
{
    int rc;

    memset(msg, 0, sizeof *msg);
    msg->bytes = zmq_msg_size(hdr_part);
    msg->hdr = header__unpack(NULL, zmq_msg_size(hdr_part), zmq_msg_data(hdr_part));
    zmq_msg_close(hdr_part);
    if (!msg->hdr) {
        snprintf(err, err_len, "header frame (%zu bytes) is not a valid protobuf Header",
                 msg->bytes);
        s_drain(sock);
        return SS_E_PROTO;
    }
    while (s_more(sock)) {
        if (msg->n_frames == SS_MSG_MAX_FRAMES) {
            snprintf(err, err_len, "more than %d array frames", SS_MSG_MAX_FRAMES);
            s_drain(sock);
            ss_msg_close(msg);
            return SS_E_PROTO;
        }
        zmq_msg_t *f = &msg->frames[msg->n_frames];
        if ((rc = ss_msg_recv_next(sock, f)) != 0) {
            ss_msg_close(msg);
            return rc;
        }
        msg->n_frames++;
        msg->bytes += zmq_msg_size(f);
        if ((rc = s_align(f)) != 0) {
            snprintf(err, err_len, "out of memory copying a %zu-byte frame", zmq_msg_size(f));
            s_drain(sock);
            ss_msg_close(msg);
            return rc;
        }
    }
    return 0;
}

uint64_t ss_msg_n_keys(const Header *hdr)
{
    uint64_t n = 0;
    for (size_t i = 0; i < hdr->n_counts; i++)
        n += hdr->counts[i];
    return n;
}

uint64_t ss_floats_first_nonfinite(const float *v, uint64_t n)
{
    return ss_floats_first_beyond(v, n, FLT_MAX);
}

uint64_t ss_floats_first_beyond(const float *v, uint64_t n, float max_abs)
{
    /* the bits of |x| order like |x| as unsigned integers, and those of NaN
     * and infinity lie above every finite value: one compare per float, in
     * blocks of 16 that vectorize */
    uint32_t lim;
    memcpy(&lim, &max_abs, 4);
    lim &= 0x7fffffffu;
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t bad = 0;
        for (int k = 0; k < 16; k++) {
            uint32_t u;
            memcpy(&u, v + i + k, 4);
            bad |= (uint32_t)((u & 0x7fffffffu) > lim);
        }
        if (bad)
            break;
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + i, 4);
        if ((u & 0x7fffffffu) > lim)
            return i;
    }
    return n;
}

uint64_t ss_msg_n_lookup_keys(const Header *hdr)
{
    uint64_t n = 0;
    for (size_t i = 0; i < hdr->n_lookup_counts; i++)
        n += hdr->lookup_counts[i];
    return n;
}

/* tables/counts of one key part: equal, non-empty, bounded lengths. */
static int s_groups_ok(const Header *h, size_t n_tables, size_t n_counts, const char *what,
                       char *err, size_t err_len)
{
    if (n_tables == n_counts && n_tables > 0 && n_tables <= SS_MSG_MAX_GROUPS)
        return 1;
    snprintf(err, err_len, "%s: %zu %stables but %zu counts (need 1..%d equal)",
             ss_msg_type_name(h->type), n_tables, what, n_counts, SS_MSG_MAX_GROUPS);
    return 0;
}

/* Expected array frame sizes of a message whose frames have shape (enum
 * ss_msg_shape), in bytes; returns the count or -1 with err set when the
 * header itself is inconsistent. */
static int s_expected(const Header *h, int shape, size_t *sz, char *err, size_t err_len)
{
    const char *name = ss_msg_type_name(h->type);
    uint64_t n = ss_msg_n_keys(h);
    switch (shape) {
    case SS_MSG_F_NONE:
        return 0;
    case SS_MSG_F_KEYS: case SS_MSG_F_PUSH: case SS_MSG_F_PUSH_KEYS:
        if (!s_groups_ok(h, h->n_tables, h->n_counts, "", err, err_len))
            return -1;
        sz[0] = n * 8;
        if (shape == SS_MSG_F_KEYS)
            return 1;
        if (!h->has_dim || h->dim == 0) {
            snprintf(err, err_len, "%s: header has no row dim", name);
            return -1;
        }
        sz[1] = n * h->dim * 4;
        if (shape == SS_MSG_F_PUSH)
            return 2;
        if (!s_groups_ok(h, h->n_lookup_tables, h->n_lookup_counts, "lookup ", err, err_len))
            return -1;
        sz[2] = ss_msg_n_lookup_keys(h) * 8;
        return 3;
    case SS_MSG_F_RANGE: case SS_MSG_F_RANGE_ALPHA: case SS_MSG_F_RANGE_ONLY:
        if (!h->has_offset || !h->has_length) {
            snprintf(err, err_len, "%s: header needs offset and length", name);
            return -1;
        }
        if (shape == SS_MSG_F_RANGE_ALPHA && !h->has_alpha) {
            snprintf(err, err_len, "%s: header has no alpha", name);
            return -1;
        }
        sz[0] = h->length * 4;
        return shape == SS_MSG_F_RANGE_ONLY ? 0 : 1;
    case SS_MSG_F_ROWS:
        if (!h->has_dim || !h->has_length) {
            snprintf(err, err_len, "LOOKUP reply needs dim and length");
            return -1;
        }
        sz[0] = h->length * h->dim * 4;
        return 1;
    case SS_MSG_F_FLOATS:
        if (!h->has_length) {
            snprintf(err, err_len, "%s reply needs length", name);
            return -1;
        }
        sz[0] = h->length * 4;
        return 1;
    default:
        ss_assert(!"a shape that ss_msg_types.h does not list");
        return -1;
    }
}

/* The frames a request of its type carries (ss_msg_types.h). */
static int s_expected_request(const Header *h, size_t *sz, char *err, size_t err_len)
{
    const struct ss_msg_type *t = ss_msg_type_find(h->type);
    if (!t) {
        snprintf(err, err_len, "unknown message type %d", (int)h->type);
        return -1;
    }
    return s_expected(h, t->req, sz, err, err_len);
}

/* The frames a reply carries: none with an error status, else its type's. */
static int s_expected_reply(const Header *h, size_t *sz, char *err, size_t err_len)
{
    if (h->has_status && h->status != 0)
        return 0;
    const struct ss_msg_type *t = ss_msg_type_find(h->type);
    if (!t) {
        snprintf(err, err_len, "unknown reply type %d", (int)h->type);
        return -1;
    }
    return s_expected(h, t->reply == SS_MSG_F_SAME ? t->req : t->reply, sz, err,
                      err_len);
}

/* The header's own bounds: version, and counts and lengths small enough
 * that byte sizes cannot overflow. */
static int s_check_header(const Header *h, char *err, size_t err_len)
{
    if (h->version != SS_PROTO_VERSION) {
        snprintf(err, err_len, "protocol version %u, this build speaks %d", h->version,
                 SS_PROTO_VERSION);
        return SS_E_VERSION;
    }
    for (size_t i = 0; i < h->n_counts; i++)
        if (h->counts[i] > (1u << 30)) {
            snprintf(err, err_len, "count %u too large", h->counts[i]);
            return SS_E_PROTO;
        }
    for (size_t i = 0; i < h->n_lookup_counts; i++)
        if (h->lookup_counts[i] > (1u << 30)) {
            snprintf(err, err_len, "lookup count %u too large", h->lookup_counts[i]);
            return SS_E_PROTO;
        }
    if ((h->has_length && h->length > (1ull << 32)) || (h->has_dim && h->dim > (1u << 16))) {
        snprintf(err, err_len, "length or dim too large");
        return SS_E_PROTO;
    }
    return 0;
}

size_t ss_msg_pack_offsets(const size_t *len, size_t n, size_t *off)
{
    size_t at = 0, end = 0;
    ss_assert(n <= SS_MSG_MAX_FRAMES);
    for (size_t k = 0; k < n; k++) {
        size_t i = n < 2 ? k : k == 0 ? 1 : k == 1 ? 0 : k;  /* the floats first */
        off[i] = at;
        end = at + len[i];
        at = (end + 7) & ~(size_t)7;
    }
    return end;
}

/* Split msg's one packed frame into n views of sz[i] bytes (the frames of
 * the unpacked form); the frame moves to msg->packed. Returns 0, or
 * SS_E_PROTO with err when its length is not what sz implies (SS_E_NOMEM
 * when a small frame cannot be copied). */
static int s_unpack(struct ss_msg *msg, const size_t *sz, int n, char *err, size_t err_len)
{
    const char *name = ss_msg_type_name(msg->hdr->type);
    size_t off[SS_MSG_MAX_FRAMES];
    if (msg->n_frames != (n > 0 ? 1u : 0u)) {
        snprintf(err, err_len, "%s: packed message has %zu array frames, expected %d", name,
                 msg->n_frames, n > 0);
        return SS_E_PROTO;
    }
    if (n == 0)
        return 0;
    size_t want = ss_msg_pack_offsets(sz, (size_t)n, off);
    size_t got = zmq_msg_size(&msg->frames[0]);
    if (got != want) {
        snprintf(err, err_len, "%s: packed frame has %zu bytes, header implies %zu", name, got,
                 want);
        return SS_E_PROTO;
    }
    /* ZeroMQ keeps a small frame inside its zmq_msg_t: views into that
     * would point into msg itself and dangle once msg is copied (the ring
     * keeps a pending piece by struct copy), so such a frame gets a heap
     * copy of its own */
    char *data = zmq_msg_data(&msg->frames[0]);
    uintptr_t d = (uintptr_t)data, at = (uintptr_t)&msg->frames[0];
    int rc;
    zmq_msg_init(&msg->packed);
    if (d >= at && d < at + sizeof(zmq_msg_t)) {
        void *buf = ss_try_malloc(got ? got : 1);
        if (!buf || zmq_msg_init_data(&msg->packed, buf, got, s_free_buf, NULL) != 0) {
            ss_free(buf);
            snprintf(err, err_len, "%s: out of memory copying a %zu-byte packed frame", name,
                     got);
            return SS_E_NOMEM;
        }
        memcpy(buf, data, got);
    } else {
        rc = zmq_msg_move(&msg->packed, &msg->frames[0]);
        ss_assert(rc == 0);  /* both are valid messages */
    }
    zmq_msg_close(&msg->frames[0]);
    msg->has_packed = 1;
    msg->n_frames = 0;
    char *base = zmq_msg_data(&msg->packed);
    for (int i = 0; i < n; i++) {
        /* no free function: a view, nothing allocated */
        rc = zmq_msg_init_data(&msg->frames[i], base + off[i], sz[i], NULL, NULL);
        ss_assert(rc == 0);
        msg->n_frames++;
    }
    return 0;
}

int ss_msg_check(struct ss_msg *msg, int is_reply, char *err, size_t err_len)
{
    size_t sz[SS_MSG_MAX_FRAMES];
    const Header *h = msg->hdr;
    int rc = s_check_header(h, err, err_len);
    if (rc)
        return rc;
    int n = is_reply ? s_expected_reply(h, sz, err, err_len)
                     : s_expected_request(h, sz, err, err_len);
    if (n < 0)
        return SS_E_PROTO;
    if (h->has_packed && h->packed && !msg->has_packed &&
        (rc = s_unpack(msg, sz, n, err, err_len)) != 0)
        return rc;
    if ((size_t)n != msg->n_frames) {
        snprintf(err, err_len, "%s: %zu array frames, expected %d", ss_msg_type_name(h->type),
                 msg->n_frames, n);
        return SS_E_PROTO;
    }
    for (int i = 0; i < n; i++) {
        size_t got = zmq_msg_size(&msg->frames[i]);
        if (got != sz[i]) {
            snprintf(err, err_len, "%s: frame %d has %zu bytes, header implies %zu",
                     ss_msg_type_name(h->type), i + 1, got, sz[i]);
            return SS_E_PROTO;
        }
    }
    return 0;
}

static int s_send_part(void *sock, const void *data, size_t len, int more)
{
    if (zmq_send(sock, data, len, more ? ZMQ_SNDMORE : 0) >= 0)
        return 0;
    return zmq_errno() == EAGAIN ? SS_E_TIMEOUT : SS_E_NET;
}

/* Send the identity (if any) and the packed header; more: frames follow. */
static int s_send_head(void *sock, const uint8_t *id, size_t id_len, const Header *hdr, int more)
{
    uint8_t small[512];
    size_t len = header__get_packed_size(hdr);
    uint8_t *buf = len <= sizeof small ? small : ss_try_malloc(len);
    int rc = 0;
    if (!buf)
        return SS_E_NOMEM;
    header__pack(hdr, buf);
    if (id)
        rc = s_send_part(sock, id, id_len, 1);
    if (rc == 0)
        rc = s_send_part(sock, buf, len, more);
    if (buf != small)
        ss_free(buf);
    return rc;
}

int ss_msg_send(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                const struct ss_frame *frames, size_t n_frames)
{
    int rc = s_send_head(sock, id, id_len, hdr, n_frames > 0);
    for (size_t i = 0; rc == 0 && i < n_frames; i++)
        rc = s_send_part(sock, frames[i].data, frames[i].len, i + 1 < n_frames);
    return rc;
}

int ss_msg_send_packed(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                       const struct ss_frame *frames, size_t n_frames)
{
    size_t len[SS_MSG_MAX_FRAMES] = {0}, off[SS_MSG_MAX_FRAMES];
    Header h = *hdr;
    if (n_frames > SS_MSG_MAX_FRAMES)
        return SS_E_INVAL;
    for (size_t i = 0; i < n_frames; i++)
        len[i] = frames[i].len;
    size_t total = ss_msg_pack_offsets(len, n_frames, off);
    uint8_t *buf = n_frames ? ss_try_malloc(total ? total : 1) : NULL;
    if (n_frames && !buf)
        return SS_E_NOMEM;
    if (buf)
        memset(buf, 0, total);  /* the padding between arrays */
    for (size_t i = 0; i < n_frames; i++)
        if (len[i])
            memcpy(buf + off[i], frames[i].data, len[i]);
    h.has_packed = h.packed = 1;
    struct ss_frame one = {buf, total};
    int rc = ss_msg_send(sock, id, id_len, &h, &one, n_frames ? 1 : 0);
    ss_free(buf);
    return rc;
}

int ss_msg_send_zmsgs(void *sock, const uint8_t *id, size_t id_len, const Header *hdr,
                      zmq_msg_t *frames, size_t n_frames)
{
    size_t i = 0;
    int rc = s_send_head(sock, id, id_len, hdr, n_frames > 0);
    for (; rc == 0 && i < n_frames; i++)
        if (zmq_msg_send(&frames[i], sock, i + 1 < n_frames ? ZMQ_SNDMORE : 0) < 0)
            rc = SS_E_NET;
    for (size_t j = (rc == 0) ? n_frames : (i ? i - 1 : 0); j < n_frames; j++)
        zmq_msg_close(&frames[j]);
    return rc;
}

int ss_msg_send_error(void *sock, const uint8_t *id, size_t id_len, int type, uint64_t req_id,
                      int rc, const char *text)
{
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = (MsgType)type;
    h.req_id = req_id;
    h.has_status = 1;
    h.status = rc;
    h.error = (char *)text;
    return ss_msg_send(sock, id, id_len, &h, NULL, 0);
}
