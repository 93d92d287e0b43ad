/* tr_allreduce.c - ring AllReduce (sum) over ZeroMQ between shadow threads.
 *
 * DESIGN: x is split into n segments whose lengths differ by at most one.
 * Reduce-scatter: at step s (0..n-2) rank r sends segment (r - s) mod n to
 * its right neighbour and adds the segment (r - s - 1) mod n received from
 * its left one; afterwards rank r holds the full sum of segment (r + 1) mod n.
 * All-gather: at step n-1+t (t = 0..n-2) it sends segment (r + 1 - t) and
 * copies in segment (r - t). The all-gather copies, so every rank ends with
 * bitwise identical sums. The segment sent at step s is the one received at
 * step s-1, so each segment travels as pieces of at most chunk_floats and a
 * piece is forwarded as soon as the matching piece of the previous step has
 * arrived (pipelining). Every rank sends its pieces in (step, offset) order
 * over one connection, so they arrive from the left in that order too: the
 * receiver expects exactly the next piece and drops anything else.
 *
 * Sending never blocks: the DEALER has ZMQ_SNDTIMEO 0 and ZMQ_IMMEDIATE (no
 * queueing to a peer that is not connected), and one zmq_poll() loop waits
 * for "can receive" and "can send" together until the round's deadline. As
 * a rank keeps receiving while its sends wait, the ring cannot deadlock on
 * high-water marks, whatever their size.
 *
 * Rounds are numbered from 1 and every piece carries its round. Pieces of
 * older rounds (left over by abandoned rounds) are dropped. A piece of a
 * newer round means the others timed out and moved on while this trainer was
 * away (frozen, slow): the round is abandoned, the piece is kept, and the
 * next call runs that newer round, so the ring heals by itself. */
#include "tr_allreduce.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_auth.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg.h"
#include "ss_time.h"

#define AR_DEFAULT_CHUNK 65536      /* floats per piece when conf says 0 */
#define AR_MAX_CHUNK (1u << 28)     /* floats per piece at most (1 GiB) */
#define AR_HEADER_SLACK 1024        /* bytes kept for the header under MAXMSGSIZE */
#define AR_QUEUE_BYTES (32u << 20)  /* bytes a high-water mark may hold */
#define AR_RECV_BATCH 256           /* messages read before sending again */
#define AR_MAX_LINGER_MS 2000       /* how long pending sends may outlive close */

/* Progress through the steps of a round: a step and floats done in it. */
struct ar_cursor {
    uint32_t step;  /* 0..n_steps; n_steps = done */
    size_t off;     /* floats of this step's segment done */
};

/* The round in progress. */
struct ar_round {
    uint64_t round;        /* round number */
    float *x;              /* the caller's vector, borrowed */
    size_t len;            /* floats in x */
    uint32_t n_steps;      /* 2 * (n - 1) */
    struct ar_cursor tx;   /* next piece to send */
    struct ar_cursor rx;   /* next piece expected */
    uint64_t deadline_ns;  /* monotonic time the round is abandoned at */
};

struct tr_allreduce {
    void *rx_sock;                   /* ROUTER bound at our endpoint; owned */
    void *tx_sock;                   /* DEALER connected to the right; owned */
    uint32_t rank;                   /* this trainer */
    uint32_t n;                      /* trainers in the ring */
    uint32_t left;                   /* rank we receive from */
    uint32_t right;                  /* rank we send to */
    char **endpoints;                /* n copied endpoints */
    int64_t timeout_ms;              /* round deadline */
    size_t chunk;                    /* floats per piece */
    uint64_t round;                  /* round the next call runs */
    struct ss_msg pending;           /* a newer-round piece kept for the next call */
    int has_pending;                 /* pending is filled */
    struct tr_allreduce_stats stats; /* counters */
};

/* ---- segments and steps ---- */

/* First element of segment seg when len floats are split in n. */
static size_t s_seg_start(size_t len, uint32_t n, uint32_t seg)
{
    size_t q = len / n, rem = len % n;
    return (size_t)seg * q + (seg < rem ? seg : rem);
}

/* Length of segment seg. */
static size_t s_seg_len(size_t len, uint32_t n, uint32_t seg)
{
    return len / n + (seg < len % n ? 1 : 0);
}

/* (a - b) mod n for ranks and step counts below n. */
static uint32_t s_mod_sub(uint32_t a, uint32_t b, uint32_t n)
{
    return (uint32_t)(((uint64_t)a + n - b % n) % n);
}

/* Segment rank r sends at step s. */
static uint32_t s_send_seg(const tr_allreduce_t *self, uint32_t s)
{
    if (s < self->n - 1)
        return s_mod_sub(self->rank, s, self->n);
    return s_mod_sub((self->rank + 1) % self->n, s - (self->n - 1), self->n);
}

/* Segment rank r receives at step s: the one its left neighbour sends. */
static uint32_t s_recv_seg(const tr_allreduce_t *self, uint32_t s)
{
    if (s < self->n - 1)
        return s_mod_sub(self->rank, s + 1, self->n);
    return s_mod_sub(self->rank, s - (self->n - 1), self->n);
}

/* Move a cursor past finished (or empty) segments. */
static void s_cursor_settle(const tr_allreduce_t *self, const struct ar_round *rd,
                            struct ar_cursor *c, int is_tx)
{
    while (c->step < rd->n_steps) {
        uint32_t seg = is_tx ? s_send_seg(self, c->step) : s_recv_seg(self, c->step);
        if (c->off < s_seg_len(rd->len, self->n, seg))
            return;
        c->step++;
        c->off = 0;
    }
}

/* Floats in the next piece to send (tx cursor not done). */
static size_t s_tx_piece(const tr_allreduce_t *self, const struct ar_round *rd)
{
    size_t left = s_seg_len(rd->len, self->n, s_send_seg(self, rd->tx.step)) - rd->tx.off;
    return left < self->chunk ? left : self->chunk;
}

/* True when the next piece's data is final here: step 0 sends our own data;
 * later steps forward what the previous step received. */
static int s_tx_ready(const tr_allreduce_t *self, const struct ar_round *rd)
{
    const struct ar_cursor *tx = &rd->tx, *rx = &rd->rx;
    if (tx->step >= rd->n_steps)
        return 0;
    if (tx->step == 0 || rx->step > tx->step - 1)
        return 1;
    return rx->step == tx->step - 1 && rx->off >= tx->off + s_tx_piece(self, rd);
}

/* ---- sending ---- */

/* Send every piece that is ready until the socket would block (*blocked
 * set). Returns 0, or SS_E_NET/SS_E_NOMEM with err set. */
static int s_pump_send(tr_allreduce_t *self, struct ar_round *rd, int *blocked, char *err,
                       size_t err_len)
{
    *blocked = 0;
    while (s_tx_ready(self, rd)) {
        size_t piece = s_tx_piece(self, rd);
        size_t off = s_seg_start(rd->len, self->n, s_send_seg(self, rd->tx.step)) + rd->tx.off;
        Header h = HEADER__INIT;
        struct ss_frame f = {rd->x + off, piece * sizeof(float)};

        h.version = SS_PROTO_VERSION;
        h.type = MSG_TYPE__MSG_AR_CHUNK;
        h.req_id = rd->round;
        h.has_sender = h.has_round = h.has_step = h.has_offset = h.has_length = 1;
        h.sender = self->rank;
        h.round = rd->round;
        h.step = rd->tx.step;
        h.offset = off;
        h.length = piece;
        int rc = ss_msg_send(self->tx_sock, NULL, 0, &h, &f, 1);
        if (rc == SS_E_TIMEOUT) {
            *blocked = 1;
            return 0;
        }
        if (rc) {
            snprintf(err, err_len, "allreduce round %" PRIu64 ": send to rank %u (%s): %s",
                     rd->round, self->right, self->endpoints[self->right], ss_strerror(rc));
            return rc;
        }
        self->stats.bytes_sent += f.len;
        rd->tx.off += piece;
        s_cursor_settle(self, rd, &rd->tx, 1);
    }
    return 0;
}

/* ---- receiving ---- */

/* Count and log a dropped message (the first ten, then every 1000th). */
static void s_bad(tr_allreduce_t *self, const char *why)
{
    uint64_t k = ++self->stats.msgs_bad;
    if (k <= 10 || k % 1000 == 0)
        SS_LOG(SS_LOG_WARN, "allreduce: dropped a bad message on %s (%" PRIu64 " so far): %s",
               self->endpoints[self->rank], k, why);
}

/* Add (reduce-scatter) or copy (all-gather) a received piece into x. The
 * frame may be unaligned, hence memcpy. */
static void s_apply(const struct ar_round *rd, uint32_t n, const Header *h, const zmq_msg_t *f)
{
    const unsigned char *src = zmq_msg_data((zmq_msg_t *)f);
    float *dst = rd->x + h->offset;
    if (h->step >= n - 1) {
        memcpy(dst, src, h->length * sizeof(float));
        return;
    }
    for (size_t i = 0; i < h->length; i++) {
        float v;
        memcpy(&v, src + i * sizeof(float), sizeof v);
        dst[i] += v;
    }
}

/* Check a received message against the ring and the round. Returns 0 when
 * it is a well-formed piece of some round, else 1 with why set. */
static int s_validate(const tr_allreduce_t *self, const struct ar_round *rd,
                      const struct ss_msg *msg, char *why, size_t why_len)
{
    const Header *h = msg->hdr;
    if (ss_msg_check(msg, 0, why, why_len))
        return 1;
    if (h->type != MSG_TYPE__MSG_AR_CHUNK) {
        snprintf(why, why_len, "type %s, expected AR_CHUNK", ss_msg_type_name(h->type));
        return 1;
    }
    if (!h->has_sender || h->sender != self->left) {
        snprintf(why, why_len, "sender %d, expected the left neighbour %u",
                 h->has_sender ? (int)h->sender : -1, self->left);
        return 1;
    }
    if (!h->has_round || !h->has_step || h->step >= rd->n_steps) {
        snprintf(why, why_len, "round/step missing or step %u not below %u",
                 h->has_step ? h->step : 0, rd->n_steps);
        return 1;
    }
    if (h->length == 0 || h->offset > rd->len || h->length > rd->len - h->offset) {
        snprintf(why, why_len, "piece [%" PRIu64 ", +%" PRIu64 ") outside x[0..%zu)", h->offset,
                 h->length, rd->len);
        return 1;
    }
    return 0;
}

/* Take one received message (ownership passes here). Returns 0 when it was
 * applied or dropped, 1 when it belongs to a newer round (kept as pending
 * and the next round number raised). */
static int s_handle(tr_allreduce_t *self, struct ar_round *rd, struct ss_msg *msg)
{
    char why[256];
    const Header *h = msg->hdr;

    if (s_validate(self, rd, msg, why, sizeof why)) {
        s_bad(self, why);
    } else if (h->round < rd->round) {
        self->stats.msgs_stale++;
    } else if (h->round > rd->round) {
        self->pending = *msg;
        self->has_pending = 1;
        if (h->round > self->round)
            self->round = h->round;
        return 1;
    } else {
        uint32_t seg = s_recv_seg(self, rd->rx.step);
        size_t want = s_seg_start(rd->len, self->n, seg) + rd->rx.off;
        size_t room = s_seg_len(rd->len, self->n, seg) - rd->rx.off;
        if (rd->rx.step >= rd->n_steps || h->step != rd->rx.step || h->offset != want ||
            h->length > room) {
            snprintf(why, sizeof why,
                     "round %" PRIu64 " step %u piece [%" PRIu64 ", +%" PRIu64
                     "), expected step %u at %zu (up to %zu floats)",
                     h->round, h->step, h->offset, h->length, rd->rx.step, want, room);
            s_bad(self, why);
        } else {
            s_apply(rd, self->n, h, &msg->frames[0]);
            self->stats.bytes_received += h->length * sizeof(float);
            rd->rx.off += h->length;
            s_cursor_settle(self, rd, &rd->rx, 0);
        }
    }
    ss_msg_close(msg);
    return 0;
}

/* Read what is waiting (up to a batch) while pieces are still expected.
 * Returns 0, 1 when a newer round was seen, or SS_E_NET/SS_E_STOPPED. */
static int s_pump_recv(tr_allreduce_t *self, struct ar_round *rd, char *err, size_t err_len)
{
    for (int i = 0; i < AR_RECV_BATCH && rd->rx.step < rd->n_steps; i++) {
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        char why[256] = "";
        struct ss_msg msg;
        int rc = ss_msg_recv(self->rx_sock, ZMQ_DONTWAIT, id, &id_len, &msg, why, sizeof why);
        if (rc == SS_E_TIMEOUT)
            return 0;
        if (rc == SS_E_PROTO) {
            s_bad(self, why);
            continue;
        }
        if (rc) {
            snprintf(err, err_len, "allreduce round %" PRIu64 ": receive on %s: %s", rd->round,
                     self->endpoints[self->rank], ss_strerror(rc));
            return rc;
        }
        if (s_handle(self, rd, &msg))
            return 1;
    }
    return 0;
}

/* ---- the round ---- */

/* Fill err for an abandoned round; returns SS_E_TIMEOUT. */
static int s_timeout(const tr_allreduce_t *self, const struct ar_round *rd, int tx_blocked,
                     char *err, size_t err_len)
{
    if (tx_blocked)
        snprintf(err, err_len,
                 "allreduce round %" PRIu64 ": rank %u (%s) did not take data within %" PRId64
                 " ms (not connected or not reading; step %u of %u)",
                 rd->round, self->right, self->endpoints[self->right], self->timeout_ms,
                 rd->tx.step + 1, rd->n_steps);
    else
        snprintf(err, err_len,
                 "allreduce round %" PRIu64 ": no data from rank %u (%s) within %" PRId64
                 " ms (step %u of %u)",
                 rd->round, self->left, self->endpoints[self->left], self->timeout_ms,
                 rd->rx.step + 1, rd->n_steps);
    return SS_E_TIMEOUT;
}

/* Wait until a piece can be received or sent, or the deadline. Returns 0,
 * 1 when the deadline has passed, or SS_E_NET/SS_E_STOPPED. */
static int s_wait(tr_allreduce_t *self, const struct ar_round *rd, int tx_blocked)
{
    zmq_pollitem_t items[2];
    int n_items = 0;
    uint64_t now = ss_now_ns();

    if (now >= rd->deadline_ns)
        return 1;
    if (rd->rx.step < rd->n_steps)
        items[n_items++] = (zmq_pollitem_t){self->rx_sock, 0, ZMQ_POLLIN, 0};
    if (tx_blocked)
        items[n_items++] = (zmq_pollitem_t){self->tx_sock, 0, ZMQ_POLLOUT, 0};
    ss_assert(n_items > 0);
    long wait_ms = (long)((rd->deadline_ns - now + 999999) / 1000000);
    if (zmq_poll(items, n_items, wait_ms) >= 0 || zmq_errno() == EINTR)
        return 0;
    return zmq_errno() == ETERM ? SS_E_STOPPED : SS_E_NET;
}

/* Run one round to completion, abandonment or error. */
static int s_run(tr_allreduce_t *self, struct ar_round *rd, char *err, size_t err_len)
{
    s_cursor_settle(self, rd, &rd->tx, 1);
    s_cursor_settle(self, rd, &rd->rx, 0);
    if (self->has_pending) {
        struct ss_msg msg = self->pending;
        self->has_pending = 0;
        memset(&self->pending, 0, sizeof self->pending);
        if (s_handle(self, rd, &msg))
            goto behind;
    }
    for (;;) {
        int tx_blocked = 0;
        int rc = s_pump_send(self, rd, &tx_blocked, err, err_len);
        if (rc)
            return rc;
        rc = s_pump_recv(self, rd, err, err_len);
        if (rc == 1)
            goto behind;
        if (rc)
            return rc;
        if (rd->tx.step == rd->n_steps && rd->rx.step == rd->n_steps)
            return 0;
        if (!tx_blocked && s_tx_ready(self, rd))
            continue;  /* what was just received can be forwarded now */
        rc = s_wait(self, rd, tx_blocked);
        if (rc == 1)
            return s_timeout(self, rd, tx_blocked, err, err_len);
        if (rc) {
            snprintf(err, err_len, "allreduce round %" PRIu64 ": poll: %s", rd->round,
                     zmq_strerror(zmq_errno()));
            return rc;
        }
    }
behind:
    snprintf(err, err_len,
             "allreduce round %" PRIu64 ": abandoned: rank %u (%s) has moved on to round %" PRIu64
             " (this trainer fell behind, or the others gave up on this round first); the next"
             " call joins that round",
             rd->round, self->left, self->endpoints[self->left], self->round);
    SS_LOG(SS_LOG_INFO, "allreduce: fell behind in round %" PRIu64 ", joining round %" PRIu64,
           rd->round, self->round);
    return SS_E_TIMEOUT;
}

int tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err, size_t err_len)
{
    ss_assert(self && (x || len == 0) && err);
    struct ar_round rd = {.round = self->round, .x = x, .len = len};
    int rc = 0;

    self->round++;
    if (self->n > 1) {
        rd.n_steps = 2 * (self->n - 1);
        rd.deadline_ns = ss_now_ns() + (uint64_t)self->timeout_ms * 1000000ull;
        rc = s_run(self, &rd, err, err_len);
    }
    if (rc)
        self->stats.rounds_failed++;
    else
        self->stats.rounds_ok++;
    return rc;
}

/* ---- life cycle ---- */

/* Check conf; returns 0 or SS_E_CONFIG with err set. */
static int s_check_conf(const struct tr_allreduce_conf *conf, char *err, size_t err_len)
{
    if (conf->n == 0 || conf->rank >= conf->n) {
        snprintf(err, err_len, "allreduce: rank %u is not below the ring size %u", conf->rank,
                 conf->n);
        return SS_E_CONFIG;
    }
    const struct ss_cluster_id *me = conf->cluster ? ss_cluster_me(conf->cluster) : NULL;
    if (conf->cluster && (!me || me->role != SS_CLUSTER_TRAINER || me->index != conf->rank)) {
        snprintf(err, err_len, "allreduce: rank %u: the cluster's identity is not this trainer",
                 conf->rank);
        return SS_E_CONFIG;
    }
    if (conf->timeout_ms <= 0) {
        snprintf(err, err_len, "allreduce: timeout_ms %" PRId64 " must be positive",
                 conf->timeout_ms);
        return SS_E_CONFIG;
    }
    if (conf->max_message_bytes > 0 && conf->max_message_bytes < AR_HEADER_SLACK + 4) {
        snprintf(err, err_len, "allreduce: max_message_bytes %" PRId64 " is too small",
                 conf->max_message_bytes);
        return SS_E_CONFIG;
    }
    for (uint32_t i = 0; i < conf->n; i++)
        if (!conf->endpoints || !conf->endpoints[i] || !conf->endpoints[i][0]) {
            snprintf(err, err_len, "allreduce: endpoint of rank %u is missing", i);
            return SS_E_CONFIG;
        }
    return 0;
}

/* Piece size: conf's (or the default), capped so a piece fits a message. */
static size_t s_chunk(const struct tr_allreduce_conf *conf)
{
    size_t chunk = conf->chunk_floats ? conf->chunk_floats : AR_DEFAULT_CHUNK;
    if (chunk > AR_MAX_CHUNK)
        chunk = AR_MAX_CHUNK;
    if (conf->max_message_bytes > 0) {
        size_t cap = (size_t)(conf->max_message_bytes - AR_HEADER_SLACK) / sizeof(float);
        if (chunk > cap)
            chunk = cap;
    }
    return chunk;
}

/* Create the ROUTER (bound here) and the DEALER (to the right). Returns 0
 * or SS_E_NET with err set. */
static int s_open_sockets(tr_allreduce_t *self, void *zctx, int64_t max_message_bytes,
                          const struct ss_curve *curve, const ss_cluster_t *cluster, char *err,
                          size_t err_len)
{
    int zero = 0, one = 1, ipv6;
    int linger = (int)(self->timeout_ms < AR_MAX_LINGER_MS ? self->timeout_ms : AR_MAX_LINGER_MS);
    int64_t maxmsg = max_message_bytes > 0 ? max_message_bytes : -1;
    size_t piece_bytes = self->chunk * sizeof(float) + 64;
    int hwm = (int)(AR_QUEUE_BYTES / piece_bytes);
    const char *me = self->endpoints[self->rank], *right = self->endpoints[self->right];

    hwm = hwm < 16 ? 16 : hwm > 1000 ? 1000 : hwm;
    ipv6 = ss_endpoint_is_ipv6(right);
    int ipv6_me = ss_endpoint_is_ipv6(me);
    self->rx_sock = zmq_socket(zctx, ZMQ_ROUTER);
    self->tx_sock = zmq_socket(zctx, ZMQ_DEALER);
    if (!self->rx_sock || !self->tx_sock ||
        zmq_setsockopt(self->rx_sock, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(self->rx_sock, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(self->rx_sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(self->tx_sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(self->tx_sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(self->tx_sock, ZMQ_SNDTIMEO, &zero, sizeof zero) ||
        zmq_setsockopt(self->tx_sock, ZMQ_IMMEDIATE, &one, sizeof one) ||
        zmq_setsockopt(self->tx_sock, ZMQ_IPV6, &ipv6, sizeof ipv6) ||
        ss_curve_server(self->rx_sock, curve) || ss_curve_client(self->tx_sock, curve)) {
        snprintf(err, err_len, "allreduce: cannot create sockets: %s", zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    if (cluster) {
        char berr[1024];
        if (ss_cluster_bind(cluster, self->rx_sock, berr, sizeof berr) != 0) {
            snprintf(err, err_len, "allreduce: rank %u: %s", self->rank, berr);
            return SS_E_NET;
        }
        me = ss_cluster_bind_endpoint(cluster);
    } else if (zmq_setsockopt(self->rx_sock, ZMQ_IPV6, &ipv6_me, sizeof ipv6_me) != 0 ||
               zmq_bind(self->rx_sock, me) != 0) {
        snprintf(err, err_len, "allreduce: cannot bind rank %u endpoint %s: %s", self->rank, me,
                 zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    ss_auth_warn_plain_bind(me, curve && curve->on, "allreduce");
    if (zmq_connect(self->tx_sock, right) != 0) {
        snprintf(err, err_len, "allreduce: cannot connect to rank %u endpoint %s: %s",
                 self->right, right, zmq_strerror(zmq_errno()));
        return SS_E_NET;
    }
    return 0;
}

tr_allreduce_t *tr_allreduce_new(void *zctx, const struct tr_allreduce_conf *conf, char *err,
                                 size_t err_len)
{
    ss_assert(zctx && conf && err);
    if (s_check_conf(conf, err, err_len))
        return NULL;

    tr_allreduce_t *self = ss_calloc(1, sizeof *self);
    self->rank = conf->rank;
    self->n = conf->n;
    self->left = (conf->rank + conf->n - 1) % conf->n;
    self->right = (conf->rank + 1) % conf->n;
    self->timeout_ms = conf->timeout_ms;
    self->chunk = s_chunk(conf);
    self->round = 1;
    self->endpoints = ss_calloc(conf->n, sizeof *self->endpoints);
    for (uint32_t i = 0; i < conf->n; i++)
        self->endpoints[i] = ss_strdup(conf->endpoints[i]);
    if (self->n > 1) {
        if (s_open_sockets(self, zctx, conf->max_message_bytes, conf->curve, conf->cluster, err,
                           err_len)) {
            tr_allreduce_destroy(&self);
            return NULL;
        }
        SS_LOG(SS_LOG_INFO, "allreduce: rank %u of %u on %s, sending to %s, %zu floats a piece",
               self->rank, self->n, self->endpoints[self->rank],
               self->endpoints[self->right], self->chunk);
    }
    return self;
}

void tr_allreduce_destroy(tr_allreduce_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_allreduce_t *self = *self_p;
    if (self->has_pending)
        ss_msg_close(&self->pending);
    if (self->rx_sock)
        zmq_close(self->rx_sock);
    if (self->tx_sock)
        zmq_close(self->tx_sock);
    for (uint32_t i = 0; i < self->n; i++)
        ss_free(self->endpoints[i]);
    ss_free(self->endpoints);
    ss_free(self);
    *self_p = NULL;
}

void tr_allreduce_set_timeout(tr_allreduce_t *self, int64_t timeout_ms)
{
    ss_assert(timeout_ms > 0);
    self->timeout_ms = timeout_ms;
}

uint64_t tr_allreduce_round(const tr_allreduce_t *self)
{
    return self->round;
}

void tr_allreduce_get_stats(const tr_allreduce_t *self, struct tr_allreduce_stats *st)
{
    *st = self->stats;
}
