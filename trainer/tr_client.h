/* tr_client.h - a worker thread's client of the embedding parameter servers,
 * and the group through which the workers of one trainer share them.
 *
 * A worker's client de-duplicates its batch's keys, hands them to the group
 * (tr_client_group_t), and pools the returned rows into the per-example
 * embedding inputs, one per field (a field may hold several weighted values,
 * combined as cfg's model.pooling / model.field_pooling say: tr_bag.h). A
 * push spreads each field's gradient over its values with the same effective
 * weights and sums the gradients per unique key of that batch's lookup.
 *
 * Requests per trainer, not per worker. The group owns one DEALER per
 * embedding shard for all the trainer's workers. What the workers hand in
 * (a batch's keys to look up, a batch's summed gradients, or both) collects
 * in one open *round*; the round closes when every client of the group has
 * handed it R things (R = trainer.round_batches for a client that asked
 * tr_client_ahead(), else 1: joined it once), when a worker would hand it an
 * (R+1)th, or when a worker needs its rows and the
 * round has not closed yet (so a slow or stopped worker never holds the
 * others up for more than their own next R batches). At close the
 * round is merged: keys de-duplicated across workers, gradients of one key
 * summed. Then ONE request per shard carries it (PUSH_LOOKUP, or PUSH or
 * LOOKUP where only one part is there), and the replies are split back: each
 * worker reads its rows out of the round's replies in place. No thread of its
 * own: the worker that closes a round merges it (under the group's lock) and,
 * when no other worker is using the sockets, sends it; a worker that needs a
 * round's replies receives them (the sockets move between threads only
 * under the group's lock, the full barrier ZeroMQ asks for), then wakes
 * those waiting. Rounds go out in the order they closed.
 *
 * Pipelining and staleness. A worker keeps the lookups of its next
 * A = R + 1 batches in flight while it computes batch k (tr_client_ahead();
 * it cycles through tr_client_n_slots() = 2R + 1 slots, so that a slot is
 * written again only after the round reading it has closed): after
 * computing k it hands in the gradients of k and the keys of k+A
 * (tr_client_push_lookup()). A round's requests apply every push they carry
 * before any lookup, so the rows of k+A hold the push of k (and of every
 * push merged into the same or an earlier round, from any worker) but may
 * miss those of k+1..k+R: the rows of a batch miss at most the worker's own
 * last R batches of gradients (R = 1: one batch, as before the merge), and
 * never any push older than those. Other workers' pushes reach it as soon
 * as the round that carries them is applied: at most the rounds in flight
 * behind (two per worker). Updates stay Hogwild: the PS applies a round's
 * summed gradient of a key as one step (for SGD exactly the gradients one
 * after another; for Adagrad one step with the sum, as a key repeated within
 * one batch always had; with R > 1 that includes a key in several of one
 * worker's batches of a round).
 *
 * Recovery: a round's lookup that gets no answer within
 * limits.request_timeout_ms of its sending (ss_net.h) is sent again, alone,
 * until limits.recovery_timeout_ms have passed, so a PS that dies and is
 * restarted from its checkpoint (or one that stalls) is waited out; the
 * shards of a round are waited for together. Pushes are never sent twice:
 * one whose answer never came is counted once in pushes_unconfirmed (a
 * restarted PS lost it with every update since its checkpoint; a stalled
 * one applies it when it wakes). A restarted PS answers the first requests
 * of an old connection SS_E_NOHELLO (it has not heard its HELLO): the
 * connection says HELLO again (ss_net.h), the lookup is sent again at once
 * and a push that rode with it is counted unconfirmed. A round that fails
 * fails every worker in it with the same error.
 *
 * Counters: a request is counted in the stats of the client whose thread
 * sent or received it (summed over a trainer's workers the counts are the
 * trainer's); keys_total and keys_unique are each worker's own batches. */
#ifndef TR_CLIENT_H
#define TR_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"

/* Batch slots a client has room for: 2 * 8 + 1, for trainer.round_batches
 * up to 8 (ss_cfg.c). A worker uses the first tr_client_n_slots(). */
#define TR_CLIENT_SLOTS 17

typedef struct tr_client tr_client_t;

/* Client statistics, for progress lines and results. */
struct tr_client_stats {
    uint64_t lookups;          /* requests with keys to look up sent (PUSH_LOOKUP included) */
    uint64_t pushes;           /* requests with gradients sent (PUSH_LOOKUP included) */
    uint64_t rounds;           /* rounds this client closed (merged and queued) */
    uint64_t keys_sent;        /* keys looked up in those rounds, de-duplicated across workers */
    uint64_t keys_unique;      /* unique keys looked up */
    uint64_t keys_total;       /* keys before de-duplication */
    uint64_t push_full;        /* pushes answered "shard full" */
    uint64_t lookup_retries;   /* lookups sent again to a PS that did not answer */
    uint64_t pushes_unconfirmed; /* pushes never acknowledged (PS restarted or stalled) */
    uint64_t wait_ns;          /* time spent waiting for replies */
};

struct ss_curve;
typedef struct tr_client_group tr_client_group_t;

/* The group of one trainer's clients of the same kind (training workers, or
 * eval workers): the embedding shards the cluster lists (cluster and cfg
 * borrowed for the group's life), n_fields positions per example (field f
 * uses table f). curve: CURVE client keys (ss_auth.h), NULL or off for plain
 * sockets; borrowed until the first tr_client_new() has returned. Nothing is
 * connected yet (the first client connects). Caller owns; destroy it after
 * every client of it. Thread: any. */
tr_client_group_t *tr_client_group_new(void *zctx, const struct ss_cfg *cfg,
                                       const ss_cluster_t *cluster,
                                       const struct ss_curve *curve, uint32_t n_fields);
void tr_client_group_destroy(tr_client_group_t **self_p);

/* Make every LOOKUP of the group read-only (on 1): the PS answers the rows it
 * holds and the initial row for the others, storing and marking nothing.
 * Eval and predict workers score this way, so that scoring never changes the
 * model (issue 22). Call before the group's first client. Thread: any. */
void tr_client_group_set_read_only(tr_client_group_t *self, int on);

/* A client of group for batches of max_batch examples at most. The first
 * client connects the group to every shard and says HELLO (the others wait);
 * when that fails, it and every later client of the group return NULL with
 * err naming the endpoint. Joins the group: until it is destroyed, a round
 * waits for it (but never longer than its own next batch). Thread: the
 * worker thread that will use it, and only that one. */
tr_client_t *tr_client_new(tr_client_group_t *group, uint32_t max_batch, char *err,
                           size_t err_len);

/* Leave the group: rounds no longer wait for this client, a round holding its
 * keys goes out without it, the rows it did not read are dropped. Sends what
 * it handed in but does not wait for it: call tr_client_flush() first to
 * know it arrived. Thread: the client's. */
void tr_client_destroy(tr_client_t **self_p);

/* Start the lookup of a batch of B examples in slot (hand its unique keys to
 * the group's open round): its categorical values in CSR form (tr_bag.h),
 * keys [offs[B * n_fields]], one weight per value.
 * Borrows keys for the call only; offs and weights until this slot's
 * tr_client_push has returned (or its next lookup): keep them unchanged.
 * Returns 0: a send that fails fails the round, which lookup_recv reports. */
int tr_client_lookup_send(tr_client_t *self, int slot, const uint64_t *keys,
                          const uint32_t *offs, const float *weights, uint32_t B, char *err,
                          size_t err_len);

/* Wait for slot's rows (closing its round if it is still open) and pool
 * them (tr_bag_pool, each field as its pooling says) into emb [B * n_fields * dim], dim = ss_cfg_row_dim()
 * (first-order weight included, last in each row). Returns 0, or
 * SS_E_TIMEOUT/SS_E_PEER/SS_E_PROTO with err naming the shard. */
int tr_client_lookup_recv(tr_client_t *self, int slot, float *emb, char *err, size_t err_len);

/* tr_client_lookup_recv without the copy where it can be spared: rows
 * [B * n_fields] gets each position's row: in the round's reply where the
 * position holds one value of weight 1 (tr_bag_plain), else pooled into emb
 * (as lookup_recv pools it) and pointing there. The reply is kept, and rows
 * stay valid, until tr_client_lookup_release(slot) (or the slot's push, or
 * the client's flush or destroy). Returns 0, or an error as lookup_recv
 * (nothing kept then). */
int tr_client_lookup_rows(tr_client_t *self, int slot, const float **rows, float *emb,
                          char *err, size_t err_len);

/* Drop the reply tr_client_lookup_rows kept for slot (nothing if none):
 * rows pointing into it are invalid from here on. Thread: the client's. */
void tr_client_lookup_release(tr_client_t *self, int slot);

/* Send the row gradients of slot's batch: grad_emb [B * n_fields * dim] (as
 * emb) is spread over the values (tr_bag_spread: each value gets its
 * position's gradient times its effective weight, the one it was pooled
 * with) and summed per key, handed to the group's open round. Borrows
 * grad_emb for the call only. Returns 0 or an error as lookup. */
int tr_client_push(tr_client_t *self, int slot, const float *grad_emb, char *err,
                   size_t err_len);

/* Send the summed gradients of push_slot's batch (as tr_client_push()) and
 * start the lookup of the batch keys/offs/weights in lookup_slot (as
 * tr_client_lookup_send()), both in the same round. B may be 0: a push only.
 * Borrows grad_emb and keys for the call only. Returns 0 or an error as
 * lookup. */
int tr_client_push_lookup(tr_client_t *self, int push_slot, const float *grad_emb,
                          int lookup_slot, const uint64_t *keys, const uint32_t *offs,
                          const float *weights, uint32_t B, char *err, size_t err_len);

/* Wait for every round this client handed something to (their rows are
 * dropped): nothing it pushed stays unconfirmed. */
int tr_client_flush(tr_client_t *self, char *err, size_t err_len);

/* Copy the client's counters. Thread: the client's. */
void tr_client_get_stats(const tr_client_t *self, struct tr_client_stats *st);

/* Opt in to rounds of R = trainer.round_batches batches of this client, and
 * say how many batches ahead of the one it computes the worker must keep
 * looked up for them: R + 1. A client that never asks hands in one batch a
 * round (R = 1, lookahead 2), so a worker loop written for that keeps
 * working as it did. With R > 1 and fewer batches ahead the results stay
 * exact, but a round closes early, when the worker needs its rows, and the
 * worker then waits for them with nothing to compute. Call before the
 * client's first lookup. Thread: the client's. */
int tr_client_ahead(tr_client_t *self);

/* The slots the worker should cycle through: 2R + 1 (3 before
 * tr_client_ahead() or with R = 1), at most TR_CLIENT_SLOTS. With fewer, a
 * worker that writes a slot the open round still reads closes that round
 * first (correct, but the round holds fewer batches). Thread: the
 * client's. */
int tr_client_n_slots(const tr_client_t *self);

#endif
