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
 * next call runs that newer round, so the ring heals by itself.
 *
 * MEMBERSHIP (conf.allow_loss). The ring is a set of ranks, carried as a
 * bitmask in every piece (Header.members); positions, neighbours and
 * segments are those of the sorted members. Ranks only ever leave it: the
 * mask shrinks and a rank that left never comes back, so a mask names one
 * generation of the ring and a piece is used only when its mask is ours.
 *  - Only once the ring has formed: a rank is left out only after a round
 *    with every rank in it has completed here (logged once). Before that a
 *    missing rank may just not have started yet (trainers start seconds
 *    apart), and rounds fail and heal as they always did.
 *  - Detection: a round that makes no progress (no piece in or out) for
 *    the stall time, conf.timeout_ms (sync.timeout_ms; barriers keep it
 *    although their deadline is longer), runs a probe: a fresh DEALER
 *    (ZMQ_IMMEDIATE) connects to every other member and counts it alive
 *    when the ZeroMQ handshake completes within the stall time. The
 *    handshake is done by the peer's I/O thread, so a live trainer answers
 *    whatever its threads are doing (training, evaluating, in a barrier); a
 *    killed one refuses, a stopped or cut-off one stays silent. Members
 *    that do not answer are dead, provided those that do are a majority of
 *    the ring: a trainer cut off from the others finds them all silent and
 *    must not go on alone (split brain), so below a majority nothing
 *    changes and the rounds keep failing (a job of 2 cannot lose one; 3 can
 *    lose 1). All alive: the round goes on waiting (to its deadline; a
 *    barrier probes again every stall time).
 *  - Agreement: every member that stalls probes, so normally all reach the
 *    same view. Views spread besides: each probe sends a PING with the
 *    prober's mask, every piece carries one, and a receiver takes the
 *    intersection of the sender's mask and its own (dead stays dead). A
 *    piece whose mask is ours after that is kept for the restarted round. A
 *    member that knows fewer deaths gets our mask back (a PING sent to the
 *    ROUTER identity its message came from, once per mask and connection:
 *    a probe's PING and the pieces come on different ones). While views
 *    differ, rounds stall and are probed again; as masks only shrink,
 *    views meet at the intersection.
 *  - Re-forming: new neighbours among the sorted members (the DEALER
 *    disconnects from a dead right neighbour and connects to the next
 *    member), and the round restarts from the caller's x (copied at the
 *    start of every call: one memcpy of x per round, the price of
 *    restarting inside the call so that callers, barriers included, just
 *    see a sum over fewer ranks) with a fresh deadline. The rounds keep their
 *    numbers; members whose rounds differ by one heal as above.
 *  - Expulsion: a message whose mask lacks this rank means the others
 *    declared it dead (it was stopped or cut off while they probed): the
 *    call fails, and so does every later one (tr_allreduce_expelled). Its
 *    pieces carry an older, larger mask and are dropped by the members, who
 *    answer with their mask: that is how it learns. It never corrupts their
 *    sums.
 *  - RESULTS. A member that dies in the all-gather can leave a round done on
 *    some survivors (they had every segment; their callers have the sum over
 *    the old ring and went on) and not on others (one segment missing),
 *    which re-form and restart it; those that finished are in a later call,
 *    maybe of another length, or not in a call at all. So every round done
 *    here keeps its result (one copy of x, allow_loss only: done), and every
 *    re-form sends that result to the new right neighbour, ahead of any piece
 *    of the round in progress (pieces with step AR_STEP_RESULT, the round,
 *    the old ring as `summed`, the length as `total`). A member still in that
 *    round takes it (from its left neighbour, whole, for an x of that
 *    length), ends the round with it, reports the old ring for it (so that
 *    every survivor sees the same sum over the same ring) and passes it on to
 *    its right; one that finished the round, or is past it, drops it. A
 *    survivor that finished the round and is not in a call serves it at its
 *    next call (the one waiting has a barrier's deadline, or its round
 *    fails as any round that stalls). */
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
#include "ss_listen.h"
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
#define AR_MAX_RANKS 64             /* ranks a members mask can hold */
#define AR_PING_LINGER_MS 200       /* how long a probe's PING may outlive its socket */
#define AR_STEP_RESULT 0xffffffffu  /* step of a piece of a finished round's result */

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
    uint64_t progress_ns;  /* last piece in or out (or start): stall detection */
    const float *orig;     /* x as the caller gave it (allow_loss), else NULL */
    size_t res_off;        /* floats of a served result received (self->res) */
    int res_done;          /* the whole result came: the round ends with it */
    uint64_t res_summed;   /* the ring that result is the sum over */
};

struct tr_allreduce {
    void *zctx;                      /* borrowed: probes open sockets in it */
    void *rx_sock;                   /* ROUTER bound at our endpoint; owned */
    void *tx_sock;                   /* DEALER connected to the right; owned */
    ss_listen_t *listen;             /* CURVE only: the ROUTER's failed handshakes; owned */
    uint32_t rank;                   /* this trainer */
    uint32_t n;                      /* trainers in the job (endpoints) */
    uint64_t members;                /* the ring: bit r = rank r is in it */
    uint32_t n_live;                 /* members */
    uint32_t pos;                    /* our position among the sorted members */
    uint32_t left;                   /* rank we receive from */
    uint32_t right;                  /* rank we send to */
    char **endpoints;                /* n copied endpoints */
    int64_t timeout_ms;              /* round deadline */
    int64_t stall_ms;                /* no progress this long: probe (conf.timeout_ms) */
    int allow_loss;                  /* re-form without dead ranks */
    int expelled;                    /* the others declared us dead */
    int formed;                      /* a round with all n ranks completed here */
    char expelled_why[256];          /* who said so */
    struct ar_told {                 /* the mask last sent back to each rank, and */
        uint64_t mask;               /* the connection (ROUTER identity) it went to: */
        uint8_t id[SS_MSG_MAX_ID];   /* a probe's PING comes on a connection of its */
        size_t id_len;               /* own, the pieces on another */
    } told[AR_MAX_RANKS];
    struct ss_curve curve;           /* CURVE keys for probes (copied) */
    int has_curve;                   /* curve is set */
    float *orig;                     /* allow_loss: copy of the caller's x */
    size_t orig_cap;                 /* floats orig holds */
    float *done;                     /* allow_loss: the result of the last round done here */
    size_t done_cap;                 /* floats done holds */
    size_t done_len;                 /* floats of that result */
    uint64_t done_round;             /* its round (0: none yet) */
    uint64_t done_mask;              /* the ring it is the sum over */
    float *res;                      /* a result served by the left neighbour, coming in */
    size_t res_cap;                  /* floats res holds */
    int serving;                     /* sending done to the right neighbour (after a re-form) */
    size_t serve_off;                /* floats of done sent so far */
    uint64_t summed_mask;            /* the ring of the last round summed here (see .h) */
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
    uint32_t n = self->n_live, p = self->pos;
    if (s < n - 1)
        return s_mod_sub(p, s, n);
    return s_mod_sub((p + 1) % n, s - (n - 1), n);
}

/* Segment rank r receives at step s: the one its left neighbour sends. */
static uint32_t s_recv_seg(const tr_allreduce_t *self, uint32_t s)
{
    uint32_t n = self->n_live, p = self->pos;
    if (s < n - 1)
        return s_mod_sub(p, s + 1, n);
    return s_mod_sub(p, s - (n - 1), n);
}

/* Move a cursor past finished (or empty) segments. */
static void s_cursor_settle(const tr_allreduce_t *self, const struct ar_round *rd,
                            struct ar_cursor *c, int is_tx)
{
    while (c->step < rd->n_steps) {
        uint32_t seg = is_tx ? s_send_seg(self, c->step) : s_recv_seg(self, c->step);
        if (c->off < s_seg_len(rd->len, self->n_live, seg))
            return;
        c->step++;
        c->off = 0;
    }
}

/* Floats in the next piece to send (tx cursor not done). */
static size_t s_tx_piece(const tr_allreduce_t *self, const struct ar_round *rd)
{
    size_t left = s_seg_len(rd->len, self->n_live, s_send_seg(self, rd->tx.step)) - rd->tx.off;
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

/* The header of an AR_CHUNK piece this rank sends: round, step, offset and
 * length of the piece, with the ring as this rank sees it. */
static void s_chunk_header(const tr_allreduce_t *self, Header *h, uint64_t round,
                           uint32_t step, size_t off, size_t piece)
{
    *h = (Header)HEADER__INIT;
    h->version = SS_PROTO_VERSION;
    h->type = MSG_TYPE__MSG_AR_CHUNK;
    h->req_id = round;
    h->has_sender = h->has_round = h->has_step = h->has_offset = h->has_length = 1;
    h->sender = self->rank;
    h->round = round;
    h->step = step;
    h->offset = off;
    h->length = piece;
    h->has_members = 1;
    h->members = self->members;
}

/* After a re-form: send the result of the last round done here to the
 * right neighbour (see RESULTS in the DESIGN note), until the socket would
 * block (*blocked set). Best effort: a send error ends the serving (the
 * round's own pieces report it). Returns 1 when a piece left. */
static int s_pump_serve(tr_allreduce_t *self, int *blocked)
{
    int sent = 0;
    *blocked = 0;
    while (self->serving) {
        if (self->serve_off >= self->done_len || self->right == self->rank) {
            self->serving = 0;
            break;
        }
        size_t left = self->done_len - self->serve_off;
        size_t piece = left < self->chunk ? left : self->chunk;
        Header h;
        struct ss_frame f = {self->done + self->serve_off, piece * sizeof(float)};
        s_chunk_header(self, &h, self->done_round, AR_STEP_RESULT, self->serve_off, piece);
        h.has_summed = h.has_total = 1;
        h.summed = self->done_mask;
        h.total = self->done_len;
        int rc = ss_msg_send(self->tx_sock, NULL, 0, &h, &f, 1);
        if (rc == SS_E_TIMEOUT) {
            *blocked = 1;
            break;
        }
        if (rc) {
            self->serving = 0;
            break;
        }
        self->stats.bytes_sent += f.len;
        self->serve_off += piece;
        sent = 1;
    }
    return sent;
}

/* Send every piece that is ready until the socket would block (*blocked
 * set): first what is left of a result being served, then the round's.
 * Returns 0, or SS_E_NET/SS_E_NOMEM with err set. */
static int s_pump_send(tr_allreduce_t *self, struct ar_round *rd, int *blocked, char *err,
                       size_t err_len)
{
    if (s_pump_serve(self, blocked))
        rd->progress_ns = ss_now_ns();
    if (*blocked)
        return 0;
    while (s_tx_ready(self, rd)) {
        size_t piece = s_tx_piece(self, rd);
        size_t off = s_seg_start(rd->len, self->n_live, s_send_seg(self, rd->tx.step)) + rd->tx.off;
        Header h;
        struct ss_frame f = {rd->x + off, piece * sizeof(float)};
        s_chunk_header(self, &h, rd->round, rd->tx.step, off, piece);
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
        rd->progress_ns = ss_now_ns();
        rd->tx.off += piece;
        s_cursor_settle(self, rd, &rd->tx, 1);
    }
    return 0;
}

/* ---- membership ---- */

static uint64_t s_bit(uint32_t r)
{
    return 1ull << r;
}

/* "0,2,3" for a mask, into buf. */
static const char *s_mask_str(uint64_t m, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (uint32_t r = 0; r < AR_MAX_RANKS && off < len; r++)
        if (m & s_bit(r))
            off += (size_t)snprintf(buf + off, len - off, "%s%u", off ? "," : "", r);
    return buf;
}

/* Position, neighbours and size from self->members. */
static void s_place(tr_allreduce_t *self)
{
    uint32_t ranks[AR_MAX_RANKS], k = 0;
    for (uint32_t r = 0; r < self->n; r++)
        if (self->members & s_bit(r)) {
            if (r == self->rank)
                self->pos = k;
            ranks[k++] = r;
        }
    self->n_live = k;
    self->left = ranks[(self->pos + k - 1) % k];
    self->right = ranks[(self->pos + 1) % k];
}

/* Take the ring down to members m (a subset of ours, with us in it): new
 * neighbours, the DEALER moved to the new right one, a log line. why says
 * how we learnt. */
static void s_reform(tr_allreduce_t *self, uint64_t m, const char *why)
{
    char gone[256], now[256];
    uint32_t old_right = self->right;
    uint64_t lost = self->members & ~m;

    ss_assert((m & s_bit(self->rank)) && (m & ~self->members) == 0 && lost);
    self->members = m;
    self->summed_mask = m;
    s_place(self);
    self->stats.changes++;
    if (self->done_round > 0 && self->done_len > 0) {
        /* a survivor may lack a piece of that round: it gets the result */
        self->serving = 1;
        self->serve_off = 0;
    }
    if (self->right != old_right) {
        /* the old right neighbour is dead (only the dead leave): whatever
         * is queued for it goes with the connection */
        if (old_right != self->rank)
            zmq_disconnect(self->tx_sock, self->endpoints[old_right]);
        if (self->right != self->rank && zmq_connect(self->tx_sock, self->endpoints[self->right]))
            SS_LOG(SS_LOG_ERROR, "allreduce: cannot connect to rank %u (%s): %s", self->right,
                   self->endpoints[self->right], zmq_strerror(zmq_errno()));
    }
    SS_LOG(SS_LOG_WARN, "allreduce: ring membership change %" PRIu64 ": rank(s) %s left the "
           "ring (%s); ring of %u now: ranks %s; rank %u sends to rank %u", self->stats.changes,
           s_mask_str(lost, gone, sizeof gone), why, self->n_live,
           s_mask_str(m, now, sizeof now), self->rank, self->right);
}

/* Send our mask as a PING, to the ROUTER identity id (or, id NULL, to the
 * right neighbour). Best effort: never blocks, errors are ignored. */
static void s_tell(tr_allreduce_t *self, void *sock, const uint8_t *id, size_t id_len)
{
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = MSG_TYPE__MSG_PING;
    h.req_id = self->round;
    h.has_sender = h.has_members = 1;
    h.sender = self->rank;
    h.members = self->members;
    (void)ss_msg_send(sock, id, id_len, &h, NULL, 0);
}

enum { M_SAME, M_DROP, M_CHANGED, M_EXPELLED };

/* A message from rank sender carrying its ring m: compare with ours.
 * M_SAME: same ring. M_DROP: not for our ring (the sender is dead to us, or
 * knows fewer deaths: it is told our mask when id is given). M_CHANGED: the
 * sender knew of deaths we did not; our ring re-formed as the intersection.
 * M_EXPELLED: the sender's ring lacks us. */
static int s_merge(tr_allreduce_t *self, uint32_t sender, uint64_t m, const uint8_t *id,
                   size_t id_len)
{
    uint64_t mine = self->members, both = m & mine;
    if (m == mine)
        return M_SAME;
    if (!(m & s_bit(self->rank))) {
        char ring[256];
        if (!self->expelled)
            snprintf(self->expelled_why, sizeof self->expelled_why,
                     "rank %u's ring (ranks %s) does not include this trainer (rank %u): the "
                     "others declared it dead while it was unreachable", sender,
                     s_mask_str(m, ring, sizeof ring), self->rank);
        self->expelled = 1;
        return M_EXPELLED;
    }
    if (!self->allow_loss)
        return M_DROP;
    if ((mine & s_bit(sender)) && both != mine) {
        char why[64];
        snprintf(why, sizeof why, "learnt from rank %u", sender);
        s_reform(self, both, why);
        return M_CHANGED;
    }
    /* the sender left our ring, or its ring is larger than ours: tell it */
    struct ar_told *t = &self->told[sender];
    if (id && (t->mask != mine || t->id_len != id_len || memcmp(t->id, id, id_len) != 0)) {
        t->mask = mine;
        t->id_len = id_len;
        memcpy(t->id, id, id_len);
        s_tell(self, self->rx_sock, id, id_len);
    }
    return M_DROP;
}

/* Probe every other member: alive when a ZeroMQ handshake with it completes
 * within the stall time. Returns the members found alive (us included). */
static uint64_t s_probe(tr_allreduce_t *self)
{
    void *socks[AR_MAX_RANKS];
    uint32_t ranks[AR_MAX_RANKS], k = 0;
    uint64_t alive = s_bit(self->rank);
    int one = 1, linger = AR_PING_LINGER_MS;
    uint64_t deadline = ss_now_ns() + (uint64_t)self->stall_ms * 1000000ull;

    self->stats.probes++;
    for (uint32_t r = 0; r < self->n; r++) {
        if (r == self->rank || !(self->members & s_bit(r)))
            continue;
        void *s = zmq_socket(self->zctx, ZMQ_DEALER);
        if (!s || zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one) ||
            zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) ||
            ss_curve_client(s, self->has_curve ? &self->curve : NULL) ||
            zmq_connect(s, self->endpoints[r])) {
            /* cannot even try: count it alive rather than drop a live rank */
            SS_LOG(SS_LOG_WARN, "allreduce: cannot probe rank %u (%s): %s", r,
                   self->endpoints[r], zmq_strerror(zmq_errno()));
            alive |= s_bit(r);
            if (s)
                zmq_close(s);
            continue;
        }
        socks[k] = s;
        ranks[k++] = r;
    }
    for (uint32_t left = k; left > 0;) {
        zmq_pollitem_t items[AR_MAX_RANKS];
        uint32_t idx[AR_MAX_RANKS], m = 0;
        uint64_t now = ss_now_ns();
        if (now >= deadline)
            break;
        for (uint32_t i = 0; i < k; i++)
            if (!(alive & s_bit(ranks[i]))) {
                items[m] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLOUT, 0};
                idx[m++] = i;
            }
        int rc = zmq_poll(items, (int)m, (long)((deadline - now + 999999) / 1000000));
        if (rc < 0 && zmq_errno() != EINTR)
            break;
        for (uint32_t j = 0; rc > 0 && j < m; j++)
            if (items[j].revents & ZMQ_POLLOUT) {
                alive |= s_bit(ranks[idx[j]]);
                s_tell(self, socks[idx[j]], NULL, 0);  /* gossip our view */
                left--;
            }
    }
    for (uint32_t i = 0; i < k; i++)
        zmq_close(socks[i]);
    return alive;
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

/* Check a received piece against the ring and the round. Returns 0 when it
 * is a well-formed piece of some round, else 1 with why set. */
static int s_validate(const tr_allreduce_t *self, const struct ar_round *rd,
                      const struct ss_msg *msg, char *why, size_t why_len)
{
    const Header *h = msg->hdr;
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

enum { H_GO_ON, H_BEHIND, H_CHANGED, H_EXPELLED, H_DROP };

/* A piece of a result served by the left neighbour (step AR_STEP_RESULT):
 * taken into self->res when it is for this round and this x and follows the
 * last one (offset 0 starts over); else dropped as stale (a result this
 * rank does not need: it finished that round, or has moved on). */
static void s_result_piece(tr_allreduce_t *self, struct ar_round *rd, const struct ss_msg *msg)
{
    const Header *h = msg->hdr;
    uint64_t all = self->n >= AR_MAX_RANKS ? ~0ull : s_bit(self->n) - 1;
    if (!self->allow_loss || rd->res_done || !h->has_round || h->round != rd->round ||
        !h->has_total || h->total != rd->len || !h->has_summed || (h->summed & ~all) ||
        !(h->summed & s_bit(self->rank)) || (self->members & ~h->summed) ||
        h->sender != self->left || !h->has_offset || !h->has_length || h->length == 0 ||
        h->offset > rd->len || h->length > rd->len - h->offset ||
        (h->offset != 0 && h->offset != rd->res_off)) {
        self->stats.msgs_stale++;
        return;
    }
    if (self->res_cap < rd->len) {
        self->res = ss_realloc(self->res, rd->len * sizeof(float));
        self->res_cap = rd->len;
    }
    memcpy(self->res + h->offset, zmq_msg_data((zmq_msg_t *)&msg->frames[0]),
           h->length * sizeof(float));
    rd->res_off = h->offset + h->length;
    rd->progress_ns = ss_now_ns();
    self->stats.bytes_received += h->length * sizeof(float);
    if (rd->res_off == rd->len) {
        rd->res_done = 1;
        rd->res_summed = h->summed;
    }
}

/* The membership part of a message: H_GO_ON when it is a piece of our ring,
 * H_DROP when there is nothing more to do with it, else what happened; *keep: the message is a piece of the
 * new ring (keep it for the restarted round). Messages without a mask are
 * from the full ring. */
static int s_members_of(tr_allreduce_t *self, const Header *h, const uint8_t *id,
                        size_t id_len, int *keep)
{
    uint64_t all = self->n >= AR_MAX_RANKS ? ~0ull : s_bit(self->n) - 1;
    uint64_t m = h->has_members ? h->members & all : all;
    *keep = 0;
    if (!h->has_sender || h->sender >= self->n ||
        (h->type == MSG_TYPE__MSG_PING && !h->has_members)) {
        s_bad(self, "membership message without a valid sender or members");
        return H_DROP;
    }
    switch (s_merge(self, h->sender, m, id, id_len)) {
    case M_SAME:
        return h->type == MSG_TYPE__MSG_PING ? H_DROP : H_GO_ON;
    case M_CHANGED:
        *keep = h->type == MSG_TYPE__MSG_AR_CHUNK && m == self->members;
        return H_CHANGED;
    case M_EXPELLED:
        return H_EXPELLED;
    default:
        if (h->type == MSG_TYPE__MSG_AR_CHUNK)
            self->stats.msgs_stale++;
        return H_DROP;
    }
}

/* Take one received message (ownership passes here). Returns H_GO_ON when
 * it was applied or dropped; H_BEHIND when it belongs to a newer round (kept
 * as pending, the next round number raised); H_CHANGED when the ring
 * re-formed (a piece of the new ring is kept as pending); H_EXPELLED. */
static int s_handle(tr_allreduce_t *self, struct ar_round *rd, struct ss_msg *msg,
                    const uint8_t *id, size_t id_len)
{
    char why[256];
    const Header *h = msg->hdr;
    int keep = 0, rc = H_GO_ON;

    if (ss_msg_check(msg, 0, why, sizeof why)) {
        s_bad(self, why);
    } else if (h->type != MSG_TYPE__MSG_AR_CHUNK && h->type != MSG_TYPE__MSG_PING) {
        snprintf(why, sizeof why, "type %s, expected AR_CHUNK", ss_msg_type_name(h->type));
        s_bad(self, why);
    } else if ((rc = s_members_of(self, h, id, id_len, &keep)) != H_GO_ON) {
        rc = rc == H_DROP ? H_GO_ON : rc;
    } else if (h->has_step && h->step == AR_STEP_RESULT) {
        s_result_piece(self, rd, msg);
    } else if (s_validate(self, rd, msg, why, sizeof why)) {
        s_bad(self, why);
    } else if (h->round < rd->round) {
        self->stats.msgs_stale++;
    } else if (h->round > rd->round) {
        keep = 1;
        rc = H_BEHIND;
        if (h->round > self->round)
            self->round = h->round;
    } else {
        uint32_t seg = s_recv_seg(self, rd->rx.step);
        size_t want = s_seg_start(rd->len, self->n_live, seg) + rd->rx.off;
        size_t room = s_seg_len(rd->len, self->n_live, seg) - rd->rx.off;
        if (rd->rx.step >= rd->n_steps || h->step != rd->rx.step || h->offset != want ||
            h->length > room) {
            snprintf(why, sizeof why,
                     "round %" PRIu64 " step %u piece [%" PRIu64 ", +%" PRIu64
                     "), expected step %u at %zu (up to %zu floats)",
                     h->round, h->step, h->offset, h->length, rd->rx.step, want, room);
            s_bad(self, why);
        } else {
            s_apply(rd, self->n_live, h, &msg->frames[0]);
            rd->progress_ns = ss_now_ns();
            self->stats.bytes_received += h->length * sizeof(float);
            rd->rx.off += h->length;
            s_cursor_settle(self, rd, &rd->rx, 0);
        }
    }
    if (keep) {
        if (self->has_pending)
            ss_msg_close(&self->pending);
        self->pending = *msg;
        self->has_pending = 1;
    } else {
        ss_msg_close(msg);
    }
    return rc;
}

/* Read what is waiting on sock (up to a batch): the ROUTER (pieces, probes;
 * is_rx) while pieces are still expected, or the DEALER (membership notices
 * from the right neighbour). Returns H_GO_ON, another H_* (stop reading), or
 * SS_E_NET/SS_E_STOPPED. */
static int s_pump_recv(tr_allreduce_t *self, struct ar_round *rd, void *sock, int is_rx,
                       char *err, size_t err_len)
{
    for (int i = 0; i < AR_RECV_BATCH && !rd->res_done && (!is_rx || rd->rx.step < rd->n_steps);
         i++) {
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        char why[256] = "";
        struct ss_msg msg;
        int rc = ss_msg_recv(sock, ZMQ_DONTWAIT, is_rx ? id : NULL, &id_len, &msg, why,
                             sizeof why);
        if (rc == SS_E_TIMEOUT)
            return H_GO_ON;
        if (rc == SS_E_PROTO) {
            s_bad(self, why);
            continue;
        }
        if (rc) {
            snprintf(err, err_len, "allreduce round %" PRIu64 ": receive on %s: %s", rd->round,
                     is_rx ? self->endpoints[self->rank] : self->endpoints[self->right],
                     ss_strerror(rc));
            return rc;
        }
        rc = s_handle(self, rd, &msg, is_rx ? id : NULL, id_len);
        if (rc != H_GO_ON)
            return rc;
    }
    return H_GO_ON;
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

/* The error of every call once expelled. */
static int s_expelled(const tr_allreduce_t *self, uint64_t round, char *err, size_t err_len)
{
    snprintf(err, err_len, "allreduce round %" PRIu64 ": this trainer was declared dead and "
             "left out of the ring: %s; it cannot rejoin this job (the others go on without it)",
             round, self->expelled_why);
    return SS_E_STOPPED;
}

enum { W_READY, W_DEADLINE, W_STALL };

/* Wait until a piece can be received or sent, a notice arrives, the
 * deadline or the stall time. Returns a W_*, or SS_E_NET/SS_E_STOPPED. */
static int s_wait(tr_allreduce_t *self, const struct ar_round *rd, int tx_blocked)
{
    zmq_pollitem_t items[2];
    int n_items = 0;
    uint64_t now = ss_now_ns();
    uint64_t stall = rd->progress_ns + (uint64_t)self->stall_ms * 1000000ull;
    int probing = self->allow_loss && self->formed;
    uint64_t wake = probing && stall < rd->deadline_ns ? stall : rd->deadline_ns;

    if (now >= rd->deadline_ns)
        return W_DEADLINE;
    if (now >= wake)
        return W_STALL;
    if (rd->rx.step < rd->n_steps)
        items[n_items++] = (zmq_pollitem_t){self->rx_sock, 0, ZMQ_POLLIN, 0};
    items[n_items++] = (zmq_pollitem_t){self->tx_sock, 0,
                                        (short)(ZMQ_POLLIN | (tx_blocked ? ZMQ_POLLOUT : 0)), 0};
    long wait_ms = (long)((wake - now + 999999) / 1000000);
    if (zmq_poll(items, n_items, wait_ms) >= 0 || zmq_errno() == EINTR)
        return W_READY;
    return zmq_errno() == ETERM ? SS_E_STOPPED : SS_E_NET;
}

/* Start (or restart, after the ring re-formed) rd on the current ring. */
static void s_begin(tr_allreduce_t *self, struct ar_round *rd)
{
    uint64_t now = ss_now_ns();
    if (rd->orig && rd->x != rd->orig)
        memcpy(rd->x, rd->orig, rd->len * sizeof(float));
    rd->n_steps = 2 * (self->n_live - 1);
    rd->tx = (struct ar_cursor){0, 0};
    rd->rx = (struct ar_cursor){0, 0};
    rd->deadline_ns = now + (uint64_t)self->timeout_ms * 1000000ull;
    rd->progress_ns = now;
    s_cursor_settle(self, rd, &rd->tx, 1);
    s_cursor_settle(self, rd, &rd->rx, 0);
}

/* No progress for the stall time: probe the members. Returns 1 when the
 * ring re-formed (the round restarts), else 0 (keep waiting). */
static int s_stalled(tr_allreduce_t *self, struct ar_round *rd)
{
    uint64_t t0 = rd->progress_ns;
    uint64_t alive = s_probe(self);
    rd->progress_ns = ss_now_ns();  /* probe again after another stall time */
    if ((alive & self->members) == self->members)
        return 0;
    uint32_t n_alive = (uint32_t)__builtin_popcountll(alive & self->members);
    if (2 * n_alive <= self->n_live) {
        /* maybe this trainer is the one cut off: the majority decides */
        if (self->stats.probes % 10 == 1)
            SS_LOG(SS_LOG_WARN, "allreduce: only %u of the %u trainers of the ring answer; not "
                   "re-forming without a majority (rounds keep failing until more answer)",
                   n_alive, self->n_live);
        return 0;
    }
    char why[128];
    snprintf(why, sizeof why, "no handshake within %" PRId64 " ms after %" PRId64
             " ms without progress in round %" PRIu64, self->stall_ms, self->stall_ms, rd->round);
    s_reform(self, alive & self->members, why);
    self->stats.reform_ms = (ss_now_ns() - t0) / 1000000ull;
    return 1;
}

/* Run one round to completion, abandonment or error. */
static int s_run(tr_allreduce_t *self, struct ar_round *rd, char *err, size_t err_len)
{
    int rc = H_GO_ON;
    s_begin(self, rd);
    for (;;) {
        if (rc == H_CHANGED)
            s_begin(self, rd);
        rc = H_GO_ON;
        if (self->has_pending) {
            struct ss_msg msg = self->pending;
            self->has_pending = 0;
            memset(&self->pending, 0, sizeof self->pending);
            rc = s_handle(self, rd, &msg, NULL, 0);
        }
        if (rc == H_GO_ON && rd->n_steps == 0)
            return 0;  /* a ring of one */
        int tx_blocked = 0;
        if (rc == H_GO_ON)
            rc = s_pump_send(self, rd, &tx_blocked, err, err_len);
        if (rc == H_GO_ON)
            rc = s_pump_recv(self, rd, self->rx_sock, 1, err, err_len);
        if (rc == H_GO_ON)
            rc = s_pump_recv(self, rd, self->tx_sock, 0, err, err_len);
        if (rd->res_done)
            return 0;  /* a survivor that finished the round served its result */
        if (rc == H_BEHIND)
            goto behind;
        if (rc == H_EXPELLED)
            return s_expelled(self, rd->round, err, err_len);
        if (rc == H_CHANGED)
            continue;
        if (rc)
            return rc;
        if (rd->tx.step == rd->n_steps && rd->rx.step == rd->n_steps)
            return 0;
        if (!tx_blocked && s_tx_ready(self, rd))
            continue;  /* what was just received can be forwarded now */
        rc = s_wait(self, rd, tx_blocked);
        if (rc == W_READY)
            continue;
        if (rc == W_STALL || rc == W_DEADLINE) {
            int changed = self->allow_loss && self->formed && s_stalled(self, rd);
            if (!changed && rc == W_DEADLINE)
                return s_timeout(self, rd, tx_blocked, err, err_len);
            rc = changed ? H_CHANGED : H_GO_ON;
            continue;
        }
        snprintf(err, err_len, "allreduce round %" PRIu64 ": poll: %s", rd->round,
                 zmq_strerror(zmq_errno()));
        return rc;
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

/* A round done here: keep its result, for a survivor that may lack a piece
 * of it when a member died in its all-gather (served after a re-form). */
static void s_keep_done(tr_allreduce_t *self, const struct ar_round *rd)
{
    if (self->done_cap < rd->len) {
        self->done = ss_realloc(self->done, rd->len * sizeof(float));
        self->done_cap = rd->len;
    }
    if (rd->len)
        memcpy(self->done, rd->x, rd->len * sizeof(float));
    self->done_len = rd->len;
    self->done_round = rd->round;
    self->done_mask = self->members;
    self->serving = 0;  /* every member has left the round served before */
}

/* The round ended with the result the left neighbour served: it is the sum
 * over the ring that finished it (res_summed), which the caller sees
 * (tr_allreduce_size/members), as the ranks that finished it did; pass it on
 * to the right neighbour, which may lack it too. */
static void s_adopt_result(tr_allreduce_t *self, struct ar_round *rd)
{
    char ring[256];
    float *t = self->done;
    size_t cap = self->done_cap;
    memcpy(rd->x, self->res, rd->len * sizeof(float));
    self->done = self->res;
    self->done_cap = self->res_cap;
    self->res = t;
    self->res_cap = cap;
    self->done_len = rd->len;
    self->done_round = rd->round;
    self->done_mask = rd->res_summed;
    self->summed_mask = rd->res_summed;
    SS_LOG(SS_LOG_WARN, "allreduce round %" PRIu64 ": a member died in its all-gather and rank "
           "%u had finished it: this trainer ends it with that result (the sum over ranks %s), "
           "as every survivor does", rd->round, self->left,
           s_mask_str(rd->res_summed, ring, sizeof ring));
    self->serving = 1;
    self->serve_off = 0;
    int blocked;
    (void)s_pump_serve(self, &blocked);  /* the rest goes with the next call's pieces */
}

int tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err, size_t err_len)
{
    ss_assert(self && (x || len == 0) && err);
    struct ar_round rd = {.round = self->round, .x = x, .len = len};
    int rc = 0;

    self->round++;
    self->summed_mask = self->members;
    if (self->listen)
        ss_listen_drain(self->listen);
    if (self->expelled) {
        rc = s_expelled(self, rd.round, err, err_len);
    } else if (self->n > 1) {
        if (self->allow_loss && len > 0) {
            if (self->orig_cap < len) {
                self->orig = ss_realloc(self->orig, len * sizeof(float));
                self->orig_cap = len;
            }
            memcpy(self->orig, x, len * sizeof(float));
            rd.orig = self->orig;
        }
        rc = s_run(self, &rd, err, err_len);
    }
    if (rc) {
        self->stats.rounds_failed++;
        return rc;
    }
    self->stats.rounds_ok++;
    if (rd.res_done)
        s_adopt_result(self, &rd);
    else if (self->allow_loss && self->n > 1)
        s_keep_done(self, &rd);
    if (!self->formed && self->n_live == self->n && self->n > 1) {
        self->formed = 1;
        if (self->allow_loss)
            SS_LOG_ALWAYS(SS_LOG_INFO, "allreduce: all %u trainers joined the ring; from now "
                          "on one that stops answering for %" PRId64 " ms is left out "
                          "(job.allow_trainer_loss)", self->n, self->stall_ms);
    }
    return 0;
}

/* ---- life cycle ---- */

/* Check conf; returns 0 or SS_E_CONFIG with err set. */
static int s_check_conf(const struct tr_allreduce_conf *conf, char *err, size_t err_len)
{
    if (conf->n == 0 || conf->n > AR_MAX_RANKS || conf->rank >= conf->n) {
        snprintf(err, err_len, "allreduce: rank %u is not below the ring size %u (at most %d)",
                 conf->rank, conf->n, AR_MAX_RANKS);
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
    if (self->has_curve && ss_curve_secured(&self->curve) &&
        !(self->listen = ss_listen_new(zctx, self->rx_sock, "allreduce", self->n + 16, err,
                                       err_len)))
        return SS_E_NET;
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
    self->zctx = zctx;
    self->rank = conf->rank;
    self->n = conf->n;
    self->members = conf->n >= AR_MAX_RANKS ? ~0ull : s_bit(conf->n) - 1;
    self->summed_mask = self->members;
    s_place(self);
    self->timeout_ms = conf->timeout_ms;
    self->stall_ms = conf->timeout_ms;
    self->allow_loss = conf->allow_loss;
    if (conf->curve) {
        self->curve = *conf->curve;
        self->has_curve = 1;
    }
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
    ss_listen_destroy(&self->listen);
    if (self->rx_sock)
        zmq_close(self->rx_sock);
    if (self->tx_sock)
        zmq_close(self->tx_sock);
    for (uint32_t i = 0; i < self->n; i++)
        ss_free(self->endpoints[i]);
    ss_free(self->endpoints);
    ss_free(self->orig);
    ss_free(self->done);
    ss_free(self->res);
    ss_curve_wipe(&self->curve);  /* the copy's secrets */
    ss_free(self);
    *self_p = NULL;
}

void tr_allreduce_set_timeout(tr_allreduce_t *self, int64_t timeout_ms)
{
    ss_assert(timeout_ms > 0);
    self->timeout_ms = timeout_ms;
}

uint32_t tr_allreduce_size(const tr_allreduce_t *self)
{
    return (uint32_t)__builtin_popcountll(self->summed_mask);
}

uint64_t tr_allreduce_members(const tr_allreduce_t *self)
{
    return self->summed_mask;
}

int tr_allreduce_expelled(const tr_allreduce_t *self)
{
    return self->expelled;
}

uint64_t tr_allreduce_round(const tr_allreduce_t *self)
{
    return self->round;
}

void tr_allreduce_get_stats(const tr_allreduce_t *self, struct tr_allreduce_stats *st)
{
    *st = self->stats;
    if (self->listen) {  /* events since the last call, then the monitor's count */
        struct ss_listen_stats ls;
        ss_listen_drain(self->listen);
        ss_listen_get_stats(self->listen, &ls);
        st->handshakes_failed = ls.handshake_failed;
    }
}
