/* tr_client.c - embedding client of one worker thread: de-duplicated
 * lookups to all shards at once, per-key summed pushes, acknowledgements.
 *
 * DESIGN: keys are walked field-major (field outer, example inner, then the
 * field's values) so that each shard's unique keys come out grouped by
 * table, which is exactly the (tables, counts) grouping of the LOOKUP/PUSH
 * header. Keys are de-duplicated per field (a table's keys are its own:
 * ss_key_make mixes the table into the key) in a key set emptied in O(1)
 * (tr_dedup.h) that is small enough to stay in the L1 cache; it maps a key
 * to its first value, whose (shard, index) the later ones copy. Each batch slot keeps
 * its own key lists and positions (one per value), so a lookup of the next
 * batch can be in flight while the current one is pushed. Buffers sized per
 * value grow when a batch holds more values than any before (multi-valued
 * fields). Replies are matched by request id in ss_conn_wait(), which keeps
 * the answers that arrive before they are awaited. */
#include "tr_client.h"

#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"
#include "tr_bag.h"
#include "tr_dedup.h"

/* One shard's part of one batch. */
struct tr_part {
    uint64_t *keys;          /* unique keys, grouped by table */
    uint32_t *tables;        /* group tables */
    uint32_t *counts;        /* group sizes */
    size_t n_keys;           /* unique keys */
    size_t n_groups;         /* groups */
    uint64_t lookup_id;      /* request id of its lookup, 0 = none in flight */
    int with_push;           /* that request is a PUSH_LOOKUP */
};

/* One batch in flight. */
struct tr_slot {
    struct tr_part *parts;   /* one per shard */
    uint32_t *pos_shard;     /* per value: shard of the key */
    uint32_t *pos_index;     /* per value: index in the shard's list */
    size_t cap;              /* values the arrays above (and parts' keys) hold */
    const uint32_t *offs;    /* borrowed CSR offsets of the batch (B * n_fields + 1) */
    const float *weights;    /* value weights pooled with: the borrowed ones (sum), or eff */
    float *eff;              /* [cap] effective weights of mean/sqrtn fields (tr_bag_scale) */
    size_t n_vals;           /* values in the batch */
    uint32_t B;              /* examples */
};

struct tr_client {
    const struct ss_cfg *cfg;      /* borrowed */
    uint32_t n_fields;             /* keys per example */
    uint32_t dim;                  /* floats per row */
    const uint8_t *pooling;        /* [n_fields] enum ss_pooling per field, in cfg */
    int scaled;                    /* some field is not sum-pooled: weights go through eff */
    uint32_t max_batch;            /* largest B */
    size_t n_shards;               /* embedding shards */
    ss_conn_t **conns;             /* one DEALER per shard */
    uint64_t *push_id;             /* per shard: unacknowledged push, 0 = none */
    float *grad;                   /* summed gradients, all shards [grad_cap * dim] */
    size_t grad_cap;               /* unique keys grad holds */
    const float **vrow;            /* per value: its row in a LOOKUP reply */
    float **vgrad;                 /* per value: its summed gradient row in grad */
    size_t vptr_cap;               /* entries of vrow and vgrad */
    struct tr_slot slots[TR_CLIENT_SLOTS]; /* batches */
    struct tr_dedup dedup;         /* one field's keys of the batch being grouped */
    struct tr_client_stats stats;  /* counters */
    int read_only;                 /* LOOKUPs are read-only (scoring) */
};

static void s_slot_init(struct tr_slot *sl, size_t n_shards, size_t max_keys, uint32_t F)
{
    sl->parts = ss_calloc(n_shards, sizeof *sl->parts);
    sl->pos_shard = ss_malloc(max_keys * sizeof(uint32_t));
    sl->pos_index = ss_malloc(max_keys * sizeof(uint32_t));
    sl->eff = ss_malloc(max_keys * sizeof(float));
    sl->cap = max_keys;
    for (size_t s = 0; s < n_shards; s++) {
        sl->parts[s].keys = ss_malloc(max_keys * sizeof(uint64_t));
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
    for (size_t s = 0; s < n_shards; s++)
        sl->parts[s].keys = ss_realloc(sl->parts[s].keys, sl->cap * sizeof(uint64_t));
}

static void s_slot_fini(struct tr_slot *sl, size_t n_shards)
{
    for (size_t s = 0; sl->parts && s < n_shards; s++) {
        ss_free(sl->parts[s].keys);
        ss_free(sl->parts[s].tables);
        ss_free(sl->parts[s].counts);
    }
    ss_free(sl->parts);
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

tr_client_t *tr_client_new(void *zctx, const struct ss_cfg *cfg, const ss_cluster_t *cluster,
                           const struct ss_curve *curve, uint32_t n_fields, uint32_t max_batch,
                           char *err, size_t err_len)
{
    tr_client_t *self = ss_calloc(1, sizeof *self);
    size_t max_keys = (size_t)max_batch * n_fields;
    struct ss_conn_opts opts = {.max_message_bytes = cfg->max_message_bytes,
                                .timeout_ms = cfg->request_timeout_ms,
                                .curve = curve,
                                .max_in_flight = cfg->security.max_in_flight};

    self->cfg = cfg;
    self->n_fields = n_fields;
    self->dim = ss_cfg_row_dim(cfg);
    ss_assert(n_fields <= SS_CFG_MAX_FIELDS);
    self->pooling = cfg->pooling_of;
    for (uint32_t f = 0; f < n_fields; f++)
        self->scaled |= cfg->pooling_of[f] != SS_POOL_SUM;
    self->max_batch = max_batch;
    self->n_shards = ss_cluster_count(cluster, SS_CLUSTER_EMBEDDING);
    self->conns = ss_calloc(self->n_shards, sizeof *self->conns);
    self->push_id = ss_calloc(self->n_shards, sizeof *self->push_id);
    self->grad_cap = max_keys;
    self->grad = ss_malloc(max_keys * self->dim * sizeof(float));
    tr_dedup_init(&self->dedup);
    tr_dedup_begin(&self->dedup, max_batch);
    self->vptr_cap = max_keys;
    self->vrow = ss_malloc(max_keys * sizeof *self->vrow);
    self->vgrad = ss_malloc(max_keys * sizeof *self->vgrad);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        s_slot_init(&self->slots[i], self->n_shards, max_keys, n_fields);
    for (size_t s = 0; s < self->n_shards; s++) {
        char herr[512] = "";
        char ep_buf[SS_CLUSTER_EP_MAX];  /* a service thread's endpoint (ss_cluster.h) */
        const char *ep = ss_cluster_ps_endpoint(cluster, SS_CLUSTER_EMBEDDING, s,
                                                ss_cluster_next_slot(cluster), ep_buf,
                                                sizeof ep_buf);
        self->conns[s] = ss_conn_new(zctx, ep, &opts);
        if (!self->conns[s]) {
            snprintf(err, err_len, "cannot connect to embedding PS %s", ep);
            goto fail;
        }
        int rc = ss_conn_hello(self->conns[s],
                               ss_cluster_hello_hash(cluster, SS_CLUSTER_EMBEDDING, s), herr,
                               sizeof herr);
        if (rc) {
            snprintf(err, err_len, "embedding PS %zu (%s): %s", s, ep,
                     rc == SS_E_TIMEOUT ? "does not answer (is it running? see its log)"
                                        : herr);
            goto fail;
        }
    }
    return self;
fail:
    tr_client_destroy(&self);
    return NULL;
}

void tr_client_destroy(tr_client_t **self_p)
{
    tr_client_t *self = *self_p;
    if (!self)
        return;
    for (size_t s = 0; s < self->n_shards; s++)
        ss_conn_destroy(&self->conns[s]);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        s_slot_fini(&self->slots[i], self->n_shards);
    ss_free(self->conns);
    ss_free(self->push_id);
    ss_free(self->grad);
    tr_dedup_fini(&self->dedup);
    ss_free(self->vrow);
    ss_free(self->vgrad);
    ss_free(self);
    *self_p = NULL;
}

/* Values of field f in the batch. */
static size_t s_field_values(const struct tr_slot *sl, uint32_t F, uint32_t f)
{
    size_t n = 0;
    for (uint32_t b = 0; b < sl->B; b++)
        n += sl->offs[(size_t)b * F + f + 1] - sl->offs[(size_t)b * F + f];
    return n;
}

/* A new key of field f at value i: append it to its shard's list (a new
 * group when the list's last group is another table) and record where. */
static void s_place_new(tr_client_t *self, struct tr_slot *sl, uint64_t key, uint32_t f,
                        size_t i)
{
    uint32_t n_shards = (uint32_t)self->n_shards;
    uint32_t s = n_shards > 1 ? ss_key_shard(key, n_shards) : 0;
    struct tr_part *p = &sl->parts[s];
    if (p->n_groups == 0 || p->tables[p->n_groups - 1] != f) {
        p->tables[p->n_groups] = f;
        p->counts[p->n_groups++] = 0;
    }
    p->counts[p->n_groups - 1]++;
    p->keys[p->n_keys] = key;
    sl->pos_shard[i] = s;
    sl->pos_index[i] = (uint32_t)p->n_keys++;
}

/* Group the batch's keys into sl: each shard's key list and the positions
 * of every value. A key repeated within a field takes its first value's
 * place; fields are de-duplicated apart (their keys differ: ss_key_make),
 * each in a set small enough for the L1 cache. */
static void s_dedup(tr_client_t *self, struct tr_slot *sl, const uint64_t *keys, uint32_t B)
{
    uint32_t F = self->n_fields;
    s_grow(self, sl->n_vals);
    s_slot_grow(sl, self->n_shards, sl->n_vals);
    for (size_t s = 0; s < self->n_shards; s++)
        sl->parts[s].n_keys = sl->parts[s].n_groups = 0;
    sl->B = B;
    for (uint32_t f = 0; f < F; f++) {
        tr_dedup_begin(&self->dedup, s_field_values(sl, F, f));
        for (uint32_t b = 0; b < B; b++) {
            size_t p = (size_t)b * F + f;
            for (uint32_t i = sl->offs[p]; i < sl->offs[p + 1]; i++) {
                uint32_t first = tr_dedup_insert(&self->dedup, keys[i], i);
                if (first == i) {
                    s_place_new(self, sl, keys[i], f, i);
                } else {
                    sl->pos_shard[i] = sl->pos_shard[first];
                    sl->pos_index[i] = sl->pos_index[first];
                }
            }
        }
    }
}

static void s_header(Header *h, int type, const struct tr_part *p)
{
    header__init(h);
    h->type = (MsgType)type;
    h->n_tables = p->n_groups;
    h->tables = (uint32_t *)p->tables;
    h->n_counts = p->n_groups;
    h->counts = (uint32_t *)p->counts;
}

void tr_client_set_read_only(tr_client_t *self, int on)
{
    ss_assert(self);
    self->read_only = !!on;
}

/* Pushed keys that shard s refused at capacity (the rest was applied). */
static void s_count_full(tr_client_t *self, size_t s, uint64_t n)
{
    if (self->stats.push_full == 0)
        SS_LOG(SS_LOG_WARN, "embedding PS %s is full (tables.capacity_rows): gradients of %llu "
               "new keys dropped, the rest applied", ss_conn_endpoint(self->conns[s]),
               (unsigned long long)n);
    self->stats.push_full++;
}

/* Wait for request id on shard s; fills reply on 0 (caller closes it). A
 * push answered "full" counts as done (logged once). SS_E_NOHELLO: the PS
 * restarted and did not serve it (the connection has said HELLO again). */
static int s_wait(tr_client_t *self, size_t s, uint64_t id, const char *what,
                  struct ss_msg *reply, char *err, size_t err_len)
{
    char perr[512] = "";
    uint64_t t0 = ss_now_ns();
    int rc = ss_conn_wait(self->conns[s], id, -1, reply, perr, sizeof perr);
    self->stats.wait_ns += ss_now_ns() - t0;
    if (rc == SS_E_PEER && reply->hdr->status == SS_E_FULL) {
        if (self->stats.push_full++ == 0)
            SS_LOG(SS_LOG_WARN, "%s", perr);
        return 0;
    }
    if (rc == SS_E_PEER && reply->hdr->status == SS_E_NOHELLO) {
        ss_msg_close(reply);
        snprintf(err, err_len, "embedding PS %s restarted: %s not served",
                 ss_conn_endpoint(self->conns[s]), what);
        return SS_E_NOHELLO;
    }
    if (rc == SS_E_PEER)
        ss_msg_close(reply);
    if (rc == SS_E_TIMEOUT)
        snprintf(err, err_len,
                 "embedding PS %s did not answer a %s within %lld ms "
                 "(limits.request_timeout_ms): is it running?",
                 ss_conn_endpoint(self->conns[s]), what,
                 (long long)self->cfg->request_timeout_ms);
    else if (rc)
        snprintf(err, err_len, "embedding PS %s: %s", ss_conn_endpoint(self->conns[s]), perr);
    return rc;
}

/* Send one request to shard s; sets *id. Returns 0 or SS_E_NET with err. */
static int s_send(tr_client_t *self, size_t s, Header *h, const struct ss_frame *f, size_t n_f,
                  uint64_t *id, char *err, size_t err_len)
{
    if (ss_conn_send(self->conns[s], h, f, n_f, id) == 0)
        return 0;
    snprintf(err, err_len, "cannot send to %s", ss_conn_endpoint(self->conns[s]));
    return SS_E_NET;
}

/* Send part p's keys to shard s as a plain LOOKUP; sets p->lookup_id. */
static int s_send_lookup(tr_client_t *self, size_t s, struct tr_part *p, char *err,
                         size_t err_len)
{
    Header h;
    s_header(&h, MSG_TYPE__MSG_LOOKUP, p);
    h.has_read_only = h.read_only = self->read_only;
    struct ss_frame f = {p->keys, p->n_keys * sizeof(uint64_t)};
    if (s_send(self, s, &h, &f, 1, &p->lookup_id, err, err_len) != 0)
        return SS_E_NET;
    p->with_push = 0;
    self->stats.lookups++;
    return 0;
}

/* Group a batch's values into slot (a lookup about to start): dedup and
 * counts. Borrows offs and weights until the slot's rows are pooled and its
 * gradients pushed. */
static void s_start_lookup(tr_client_t *self, struct tr_slot *sl, const uint64_t *keys,
                           const uint32_t *offs, const float *weights, uint32_t B)
{
    ss_assert(B <= self->max_batch);
    ss_assert(offs && (keys || B == 0) && (weights || B == 0));
    sl->offs = offs;
    sl->weights = weights;
    sl->n_vals = offs[(size_t)B * self->n_fields];
    s_dedup(self, sl, keys, B);  /* makes room for n_vals values in sl */
    if (self->scaled) {  /* mean/sqrtn: pool and spread with e_i = w_i / norm (tr_bag.h) */
        tr_bag_scale(offs, weights, (size_t)B * self->n_fields, self->pooling, self->n_fields,
                     sl->eff);
        sl->weights = sl->eff;
    }
    for (size_t s = 0; s < self->n_shards; s++) {
        sl->parts[s].lookup_id = 0;
        self->stats.keys_unique += sl->parts[s].n_keys;
    }
    self->stats.keys_total += sl->n_vals;
}

/* Wait for the lookup in flight of part p on shard s. When the PS does not
 * answer within request_timeout_ms, the lookup alone is sent again (a push
 * that rode with it is not: see tr_client.h) and waited for, until
 * limits.recovery_timeout_ms have passed: a PS that died and was restarted
 * by the launcher, or one that was stalled, is waited out. */
static int s_wait_lookup(tr_client_t *self, size_t s, struct tr_part *p, struct ss_msg *reply,
                         char *err, size_t err_len)
{
    uint64_t t0 = ss_now_ms();
    int rc;
    while ((rc = s_wait(self, s, p->lookup_id, "LOOKUP", reply, err, err_len)) != 0 &&
           (rc == SS_E_TIMEOUT || rc == SS_E_NOHELLO) &&
           ss_now_ms() - t0 < (uint64_t)self->cfg->recovery_timeout_ms) {
        if (self->stats.lookup_retries++ % 50 == 0)
            SS_LOG(SS_LOG_WARN, "%s; retrying the lookup for up to %lld ms "
                   "(limits.recovery_timeout_ms)", err,
                   (long long)self->cfg->recovery_timeout_ms);
        if (p->with_push)
            self->stats.pushes_unconfirmed++;
        if (s_send_lookup(self, s, p, err, err_len) != 0)
            return SS_E_NET;
    }
    if (rc == 0 && p->with_push && reply->hdr->has_n_full && reply->hdr->n_full)
        s_count_full(self, s, reply->hdr->n_full);
    return rc;
}

int tr_client_lookup_send(tr_client_t *self, int slot, const uint64_t *keys,
                          const uint32_t *offs, const float *weights, uint32_t B, char *err,
                          size_t err_len)
{
    struct tr_slot *sl = &self->slots[slot];
    ss_assert(slot >= 0 && slot < TR_CLIENT_SLOTS);
    s_start_lookup(self, sl, keys, offs, weights, B);
    for (size_t s = 0; s < self->n_shards; s++)
        if (sl->parts[s].n_keys && s_send_lookup(self, s, &sl->parts[s], err, err_len) != 0)
            return SS_E_NET;
    return 0;
}

int tr_client_lookup_recv(tr_client_t *self, int slot, float *emb, char *err, size_t err_len)
{
    struct tr_slot *sl = &self->slots[slot];
    uint32_t dim = self->dim;
    struct ss_msg replies[SS_CFG_MAX_LIST];
    const float *rows[SS_CFG_MAX_LIST] = {0};
    int rc = 0;
    memset(replies, 0, self->n_shards * sizeof replies[0]);
    for (size_t s = 0; s < self->n_shards && rc == 0; s++) {
        struct tr_part *p = &sl->parts[s];
        if (p->n_keys == 0)
            continue;
        rc = s_wait_lookup(self, s, p, &replies[s], err, err_len);
        p->lookup_id = 0;
        if (rc)
            break;
        if (replies[s].hdr->length != p->n_keys || replies[s].hdr->dim != dim) {
            snprintf(err, err_len, "embedding PS %s answered %llu rows of dim %u, asked %zu of %u",
                     ss_conn_endpoint(self->conns[s]),
                     (unsigned long long)replies[s].hdr->length, replies[s].hdr->dim, p->n_keys,
                     dim);
            rc = SS_E_PROTO;
            break;
        }
        rows[s] = zmq_msg_data(&replies[s].frames[0]);
    }
    /* one pass over the batch: each value's row in its shard's reply, then
     * each position pools its values (one value: a plain copy) */
    for (size_t i = 0; rc == 0 && i < sl->n_vals; i++)
        self->vrow[i] = rows[sl->pos_shard[i]] + (size_t)sl->pos_index[i] * dim;
    if (rc == 0)
        tr_bag_pool(sl->offs, sl->weights, (size_t)sl->B * self->n_fields, self->vrow, dim,
                    emb);
    for (size_t s = 0; s < self->n_shards; s++)
        if (replies[s].hdr)
            ss_msg_close(&replies[s]);
    return rc;
}

/* Wait for every lone PUSH's acknowledgement. */
static int s_wait_pushes(tr_client_t *self, char *err, size_t err_len)
{
    for (size_t s = 0; s < self->n_shards; s++) {
        struct ss_msg reply;
        if (!self->push_id[s])
            continue;
        int rc = s_wait(self, s, self->push_id[s], "PUSH", &reply, err, err_len);
        self->push_id[s] = 0;
        if ((rc == SS_E_TIMEOUT || rc == SS_E_NOHELLO) && self->cfg->recovery_timeout_ms > 0) {
            /* not resent: a restarted PS lost it anyway, a stalled one applies it */
            if (self->stats.pushes_unconfirmed++ == 0)
                SS_LOG(SS_LOG_WARN, "%s; going on without its acknowledgement", err);
            continue;
        }
        if (rc)
            return rc;
        ss_msg_close(&reply);
    }
    return 0;
}

int tr_client_flush(tr_client_t *self, char *err, size_t err_len)
{
    int rc = s_wait_pushes(self, err, err_len);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        for (size_t s = 0; s < self->n_shards; s++) {
            struct tr_part *p = &self->slots[i].parts[s];
            struct ss_msg reply;
            if (!p->lookup_id)
                continue;
            int r = s_wait_lookup(self, s, p, &reply, err, err_len);
            p->lookup_id = 0;
            if (r == 0)
                ss_msg_close(&reply);
            rc = rc ? rc : r;
        }
    return rc;
}

/* Sum slot's per-position row gradients per unique key: shard s's summed
 * rows land at self->grad + base[s] * dim. */
static void s_sum_grads(tr_client_t *self, const struct tr_slot *sl, const float *grad_emb,
                        size_t *base)
{
    uint32_t dim = self->dim;
    size_t n_pos = (size_t)sl->B * self->n_fields, total = 0;
    for (size_t s = 0; s < self->n_shards; s++) {
        base[s] = total;
        total += sl->parts[s].n_keys;
    }
    if (total > self->grad_cap) {
        self->grad_cap = total;
        self->grad = ss_realloc(self->grad, total * dim * sizeof(float));
    }
    memset(self->grad, 0, total * dim * sizeof(float));
    for (size_t i = 0; i < sl->n_vals; i++)
        self->vgrad[i] = self->grad + (base[sl->pos_shard[i]] + sl->pos_index[i]) * dim;
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
    struct tr_slot *sl = &self->slots[push_slot], *lk = NULL;
    uint32_t dim = self->dim;
    size_t base[SS_CFG_MAX_LIST];
    int rc = s_wait_pushes(self, err, err_len);
    if (rc)
        return rc;
    ss_assert(push_slot >= 0 && push_slot < TR_CLIENT_SLOTS && lookup_slot != push_slot);
    if (B > 0) {
        lk = &self->slots[lookup_slot];
        s_start_lookup(self, lk, keys, offs, weights, B);
    }
    s_sum_grads(self, sl, grad_emb, base);
    for (size_t s = 0; s < self->n_shards; s++) {
        const struct tr_part *p = &sl->parts[s];
        struct tr_part *q = lk ? &lk->parts[s] : NULL;
        int has_q = q && q->n_keys > 0;
        Header h;
        if (p->n_keys == 0) {  /* nothing to push here: a plain lookup */
            if (has_q && s_send_lookup(self, s, q, err, err_len) != 0)
                return SS_E_NET;
            continue;
        }
        s_header(&h, has_q ? MSG_TYPE__MSG_PUSH_LOOKUP : MSG_TYPE__MSG_PUSH, p);
        h.has_dim = 1;
        h.dim = dim;
        struct ss_frame f[3] = {{p->keys, p->n_keys * sizeof(uint64_t)},
                                {self->grad + base[s] * dim, p->n_keys * dim * sizeof(float)},
                                {has_q ? q->keys : NULL, has_q ? q->n_keys * sizeof(uint64_t) : 0}};
        if (has_q) {
            h.n_lookup_tables = h.n_lookup_counts = q->n_groups;
            h.lookup_tables = q->tables;
            h.lookup_counts = q->counts;
        }
        if (s_send(self, s, &h, f, has_q ? 3 : 2, has_q ? &q->lookup_id : &self->push_id[s], err,
                   err_len) != 0)
            return SS_E_NET;
        self->stats.pushes++;
        self->stats.lookups += has_q;
        if (has_q)
            q->with_push = 1;
    }
    return 0;
}

void tr_client_get_stats(const tr_client_t *self, struct tr_client_stats *st)
{
    *st = self->stats;
}
