/* ps_probe.c - a test client for shadow-ps, used by the integration tests.
 *
 *   ps_probe -c JOB push   --client I --rounds R --keys K [--combined]
 *       push gradient (I+1)/4 to every element of K keys, R times, all shards
 *       in flight at once; exit 0 when every push was acknowledged. With
 *       --combined each push is a PUSH_LOOKUP of the same keys, and every row
 *       it returns must already hold this client's pushes so far (SGD, all
 *       gradients positive: element <= -lr * (r+1) * (I+1)/4).
 *   ps_probe -c JOB verify --clients C --rounds R --keys K
 *       look the K keys up and check each element equals
 *       init - tables.lr * R * sum_{i<C} (i+1)/4 exactly (SGD; init_scale 0
 *       makes every intermediate sum exact whatever the arrival order).
 *   ps_probe -c JOB dump --keys K --out FILE
 *       write the rows of K keys as hex floats (for byte comparison).
 *   ps_probe -c JOB garbage [--shard S]
 *       send one malformed message of every kind to embedding shard S and
 *       check each gets an error reply with the right status.
 *   ps_probe -c JOB sync
 *       INIT/ELASTIC/PULL on sync shard 0 against the elastic rule.
 *   ps_probe -c JOB fuzz [--rounds R] [--shard S] [--sync]
 *       R random messages (random header fields, frame counts and sizes,
 *       some plain garbage) to embedding shard S (or sync shard S); counts
 *       the replies and checks the PS still answers PING at the end.
 *   ps_probe -c JOB flood --keys K --rounds R [--shard S] [--bound-mb B]
 *       a client that never reads its replies: R LOOKUPs of K keys on one
 *       connection, after one read normally (rows exist). Prints the PS's RSS
 *       before, at its peak while it serves them and after, and the replies
 *       it dropped; fails when the peak grew more than B MiB or when another
 *       client is not served meanwhile.
 *   ps_probe -c JOB conns --clients N [--hold-ms M] [--shard S]
 *       open N connections at once (each says HELLO), hold them M ms, close
 *       them; prints how many were answered and whether a new client is
 *       served afterwards, as a trainer asks: HELLO sent again (1 s, up to
 *       5 times; exit 0 when served).
 *   ps_probe -c JOB frames --frames N --frame-mb M [--hold-ms W] [--shard S]
 *                          [--raw-plain]
 *       one message of N frames of M MiB to embedding shard S (no HELLO:
 *       libzmq buffers a whole message before the PS can refuse it), with
 *       this process's security settings (a client without the job token:
 *       --set security.token_file=), the socket kept open W ms (default
 *       3000) for the transfer. --raw-plain writes the same frames on a bare
 *       socket after a greeting that claims PLAIN, without the handshake,
 *       and reports how many bytes the PS took before it closed. Exit 0 once
 *       sent (the test reads the PS's memory).
 *
 * With security.curve on, every connection uses security.client_key. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ps_embed.h"
#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_json.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"

struct probe {
    struct ss_cfg *cfg;       /* job config */
    ss_cluster_t *cl;         /* its membership: endpoints, shard map, HELLO hashes */
    void *zctx;               /* ZeroMQ context */
    ss_conn_t *conns[64];     /* one per embedding shard */
    size_t n_shards;          /* cluster.embedding.count */
    uint32_t dim;             /* floats per row: ss_cfg_row_dim() */
    struct ss_curve curve;    /* client keys when security.curve is on */
};

/* Connection options of this job, with timeout_ms. */
static struct ss_conn_opts s_opts(const struct probe *p, int64_t timeout_ms)
{
    return (struct ss_conn_opts){.max_message_bytes = p->cfg->max_message_bytes,
                                 .timeout_ms = timeout_ms,
                                 .curve = &p->curve,
                                 .max_in_flight = p->cfg->security.max_in_flight};
}

/* A raw DEALER to ep (CURVE keys set when on); NULL on failure. */
static void *s_raw_socket(struct probe *p, const char *ep, int rcvhwm)
{
    int linger = 0;
    void *sock = zmq_socket(p->zctx, ZMQ_DEALER);
    if (!sock || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(sock, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm) ||
        ss_curve_client(sock, &p->curve) || zmq_connect(sock, ep)) {
        fprintf(stderr, "ps_probe: cannot connect to %s: %s\n", ep, zmq_strerror(zmq_errno()));
        if (sock)
            zmq_close(sock);
        return NULL;
    }
    return sock;
}

/* Send a HELLO with this job's config hash on a raw socket (no wait). */
static void s_raw_hello_send(struct probe *p, void *sock, uint64_t hash)
{
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = MSG_TYPE__MSG_HELLO;
    h.req_id = 1;
    h.has_config_hash = 1;
    h.config_hash = hash;
    ss_msg_send(sock, NULL, 0, &h, NULL, 0);
}

/* HELLO on a raw socket and its answer within timeout_ms: returns its status,
 * or 1 when none came. */
static int s_raw_hello(struct probe *p, void *sock, uint64_t hash, long timeout_ms)
{
    char err[256];
    struct ss_msg m;
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    s_raw_hello_send(p, sock, hash);
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return 1;
    if (ss_msg_recv(sock, 0, NULL, NULL, &m, err, sizeof err) != 0)
        return 2;
    int st = m.hdr->has_status ? m.hdr->status : 0;
    ss_msg_close(&m);
    return st;
}

static uint64_t s_key(uint64_t k, uint32_t *table, uint32_t n_tables)
{
    *table = (uint32_t)(k % n_tables);
    return ss_key_make(*table, k);
}

static int s_connect(struct probe *p)
{
    char err[512];
    struct ss_conn_opts o = s_opts(p, p->cfg->request_timeout_ms);
    p->n_shards = ss_cluster_count(p->cl, SS_CLUSTER_EMBEDDING);
    p->dim = ss_cfg_row_dim(p->cfg);
    for (size_t s = 0; s < p->n_shards; s++) {
        const char *ep = ss_cluster_endpoint(p->cl, SS_CLUSTER_EMBEDDING, s);
        p->conns[s] = ss_conn_new(p->zctx, ep, &o);
        if (!p->conns[s] ||
            ss_conn_hello(p->conns[s], ss_cluster_hello_hash(p->cl, SS_CLUSTER_EMBEDDING, s),
                          err, sizeof err) != 0) {
            fprintf(stderr, "ps_probe: hello to %s failed: %s\n", ep, err);
            return 1;
        }
    }
    return 0;
}

/* Keys of shard s among the first K, one table group per key (simple). */
struct shard_keys {
    uint64_t *keys;    /* keys owned by the shard */
    uint32_t *tables;  /* their tables */
    uint32_t *counts;  /* all 1 */
    size_t n;          /* count */
};

static void s_split(struct probe *p, size_t k_total, struct shard_keys *sk)
{
    for (size_t s = 0; s < p->n_shards; s++) {
        sk[s].keys = ss_calloc(k_total, sizeof(uint64_t));
        sk[s].tables = ss_calloc(k_total, sizeof(uint32_t));
        sk[s].counts = ss_calloc(k_total, sizeof(uint32_t));
        sk[s].n = 0;
    }
    for (size_t k = 0; k < k_total; k++) {
        uint32_t t;
        uint64_t key = s_key(k, &t, (uint32_t)p->cfg->n_tables);
        struct shard_keys *d = &sk[ss_key_shard(key, (uint32_t)p->n_shards)];
        d->keys[d->n] = key;
        d->tables[d->n] = t;
        d->counts[d->n++] = 1;
    }
}

static void s_free_split(struct probe *p, struct shard_keys *sk)
{
    for (size_t s = 0; s < p->n_shards; s++) {
        ss_free(sk[s].keys);
        ss_free(sk[s].tables);
        ss_free(sk[s].counts);
    }
}

static void s_header(Header *h, int type, struct shard_keys *sk)
{
    header__init(h);
    h->type = (MsgType)type;
    h->n_tables = sk->n;
    h->tables = sk->tables;
    h->n_counts = sk->n;
    h->counts = sk->counts;
}

/* The rows of a PUSH_LOOKUP reply hold this client's pushes so far (see top);
 * returns the elements that do not. */
static size_t s_check_own(const struct probe *p, const struct ss_msg *reply, size_t n,
                          int client, int round)
{
    const float *rows = zmq_msg_data((zmq_msg_t *)&reply->frames[0]);
    float bound = -(float)p->cfg->table_lr * (float)(round + 1) * (float)(client + 1) * 0.25f;
    size_t bad = 0;
    for (size_t i = 0; i < n * p->dim; i++)
        bad += !(rows[i] <= bound);
    return bad;
}

static int s_push(struct probe *p, int client, int rounds, size_t k_total, int combined)
{
    struct shard_keys sk[64];
    char err[512];
    int rc = 0;
    s_split(p, k_total, sk);
    float *grad = ss_malloc(k_total * p->dim * sizeof(float));
    for (size_t i = 0; i < k_total * p->dim; i++)
        grad[i] = (float)(client + 1) * 0.25f;
    for (int r = 0; r < rounds && rc == 0; r++) {
        uint64_t ids[64];
        for (size_t s = 0; s < p->n_shards; s++) {
            Header h;
            s_header(&h, combined ? MSG_TYPE__MSG_PUSH_LOOKUP : MSG_TYPE__MSG_PUSH, &sk[s]);
            h.has_dim = 1;
            h.dim = p->dim;
            h.n_lookup_tables = h.n_lookup_counts = combined ? sk[s].n : 0;
            h.lookup_tables = sk[s].tables;
            h.lookup_counts = sk[s].counts;
            struct ss_frame f[3] = {{sk[s].keys, sk[s].n * 8},
                                    {grad, sk[s].n * p->dim * sizeof(float)},
                                    {sk[s].keys, sk[s].n * 8}};
            ss_conn_send(p->conns[s], &h, f, combined ? 3 : 2, &ids[s]);
        }
        for (size_t s = 0; s < p->n_shards; s++) {
            struct ss_msg reply;
            int w = ss_conn_wait(p->conns[s], ids[s], -1, &reply, err, sizeof err);
            size_t bad = w == 0 && combined ? s_check_own(p, &reply, sk[s].n, client, r) : 0;
            if (w == 0 || w == SS_E_PEER)
                ss_msg_close(&reply);
            if (bad) {
                fprintf(stderr, "ps_probe: round %d shard %zu: %zu elements miss this "
                        "client's pushes\n", r, s, bad);
                rc = 1;
            }
            if (w) {
                fprintf(stderr, "ps_probe: push round %d to shard %zu: %s\n", r, s, err);
                rc = 1;
            }
        }
    }
    ss_free(grad);
    s_free_split(p, sk);
    return rc;
}

/* Look up all K keys (in key order) into rows. */
static int s_lookup_all(struct probe *p, size_t k_total, float *rows)
{
    struct shard_keys sk[64];
    char err[512];
    int rc = 0;
    s_split(p, k_total, sk);
    for (size_t s = 0; s < p->n_shards && rc == 0; s++) {
        Header h;
        struct ss_msg reply;
        s_header(&h, MSG_TYPE__MSG_LOOKUP, &sk[s]);
        struct ss_frame f = {sk[s].keys, sk[s].n * 8};
        if (ss_conn_call(p->conns[s], &h, &f, 1, -1, &reply, err, sizeof err) != 0) {
            fprintf(stderr, "ps_probe: lookup on shard %zu: %s\n", s, err);
            rc = 1;
            break;
        }
        const float *got = zmq_msg_data(&reply.frames[0]);
        /* scatter back to key order */
        for (size_t j = 0, k = 0; k < k_total && j < sk[s].n; k++) {
            uint32_t t;
            if (s_key(k, &t, (uint32_t)p->cfg->n_tables) != sk[s].keys[j])
                continue;
            memcpy(rows + k * p->dim, got + j * p->dim, p->dim * sizeof(float));
            j++;
        }
        ss_msg_close(&reply);
    }
    s_free_split(p, sk);
    return rc;
}

static int s_verify(struct probe *p, int clients, int rounds, size_t k_total)
{
    float *rows = ss_malloc(k_total * p->dim * sizeof(float));
    float *init = ss_malloc(p->dim * sizeof(float));
    struct ps_embed_conf ec = {.n_tables = (uint32_t)p->cfg->n_tables,
                               .dim = p->dim,
                               .first_order = p->cfg->first_order ? 1u : 0u,
                               .optimizer = p->cfg->optimizer,
                               .lr = (float)p->cfg->table_lr,
                               .eps = (float)p->cfg->table_eps,
                               .init_acc = (float)p->cfg->table_init_acc,
                               .init_scale = (float)p->cfg->table_init_scale,
                               .l2 = (float)p->cfg->table_l2,
                               .seed = (uint64_t)p->cfg->job_seed,
                               .capacity_rows = 16,
                               .n_stripes = 1};
    ps_embed_t *ref = ps_embed_new(&ec);
    double sum = 0;
    size_t bad = 0;
    for (int i = 0; i < clients; i++)
        sum += (i + 1) * 0.25;
    int rc = s_lookup_all(p, k_total, rows);
    for (size_t k = 0; rc == 0 && k < k_total; k++) {
        uint32_t t;
        uint64_t key = s_key(k, &t, (uint32_t)p->cfg->n_tables);
        ps_embed_init_row(ref, t, key, init);
        for (uint32_t d = 0; d < p->dim; d++) {
            float want = init[d] - (float)(p->cfg->table_lr * rounds * sum);
            if (rows[k * p->dim + d] != want && bad++ < 5)
                fprintf(stderr, "ps_probe: key %zu elem %u: got %.9g, want %.9g\n", k, d,
                        rows[k * p->dim + d], want);
        }
    }
    if (rc == 0)
        printf("verify: %zu keys x %u elems, %zu mismatches (expected shift %.6g)\n", k_total,
               p->dim, bad, p->cfg->table_lr * rounds * sum);
    ps_embed_destroy(&ref);
    ss_free(rows);
    ss_free(init);
    return rc || bad;
}

static int s_dump(struct probe *p, size_t k_total, const char *out)
{
    float *rows = ss_malloc(k_total * p->dim * sizeof(float));
    int rc = s_lookup_all(p, k_total, rows);
    FILE *f = rc ? NULL : fopen(out, "w");
    if (!rc && !f) {
        perror(out);
        rc = 1;
    }
    for (size_t i = 0; f && i < k_total * p->dim; i++)
        fprintf(f, "%a%c", rows[i], (i + 1) % p->dim ? ' ' : '\n');
    if (f)
        fclose(f);
    ss_free(rows);
    return rc;
}

/* ------------------------------------------------------------ garbage */

/* Send raw parts on a DEALER and wait for one reply; returns its status, or
 * 1 when no reply came. */
static int s_raw(void *sock, const void *const *parts, const size_t *lens, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zmq_send(sock, parts[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0);
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 3000) <= 0)
        return 1;
    struct ss_msg m;
    char err[256];
    if (ss_msg_recv(sock, 0, NULL, NULL, &m, err, sizeof err) != 0)
        return 2;
    int st = m.hdr->has_status ? m.hdr->status : 0;
    printf("    reply: %s (%s)\n", ss_errname(st), m.hdr->error ? m.hdr->error : "");
    ss_msg_close(&m);
    return st;
}

/* Pack a header into buf; returns its length. */
static size_t s_pack(Header *h, uint8_t *buf)
{
    if (!h->version)
        h->version = SS_PROTO_VERSION;
    h->req_id = 77;
    return header__pack(h, buf);
}

struct garbage_case {
    const char *what;   /* description */
    int want;           /* expected status */
};

/* A request before HELLO gets SS_E_NOHELLO; then HELLO. Returns failures. */
static int s_hello_first(struct probe *p, void *sock, size_t shard, const uint64_t *keys)
{
    uint8_t hb[256];
    uint32_t t1[1] = {0}, c1[1] = {1};
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_LOOKUP;
    h.n_tables = 1, h.tables = t1, h.n_counts = 1, h.counts = c1;
    const void *parts[2] = {hb, keys};
    size_t lens[2] = {s_pack(&h, hb), 8};
    printf("case -1: LOOKUP before HELLO\n");
    int st = s_raw(sock, parts, lens, 2), fails = st != SS_E_NOHELLO;
    if (fails)
        printf("    FAIL: status %s, wanted SS_E_NOHELLO\n", ss_errname(st));
    st = s_raw_hello(p, sock, ss_cluster_hello_hash(p->cl, SS_CLUSTER_EMBEDDING, shard), 3000);
    printf("HELLO: %s\n", ss_errname(st));
    return fails + (st != 0);
}

static int s_garbage(struct probe *p, size_t shard)
{
    void *sock = s_raw_socket(p, ss_cluster_endpoint(p->cl, SS_CLUSTER_EMBEDDING, shard), 1000);
    int fails = 0;
    uint8_t hb[256];
    uint64_t keys[4] = {1, 2, 3, 4};
    float grads[64] = {0};
    if (!sock)
        return 1;
    /* keys this shard owns, so that each case fails for its own reason only */
    for (uint64_t k = 1, i = 0; i < 4; k++)
        if (ss_cluster_shard_of(p->cl, k) == shard)
            keys[i++] = k;
    uint32_t t1[1] = {0}, c1[1] = {2}, tbad[1] = {9999}, c2[2] = {1, 1};
    fails += s_hello_first(p, sock, shard, keys);
    for (int i = 0; i < 15; i++) {
        Header h = HEADER__INIT;
        const void *parts[4] = {hb, keys, grads, keys};
        size_t lens[4] = {0, 16, 0, 8}, n = 2;
        struct garbage_case gc = {"", SS_E_PROTO};
        h.type = MSG_TYPE__MSG_LOOKUP;
        h.n_tables = 1, h.tables = t1, h.n_counts = 1, h.counts = c1;
        switch (i) {
        case 0: gc.what = "header frame is not protobuf"; memcpy(hb, "\xff\xff\xff garbage", 11);
            lens[0] = 11; n = 1; break;
        case 1: gc.what = "LOOKUP without keys frame"; n = 1; break;
        case 2: gc.what = "keys frame size mismatch"; lens[1] = 12; break;
        case 3: gc.what = "unknown message type"; h.type = (MsgType)99; n = 1; break;
        case 4: gc.what = "table out of range"; h.tables = tbad; gc.want = SS_E_RANGE; break;
        case 5: gc.what = "wrong protocol version"; h.version = 99; gc.want = SS_E_VERSION;
            break;
        case 6: gc.what = "PUSH rows with the wrong dim"; h.type = MSG_TYPE__MSG_PUSH;
            h.has_dim = 1; h.dim = p->dim + 1; lens[2] = 2 * (p->dim + 1) * 4; n = 3;
            gc.want = SS_E_RANGE; break;
        case 7: gc.what = "too many frames"; n = 4; lens[2] = 4; break;
        case 8: gc.what = "sync request to an embedding PS"; h.type = MSG_TYPE__MSG_PULL;
            h.has_offset = h.has_length = 1; h.length = 4; n = 1; gc.want = SS_E_INVAL; break;
        case 9: gc.what = "tables and counts differ"; h.n_counts = 2; h.counts = c2; break;
        case 10: gc.what = "HELLO with a wrong config hash"; h.type = MSG_TYPE__MSG_HELLO;
            h.has_config_hash = 1; h.config_hash = 12345; n = 1; gc.want = SS_E_HASH; break;
        case 11: gc.what = "PUSH_LOOKUP without lookup groups"; h.type = MSG_TYPE__MSG_PUSH_LOOKUP;
            h.has_dim = 1; h.dim = p->dim; lens[2] = 2 * p->dim * 4; n = 4; break;
        case 12: gc.what = "PUSH_LOOKUP looking up a table out of range";
            h.type = MSG_TYPE__MSG_PUSH_LOOKUP; h.has_dim = 1; h.dim = p->dim;
            h.n_lookup_tables = h.n_lookup_counts = 1; h.lookup_tables = tbad;
            h.lookup_counts = c1; lens[2] = 2 * p->dim * 4; lens[3] = 16; n = 4;
            gc.want = SS_E_RANGE; break;
        case 13: gc.what = "PUSH with a NaN gradient"; h.type = MSG_TYPE__MSG_PUSH;
            h.has_dim = 1; h.dim = p->dim; grads[p->dim + 2] = NAN; lens[2] = 2 * p->dim * 4;
            n = 3; gc.want = SS_E_INVAL; break;
        case 14: gc.what = "PUSH with a 1e30 gradient (finite, beyond security.max_abs_value)";
            h.type = MSG_TYPE__MSG_PUSH; h.has_dim = 1; h.dim = p->dim;
            grads[p->dim + 2] = 0; grads[1] = 1e30f; lens[2] = 2 * p->dim * 4; n = 3;
            gc.want = SS_E_INVAL; break;
        }
        if (i != 0)
            lens[0] = s_pack(&h, hb);
        printf("case %d: %s\n", i, gc.what);
        int st = s_raw(sock, parts, lens, n);
        if (st != gc.want) {
            printf("    FAIL: status %s, wanted %s\n", ss_errname(st), ss_errname(gc.want));
            fails++;
        }
    }
    zmq_close(sock);
    return fails ? 1 : 0;
}

/* ------------------------------------------------------------ sync */

static int s_center_call(ss_conn_t *c, int type, uint64_t off, const float *x, size_t n,
                         float alpha, float *out, char *err, size_t len)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    struct ss_frame f = {x, n * sizeof(float)};
    h.type = (MsgType)type;
    h.has_offset = h.has_length = 1;
    h.offset = off;
    h.length = n;
    if (type == MSG_TYPE__MSG_ELASTIC) {
        h.has_alpha = 1;
        h.alpha = alpha;
    }
    int rc = ss_conn_call(c, &h, &f, type == MSG_TYPE__MSG_PULL ? 0 : 1, -1, &reply, err, len);
    if (rc == 0 && out && reply.n_frames == 1)
        memcpy(out, zmq_msg_data(&reply.frames[0]), n * sizeof(float));
    if (rc == 0 && type == MSG_TYPE__MSG_INIT)
        snprintf(err, len, "%s", reply.hdr->text ? reply.hdr->text : "");
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

static int s_sync(struct probe *p)
{
    enum { N = 1000 };
    struct ss_conn_opts o = s_opts(p, p->cfg->request_timeout_ms);
    ss_conn_t *c = ss_conn_new(p->zctx, ss_cluster_endpoint(p->cl, SS_CLUSTER_SYNC, 0), &o);
    float c0[N], x[N], d[N], pulled[N], other[N];
    char err[512];
    int fails = 0;
    for (int i = 0; i < N; i++) {
        c0[i] = (float)(i % 17) * 0.5f;
        x[i] = (float)(i % 5) * 0.25f;
        other[i] = 99;
    }
    /* a NaN in the first INIT must not set the range */
    other[7] = NAN;
    int nan_rc = ss_conn_hello(c, ss_cluster_hello_hash(p->cl, SS_CLUSTER_SYNC, 0), err,
                               sizeof err) ? -1
                 : s_center_call(c, MSG_TYPE__MSG_INIT, 0, other, N, 0, NULL, err, sizeof err);
    printf("INIT with a NaN: %s (%s)\n", ss_errname(nan_rc), err);
    fails += nan_rc != SS_E_PEER || !strstr(err, "non-finite");
    other[7] = 99;
    if (s_center_call(c, MSG_TYPE__MSG_INIT, 0, c0, N, 0, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "ps_probe: sync init: %s\n", err);
        ss_conn_destroy(&c);
        return 1;
    }
    printf("first INIT: %s\n", err);
    s_center_call(c, MSG_TYPE__MSG_INIT, 0, other, N, 0, NULL, err, sizeof err);
    printf("second INIT: %s\n", err);
    fails += strcmp(err, "kept") != 0;
    if (s_center_call(c, MSG_TYPE__MSG_ELASTIC, 0, x, N, 0.5f, d, err, sizeof err) != 0 ||
        s_center_call(c, MSG_TYPE__MSG_PULL, 0, NULL, N, 0, pulled, err, sizeof err) != 0) {
        fprintf(stderr, "ps_probe: elastic/pull: %s\n", err);
        ss_conn_destroy(&c);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        float want_d = 0.5f * (x[i] - c0[i]);
        if (d[i] != want_d || pulled[i] != c0[i] + want_d) {
            if (fails++ < 5)
                printf("elem %d: d %g want %g, c %g want %g\n", i, d[i], want_d, pulled[i],
                       c0[i] + want_d);
        }
    }
    int rc = s_center_call(c, MSG_TYPE__MSG_ELASTIC, 1, x, N, 0.5f, d, err, sizeof err);
    printf("ELASTIC on a wrong range: %s (%s)\n", ss_errname(rc), err);
    fails += rc != SS_E_PEER;
    x[3] = INFINITY;
    rc = s_center_call(c, MSG_TYPE__MSG_ELASTIC, 0, x, N, 0.5f, d, err, sizeof err);
    printf("ELASTIC with an infinity: %s (%s)\n", ss_errname(rc), err);
    fails += rc != SS_E_PEER || !strstr(err, "non-finite");
    x[3] = 3.4e38f;   /* finite, but it would overflow the center (issue 22) */
    rc = s_center_call(c, MSG_TYPE__MSG_ELASTIC, 0, x, N, 0.5f, d, err, sizeof err);
    printf("ELASTIC with 3.4e38: %s (%s)\n", ss_errname(rc), err);
    fails += rc != SS_E_PEER || !strstr(err, "security.max_abs_value");
    float again[N];
    rc = s_center_call(c, MSG_TYPE__MSG_PULL, 0, NULL, N, 0, again, err, sizeof err);
    fails += rc != 0 || memcmp(again, pulled, sizeof again) != 0;  /* center unchanged */
    /* a PULL of 2^32 floats is refused before anything is allocated */
    rc = s_center_call(c, MSG_TYPE__MSG_PULL, 0, NULL, (size_t)1 << 32, 0, NULL, err, sizeof err);
    printf("PULL of 2^32 floats: %s (%s)\n", ss_errname(rc), err);
    fails += rc != SS_E_PEER;
    printf("sync: %d failures\n", fails);
    ss_conn_destroy(&c);
    return fails ? 1 : 0;
}

/* ------------------------------------------------------------ fuzz */

static uint32_t s_pick(uint64_t *st, const uint32_t *v, size_t n)
{
    return v[ss_rand_next(st) % n];
}

/* One random message on sock (never waits for the reply). */
static void s_fuzz_one(void *sock, uint64_t *st, uint32_t dim)
{
    static const uint32_t types[] = {0, 1, 2, 3, 5 + 100, 10, 11, 12, 20, 21, 22, 30, 99, 10, 11, 12};
    static const uint32_t small[] = {0, 1, 2, 3, 7, 16, 25, 26, 1000, 0xffffffffu};
    uint32_t tables[8], counts[8];
    uint8_t hb[512], junk[4096];
    Header h = HEADER__INIT;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)ss_rand_next(st);
    h.version = ss_rand_next(st) % 16 ? SS_PROTO_VERSION : (uint32_t)ss_rand_next(st);
    h.type = (MsgType)s_pick(st, types, sizeof types / sizeof types[0]);
    if (h.type == 105)
        h.type = MSG_TYPE__MSG_PING;  /* never SHUTDOWN: the PS must stay up */
    h.req_id = ss_rand_next(st);
    h.n_tables = ss_rand_next(st) % 4;
    h.n_counts = ss_rand_next(st) % 3 ? h.n_tables : ss_rand_next(st) % 4;
    for (size_t i = 0; i < 8; i++) {
        tables[i] = s_pick(st, small, 10);
        counts[i] = s_pick(st, small, 9);  /* no 0xffffffff counts: frames would be huge */
    }
    h.tables = tables;
    h.counts = counts;
    h.n_lookup_tables = ss_rand_next(st) % 4;
    h.n_lookup_counts = ss_rand_next(st) % 3 ? h.n_lookup_tables : ss_rand_next(st) % 4;
    h.lookup_tables = tables + 4;
    h.lookup_counts = counts + 4;
    h.has_dim = ss_rand_next(st) % 2;
    h.dim = ss_rand_next(st) % 3 ? dim : s_pick(st, small, 10);
    h.has_offset = h.has_length = ss_rand_next(st) % 2;
    h.offset = s_pick(st, small, 10);
    h.length = s_pick(st, small, 9);
    h.has_alpha = ss_rand_next(st) % 2;
    h.alpha = (float)(ss_rand_next(st) % 5) * 0.5f - 0.5f;
    size_t len = header__get_packed_size(&h) <= sizeof hb ? header__pack(&h, hb) : 0;
    int garbage = ss_rand_next(st) % 8 == 0;
    size_t n_frames = ss_rand_next(st) % 4;
    zmq_send(sock, garbage ? junk : hb, garbage ? ss_rand_next(st) % 64 : len,
             n_frames ? ZMQ_SNDMORE : 0);
    for (size_t f = 0; f < n_frames; f++) {
        /* mostly the size the header implies for a plausible key count */
        uint64_t n = ss_msg_n_keys(&h);
        size_t want = f == 0 ? n * 8 : f == 1 ? n * h.dim * 4 : ss_msg_n_lookup_keys(&h) * 8;
        size_t sz = ss_rand_next(st) % 3 ? (want < sizeof junk ? want : sizeof junk)
                                         : ss_rand_next(st) % sizeof junk;
        zmq_send(sock, junk, sz, f + 1 < n_frames ? ZMQ_SNDMORE : 0);
    }
}

static int s_fuzz(struct probe *p, int rounds, size_t shard, int sync)
{
    int role = sync ? SS_CLUSTER_SYNC : SS_CLUSTER_EMBEDDING;
    const char *ep = ss_cluster_endpoint(p->cl, role, shard);
    uint64_t hash = ss_cluster_hello_hash(p->cl, role, shard);
    void *sock = s_raw_socket(p, ep, 1000);
    int replies = 0;
    uint64_t st = 12345;
    char err[512];
    if (!sock || s_raw_hello(p, sock, hash, 5000) != 0) {
        fprintf(stderr, "ps_probe: fuzz: no answer to HELLO from %s\n", ep);
        if (sock)
            zmq_close(sock);
        return 1;
    }
    for (int i = 0; i < rounds; i++) {
        s_fuzz_one(sock, &st, p->dim);
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        while (zmq_poll(&it, 1, 0) > 0) {
            struct ss_msg m;
            if (ss_msg_recv(sock, 0, NULL, NULL, &m, err, sizeof err) == 0) {
                replies++;
                ss_msg_close(&m);
            }
        }
    }
    zmq_close(sock);
    /* the PS must still serve a well-behaved client */
    struct ss_conn_opts o = s_opts(p, 5000);
    ss_conn_t *c = ss_conn_new(p->zctx, ep, &o);
    Header h = HEADER__INIT;
    struct ss_msg reply = {0};
    h.type = MSG_TYPE__MSG_PING;
    int rc = c ? ss_conn_hello(c, hash, err, sizeof err) : SS_E_NET;
    if (rc == 0)
        rc = ss_conn_call(c, &h, NULL, 0, -1, &reply, err, sizeof err);
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    ss_conn_destroy(&c);
    printf("fuzz: %d messages sent, %d replies read while sending, PING after: %s\n", rounds,
           replies, rc ? err : "ok");
    return rc ? 1 : 0;
}

/* ------------------------------------------------------------ flood */

/* The count field of a STATS reply of c, or -1 (no reply, or no such count). */
static int64_t s_stat(ss_conn_t *c, const char *field)
{
    Header h = HEADER__INIT;
    struct ss_msg reply = {0};
    char err[512];
    uint64_t v = 0;
    json_t *o = NULL;
    h.type = MSG_TYPE__MSG_STATS;
    int call_rc = ss_conn_call(c, &h, NULL, 0, -1, &reply, err, sizeof err), rc = call_rc;
    if (rc == 0)
        rc = ss_json_parse(reply.hdr->text ? reply.hdr->text : "", "STATS reply", &o, err,
                           sizeof err);
    if (rc == 0)
        rc = ss_json_u64(o, field, &v, "STATS reply", err, sizeof err);
    json_decref(o);
    if (call_rc == 0 || call_rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc == 0 ? (int64_t)v : -1;
}

/* k keys of table 0 that shard owns. Caller frees. */
static uint64_t *s_shard_keys(struct probe *p, size_t k, size_t shard)
{
    uint64_t *keys = ss_malloc(k * sizeof *keys);
    for (uint64_t i = 0, n = 0; n < k; i++)
        if (ss_cluster_shard_of(p->cl, ss_key_make(0, i)) == shard)
            keys[n++] = ss_key_make(0, i);
    return keys;
}

/* Watch the PS serve `rounds` more lookups than `base`: returns its peak RSS
 * (0 when another client was not served within 120 s). */
static int64_t s_flood_watch(ss_conn_t *ctl, int64_t base, int rounds)
{
    int64_t peak = 0;
    uint64_t t0 = ss_now_ms();
    while (ss_now_ms() - t0 < 120000) {
        int64_t rss = s_stat(ctl, "rss_bytes"), done = s_stat(ctl, "req_lookup");
        if (rss < 0 || done < 0)
            return 0;  /* this client was not served: a denial of service */
        peak = rss > peak ? rss : peak;
        if (done >= base + rounds)
            return peak;
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "ps_probe: flood: the PS served %d lookups in 120 s?\n", rounds);
    return 0;
}

static int s_flood(struct probe *p, size_t k, int rounds, size_t shard, double bound_mb)
{
    const char *ep = ss_cluster_endpoint(p->cl, SS_CLUSTER_EMBEDDING, shard);
    uint64_t hash = ss_cluster_hello_hash(p->cl, SS_CLUSTER_EMBEDDING, shard);
    struct ss_conn_opts o = s_opts(p, 30000);
    char err[512];
    uint32_t table = 0, count = (uint32_t)k;
    ss_conn_t *ctl = ss_conn_new(p->zctx, ep, &o);
    void *sock = s_raw_socket(p, ep, 1);
    uint64_t *keys = s_shard_keys(p, k, shard);
    Header h = HEADER__INIT;
    struct ss_msg reply = {0};
    struct ss_frame f = {keys, k * sizeof *keys};
    h.version = SS_PROTO_VERSION;
    h.type = MSG_TYPE__MSG_LOOKUP;
    h.n_tables = h.n_counts = 1;
    h.tables = &table;
    h.counts = &count;
    int rc = ctl && sock ? ss_conn_hello(ctl, hash, err, sizeof err) : 1;
    if (rc == 0 && (rc = s_raw_hello(p, sock, hash, 5000)) != 0)
        snprintf(err, sizeof err, "HELLO of the flooding client: status %d", rc);
    if (rc == 0)  /* once, read: every row exists before the flood */
        rc = ss_conn_call(ctl, &h, &f, 1, -1, &reply, err, sizeof err);
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    int64_t before = rc ? -1 : s_stat(ctl, "rss_bytes"), base = s_stat(ctl, "req_lookup");
    uint64_t t_sent = ss_now_ms();
    for (int r = 0; rc == 0 && r < rounds; r++) {
        h.req_id = 100 + (uint64_t)r;
        rc = ss_msg_send(sock, NULL, 0, &h, &f, 1);  /* and never read the reply */
    }
    int64_t peak = rc ? 0 : s_flood_watch(ctl, base, rounds);
    /* req_lookup counts a request when it is read; its reply is sent (or
     * dropped) after, and a loaded PS may still be serving the last few
     * read. The drop count is read once it stands still for 3 times as long
     * as one lookup took on average here (0.3 s at least), up to 60 s. */
    uint64_t per = (ss_now_ms() - t_sent) / (uint64_t)(rounds > 0 ? rounds : 1);
    uint64_t still = per * 3 > 300 ? per * 3 : 300, t_read = ss_now_ms();
    int64_t dropped = s_stat(ctl, "replies_dropped"), was = -2;
    while (peak && dropped != was && ss_now_ms() - t_read < 60000) {
        struct timespec ts = {(time_t)(still / 1000), (long)(still % 1000) * 1000000};
        nanosleep(&ts, NULL);
        was = dropped;
        dropped = s_stat(ctl, "replies_dropped");
    }
    int64_t after = peak ? s_stat(ctl, "rss_bytes") : -1;
    double mb = 1024.0 * 1024.0, grew = (double)(peak - before) / mb;
    if (rc == 0 && peak)
        printf("{\"flood_keys\":%zu,\"lookups\":%d,\"reply_mb\":%.1f,\"rss_before_mb\":%.1f,"
               "\"rss_peak_mb\":%.1f,\"rss_after_mb\":%.1f,\"peak_growth_mb\":%.1f,"
               "\"bound_mb\":%.1f,\"replies_dropped\":%" PRId64 "}\n",
               k, rounds, (double)k * p->dim * 4 / mb, (double)before / mb, (double)peak / mb,
               (double)after / mb, grew, bound_mb, dropped);
    else
        fprintf(stderr, "ps_probe: flood: %s\n", rc ? err : "the PS stopped serving others");
    ss_free(keys);
    if (sock)
        zmq_close(sock);
    ss_conn_destroy(&ctl);
    return rc || !peak || (bound_mb > 0 && grew > bound_mb);
}

/* ------------------------------------------------------------ conns */

/* Count the sockets that have a reply waiting; reads it. */
static int s_count_answers(void **socks, int n, char *answered, long wait_ms)
{
    zmq_pollitem_t *items = ss_calloc((size_t)n, sizeof *items);
    int got = 0;
    uint64_t t0 = ss_now_ms();
    for (int i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
    while ((long)(ss_now_ms() - t0) < wait_ms && zmq_poll(items, n, 50) >= 0)
        for (int i = 0; i < n; i++)
            if ((items[i].revents & ZMQ_POLLIN) && !answered[i]) {
                struct ss_msg m;
                char err[128];
                answered[i] = 1;
                if (ss_msg_recv(socks[i], 0, NULL, NULL, &m, err, sizeof err) == 0)
                    ss_msg_close(&m);
                items[i].events = 0;
            }
    for (int i = 0; i < n; i++)
        got += answered[i];
    ss_free(items);
    return got;
}

static int s_conns(struct probe *p, int n, long hold_ms, size_t shard)
{
    const char *ep = ss_cluster_endpoint(p->cl, SS_CLUSTER_EMBEDDING, shard);
    uint64_t hash = ss_cluster_hello_hash(p->cl, SS_CLUSTER_EMBEDDING, shard);
    void **socks = ss_calloc((size_t)n, sizeof *socks);
    char *answered = ss_calloc((size_t)n, 1), err[512];
    int opened = 0;
    for (; opened < n; opened++) {
        if (!(socks[opened] = s_raw_socket(p, ep, 1)))
            break;
        s_raw_hello_send(p, socks[opened], hash);
    }
    int got = s_count_answers(socks, opened, answered, hold_ms);
    for (int i = 0; i < opened; i++)
        zmq_close(socks[i]);
    /* The new client asks as a trainer does: a HELLO unanswered in 1 s is
     * sent again on a new connection, 5 times. (The PS may still count some
     * of the closed connections when it comes, and shut it; a HELLO on a
     * connection that was shut is lost.) */
    struct ss_conn_opts o = s_opts(p, 1000);
    int rc = SS_E_NET, tries = 0;
    snprintf(err, sizeof err, "no connection");
    while (rc && tries++ < 5) {
        ss_conn_t *c = ss_conn_new(p->zctx, ep, &o);
        rc = c ? ss_conn_hello(c, hash, err, sizeof err) : SS_E_NET;
        ss_conn_destroy(&c);
    }
    printf("conns: %d opened, %d answered within %ld ms; a new client afterwards: %s (HELLO %d "
           "time%s)\n", opened, got, hold_ms, rc ? err : "served", tries, tries == 1 ? "" : "s");
    ss_free(socks);
    ss_free(answered);
    return rc ? 1 : 0;
}

/* ------------------------------------------------------------ frames */

static void s_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A bare stream socket connected to a tcp:// or ipc:// endpoint, or -1. */
static int s_bare_connect(const char *ep)
{
    int fd = -1;
    if (!strncmp(ep, "ipc://", 6)) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", ep + 6);
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0 &&
            connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            fd = -1;
        }
        return fd;
    }
    char host[256];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    snprintf(host, sizeof host, "%s", ep + (strncmp(ep, "tcp://", 6) ? 0 : 6));
    char *colon = strrchr(host, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    char *h = host;
    if (h[0] == '[') {  /* [v6]:port */
        h++;
        h[strlen(h) - 1] = '\0';
    }
    if (getaddrinfo(h, colon + 1, &hints, &ai) != 0)
        return -1;
    if ((fd = socket(ai->ai_family, SOCK_STREAM, 0)) >= 0 &&
        connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

/* Write all of buf; the bytes written before an error. */
static size_t s_write_all(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    return done;
}

/* --raw-plain: a ZMTP 3.0 greeting that claims PLAIN (as a client), then
 * the frames as data at once, never the HELLO command. */
static int s_frames_raw(const char *ep, int n, size_t bytes, long hold_ms, const char *buf)
{
    uint8_t greet[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
    memcpy(greet + 12, "PLAIN", 5);  /* mechanism, NUL-padded to 20 bytes; as-server 0 */
    int fd = s_bare_connect(ep);
    if (fd < 0) {
        fprintf(stderr, "ps_probe: frames: cannot connect to %s: %s\n", ep, strerror(errno));
        return 1;
    }
    size_t sent = s_write_all(fd, greet, sizeof greet), want = sizeof greet;
    for (int i = 0; i < n && sent == want; i++) {
        uint8_t head[9] = {(uint8_t)(0x02 | (i + 1 < n ? 0x01 : 0))};  /* long frame, more */
        for (int b = 0; b < 8; b++)
            head[1 + b] = (uint8_t)((uint64_t)bytes >> (56 - 8 * b));
        sent += s_write_all(fd, head, sizeof head);
        sent += s_write_all(fd, buf, bytes);
        want += sizeof head + bytes;
    }
    s_sleep_ms(hold_ms);
    close(fd);
    printf("{\"frames\":%d,\"frame_mb\":%.1f,\"raw_plain\":true,\"bytes_taken\":%zu,"
           "\"bytes_meant\":%zu}\n", n, (double)bytes / 1048576.0, sent, want);
    return 0;
}

static int s_frames(struct probe *p, int n, double frame_mb, long hold_ms, size_t shard,
                    int raw_plain)
{
    const char *ep = ss_cluster_endpoint(p->cl, SS_CLUSTER_EMBEDDING, shard);
    size_t bytes = (size_t)(frame_mb * 1048576.0);
    if (n < 1 || bytes < 1) {
        fprintf(stderr, "ps_probe: frames: give --frames N and --frame-mb M\n");
        return 2;
    }
    char *buf = ss_malloc(bytes);
    memset(buf, 0x5a, bytes);
    int rc = 0;
    if (raw_plain) {
        rc = s_frames_raw(ep, n, bytes, hold_ms, buf);
    } else {
        /* a refused handshake drops the connection's queue: a send then
         * blocks (no peer), so it gives up after hold_ms */
        void *sock = s_raw_socket(p, ep, 1);
        int timeo = (int)hold_ms, queued = 0;
        if (sock && zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeo, sizeof timeo) == 0)
            while (queued < n &&
                   zmq_send(sock, buf, bytes, queued + 1 < n ? ZMQ_SNDMORE : 0) == (int)bytes)
                queued++;
        if (sock) {
            s_sleep_ms(hold_ms);  /* the I/O thread sends meanwhile, if the PS takes it */
            zmq_close(sock);
        }
        rc = !sock;
        if (!rc)
            printf("{\"frames\":%d,\"frame_mb\":%.1f,\"raw_plain\":false,\"frames_queued\":%d}\n",
                   n, frame_mb, queued);
    }
    ss_free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"client", required_argument, 0, 'i'},
        {"clients", required_argument, 0, 'n'}, {"rounds", required_argument, 0, 'r'},
        {"keys", required_argument, 0, 'k'},   {"out", required_argument, 0, 'o'},
        {"shard", required_argument, 0, 'S'},  {"set", required_argument, 0, 's'},
        {"sync", no_argument, 0, 'Y'},         {"combined", no_argument, 0, 'C'},
        {"bound-mb", required_argument, 0, 'B'}, {"hold-ms", required_argument, 0, 'H'},
        {"frames", required_argument, 0, 'F'}, {"frame-mb", required_argument, 0, 'M'},
        {"raw-plain", no_argument, 0, 'P'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    struct probe p = {0};
    const char *config = NULL, *out = "rows.txt";
    const char *sets[32];
    size_t n_sets = 0, keys = 1000, shard = 0;
    int client = 0, clients = 1, rounds = 1, c, rc = 1, sync = 0, combined = 0;
    double bound_mb = 0, frame_mb = 0;
    long hold_ms = -1;
    int frames = 0, raw_plain = 0;
    char err[1024];
    while ((c = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'i': client = atoi(optarg); break;
        case 'n': clients = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'k': keys = (size_t)atol(optarg); break;
        case 'o': out = optarg; break;
        case 'S': shard = (size_t)atol(optarg); break;
        case 's': if (n_sets < 32) sets[n_sets++] = optarg; break;
        case 'Y': sync = 1; break;
        case 'C': combined = 1; break;
        case 'B': bound_mb = atof(optarg); break;
        case 'H': hold_ms = atol(optarg); break;
        case 'F': frames = atoi(optarg); break;
        case 'M': frame_mb = atof(optarg); break;
        case 'P': raw_plain = 1; break;
        default:
            fprintf(stderr, "usage: ps_probe -c JOB push|verify|dump|garbage|sync|fuzz|flood|conns|"
                    "frames [options]\n");
            return 2;
        }
    }
    if (!config || optind >= argc) {
        fprintf(stderr, "usage: ps_probe -c JOB push|verify|dump|garbage|sync [options]\n");
        return 2;
    }
    ss_log_init("probe", SS_LOG_WARN);
    p.cfg = ss_calloc(1, sizeof *p.cfg);
    if (ss_cfg_load(p.cfg, config, sets, n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "ps_probe: %s\n", err);
        ss_free(p.cfg);
        return 2;
    }
    if (ss_curve_load(&p.curve, &p.cfg->security, SS_CURVE_CLIENT, err, sizeof err) != 0 ||
        !(p.cl = ss_cluster_new(p.cfg, NULL, NULL, err, sizeof err))) {
        fprintf(stderr, "ps_probe: %s\n", err);
        ss_free(p.cfg);
        return 2;
    }
    p.zctx = zmq_ctx_new();
    const char *cmd = argv[optind];
    p.dim = ss_cfg_row_dim(p.cfg);
    if (!strcmp(cmd, "conns")) {
        zmq_ctx_set(p.zctx, ZMQ_MAX_SOCKETS, clients + 64);  /* one socket per client */
        rc = s_conns(&p, clients, hold_ms < 0 ? 2000 : hold_ms, shard);
    } else if (!strcmp(cmd, "frames")) {
        rc = s_frames(&p, frames, frame_mb, hold_ms < 0 ? 3000 : hold_ms, shard, raw_plain);
    } else if (!strcmp(cmd, "flood")) {
        rc = s_flood(&p, keys, rounds, shard, bound_mb);
    } else if (!strcmp(cmd, "fuzz")) {
        p.dim = ss_cfg_row_dim(p.cfg);
        rc = s_fuzz(&p, rounds, shard, sync);
    } else if (!strcmp(cmd, "garbage") || !strcmp(cmd, "sync")) {
        p.dim = ss_cfg_row_dim(p.cfg);
        rc = !strcmp(cmd, "sync") ? s_sync(&p) : s_garbage(&p, shard);
    } else if (s_connect(&p) == 0) {
        if (!strcmp(cmd, "push"))
            rc = s_push(&p, client, rounds, keys, combined);
        else if (!strcmp(cmd, "verify"))
            rc = s_verify(&p, clients, rounds, keys);
        else if (!strcmp(cmd, "dump"))
            rc = s_dump(&p, keys, out);
    }
    for (size_t s = 0; s < p.n_shards; s++)
        ss_conn_destroy(&p.conns[s]);
    zmq_ctx_term(p.zctx);
    ss_curve_wipe(&p.curve);
    ss_cluster_destroy(&p.cl);
    ss_free(p.cfg);
    return rc;
}
