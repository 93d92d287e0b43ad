/* tr_client.c - embedding client of one worker thread: de-duplicated
 * lookups to all shards at once, per-key summed pushes, acknowledgements.
 *
 * DESIGN: keys are walked field-major (field outer, example inner) so that
 * each shard's unique keys come out grouped by table, which is exactly the
 * (tables, counts) grouping of the LOOKUP/PUSH header. A small open
 * addressing table, stamped per batch so it never needs clearing, maps a key
 * to its (shard, index). Replies on a shard's socket are matched by request
 * id: a push acknowledgement that arrives while a lookup is awaited is
 * recorded, not dropped. */
#include "tr_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"

struct tr_shard {
    ss_conn_t *conn;         /* DEALER to the shard */
    uint64_t *keys;          /* unique keys of this batch, grouped by table */
    uint32_t *tables;        /* group tables */
    uint32_t *counts;        /* group sizes */
    size_t n_keys;           /* unique keys */
    size_t n_groups;         /* groups */
    float *grad;             /* summed gradients [n_keys * dim] */
    uint64_t lookup_id;      /* request id of the lookup awaited, 0 = none */
    uint64_t push_id;        /* request id of the unacknowledged push, 0 = none */
    uint64_t push_sent_ms;   /* when that push was sent */
};

struct dedup_slot {
    uint64_t key;            /* the key */
    uint32_t stamp;          /* batch stamp; other values mean empty */
    uint32_t shard;          /* owning shard */
    uint32_t index;          /* index in the shard's key list */
};

struct tr_client {
    const struct ss_cfg *cfg;      /* borrowed */
    uint32_t n_fields;             /* keys per example */
    uint32_t dim;                  /* floats per row */
    uint32_t max_batch;            /* largest B */
    size_t n_shards;               /* embedding shards */
    struct tr_shard *shards;       /* n_shards */
    struct dedup_slot *slots;      /* dedup table */
    size_t slot_mask;              /* capacity - 1 */
    uint32_t stamp;                /* current batch stamp */
    uint32_t *pos_shard;           /* per (b, f): shard of the key */
    uint32_t *pos_index;           /* per (b, f): index in the shard list */
    uint32_t B;                    /* examples in the last lookup */
    struct tr_client_stats stats;  /* counters */
};

tr_client_t *tr_client_new(void *zctx, const struct ss_cfg *cfg, uint32_t n_fields,
                           uint32_t max_batch, char *err, size_t err_len)
{
    tr_client_t *self = ss_calloc(1, sizeof *self);
    size_t max_keys = (size_t)max_batch * n_fields, cap = 16;
    struct ss_conn_opts opts = {cfg->max_message_bytes, cfg->request_timeout_ms};

    self->cfg = cfg;
    self->n_fields = n_fields;
    self->dim = (uint32_t)cfg->embedding_dim;
    self->max_batch = max_batch;
    self->n_shards = cfg->embedding_eps.n;
    self->shards = ss_calloc(self->n_shards, sizeof *self->shards);
    while (cap < 2 * max_keys)
        cap <<= 1;
    self->slots = ss_calloc(cap, sizeof *self->slots);
    self->slot_mask = cap - 1;
    self->pos_shard = ss_malloc(max_keys * sizeof(uint32_t));
    self->pos_index = ss_malloc(max_keys * sizeof(uint32_t));
    for (size_t s = 0; s < self->n_shards; s++) {
        struct tr_shard *sh = &self->shards[s];
        sh->keys = ss_malloc(max_keys * sizeof(uint64_t));
        sh->tables = ss_malloc(n_fields * sizeof(uint32_t));
        sh->counts = ss_malloc(n_fields * sizeof(uint32_t));
        sh->grad = ss_malloc(max_keys * self->dim * sizeof(float));
        sh->conn = ss_conn_new(zctx, cfg->embedding_eps.v[s], &opts);
        if (!sh->conn) {
            snprintf(err, err_len, "cannot connect to embedding PS %s", cfg->embedding_eps.v[s]);
            goto fail;
        }
        char herr[512] = "";
        int rc = ss_conn_hello(sh->conn, ss_cfg_cluster_hash(cfg), herr, sizeof herr);
        if (rc) {
            snprintf(err, err_len, "embedding PS %zu (%s): %s", s, cfg->embedding_eps.v[s],
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
    for (size_t s = 0; s < self->n_shards; s++) {
        struct tr_shard *sh = &self->shards[s];
        ss_conn_destroy(&sh->conn);
        ss_free(sh->keys);
        ss_free(sh->tables);
        ss_free(sh->counts);
        ss_free(sh->grad);
    }
    ss_free(self->shards);
    ss_free(self->slots);
    ss_free(self->pos_shard);
    ss_free(self->pos_index);
    ss_free(self);
    *self_p = NULL;
}

/* Group the batch's keys: fills each shard's key list and pos_*. */
static void s_dedup(tr_client_t *self, const uint64_t *keys, uint32_t B)
{
    uint32_t F = self->n_fields, n_shards = (uint32_t)self->n_shards;
    if (++self->stamp == 0) {  /* wrapped: really clear once */
        memset(self->slots, 0, (self->slot_mask + 1) * sizeof *self->slots);
        self->stamp = 1;
    }
    for (size_t s = 0; s < self->n_shards; s++)
        self->shards[s].n_keys = self->shards[s].n_groups = 0;
    for (uint32_t f = 0; f < F; f++) {
        for (uint32_t b = 0; b < B; b++) {
            uint64_t key = keys[(size_t)b * F + f];
            size_t i = ss_mix64(key) & self->slot_mask;
            while (self->slots[i].stamp == self->stamp && self->slots[i].key != key)
                i = (i + 1) & self->slot_mask;
            struct dedup_slot *slot = &self->slots[i];
            if (slot->stamp != self->stamp) {
                uint32_t s = n_shards > 1 ? ss_key_shard(key, n_shards) : 0;
                struct tr_shard *sh = &self->shards[s];
                if (sh->n_groups == 0 || sh->tables[sh->n_groups - 1] != f) {
                    sh->tables[sh->n_groups] = f;
                    sh->counts[sh->n_groups++] = 0;
                }
                sh->counts[sh->n_groups - 1]++;
                sh->keys[sh->n_keys] = key;
                *slot = (struct dedup_slot){key, self->stamp, s, (uint32_t)sh->n_keys++};
            }
            self->pos_shard[(size_t)b * F + f] = slot->shard;
            self->pos_index[(size_t)b * F + f] = slot->index;
        }
    }
}

static void s_header(Header *h, int type, struct tr_shard *sh)
{
    header__init(h);
    h->type = (MsgType)type;
    h->n_tables = sh->n_groups;
    h->tables = sh->tables;
    h->n_counts = sh->n_groups;
    h->counts = sh->counts;
}

/* Handle one reply of shard sh; sets *got_lookup when it was the awaited
 * lookup (then *reply stays open for the caller). */
static int s_take_reply(tr_client_t *self, struct tr_shard *sh, struct ss_msg *reply,
                        int *got_lookup, char *err, size_t err_len)
{
    char perr[512];
    uint64_t id = reply->hdr->req_id;
    int rc = ss_msg_check(reply, 1, perr, sizeof perr);
    int status = reply->hdr->has_status ? reply->hdr->status : 0;
    if (rc == 0 && status != 0 && !(id == sh->push_id && status == SS_E_FULL))
        rc = SS_E_PEER, snprintf(perr, sizeof perr, "%s",
                                 reply->hdr->error ? reply->hdr->error : ss_strerror(status));
    if (id == sh->push_id && id) {
        sh->push_id = 0;
        if (status == SS_E_FULL && self->stats.push_full++ == 0)
            SS_LOG(SS_LOG_WARN, "embedding PS %s: %s", ss_conn_endpoint(sh->conn),
                   reply->hdr->error ? reply->hdr->error : "full");
    } else if (id == sh->lookup_id && id) {
        sh->lookup_id = 0;
        *got_lookup = rc == 0;
    } else {
        ss_msg_close(reply);
        return 0;  /* stale */
    }
    if (rc) {
        snprintf(err, err_len, "embedding PS %s: %s", ss_conn_endpoint(sh->conn), perr);
        ss_msg_close(reply);
        return rc;
    }
    if (!*got_lookup)
        ss_msg_close(reply);
    return 0;
}

/* Wait on sh until its lookup reply (want_lookup) or push ack is in.
 * On a lookup, *reply is filled and open. */
static int s_wait(tr_client_t *self, struct tr_shard *sh, int want_lookup, struct ss_msg *reply,
                  char *err, size_t err_len)
{
    uint64_t t0 = ss_now_ns();
    uint64_t deadline = ss_now_ms() + (uint64_t)self->cfg->request_timeout_ms;
    void *sock = ss_conn_socket(sh->conn);
    int rc = 0, last_look = 0;
    while (want_lookup ? sh->lookup_id != 0 : sh->push_id != 0) {
        int64_t left = (int64_t)(deadline - ss_now_ms());
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, left > 0 ? left : 0);
        if (n < 0 && zmq_errno() == EINTR)
            continue;
        if (n == 0 && !last_look) {
            /* one last look: when this process was stopped (SIGSTOP) or
             * starved, the answer may be waiting in the kernel already */
            last_look = 1;
            deadline = ss_now_ms() + 300;
            continue;
        }
        if (n <= 0) {
            snprintf(err, err_len,
                     "embedding PS %s did not answer a %s within %lld ms "
                     "(limits.request_timeout_ms): is it running?",
                     ss_conn_endpoint(sh->conn), want_lookup ? "LOOKUP" : "PUSH",
                     (long long)self->cfg->request_timeout_ms);
            rc = SS_E_TIMEOUT;
            break;
        }
        char perr[512];
        int got = 0;
        if (ss_msg_recv(sock, ZMQ_DONTWAIT, NULL, NULL, reply, perr, sizeof perr) != 0)
            continue;
        if ((rc = s_take_reply(self, sh, reply, &got, err, err_len)) != 0)
            break;
        if (got && !want_lookup)
            ss_msg_close(reply);
    }
    self->stats.wait_ns += ss_now_ns() - t0;
    return rc;
}

int tr_client_lookup(tr_client_t *self, const uint64_t *keys, uint32_t B, float *emb, char *err,
                     size_t err_len)
{
    uint32_t F = self->n_fields, dim = self->dim;
    int rc = 0;
    ss_assert(B <= self->max_batch);
    s_dedup(self, keys, B);
    self->B = B;
    for (size_t s = 0; s < self->n_shards; s++) {
        struct tr_shard *sh = &self->shards[s];
        Header h;
        if (sh->n_keys == 0)
            continue;
        s_header(&h, MSG_TYPE__MSG_LOOKUP, sh);
        struct ss_frame f = {sh->keys, sh->n_keys * sizeof(uint64_t)};
        if ((rc = ss_conn_send(sh->conn, &h, &f, 1, &sh->lookup_id)) != 0) {
            snprintf(err, err_len, "cannot send to %s", ss_conn_endpoint(sh->conn));
            return rc;
        }
        self->stats.lookups++;
        self->stats.keys_unique += sh->n_keys;
    }
    self->stats.keys_total += (uint64_t)B * F;
    struct ss_msg replies[SS_CFG_MAX_LIST];
    const float *rows[SS_CFG_MAX_LIST] = {0};
    memset(replies, 0, self->n_shards * sizeof replies[0]);
    for (size_t s = 0; s < self->n_shards && rc == 0; s++) {
        struct tr_shard *sh = &self->shards[s];
        if (sh->n_keys == 0)
            continue;
        if ((rc = s_wait(self, sh, 1, &replies[s], err, err_len)) != 0)
            break;
        if (replies[s].hdr->length != sh->n_keys || replies[s].hdr->dim != dim) {
            snprintf(err, err_len, "embedding PS %s answered %llu rows of dim %u, asked %zu of %u",
                     ss_conn_endpoint(sh->conn), (unsigned long long)replies[s].hdr->length,
                     replies[s].hdr->dim, sh->n_keys, dim);
            rc = SS_E_PROTO;
            break;
        }
        rows[s] = zmq_msg_data(&replies[s].frames[0]);
    }
    /* one pass over the batch: each position copies its row from its shard */
    for (size_t p = 0; rc == 0 && p < (size_t)B * F; p++)
        memcpy(emb + p * dim, rows[self->pos_shard[p]] + (size_t)self->pos_index[p] * dim,
               dim * sizeof(float));
    for (size_t s = 0; s < self->n_shards; s++)
        if (replies[s].hdr)
            ss_msg_close(&replies[s]);
    return rc;
}

int tr_client_flush(tr_client_t *self, char *err, size_t err_len)
{
    for (size_t s = 0; s < self->n_shards; s++) {
        struct ss_msg reply;
        int rc = s_wait(self, &self->shards[s], 0, &reply, err, err_len);
        if (rc)
            return rc;
    }
    return 0;
}

int tr_client_push(tr_client_t *self, const float *grad_emb, char *err, size_t err_len)
{
    uint32_t dim = self->dim;
    size_t n_pos = (size_t)self->B * self->n_fields;
    int rc = tr_client_flush(self, err, err_len);
    if (rc)
        return rc;
    for (size_t s = 0; s < self->n_shards; s++)
        memset(self->shards[s].grad, 0, self->shards[s].n_keys * dim * sizeof(float));
    for (size_t p = 0; p < n_pos; p++) {
        float *g = self->shards[self->pos_shard[p]].grad + (size_t)self->pos_index[p] * dim;
        const float *src = grad_emb + p * dim;
        for (uint32_t d = 0; d < dim; d++)
            g[d] += src[d];
    }
    for (size_t s = 0; s < self->n_shards; s++) {
        struct tr_shard *sh = &self->shards[s];
        Header h;
        if (sh->n_keys == 0)
            continue;
        s_header(&h, MSG_TYPE__MSG_PUSH, sh);
        h.has_dim = 1;
        h.dim = dim;
        struct ss_frame f[2] = {{sh->keys, sh->n_keys * sizeof(uint64_t)},
                                {sh->grad, sh->n_keys * dim * sizeof(float)}};
        if ((rc = ss_conn_send(sh->conn, &h, f, 2, &sh->push_id)) != 0) {
            snprintf(err, err_len, "cannot send to %s", ss_conn_endpoint(sh->conn));
            return rc;
        }
        self->stats.pushes++;
    }
    return 0;
}

void tr_client_get_stats(const tr_client_t *self, struct tr_client_stats *st)
{
    *st = self->stats;
}
