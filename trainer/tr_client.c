/* tr_client.c - embedding clients of a trainer's workers: per-batch
 * de-duplication and pooling in each worker, merged rounds in their group.
 *
 * DESIGN: a worker walks its batch field-major (field outer, example inner,
 * then the field's values) so that each shard's unique keys come out grouped
 * by table, the (tables, counts) runs of the LOOKUP/PUSH header. Keys are
 * de-duplicated per field in a key set emptied in O(1) (tr_dedup.h) small
 * enough for the L1 cache; it maps a key to its first value, whose (shard,
 * index) the later ones copy. Each batch slot keeps its own key lists and
 * positions (one per value), so a lookup of the next batch can be in flight
 * while the current one is pushed.
 *
 * A round (tr_client.h) is merged by the worker that closes it, under the
 * group's lock: each contribution's runs are appended to the shard's request
 * (a request may name a table in several runs: ps_embed_lookup_groups), its
 * keys de-duplicated against the round's earlier keys of the same table (one
 * key set per table run, s_merge), and where each of its
 * keys landed is written into the contributor's slot (tr_slot.at), which is
 * how the replies are split back without copying: a worker pools straight
 * from the round's reply frames. Pushed gradients are added into the
 * round's own buffer, so a contributor's buffers are free once its round has
 * closed; a worker closes the open round itself before it overwrites them
 * (tr_client_push_lookup). A round lives until every contributor has read or
 * dropped its part (refs). Keys are de-duplicated per table (a PS row is a
 * (table, key) pair, so one key in two tables stays two rows).
 *
 * Locks: the group's lock guards the rounds, the open round, io_busy and the
 * clients count. The sockets are used by one thread at a time, the holder of
 * io_busy (taken and given back under the lock), never under the lock
 * itself: a thread blocked on a PS does not block workers handing in keys. */
#include "tr_client.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"
#include "tr_bag.h"
#include "tr_dedup.h"

/* A sent frame's gradient buffer goes from the sending thread to ZeroMQ's
 * I/O thread, which gives it back to the pool (s_free_zmsg), and the next
 * merge reuses it. libzmq is not built with TSan (test/tsan.supp): its queue
 * orders that hand-over, but TSan cannot see it and reports the sender's
 * writes and the next merge's as a race. S_HANDED_OVER (before the frame
 * goes to ZeroMQ) and S_TAKEN_BACK (in the free) tell it so; nothing outside
 * a TSan build. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TR_CLIENT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(TR_CLIENT_TSAN)
#include <sanitizer/tsan_interface.h>
#define S_HANDED_OVER(buf) __tsan_release(buf)
#define S_TAKEN_BACK(buf) __tsan_acquire(buf)
#else
#define S_HANDED_OVER(buf) ((void)(buf))
#define S_TAKEN_BACK(buf) ((void)(buf))
#endif

/* One batch in flight. */
struct tr_slot {
    struct tr_dedup_part *parts; /* one per shard: its unique keys (tr_dedup_batch) */
    uint32_t **at;           /* [n_shards] per unique key of parts[s]: its index in the
                              * merged request of its round */
    uint32_t *pos_shard;     /* per value: shard of the key */
    uint32_t *pos_index;     /* per value: index in the shard's list */
    size_t cap;              /* values the arrays above (and parts' keys) hold */
    const uint32_t *offs;    /* borrowed CSR offsets of the batch (B * n_fields + 1) */
    const float *weights;    /* value weights pooled with: the borrowed ones (sum), or eff */
    float *eff;              /* [cap] effective weights of mean/sqrtn fields (tr_bag_scale) */
    size_t n_vals;           /* values in the batch */
    uint32_t B;              /* examples */
    struct tr_round *round;  /* the round carrying its lookup, NULL: none (a ref held) */
    float *grad;             /* its summed gradients, all shards [grad_cap * dim] */
    size_t grad_cap;         /* unique keys grad holds */
    size_t *base;            /* [n_shards] shard s's rows start at grad + base[s] * dim */
    uint64_t lk_merge;       /* which lookup merge of the group took its keys (0: none) */
    uint32_t lk_index;       /* its place among that merge's lookups */
    uint32_t lk_n;           /* the lookups that merge took */
};

/* A growable run list: keys grouped in (table, count) runs. */
struct tr_runs {
    uint64_t *keys;          /* keys */
    uint32_t *tables;        /* run tables */
    uint32_t *counts;        /* run sizes */
    size_t n_keys, n_runs;   /* used */
    size_t keys_cap, runs_cap; /* allocated */
};

/* One shard's merged request of a round. */
struct tr_rpart {
    struct tr_runs lk;       /* keys to look up */
    struct tr_runs push;     /* keys pushed */
    float *grads;            /* summed gradients of push.keys (s_gbuf_get, with room for
                              * the keys behind them: the packed frame, s_send_part);
                              * handed to ZeroMQ when sent (no copy), so NULL until the
                              * next merge */
    uint64_t lookup_id;      /* request id of the lookup (PUSH_LOOKUP or LOOKUP), 0: none */
    uint64_t push_id;        /* request id of a lone PUSH, 0: none */
    int with_push;           /* the lookup request carries the push */
    float lr_scale;          /* the push's header lr_scale (1: none sent) */
    struct ss_msg reply;     /* the lookup's reply (hdr NULL: none), held while refs */
};

/* What one client handed to a round. */
struct tr_contrib {
    tr_client_t *client;     /* who (for nothing but identity) */
    struct tr_slot *lk;      /* the slot whose keys to look up, or NULL */
    const struct tr_slot *push; /* the slot whose gradients to push, or NULL */
    const float *grad;       /* its summed gradients, shard s at grad + base[s] * dim */
    const size_t *base;      /* per shard: first key's row in grad */
    size_t cur_run, cur_key; /* merge cursor in the part being merged: its run and key */
    float lr_scale;          /* the client's lr_scale when it pushed */
};

enum tr_round_state { TR_R_OPEN, TR_R_CLOSED, TR_R_SENT, TR_R_DONE };

/* A round: the requests of one merge, one per shard. */
struct tr_round {
    struct tr_round *next;   /* in the send queue, or the free list */
    enum tr_round_state state; /* see tr_client.h */
    int refs;                /* contributions not yet read or dropped */
    struct tr_contrib *contribs; /* while open: who handed what */
    size_t n_contribs, contribs_cap;
    struct tr_rpart *parts;  /* [n_shards] */
    int rc;                  /* DONE: 0 or the error that failed it */
    char err[512];           /* what went wrong */
};

/* Gradient buffers a round hands to ZeroMQ (a send frame that ZeroMQ frees
 * once sent, from its I/O thread), taken back for the next rounds instead
 * of a malloc and a free of ~100 KB each, whose pages the merge then wrote
 * cold (in make run's job the workers' allocation and round merge took
 * 0.02-0.03 us per example less: docs/per-core.md, tenth pass). Each buffer
 * has a header in front (s_ghdr); the pool lives until its group and every
 * buffer it made are gone (refs), since ZeroMQ may free a frame after the
 * group's sockets are closed. */
#define TR_CLIENT_GPOOL 8          /* buffers kept for reuse at most */
#define TR_CLIENT_GHDR 64          /* bytes of header before a buffer's floats */

struct s_gpool {
    pthread_mutex_t lock;          /* guards everything below */
    int refs;                      /* the group (until destroyed) + buffers made and alive
                                    * outside the pool */
    int closed;                    /* the group is gone: buffers come back to be freed */
    int n;                         /* buffers kept */
    float *buf[TR_CLIENT_GPOOL];   /* kept buffers (their floats) */
};

/* A pooled buffer's header, TR_CLIENT_GHDR bytes before its floats. */
struct s_ghdr {
    struct s_gpool *pool;          /* its pool */
    size_t cap;                    /* bytes it holds */
};

struct tr_client_group {
    pthread_mutex_t lock;          /* guards everything below but the immutable fields */
    struct s_gpool *gpool;         /* gradient buffers (own lock; thread-safe) */
    pthread_cond_t cond;           /* a round got done, or the sockets were given back */
    void *zctx;                    /* ZeroMQ context, borrowed */
    const struct ss_cfg *cfg;      /* borrowed */
    const ss_cluster_t *cluster;   /* borrowed */
    const struct ss_curve *curve;  /* borrowed until connected */
    uint32_t n_fields;             /* keys per example */
    uint32_t dim;                  /* floats per row */
    size_t n_shards;               /* embedding shards */
    int round_batches;             /* trainer.round_batches: contributions per client a round */
    ss_conn_t **conns;             /* one DEALER per shard: used by the io_busy holder only */
    int connected;                 /* conns are open and said HELLO */
    int connect_rc;                /* the failure of the first connect, 0: none */
    char connect_err[512];         /* its text */
    int n_clients;                 /* clients in the group */
    int sum_rb;                    /* sum of the clients' rb: a round full of them closes */
    int read_only;                 /* LOOKUPs are read-only (scoring): set before any client */
    int io_busy;                   /* a thread is using the sockets */
    struct tr_round *open;         /* the round taking contributions, or NULL */
    struct tr_round *send_head;    /* closed rounds to send, oldest first */
    struct tr_round *send_tail;
    struct tr_round *free_rounds;  /* done with, kept for reuse */
    struct tr_dedup dedup;         /* the merge's key set (under lock) */
    uint64_t n_lk_merges;          /* lookup merges so far (tr_slot.lk_merge) */
    uint32_t n_ids;                /* clients made so far (tr_client.id) */
};

struct tr_client {
    tr_client_group_t *g;          /* borrowed */
    uint32_t id;                   /* its number in the group: a round merges by it */
    uint32_t n_fields;             /* keys per example */
    uint32_t dim;                  /* floats per row */
    const uint8_t *pooling;        /* [n_fields] enum ss_pooling per field, in cfg */
    int scaled;                    /* some field is not sum-pooled: weights go through eff */
    uint32_t max_batch;            /* largest B */
    size_t n_shards;               /* embedding shards */
    size_t max_keys;               /* values a slot holds at first (max_batch * n_fields) */
    int rb;                        /* its batches per round: 1, or the group's round_batches
                                    * once it asked tr_client_ahead() (under g->lock) */
    struct tr_round *push_round;   /* the round carrying a lone push (B = 0), a ref held */
    const float **vrow;            /* per value: its row in a LOOKUP reply */
    float **vgrad;                 /* per value: its summed gradient row in grad */
    size_t vptr_cap;               /* entries of vrow and vgrad */
    struct tr_slot slots[TR_CLIENT_SLOTS]; /* batches (buffers made at first use) */
    struct tr_dedup dedup;         /* one field's keys of the batch being grouped */
    struct tr_client_stats stats;  /* counters, this thread's */
    float lr_scale;                /* of its next pushes (tr_client_set_lr_scale) */
};

/* ------------------------------------------------------------------ */
/* Gradient buffers (s_gpool) */

static struct s_gpool *s_gpool_new(void)
{
    struct s_gpool *p = ss_calloc(1, sizeof *p);
    int rc = pthread_mutex_init(&p->lock, NULL);
    ss_assert(rc == 0);
    p->refs = 1;  /* the group's */
    return p;
}

static struct s_ghdr *s_ghdr_of(float *buf)
{
    return (struct s_ghdr *)(void *)((char *)buf - TR_CLIENT_GHDR);
}

/* Free the pool once nothing refers to it. Needs p->lock; unlocks it. */
static void s_gpool_unref_unlock(struct s_gpool *p)
{
    int last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (!last)
        return;
    for (int i = 0; i < p->n; i++)
        ss_free(s_ghdr_of(p->buf[i]));
    pthread_mutex_destroy(&p->lock);
    ss_free(p);
}

/* A buffer of at least bytes bytes (8-aligned): a kept one that is large
 * enough, else a new one of bytes + bytes / 2. The caller owns it; give it
 * back with s_gbuf_put (or hand it to ZeroMQ with s_free_zmsg). Thread:
 * any. */
static float *s_gbuf_get(struct s_gpool *p, size_t bytes)
{
    float *buf = NULL;
    pthread_mutex_lock(&p->lock);
    for (int i = p->n - 1; i >= 0; i--)
        if (s_ghdr_of(p->buf[i])->cap >= bytes) {
            buf = p->buf[i];
            p->buf[i] = p->buf[--p->n];
            break;
        }
    p->refs++;
    pthread_mutex_unlock(&p->lock);
    if (buf)
        return buf;
    size_t cap = bytes + bytes / 2;
    struct s_ghdr *h = ss_malloc(TR_CLIENT_GHDR + cap);
    h->pool = p;
    h->cap = cap;
    return (float *)(void *)((char *)h + TR_CLIENT_GHDR);
}

/* Bytes buf (from s_gbuf_get, or NULL) holds. */
static size_t s_gbuf_cap(float *buf)
{
    return buf ? s_ghdr_of(buf)->cap : 0;
}

/* Give buf (from s_gbuf_get; NULL: nothing) back: kept for reuse while its
 * group lives and the pool has room (a smaller kept one makes room), else
 * freed. Thread: any (ZeroMQ's I/O thread frees sent frames with it). */
static void s_gbuf_put(float *buf)
{
    if (!buf)
        return;
    struct s_ghdr *h = s_ghdr_of(buf);
    struct s_gpool *p = h->pool;
    pthread_mutex_lock(&p->lock);
    if (!p->closed && p->n == TR_CLIENT_GPOOL) {  /* replace the smallest if smaller */
        int lo = 0;
        for (int i = 1; i < p->n; i++)
            if (s_ghdr_of(p->buf[i])->cap < s_ghdr_of(p->buf[lo])->cap)
                lo = i;
        if (s_ghdr_of(p->buf[lo])->cap < h->cap) {
            float *old = p->buf[lo];
            p->buf[lo] = buf;
            buf = old;
            h = s_ghdr_of(buf);
        }
    } else if (!p->closed) {
        p->buf[p->n++] = buf;
        buf = NULL;
    }
    if (buf)
        ss_free(h);
    s_gpool_unref_unlock(p);
}

/* The group is gone: free the kept buffers now; the pool goes with the last
 * buffer still out (in a ZeroMQ frame not yet freed). */
static void s_gpool_close(struct s_gpool *p)
{
    pthread_mutex_lock(&p->lock);
    p->closed = 1;
    for (int i = 0; i < p->n; i++)
        ss_free(s_ghdr_of(p->buf[i]));
    p->n = 0;
    s_gpool_unref_unlock(p);
}

/* ------------------------------------------------------------------ */
/* Buffers */

static void s_slot_init(struct tr_slot *sl, size_t n_shards, size_t max_keys, uint32_t F,
                        uint32_t dim)
{
    sl->parts = ss_calloc(n_shards, sizeof *sl->parts);
    sl->at = ss_calloc(n_shards, sizeof *sl->at);
    sl->grad_cap = max_keys;
    sl->grad = ss_malloc(max_keys * dim * sizeof(float));
    sl->base = ss_calloc(n_shards + 1, sizeof *sl->base);
    sl->pos_shard = ss_malloc(max_keys * sizeof(uint32_t));
    sl->pos_index = ss_malloc(max_keys * sizeof(uint32_t));
    sl->eff = ss_malloc(max_keys * sizeof(float));
    sl->cap = max_keys;
    for (size_t s = 0; s < n_shards; s++) {
        sl->parts[s].keys = ss_malloc(max_keys * sizeof(uint64_t));
        sl->at[s] = ss_malloc(max_keys * sizeof(uint32_t));
        sl->parts[s].tables = ss_malloc(F * sizeof(uint32_t));
        sl->parts[s].counts = ss_malloc(F * sizeof(uint32_t));
    }
}

/* Make room for n values in sl (multi-valued fields can exceed B * F). */
static void s_slot_grow(struct tr_slot *sl, size_t n_shards, size_t n)
{
    if (n <= sl->cap)
        return;
    while (sl->cap < n)
        sl->cap *= 2;
    sl->pos_shard = ss_realloc(sl->pos_shard, sl->cap * sizeof(uint32_t));
    sl->pos_index = ss_realloc(sl->pos_index, sl->cap * sizeof(uint32_t));
    sl->eff = ss_realloc(sl->eff, sl->cap * sizeof(float));
    for (size_t s = 0; s < n_shards; s++) {
        sl->parts[s].keys = ss_realloc(sl->parts[s].keys, sl->cap * sizeof(uint64_t));
        sl->at[s] = ss_realloc(sl->at[s], sl->cap * sizeof(uint32_t));
    }
}

static void s_slot_fini(struct tr_slot *sl, size_t n_shards)
{
    for (size_t s = 0; sl->parts && s < n_shards; s++) {
        ss_free(sl->parts[s].keys);
        ss_free(sl->at[s]);
        ss_free(sl->parts[s].tables);
        ss_free(sl->parts[s].counts);
    }
    ss_free(sl->parts);
    ss_free(sl->at);
    ss_free(sl->grad);
    ss_free(sl->base);
    ss_free(sl->pos_shard);
    ss_free(sl->pos_index);
    ss_free(sl->eff);
}

/* Make vrow and vgrad hold n entries. */
static void s_grow(tr_client_t *self, size_t n)
{
    if (self->vptr_cap < n) {
        self->vptr_cap = n;
        self->vrow = ss_realloc(self->vrow, n * sizeof *self->vrow);
        self->vgrad = ss_realloc(self->vgrad, n * sizeof *self->vgrad);
    }
}

/* Make runs hold n_keys keys and n_runs runs. */
static void s_runs_reserve(struct tr_runs *r, size_t n_keys, size_t n_runs)
{
    if (n_keys > r->keys_cap) {
        r->keys_cap = n_keys + n_keys / 2;
        r->keys = ss_realloc(r->keys, r->keys_cap * sizeof(uint64_t));
    }
    if (n_runs > r->runs_cap) {
        r->runs_cap = n_runs + n_runs / 2;
        r->tables = ss_realloc(r->tables, r->runs_cap * sizeof(uint32_t));
        r->counts = ss_realloc(r->counts, r->runs_cap * sizeof(uint32_t));
    }
}

static void s_runs_fini(struct tr_runs *r)
{
    ss_free(r->keys);
    ss_free(r->tables);
    ss_free(r->counts);
}

static struct tr_round *s_round_new(size_t n_shards)
{
    struct tr_round *r = ss_calloc(1, sizeof *r);
    r->parts = ss_calloc(n_shards, sizeof *r->parts);
    return r;
}

static void s_round_free(struct tr_round *r, size_t n_shards)
{
    for (size_t s = 0; s < n_shards; s++) {
        if (r->parts[s].reply.hdr)
            ss_msg_close(&r->parts[s].reply);
        s_runs_fini(&r->parts[s].lk);
        s_runs_fini(&r->parts[s].push);
        s_gbuf_put(r->parts[s].grads);
    }
    ss_free(r->parts);
    ss_free(r->contribs);
    ss_free(r);
}

/* ------------------------------------------------------------------ */
/* The group */

tr_client_group_t *tr_client_group_new(void *zctx, const struct ss_cfg *cfg,
                                       const ss_cluster_t *cluster,
                                       const struct ss_curve *curve, uint32_t n_fields)
{
    tr_client_group_t *g = ss_calloc(1, sizeof *g);
    ss_assert(zctx && cfg && cluster && n_fields <= SS_CFG_MAX_FIELDS);
    int rc = pthread_mutex_init(&g->lock, NULL);
    ss_assert(rc == 0);
    rc = pthread_cond_init(&g->cond, NULL);
    ss_assert(rc == 0);
    g->zctx = zctx;
    g->cfg = cfg;
    g->cluster = cluster;
    g->curve = curve;
    g->n_fields = n_fields;
    g->dim = ss_cfg_row_dim(cfg);
    g->n_shards = ss_cluster_count(cluster, SS_CLUSTER_EMBEDDING);
    ss_assert(g->n_shards <= SS_CFG_MAX_LIST);
    g->round_batches = cfg->round_batches > 1 ? (int)cfg->round_batches : 1;
    ss_assert(2 * g->round_batches + 1 <= TR_CLIENT_SLOTS);
    g->conns = ss_calloc(g->n_shards ? g->n_shards : 1, sizeof *g->conns);
    g->gpool = s_gpool_new();
    tr_dedup_init(&g->dedup);
    return g;
}

/* Free a round that nobody reads (refs 0) and nobody will send. Needs g->lock. */
static void s_round_recycle(tr_client_group_t *g, struct tr_round *r)
{
    ss_assert(r->refs == 0 && r->state != TR_R_OPEN && r->state != TR_R_CLOSED);
    for (size_t s = 0; s < g->n_shards; s++)
        if (r->parts[s].reply.hdr)
            ss_msg_close(&r->parts[s].reply);
    r->next = g->free_rounds;
    g->free_rounds = r;
}

void tr_client_group_set_read_only(tr_client_group_t *self, int on)
{
    ss_assert(self);
    pthread_mutex_lock(&self->lock);
    ss_assert(self->n_clients == 0);
    self->read_only = !!on;
    pthread_mutex_unlock(&self->lock);
}

void tr_client_group_destroy(tr_client_group_t **self_p)
{
    tr_client_group_t *g = *self_p;
    if (!g)
        return;
    ss_assert(g->n_clients == 0 && !g->io_busy);
    if (g->open)  /* an empty open round (a client that handed in nothing) */
        s_round_free(g->open, g->n_shards);
    for (struct tr_round *r = g->send_head, *n; r; r = n) {
        n = r->next;
        s_round_free(r, g->n_shards);
    }
    for (struct tr_round *r = g->free_rounds, *n; r; r = n) {
        n = r->next;
        s_round_free(r, g->n_shards);
    }
    for (size_t s = 0; s < g->n_shards; s++)
        ss_conn_destroy(&g->conns[s]);
    ss_free(g->conns);
    s_gpool_close(g->gpool);
    tr_dedup_fini(&g->dedup);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    ss_free(g);
    *self_p = NULL;
}

/* Open the connections and say HELLO. Returns 0 or an error with err. */
static int s_connect(tr_client_group_t *g, char *err, size_t err_len)
{
    const struct ss_cfg *cfg = g->cfg;
    struct ss_conn_opts opts = {.max_message_bytes = cfg->max_message_bytes,
                                .timeout_ms = cfg->request_timeout_ms,
                                .curve = g->curve,
                                .max_in_flight = cfg->security.max_in_flight};
    for (size_t s = 0; s < g->n_shards; s++) {
        char herr[512] = "";
        char ep_buf[SS_CLUSTER_EP_MAX];  /* a service thread's endpoint (ss_cluster.h) */
        const char *ep = ss_cluster_ps_endpoint(g->cluster, SS_CLUSTER_EMBEDDING, s,
                                                ss_cluster_next_slot(g->cluster), ep_buf,
                                                sizeof ep_buf);
        g->conns[s] = ss_conn_new(g->zctx, ep, &opts);
        if (!g->conns[s]) {
            snprintf(err, err_len, "cannot connect to embedding PS %s", ep);
            return SS_E_NET;
        }
        int rc = ss_conn_hello(g->conns[s],
                               ss_cluster_hello_hash(g->cluster, SS_CLUSTER_EMBEDDING, s), herr,
                               sizeof herr);
        if (rc) {
            snprintf(err, err_len, "embedding PS %zu (%s): %s", s, ep,
                     rc == SS_E_TIMEOUT ? "does not answer (is it running? see its log)"
                                        : herr);
            return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Merging a round (under the group's lock) */

/* d[j] += x[j] and d[j] = x[j] for j < dim, 4 lanes at a time where SSE2 is
 * there (the compiler leaves these loops scalar, and the copy a libc call,
 * as d and x might overlap; they never do): element by element, so the
 * same bits. */
static inline void s_row_add(float *d, const float *x, uint32_t dim)
{
    uint32_t j = 0;
#if defined(__SSE2__)
    for (; j + 4 <= dim; j += 4)
        _mm_storeu_ps(d + j, _mm_add_ps(_mm_loadu_ps(d + j), _mm_loadu_ps(x + j)));
#endif
    for (; j < dim; j++)
        d[j] += x[j];
}

static inline void s_row_copy(float *d, const float *x, uint32_t dim)
{
    uint32_t j = 0;
#if defined(__SSE2__)
    for (; j + 4 <= dim; j += 4)
        _mm_storeu_ps(d + j, _mm_loadu_ps(x + j));
#endif
    for (; j < dim; j++)
        d[j] = x[j];
}

/* d[j] = fresh ? x[j] : d[j] + x[j] for j < dim, without a branch on fresh
 * (in a push merge whether a later contribution's key is new to the run is
 * about a coin toss): both are computed and one is kept by a mask, so the
 * bits are those of the copy or of the add. d is read even when fresh (a
 * row of the round's buffer, in bounds; what it held is dropped). */
static inline void s_row_put(float *d, const float *x, uint32_t dim, uint32_t fresh)
{
    uint32_t j = 0, keep = fresh - 1;  /* all ones: add; 0: copy */
#if defined(__SSE2__)
    __m128 m = _mm_castsi128_ps(_mm_set1_epi32((int)keep));
    for (; j + 4 <= dim; j += 4) {
        __m128 xv = _mm_loadu_ps(x + j);
        __m128 sum = _mm_add_ps(_mm_loadu_ps(d + j), xv);
        _mm_storeu_ps(d + j, _mm_or_ps(_mm_and_ps(m, sum), _mm_andnot_ps(m, xv)));
    }
#endif
    for (; j < dim; j++) {
        float sum = d[j] + x[j];
        uint32_t a, b;
        memcpy(&a, &sum, sizeof a);
        memcpy(&b, &x[j], sizeof b);
        a = (a & keep) | (b & ~keep);
        memcpy(&d[j], &a, sizeof a);
    }
}

/* How s_merge_keys finds where a key lands in the run. */
enum s_place {
    S_PLACE_ALONE,  /* the run's only contribution: its keys are unique, each is new */
    S_PLACE_FIRST,  /* the first of several: each is new, and goes into g->dedup */
    S_PLACE_SET,    /* one between: looked up in g->dedup, a new one added to it */
    S_PLACE_LAST,   /* the last of several: looked up in g->dedup (nobody after it
                     * looks a new one up, so it is not added) */
    S_PLACE_KNOWN   /* given: the positions of the lookup merge that took the same
                     * contributions in the same order (s_push_as_lookup) */
};

/* The loop of s_merge_keys for one way (how) and push or lookup (a
 * constant in each call, so each gets its own loop). A key's place, whether
 * it is new (pos == end) and what follows from it are data, not branches:
 * the key is stored at end either way (a key that is not new is overwritten
 * by the next one that is; keys has room for every key of the round), end
 * moves on by one when it is new, and a pushed row found in the set is
 * copied or added by a mask (s_row_put). A push merge with known places
 * keeps a branch: in a harness of make run's batches (docs/per-core.md,
 * twelfth pass) s_row_put cost more there than the branch's misses. */
static inline __attribute__((always_inline)) uint32_t
s_merge_loop(struct tr_dedup *set, uint64_t *keys, uint32_t end, const uint64_t *pk, size_t k0,
             size_t n, enum s_place how, const uint32_t *known, uint32_t *at, uint32_t dim,
             const float *src, float *dst)
{
    for (size_t k = k0; k < k0 + n; k++) {
        uint64_t key = pk[k];
        uint32_t pos;
        if (how == S_PLACE_ALONE || how == S_PLACE_FIRST)
            pos = end;
        else if (how == S_PLACE_KNOWN)
            pos = known[k];
        else if (how == S_PLACE_LAST)
            pos = tr_dedup_find(set, key, end);
        else
            pos = tr_dedup_insert(set, key, end);
        if (how == S_PLACE_FIRST)
            tr_dedup_add(set, key, end);
        ss_assert(pos <= end);
        uint32_t fresh = pos == end;
        keys[end] = key;
        if (src) {  /* (ALONE and FIRST: the rows are copied in a block) */
            float *d = dst + (size_t)pos * dim;
            const float *x = src + k * dim;
            if (how != S_PLACE_KNOWN)
                s_row_put(d, x, dim, fresh);
            else if (fresh)  /* a branch here cost less than s_row_put */
                s_row_copy(d, x, dim);
            else
                s_row_add(d, x, dim);
        }
        if (at)
            at[k] = pos;
        end += fresh;
    }
    return end;
}

/* Append keys [k0, k0 + n) of contribution part p to the merged runs m (the
 * last run, of the same table): each key new to the run is added, and where
 * it landed goes to at[k] (at may be NULL). With src, p's gradient rows are
 * summed into m's (dst) likewise. With S_PLACE_FIRST, _SET and _LAST
 * g->dedup holds the run's keys so far; with S_PLACE_KNOWN known[k] is where
 * key k lands. Every way gives the same keys, places and sums in the same
 * order. */
static void s_merge_keys(tr_client_group_t *g, struct tr_runs *m, const struct tr_dedup_part *p,
                         size_t k0, size_t n, enum s_place how, const uint32_t *known,
                         uint32_t *at, const float *src, float *dst)
{
    uint32_t dim = g->dim;
    /* a copy of the set's handle (inserting changes its slots only): the
     * compiler keeps its fields in registers, which the stores below could
     * otherwise alias */
    struct tr_dedup set = g->dedup;
    uint32_t n0 = (uint32_t)m->n_keys, end = n0;
    ss_assert(m->keys_cap - n0 >= n);
    if (src && (how == S_PLACE_ALONE || how == S_PLACE_FIRST)) {
        /* every key new: its rows land in a block, in their order */
        memcpy(dst + (size_t)n0 * dim, src + k0 * dim, n * dim * sizeof(float));
        src = dst = NULL;
    }
#define S_MERGE(HOW) \
    (src ? s_merge_loop(&set, m->keys, end, p->keys, k0, n, HOW, known, at, dim, src, dst) \
         : s_merge_loop(&set, m->keys, end, p->keys, k0, n, HOW, known, at, dim, NULL, NULL))
    switch (how) {
    case S_PLACE_ALONE: end = S_MERGE(S_PLACE_ALONE); break;
    case S_PLACE_FIRST: end = S_MERGE(S_PLACE_FIRST); break;
    case S_PLACE_SET: end = S_MERGE(S_PLACE_SET); break;
    case S_PLACE_LAST: end = S_MERGE(S_PLACE_LAST); break;
    case S_PLACE_KNOWN: end = S_MERGE(S_PLACE_KNOWN); break;
    }
#undef S_MERGE
    m->n_keys = end;
    m->counts[m->n_runs - 1] += end - n0;
}

/* The part of contribution c that r merges on shard s (push or lookup). */
static const struct tr_dedup_part *s_contrib_part(const struct tr_contrib *c, size_t s, int push)
{
    const struct tr_slot *sl = push ? c->push : c->lk;
    return sl ? &sl->parts[s] : NULL;
}

/* Number the lookups of r (about to be merged) in its slots: which merge,
 * their order in it, how many. Needs g->lock. */
static void s_mark_lookups(tr_client_group_t *g, struct tr_round *r)
{
    uint32_t n = 0;
    g->n_lk_merges++;
    for (size_t c = 0; c < r->n_contribs; c++) {
        struct tr_slot *sl = r->contribs[c].lk;
        if (sl) {
            sl->lk_merge = g->n_lk_merges;
            sl->lk_index = n++;
        }
    }
    for (size_t c = 0; c < r->n_contribs; c++)
        if (r->contribs[c].lk)
            r->contribs[c].lk->lk_n = n;
}

/* Whether r pushes exactly the slots that one lookup merge took, in the same
 * order (the common case: the workers hand in their batches in the same
 * order twice). Each shard's merge of the pushes then meets the same keys in
 * the same order as that lookup merge did, and each key lands where the
 * lookup's at[] says: no set needed. Needs g->lock. */
static int s_push_as_lookup(const struct tr_round *r)
{
    const struct tr_slot *first = r->n_contribs ? r->contribs[0].push : NULL;
    if (!first || first->lk_merge == 0 || first->lk_n != r->n_contribs)
        return 0;
    for (size_t c = 0; c < r->n_contribs; c++) {
        const struct tr_slot *sl = r->contribs[c].push;
        if (!sl || sl->lk_merge != first->lk_merge || sl->lk_index != c)
            return 0;
    }
    return 1;
}

/* Bytes of the packed frame of a push of at most n_push keys of dim floats
 * and n_lookup looked-up keys: the gradients, padded to 8, then the keys
 * (ss_msg_pack_offsets()). */
static size_t s_packed_bytes(size_t n_push, uint32_t dim, size_t n_lookup)
{
    size_t gbytes = n_push * dim * sizeof(float);
    return ((gbytes + 7) & ~(size_t)7) + (n_push + n_lookup) * sizeof(uint64_t);
}

/* Merge what the contributions of r look up (or, push = 1, push) into r's
 * per-shard requests: one run per table, whose keys are de-duplicated in a
 * set of that table's keys alone (small enough for the L1 cache, as in a
 * worker's own de-duplication; a set for the whole round was not). A
 * contribution's runs come in table order (s_place_new), so one cursor per
 * contribution walks them. Needs g->lock. */
static void s_merge(tr_client_group_t *g, struct tr_round *r, int push)
{
    int as_lookup = push ? s_push_as_lookup(r) : (s_mark_lookups(g, r), 0);
    for (size_t s = 0; s < g->n_shards; s++) {
        struct tr_rpart *rp = &r->parts[s];
        struct tr_runs *m = push ? &rp->push : &rp->lk;
        size_t nk = 0;
        for (size_t c = 0; c < r->n_contribs; c++) {
            const struct tr_dedup_part *p = s_contrib_part(&r->contribs[c], s, push);
            nk += p ? p->n_keys : 0;
            r->contribs[c].cur_run = r->contribs[c].cur_key = 0;
        }
        if (nk == 0)
            continue;
        s_runs_reserve(m, nk, g->n_fields);
        size_t need = push ? s_packed_bytes(nk, g->dim, rp->lk.n_keys) : 0;
        if (push && s_gbuf_cap(rp->grads) < need) {  /* NULL after each send */
            s_gbuf_put(rp->grads);
            rp->grads = s_gbuf_get(g->gpool, need);
        }
        for (uint32_t f = 0; f < g->n_fields; f++) {
            size_t n_f = 0, n_in = 0;
            for (size_t c = 0; c < r->n_contribs; c++) {
                const struct tr_contrib *ct = &r->contribs[c];
                const struct tr_dedup_part *p = s_contrib_part(ct, s, push);
                if (p && ct->cur_run < p->n_groups && p->tables[ct->cur_run] == f) {
                    n_f += p->counts[ct->cur_run];
                    n_in++;
                }
            }
            if (n_f == 0)
                continue;
            if (!as_lookup && n_in > 1)
                tr_dedup_begin(&g->dedup, n_f);
            m->tables[m->n_runs] = f;
            m->counts[m->n_runs++] = 0;
            for (size_t c = 0, i = 0; c < r->n_contribs; c++) {
                struct tr_contrib *ct = &r->contribs[c];
                const struct tr_dedup_part *p = s_contrib_part(ct, s, push);
                if (!p || ct->cur_run >= p->n_groups || p->tables[ct->cur_run] != f)
                    continue;
                size_t n = p->counts[ct->cur_run];
                /* the first to reach the run: its keys are new (with
                 * as_lookup, where the lookup merge put them: in a block) */
                enum s_place how = i == 0 && (as_lookup || n_in == 1) ? S_PLACE_ALONE
                                   : as_lookup     ? S_PLACE_KNOWN
                                   : i == 0        ? S_PLACE_FIRST
                                   : i + 1 == n_in ? S_PLACE_LAST
                                                   : S_PLACE_SET;
                ss_assert(!(as_lookup && i == 0) || ct->push->at[s][ct->cur_key] == m->n_keys);
                i++;
                if (push)
                    s_merge_keys(g, m, p, ct->cur_key, n, how, ct->push->at[s], NULL,
                                 ct->grad + ct->base[s] * g->dim, rp->grads);
                else
                    s_merge_keys(g, m, p, ct->cur_key, n, how, NULL, ct->lk->at[s], NULL,
                                 NULL);
                ct->cur_key += n;
                ct->cur_run++;
            }
        }
    }
}

/* Put r's contributions in the order of their clients' ids, each client's
 * own in the order it handed them in (a stable insertion sort: a round holds
 * a few). So the pushes of a round meet in the order their lookups met
 * whichever worker came first (s_push_as_lookup), and the order of what two
 * clients hand in does not depend on which came first. A key's gradients of
 * two contributions add up the same either way (a + b = b + a). */
static void s_sort_contribs(struct tr_round *r)
{
    for (size_t i = 1; i < r->n_contribs; i++) {
        struct tr_contrib x = r->contribs[i];
        size_t j = i;
        for (; j > 0 && r->contribs[j - 1].client->id > x.client->id; j--)
            r->contribs[j] = r->contribs[j - 1];
        r->contribs[j] = x;
    }
}

/* Close the open round r: merge it and queue it to be sent; the
 * contributors' buffers are free from now on. Counted in me's stats. Needs
 * g->lock. */
static void s_close(tr_client_group_t *g, tr_client_t *me, struct tr_round *r)
{
    ss_assert(r == g->open && r->state == TR_R_OPEN);
    /* the round's scale: the mean of its pushers' (exactly 1 when every
     * one is 1, as with no cool-down) */
    float scale = 1.0f, sum = 0.0f;
    size_t n_push = 0;
    for (size_t i = 0; i < r->n_contribs; i++)
        if (r->contribs[i].push)
            sum += r->contribs[i].lr_scale, n_push++;
    if (n_push)
        scale = sum / (float)n_push;
    s_sort_contribs(r);
    for (size_t s = 0; s < g->n_shards; s++) {
        struct tr_rpart *rp = &r->parts[s];
        rp->lk.n_keys = rp->lk.n_runs = rp->push.n_keys = rp->push.n_runs = 0;
        rp->lookup_id = rp->push_id = 0;
        rp->with_push = 0;
        rp->lr_scale = scale;
    }
    s_merge(g, r, 0);
    s_merge(g, r, 1);  /* the contributors' buffers are free from here on */
    for (size_t s = 0; s < g->n_shards; s++)
        me->stats.keys_sent += r->parts[s].lk.n_keys;
    me->stats.rounds++;
    r->n_contribs = 0;
    r->state = TR_R_CLOSED;
    r->next = NULL;
    if (g->send_tail)
        g->send_tail->next = r;
    else
        g->send_head = r;
    g->send_tail = r;
    g->open = NULL;
}

/* ------------------------------------------------------------------ */
/* Sending and receiving (by the io_busy holder, without the lock) */

static void s_header(Header *h, int type, const struct tr_runs *m)
{
    header__init(h);
    h->type = (MsgType)type;
    h->n_tables = m->n_runs;
    h->tables = m->tables;
    h->n_counts = m->n_runs;
    h->counts = m->counts;
}

/* Send rp's keys to shard s as a plain LOOKUP; sets rp->lookup_id. */
static int s_send_lookup(tr_client_t *me, size_t s, struct tr_rpart *rp, char *err,
                         size_t err_len)
{
    ss_conn_t *c = me->g->conns[s];
    Header h;
    s_header(&h, MSG_TYPE__MSG_LOOKUP, &rp->lk);
    h.has_read_only = h.read_only = me->g->read_only;
    struct ss_frame f = {rp->lk.keys, rp->lk.n_keys * sizeof(uint64_t)};
    rp->with_push = 0;
    if (ss_conn_send(c, &h, &f, 1, &rp->lookup_id) != 0) {
        snprintf(err, err_len, "cannot send to %s", ss_conn_endpoint(c));
        return SS_E_NET;
    }
    me->stats.lookups++;
    return 0;
}

/* A send frame's gradient buffer (s_gbuf_get), given back by ZeroMQ once
 * sent (from its I/O thread, or the thread that closes the socket). */
static void s_free_zmsg(void *data, void *hint)
{
    (void)hint;
    S_TAKEN_BACK(data);
    s_gbuf_put(data);
}

/* A send frame holding a copy of n bytes at data. */
static void s_zmsg_copy(zmq_msg_t *f, const void *data, size_t n)
{
    int rc = zmq_msg_init_size(f, n);
    ss_assert(rc == 0);  /* ZeroMQ fails this only out of memory */
    if (n)
        memcpy(zmq_msg_data(f), data, n);
}

/* The array frames of rp's push (with its lookup when has_lk) into f, the
 * gradient buffer handed over (rp->grads is NULL after); returns how many.
 * One packed frame (ZeroMQ writes a request of several frames in more
 * pieces, each of which can wake the PS: docs/per-core.md, the transport,
 * eleventh pass): the gradients, the bulk of it, were summed into its start
 * by the merge and go without a copy, ZeroMQ freeing the buffer when it has
 * sent it (a push is never sent again); the keys are copied behind them (a
 * lookup may be sent again alone: s_wait_lookup). A packed frame longer
 * than limits.max_message_bytes (the PS's limit on one frame) goes as
 * separate frames instead, as before packing; *packed says which. */
static size_t s_push_frames(tr_client_t *me, struct tr_rpart *rp, int has_lk, zmq_msg_t *f,
                            int *packed)
{
    size_t len[3] = {rp->push.n_keys * sizeof(uint64_t),
                     rp->push.n_keys * me->dim * sizeof(float),
                     rp->lk.n_keys * sizeof(uint64_t)};
    size_t off[3], n_f = has_lk ? 3 : 2;
    size_t total = ss_msg_pack_offsets(len, n_f, off);
    char *buf = (char *)rp->grads;
    ss_assert(off[1] == 0 && total <= s_gbuf_cap(rp->grads));
    rp->grads = NULL;
    *packed = total <= (uint64_t)me->g->cfg->max_message_bytes;
    if (!*packed) {
        s_zmsg_copy(&f[0], rp->push.keys, len[0]);
        S_HANDED_OVER(buf);
        int zrc = zmq_msg_init_data(&f[1], buf, len[1], s_free_zmsg, NULL);
        ss_assert(zrc == 0);  /* fails only for a NULL buffer */
        if (has_lk)
            s_zmsg_copy(&f[2], rp->lk.keys, len[2]);
        return n_f;
    }
    memset(buf + len[1], 0, off[0] - len[1]);  /* the padding */
    memcpy(buf + off[0], rp->push.keys, len[0]);
    if (has_lk)
        memcpy(buf + off[2], rp->lk.keys, len[2]);
    S_HANDED_OVER(buf);
    int zrc = zmq_msg_init_data(&f[0], buf, total, s_free_zmsg, NULL);
    ss_assert(zrc == 0);
    return 1;
}

/* Send shard s's request of a round: PUSH_LOOKUP, PUSH or LOOKUP. */
static int s_send_part(tr_client_t *me, size_t s, struct tr_rpart *rp, char *err,
                       size_t err_len)
{
    ss_conn_t *c = me->g->conns[s];
    int has_lk = rp->lk.n_keys > 0;
    Header h;
    if (rp->push.n_keys == 0)
        return has_lk ? s_send_lookup(me, s, rp, err, err_len) : 0;
    s_header(&h, has_lk ? MSG_TYPE__MSG_PUSH_LOOKUP : MSG_TYPE__MSG_PUSH, &rp->push);
    h.has_dim = 1;
    h.dim = me->dim;
    if (rp->lr_scale != 1.0f) {
        h.has_lr_scale = 1;
        h.lr_scale = rp->lr_scale;
    }
    if (has_lk) {
        h.n_lookup_tables = h.n_lookup_counts = rp->lk.n_runs;
        h.lookup_tables = rp->lk.tables;
        h.lookup_counts = rp->lk.counts;
    }
    zmq_msg_t f[3];
    int packed;
    size_t n_f = s_push_frames(me, rp, has_lk, f, &packed);
    h.has_packed = h.packed = packed;
    if (ss_conn_send_zmsgs(c, &h, f, n_f, has_lk ? &rp->lookup_id : &rp->push_id) != 0) {
        snprintf(err, err_len, "cannot send to %s", ss_conn_endpoint(c));
        return SS_E_NET;
    }
    rp->with_push = has_lk;
    me->stats.pushes++;
    me->stats.lookups += has_lk;
    return 0;
}

/* Send every shard's request of r; returns 0 or the first failure (r fails). */
static int s_send_round(tr_client_t *me, struct tr_round *r)
{
    for (size_t s = 0; s < me->n_shards; s++) {
        int rc = s_send_part(me, s, &r->parts[s], r->err, sizeof r->err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Pushed keys that shard s refused at capacity (the rest was applied). */
static void s_count_full(tr_client_t *me, size_t s, uint64_t n)
{
    if (me->stats.push_full == 0)
        SS_LOG(SS_LOG_WARN, "embedding PS %s is full (tables.capacity_rows): gradients of %llu "
               "new keys dropped, the rest applied", ss_conn_endpoint(me->g->conns[s]),
               (unsigned long long)n);
    me->stats.push_full++;
}

/* Wait for request id on shard s; fills reply on 0 (caller closes it). A
 * push answered "full" counts as done (logged once). SS_E_NOHELLO: the PS
 * restarted and did not serve it (the connection has said HELLO again). */
static int s_wait(tr_client_t *me, size_t s, uint64_t id, const char *what,
                  struct ss_msg *reply, char *err, size_t err_len)
{
    ss_conn_t *c = me->g->conns[s];
    char perr[512] = "";
    int rc = ss_conn_wait(c, id, -1, reply, perr, sizeof perr);
    if (rc == SS_E_PEER && reply->hdr->status == SS_E_FULL) {
        if (me->stats.push_full++ == 0)
            SS_LOG(SS_LOG_WARN, "%s", perr);
        return 0;
    }
    if (rc == SS_E_PEER && reply->hdr->status == SS_E_NOHELLO) {
        ss_msg_close(reply);
        snprintf(err, err_len, "embedding PS %s restarted: %s not served", ss_conn_endpoint(c),
                 what);
        return SS_E_NOHELLO;
    }
    if (rc == SS_E_PEER)
        ss_msg_close(reply);
    if (rc == SS_E_TIMEOUT)
        snprintf(err, err_len,
                 "embedding PS %s did not answer a %s within %lld ms "
                 "(limits.request_timeout_ms): is it running?",
                 ss_conn_endpoint(c), what, (long long)me->g->cfg->request_timeout_ms);
    else if (rc)
        snprintf(err, err_len, "embedding PS %s: %s", ss_conn_endpoint(c), perr);
    return rc;
}

/* Wait for the lookup of rp on shard s into rp->reply. When the PS does not
 * answer within request_timeout_ms of the sending, the lookup alone is sent
 * again (a push that rode with it is not: see tr_client.h) and waited for,
 * until limits.recovery_timeout_ms have passed: a PS that died and was
 * restarted by the launcher, or one that was stalled, is waited out. */
static int s_wait_lookup(tr_client_t *me, size_t s, struct tr_rpart *rp, char *err,
                         size_t err_len)
{
    const struct ss_cfg *cfg = me->g->cfg;
    uint64_t t0 = ss_now_ms();
    int rc;
    while ((rc = s_wait(me, s, rp->lookup_id, "LOOKUP", &rp->reply, err, err_len)) != 0 &&
           (rc == SS_E_TIMEOUT || rc == SS_E_NOHELLO) &&
           ss_now_ms() - t0 < (uint64_t)cfg->recovery_timeout_ms) {
        if (me->stats.lookup_retries++ % 50 == 0)
            SS_LOG(SS_LOG_WARN, "%s; retrying the lookup for up to %lld ms "
                   "(limits.recovery_timeout_ms)", err, (long long)cfg->recovery_timeout_ms);
        if (rp->with_push)
            me->stats.pushes_unconfirmed++;
        if (s_send_lookup(me, s, rp, err, err_len) != 0)
            return SS_E_NET;
    }
    if (rc == 0 && rp->with_push && rp->reply.hdr->has_n_full && rp->reply.hdr->n_full)
        s_count_full(me, s, rp->reply.hdr->n_full);
    if (rc == 0 && (rp->reply.hdr->length != rp->lk.n_keys || rp->reply.hdr->dim != me->dim)) {
        snprintf(err, err_len, "embedding PS %s answered %llu rows of dim %u, asked %zu of %u",
                 ss_conn_endpoint(me->g->conns[s]), (unsigned long long)rp->reply.hdr->length,
                 rp->reply.hdr->dim, rp->lk.n_keys, me->dim);
        ss_msg_close(&rp->reply);
        rc = SS_E_PROTO;
    }
    if (rc && rp->reply.hdr)
        ss_msg_close(&rp->reply);
    return rc;
}

/* Wait for a lone PUSH's acknowledgement on shard s. */
static int s_wait_push(tr_client_t *me, size_t s, struct tr_rpart *rp, char *err,
                       size_t err_len)
{
    struct ss_msg reply;
    int rc = s_wait(me, s, rp->push_id, "PUSH", &reply, err, err_len);
    if ((rc == SS_E_TIMEOUT || rc == SS_E_NOHELLO) && me->g->cfg->recovery_timeout_ms > 0) {
        /* not resent: a restarted PS lost it anyway, a stalled one applies it */
        if (me->stats.pushes_unconfirmed++ == 0)
            SS_LOG(SS_LOG_WARN, "%s; going on without its acknowledgement", err);
        return 0;
    }
    if (rc == 0)
        ss_msg_close(&reply);
    return rc;
}

/* Receive every reply of the sent round r (the shards were sent together:
 * each wait ends request_timeout_ms after the sending at the latest). The
 * shards are waited for last sent first: by the time its reply is in, most
 * others are too, so the thread sleeps about once a round instead of once
 * for each reply that is not in yet (replies come in about in sending
 * order). */
static int s_recv_round(tr_client_t *me, struct tr_round *r)
{
    for (size_t i = 0; i < me->n_shards; i++) {
        size_t s = me->n_shards - 1 - i;
        struct tr_rpart *rp = &r->parts[s];
        int rc = 0;
        if (rp->lookup_id)
            rc = s_wait_lookup(me, s, rp, r->err, sizeof r->err);
        else if (rp->push_id)
            rc = s_wait_push(me, s, rp, r->err, sizeof r->err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The sockets role (io_busy) */

/* Send the closed rounds, oldest first: the lock is dropped around each
 * send. A round nobody reads any more is freed once sent. Needs g->lock and
 * io_busy held by this thread. */
static void s_send_queued(tr_client_group_t *g, tr_client_t *me)
{
    ss_assert(g->io_busy);
    while (g->send_head) {
        struct tr_round *r = g->send_head;
        g->send_head = r->next;
        if (!g->send_head)
            g->send_tail = NULL;
        pthread_mutex_unlock(&g->lock);
        int rc = s_send_round(me, r);
        pthread_mutex_lock(&g->lock);
        r->rc = rc;
        r->state = rc ? TR_R_DONE : TR_R_SENT;
        if (rc)
            pthread_cond_broadcast(&g->cond);
        if (r->refs == 0)
            s_round_recycle(g, r);
    }
}

/* Take the sockets (free now): send what is queued, then, when target is
 * sent and not done, receive its replies. Gives the sockets back and wakes
 * the waiters. Needs g->lock. */
static void s_io(tr_client_group_t *g, tr_client_t *me, struct tr_round *target)
{
    ss_assert(!g->io_busy);
    g->io_busy = 1;
    s_send_queued(g, me);
    if (target && target->state == TR_R_SENT) {
        pthread_mutex_unlock(&g->lock);
        int rc = s_recv_round(me, target);
        pthread_mutex_lock(&g->lock);
        target->rc = rc;
        target->state = TR_R_DONE;
        s_send_queued(g, me);  /* rounds closed meanwhile */
    }
    g->io_busy = 0;
    pthread_cond_broadcast(&g->cond);
}

/* Wait until r is done (closing it when still open, receiving its replies
 * when nobody else is using the sockets). Returns its rc. Needs g->lock; me
 * holds a ref on r. */
static int s_await(tr_client_group_t *g, tr_client_t *me, struct tr_round *r)
{
    uint64_t t0 = ss_now_ns();
    while (r->state != TR_R_DONE) {
        if (r->state == TR_R_OPEN)
            s_close(g, me, r);
        if (!g->io_busy) {
            s_io(g, me, r);
        } else {
            int rc = pthread_cond_wait(&g->cond, &g->lock);
            ss_assert(rc == 0);
        }
    }
    me->stats.wait_ns += ss_now_ns() - t0;
    return r->rc;
}

/* Drop me's ref on *rp (set to NULL); the last one frees a done or sent
 * round. Needs g->lock. */
static void s_release(tr_client_group_t *g, struct tr_round **rp)
{
    struct tr_round *r = *rp;
    *rp = NULL;
    if (!r)
        return;
    ss_assert(r->refs > 0);
    if (--r->refs == 0 && (r->state == TR_R_SENT || r->state == TR_R_DONE))
        s_round_recycle(g, r);
}

/* How many things has me handed to the open round? Needs g->lock. */
static int s_in_open(const tr_client_group_t *g, const tr_client_t *me)
{
    int n = 0;
    for (size_t c = 0; g->open && c < g->open->n_contribs; c++)
        n += g->open->contribs[c].client == me;
    return n;
}

/* Close the open round when it still reads me's slot sl (its keys to look
 * up or its gradients), which is about to be overwritten. Needs g->lock. */
static void s_free_slot(tr_client_group_t *g, tr_client_t *me, const struct tr_slot *sl)
{
    for (size_t c = 0; g->open && c < g->open->n_contribs; c++) {
        const struct tr_contrib *ct = &g->open->contribs[c];
        if (ct->client == me && (ct->lk == sl || ct->push == sl)) {
            s_close(g, me, g->open);
            return;
        }
    }
}

/* Hand lk (keys to look up, or NULL) and push (gradients in push->grad, or
 * NULL) to the open round; returns the round (a ref held for me). A client
 * that already handed round_batches things to the open round closes it
 * first; the round closes when every client has handed it round_batches
 * things; closed rounds are sent at once when the sockets are free. Needs
 * g->lock. */
static struct tr_round *s_contribute(tr_client_group_t *g, tr_client_t *me, struct tr_slot *lk,
                                     const struct tr_slot *push)
{
    if (s_in_open(g, me) >= me->rb)
        s_close(g, me, g->open);
    if (!g->open) {
        struct tr_round *r = g->free_rounds;
        if (r)
            g->free_rounds = r->next;
        else
            r = s_round_new(g->n_shards);
        r->state = TR_R_OPEN;
        r->refs = 0;
        r->rc = 0;
        r->err[0] = 0;
        r->n_contribs = 0;
        g->open = r;
    }
    struct tr_round *r = g->open;
    if (r->n_contribs == r->contribs_cap) {
        r->contribs_cap = r->contribs_cap ? 2 * r->contribs_cap : 4;
        r->contribs = ss_realloc(r->contribs, r->contribs_cap * sizeof *r->contribs);
    }
    r->contribs[r->n_contribs++] = (struct tr_contrib){
        me, lk, push, push ? push->grad : NULL, push ? push->base : NULL, 0, 0, me->lr_scale};
    r->refs++;
    if (r->n_contribs >= (size_t)g->sum_rb)
        s_close(g, me, r);
    if (g->send_head && !g->io_busy)
        s_io(g, me, NULL);
    return r;
}

/* ------------------------------------------------------------------ */
/* A worker's client */

tr_client_t *tr_client_new(tr_client_group_t *g, uint32_t max_batch, char *err, size_t err_len)
{
    ss_assert(g && max_batch > 0);
    pthread_mutex_lock(&g->lock);
    if (!g->connected && !g->connect_rc) {
        g->connect_rc = s_connect(g, g->connect_err, sizeof g->connect_err);
        g->connected = g->connect_rc == 0;
        g->curve = NULL;  /* borrowed until here */
    }
    int rc = g->connect_rc;
    uint32_t id = g->n_ids++;
    if (rc)
        snprintf(err, err_len, "%s", g->connect_err);
    else
        g->n_clients++, g->sum_rb++;
    pthread_mutex_unlock(&g->lock);
    if (rc)
        return NULL;

    tr_client_t *self = ss_calloc(1, sizeof *self);
    self->id = id;
    self->lr_scale = 1.0f;
    uint32_t F = g->n_fields;
    size_t max_keys = (size_t)max_batch * F;
    self->g = g;
    self->n_fields = F;
    self->dim = g->dim;
    self->pooling = g->cfg->pooling_of;
    for (uint32_t f = 0; f < F; f++)
        self->scaled |= g->cfg->pooling_of[f] != SS_POOL_SUM;
    self->max_batch = max_batch;
    self->n_shards = g->n_shards;
    self->max_keys = max_keys;
    self->rb = 1;
    tr_dedup_init(&self->dedup);
    tr_dedup_begin(&self->dedup, max_batch);
    self->vptr_cap = max_keys;
    self->vrow = ss_malloc(max_keys * sizeof *self->vrow);
    self->vgrad = ss_malloc(max_keys * sizeof *self->vgrad);
    return self;
}

void tr_client_destroy(tr_client_t **self_p)
{
    tr_client_t *self = *self_p;
    if (!self)
        return;
    tr_client_group_t *g = self->g;
    pthread_mutex_lock(&g->lock);
    if (s_in_open(g, self))  /* merge it now: its buffers go away */
        s_close(g, self, g->open);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        s_release(g, &self->slots[i].round);
    s_release(g, &self->push_round);
    g->n_clients--;
    g->sum_rb -= self->rb;
    if (g->open && g->open->n_contribs > 0 && g->open->n_contribs >= (size_t)g->sum_rb)
        s_close(g, self, g->open);  /* it waited for this client only */
    if (g->send_head && !g->io_busy)
        s_io(g, self, NULL);
    pthread_mutex_unlock(&g->lock);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        s_slot_fini(&self->slots[i], self->n_shards);
    tr_dedup_fini(&self->dedup);
    ss_free(self->vrow);
    ss_free(self->vgrad);
    ss_free(self);
    *self_p = NULL;
}

/* Group the batch's keys into sl (tr_dedup_batch): each shard's key list
 * and the positions of every value, de-duplicated per field in a set small
 * enough for the L1 cache. */
static void s_dedup(tr_client_t *self, struct tr_slot *sl, const uint64_t *keys, uint32_t B)
{
    s_grow(self, sl->n_vals);
    s_slot_grow(sl, self->n_shards, sl->n_vals);
    sl->B = B;
    tr_dedup_batch(&self->dedup, keys, sl->offs, B, self->n_fields, sl->parts,
                   (uint32_t)self->n_shards, sl->pos_shard, sl->pos_index);
}

/* Group a batch's values into slot (a lookup about to start): dedup and
 * counts. Borrows offs and weights until the slot's rows are pooled and its
 * gradients pushed. */
static void s_start_lookup(tr_client_t *self, struct tr_slot *sl, const uint64_t *keys,
                           const uint32_t *offs, const float *weights, uint32_t B)
{
    ss_assert(B <= self->max_batch && !sl->round);
    ss_assert(offs && (keys || B == 0) && (weights || B == 0));
    if (!sl->parts)
        s_slot_init(sl, self->n_shards, self->max_keys, self->n_fields, self->dim);
    sl->offs = offs;
    sl->weights = weights;
    sl->n_vals = offs[(size_t)B * self->n_fields];
    s_dedup(self, sl, keys, B);  /* makes room for n_vals values in sl */
    if (self->scaled) {  /* mean/sqrtn: pool and spread with e_i = w_i / norm (tr_bag.h) */
        tr_bag_scale(offs, weights, (size_t)B * self->n_fields, self->pooling, self->n_fields,
                     sl->eff);
        sl->weights = sl->eff;
    }
    for (size_t s = 0; s < self->n_shards; s++)
        self->stats.keys_unique += sl->parts[s].n_keys;
    self->stats.keys_total += sl->n_vals;
}

int tr_client_lookup_send(tr_client_t *self, int slot, const uint64_t *keys,
                          const uint32_t *offs, const float *weights, uint32_t B, char *err,
                          size_t err_len)
{
    ss_assert(slot >= 0 && slot < TR_CLIENT_SLOTS);
    struct tr_slot *sl = &self->slots[slot];
    tr_client_group_t *g = self->g;
    (void)err, (void)err_len;  /* a failed send fails the round: seen by lookup_recv */
    pthread_mutex_lock(&g->lock);
    s_free_slot(g, self, sl);
    pthread_mutex_unlock(&g->lock);
    s_start_lookup(self, sl, keys, offs, weights, B);
    pthread_mutex_lock(&g->lock);
    sl->round = s_contribute(g, self, sl, NULL);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

/* Wait for slot sl's round; base[s]: shard s's rows in its merged reply.
 * Returns 0 (the round, of which sl holds a ref, is done: its replies stay
 * as they are) or the round's error, in err. */
static int s_await_rows(tr_client_t *self, struct tr_slot *sl, const float **base, char *err,
                        size_t err_len)
{
    tr_client_group_t *g = self->g;
    ss_assert(sl->round);
    pthread_mutex_lock(&g->lock);
    struct tr_round *r = sl->round;
    int rc = s_await(g, self, r);
    if (rc)
        snprintf(err, err_len, "%s", r->err);
    pthread_mutex_unlock(&g->lock);
    for (size_t s = 0; s < self->n_shards; s++)
        base[s] = rc == 0 && sl->parts[s].n_keys ? zmq_msg_data(&r->parts[s].reply.frames[0])
                                                  : NULL;
    return rc;
}

/* Value i's row in its shard's merged reply (base: s_await_rows). */
static inline const float *s_row_of(const tr_client_t *self, const struct tr_slot *sl,
                                    const float *const *base, size_t i)
{
    uint32_t s = sl->pos_shard[i];
    return base[s] + (size_t)sl->at[s][sl->pos_index[i]] * self->dim;
}

/* Drop sl's ref on its lookup's round, if it holds one. */
static void s_slot_release(tr_client_t *self, struct tr_slot *sl)
{
    if (!sl->round)
        return;
    pthread_mutex_lock(&self->g->lock);
    s_release(self->g, &sl->round);
    pthread_mutex_unlock(&self->g->lock);
}

int tr_client_lookup_recv(tr_client_t *self, int slot, float *emb, char *err, size_t err_len)
{
    ss_assert(slot >= 0 && slot < TR_CLIENT_SLOTS);
    struct tr_slot *sl = &self->slots[slot];
    const float *base[SS_CFG_MAX_LIST];
    /* one pass over the batch: each value's row in its shard's merged reply,
     * then each position pools its values (one value: a plain copy) */
    int rc = s_await_rows(self, sl, base, err, err_len);
    for (size_t i = 0; rc == 0 && i < sl->n_vals; i++)
        self->vrow[i] = s_row_of(self, sl, base, i);
    if (rc == 0)
        tr_bag_pool(sl->offs, sl->weights, (size_t)sl->B * self->n_fields, self->vrow,
                    self->dim, emb);
    s_slot_release(self, sl);
    return rc;
}

int tr_client_lookup_rows(tr_client_t *self, int slot, const float **rows, float *emb,
                          char *err, size_t err_len)
{
    ss_assert(slot >= 0 && slot < TR_CLIENT_SLOTS && rows && emb);
    struct tr_slot *sl = &self->slots[slot];
    const float *base[SS_CFG_MAX_LIST];
    const uint32_t *offs = sl->offs;
    size_t n_pos = (size_t)sl->B * self->n_fields;
    int rc = s_await_rows(self, sl, base, err, err_len);
    if (rc) {
        s_slot_release(self, sl);
        return rc;
    }
    /* a position of one value of weight 1 is its row: taken where it lies;
     * any other is pooled into emb as lookup_recv pools it */
    for (size_t p = 0; p < n_pos; p++) {
        if (tr_bag_plain(offs, sl->weights, p)) {
            rows[p] = s_row_of(self, sl, base, offs[p]);
            continue;
        }
        for (uint32_t i = offs[p]; i < offs[p + 1]; i++)
            self->vrow[i] = s_row_of(self, sl, base, i);
        rows[p] = emb + p * self->dim;
        tr_bag_pool(offs + p, sl->weights, 1, self->vrow, self->dim, emb + p * self->dim);
    }
    return 0;
}

void tr_client_lookup_release(tr_client_t *self, int slot)
{
    ss_assert(slot >= 0 && slot < TR_CLIENT_SLOTS);
    s_slot_release(self, &self->slots[slot]);
}

int tr_client_flush(tr_client_t *self, char *err, size_t err_len)
{
    tr_client_group_t *g = self->g;
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i <= TR_CLIENT_SLOTS; i++) {
        struct tr_round **rp = i < TR_CLIENT_SLOTS ? &self->slots[i].round : &self->push_round;
        if (!*rp)
            continue;
        int r = s_await(g, self, *rp);
        if (r && !rc) {
            rc = r;
            snprintf(err, err_len, "%s", (*rp)->err);
        }
        s_release(g, rp);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* Sum slot's per-position row gradients per unique key: shard s's summed
 * rows land at sl->grad + sl->base[s] * dim. */
static void s_sum_grads(tr_client_t *self, struct tr_slot *sl, const float *grad_emb)
{
    uint32_t dim = self->dim;
    size_t n_pos = (size_t)sl->B * self->n_fields, total = 0;
    for (size_t s = 0; s < self->n_shards; s++) {
        sl->base[s] = total;
        total += sl->parts[s].n_keys;
    }
    if (total > sl->grad_cap) {
        sl->grad_cap = total;
        sl->grad = ss_realloc(sl->grad, total * dim * sizeof(float));
    }
    memset(sl->grad, 0, total * dim * sizeof(float));
    for (size_t i = 0; i < sl->n_vals; i++)
        self->vgrad[i] = sl->grad + (sl->base[sl->pos_shard[i]] + sl->pos_index[i]) * dim;
    tr_bag_spread(sl->offs, sl->weights, n_pos, grad_emb, dim, self->vgrad);
}

int tr_client_push(tr_client_t *self, int slot, const float *grad_emb, char *err,
                   size_t err_len)
{
    return tr_client_push_lookup(self, slot, grad_emb, -1, NULL, NULL, NULL, 0, err, err_len);
}

int tr_client_push_lookup(tr_client_t *self, int push_slot, const float *grad_emb,
                          int lookup_slot, const uint64_t *keys, const uint32_t *offs,
                          const float *weights, uint32_t B, char *err, size_t err_len)
{
    tr_client_group_t *g = self->g;
    struct tr_slot *sl = &self->slots[push_slot], *lk = NULL;
    int rc = 0;
    ss_assert(push_slot >= 0 && push_slot < TR_CLIENT_SLOTS && lookup_slot != push_slot);
    ss_assert(sl->parts);  /* it was looked up */
    s_slot_release(self, sl);  /* rows of tr_client_lookup_rows still held: done with */
    if (B > 0) {
        ss_assert(lookup_slot >= 0 && lookup_slot < TR_CLIENT_SLOTS);
        lk = &self->slots[lookup_slot];
    }
    pthread_mutex_lock(&g->lock);
    s_free_slot(g, self, sl);  /* the open round may still read what they hold */
    if (lk)
        s_free_slot(g, self, lk);
    if (self->push_round)  /* a lone push before: wait for it (at most one outstanding) */
        rc = s_await(g, self, self->push_round);
    if (rc)
        snprintf(err, err_len, "%s", self->push_round->err);
    s_release(g, &self->push_round);
    pthread_mutex_unlock(&g->lock);
    if (rc)
        return rc;
    if (lk)
        s_start_lookup(self, lk, keys, offs, weights, B);
    s_sum_grads(self, sl, grad_emb);
    pthread_mutex_lock(&g->lock);
    struct tr_round *r = s_contribute(g, self, lk, sl);
    if (lk)
        lk->round = r;
    else
        self->push_round = r;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

void tr_client_set_lr_scale(tr_client_t *self, float lr_scale)
{
    ss_assert(self && lr_scale >= 0.0f && lr_scale <= 1.0f);
    self->lr_scale = lr_scale;
}

void tr_client_get_stats(const tr_client_t *self, struct tr_client_stats *st)
{
    *st = self->stats;
}

int tr_client_ahead(tr_client_t *self)
{
    tr_client_group_t *g = self->g;
    pthread_mutex_lock(&g->lock);
    g->sum_rb += g->round_batches - self->rb;
    self->rb = g->round_batches;
    pthread_mutex_unlock(&g->lock);
    return self->rb + 1;
}

int tr_client_n_slots(const tr_client_t *self)
{
    return 2 * self->rb + 1;
}
