/* tr_client.h - a worker thread's client of the embedding parameter servers.
 *
 * One client per worker thread: it owns one DEALER connection to every
 * embedding shard. A lookup de-duplicates the batch's keys, sends one LOOKUP
 * per shard (all in flight at once), and pools the returned rows into the
 * per-example embedding inputs, one per field (a field may hold several
 * weighted values, combined as cfg's model.pooling / model.field_pooling
 * say: tr_bag.h). A push spreads each field's gradient over its values
 * with the same effective weights, sums the gradients per unique key of
 * that batch's lookup and sends one PUSH per shard without waiting; the
 * acknowledgements are collected before the next push (so at most one push
 * per shard is outstanding and nothing is left unconfirmed).
 *
 * Three batch slots let a worker keep the lookups of batches k+1 and k+2 in
 * flight while it computes batch k: after computing k it sends, per shard,
 * one PUSH_LOOKUP with the gradients of k and the keys of k+2
 * (tr_client_push_lookup()), which halves the messages of a separate push
 * and lookup. The rows of batch k+2 then hold the push of k but may miss
 * that of k+1: one batch of staleness, as any asynchronous PS allows. A
 * push is acknowledged by the reply to its PUSH_LOOKUP (received with the
 * rows of k+2) or, where a shard has nothing to look up, by a PUSH reply.
 *
 * Recovery: a lookup that gets no answer within limits.request_timeout_ms is
 * sent again, alone, until limits.recovery_timeout_ms have passed, so a PS
 * that dies and is restarted from its checkpoint (or one that stalls) is
 * waited out. Pushes are never sent twice: one whose answer never came is
 * counted in pushes_unconfirmed (a restarted PS lost it with every update
 * since its checkpoint; a stalled one applies it when it wakes). A restarted
 * PS answers the first requests of an old connection SS_E_NOHELLO (it has not
 * heard its HELLO): the connection says HELLO again (ss_net.h), the lookup is
 * sent again at once and a push that rode with it is counted unconfirmed. */
#ifndef TR_CLIENT_H
#define TR_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"

#define TR_CLIENT_SLOTS 3

typedef struct tr_client tr_client_t;

/* Client statistics, for progress lines and results. */
struct tr_client_stats {
    uint64_t lookups;          /* LOOKUP requests sent */
    uint64_t pushes;           /* PUSH requests sent */
    uint64_t keys_unique;      /* unique keys looked up */
    uint64_t keys_total;       /* keys before de-duplication */
    uint64_t push_full;        /* pushes answered "shard full" */
    uint64_t lookup_retries;   /* lookups sent again to a PS that did not answer */
    uint64_t pushes_unconfirmed; /* pushes never acknowledged (PS restarted or stalled) */
    uint64_t wait_ns;          /* time spent waiting for replies */
};

struct ss_curve;

/* Connect to every embedding shard the cluster lists (borrowed for the
 * client's life) and say HELLO. n_fields positions per
 * example, field f uses table f; max_batch examples per batch at most.
 * curve: CURVE client keys (ss_auth.h), NULL or off for plain sockets;
 * borrowed for the call. Returns NULL with err naming the endpoint that
 * failed. Thread: the worker thread that will use it (ZeroMQ sockets stay
 * there). */
tr_client_t *tr_client_new(void *zctx, const struct ss_cfg *cfg, const ss_cluster_t *cluster,
                           const struct ss_curve *curve, uint32_t n_fields, uint32_t max_batch,
                           char *err, size_t err_len);
void tr_client_destroy(tr_client_t **self_p);

/* Make every later LOOKUP read-only (on 1): the PS answers rows it holds
 * and the initial row for the others, storing and marking nothing. Eval and
 * predict workers score this way, so that scoring never changes the model
 * (issue 22). Thread: the owning worker thread. */
void tr_client_set_read_only(tr_client_t *self, int on);

/* Start the lookup of a batch of B examples in slot: its categorical values
 * in CSR form (tr_bag.h), keys [offs[B * n_fields]], one weight per value.
 * Borrows keys for the call only; offs and weights until this slot's
 * tr_client_push has returned (or its next lookup): keep them unchanged.
 * Returns 0 or SS_E_NET with err. */
int tr_client_lookup_send(tr_client_t *self, int slot, const uint64_t *keys,
                          const uint32_t *offs, const float *weights, uint32_t B, char *err,
                          size_t err_len);

/* Wait for slot's rows and pool them (tr_bag_pool, each field as its
 * pooling says) into emb [B * n_fields * dim], dim = ss_cfg_row_dim()
 * (first-order weight included, last in each row). Returns 0, or
 * SS_E_TIMEOUT/SS_E_PEER/SS_E_PROTO with err naming the shard. */
int tr_client_lookup_recv(tr_client_t *self, int slot, float *emb, char *err, size_t err_len);

/* Send the row gradients of slot's batch: grad_emb [B * n_fields * dim] (as
 * emb) is spread over the values (tr_bag_spread: each value gets its
 * position's gradient times its effective weight, the one it was pooled
 * with) and summed per key. Borrows grad_emb for the call only. Returns 0
 * or an error as lookup (an earlier push that was not acknowledged in
 * time). */
int tr_client_push(tr_client_t *self, int slot, const float *grad_emb, char *err,
                   size_t err_len);

/* Send the summed gradients of push_slot's batch (as tr_client_push()) and
 * start the lookup of the batch keys/offs/weights in lookup_slot (as
 * tr_client_lookup_send()), one PUSH_LOOKUP per shard that has both (a PUSH
 * or a LOOKUP where it has one). B may be 0: a push only. Waits first for
 * earlier lone PUSH acknowledgements. Borrows grad_emb and keys for the call
 * only. Returns 0 or an error as lookup. */
int tr_client_push_lookup(tr_client_t *self, int push_slot, const float *grad_emb,
                          int lookup_slot, const uint64_t *keys, const uint32_t *offs,
                          const float *weights, uint32_t B, char *err, size_t err_len);

/* Wait for every outstanding push acknowledgement and every lookup still in
 * flight (their rows are dropped): nothing sent stays unconfirmed. */
int tr_client_flush(tr_client_t *self, char *err, size_t err_len);

void tr_client_get_stats(const tr_client_t *self, struct tr_client_stats *st);

#endif
