/* tr_allreduce.h - ring AllReduce (sum) among the trainers' shadow threads.
 *
 * Used by the S-MA and S-BMUF sync algorithms (DESIGN.md section 3). Each
 * trainer's shadow thread owns one tr_allreduce: a ROUTER bound at its own
 * endpoint receives from the left neighbour, a DEALER connected to the right
 * neighbour's endpoint sends. A call is one round: reduce-scatter then
 * all-gather, chunked into pieces and pipelined. Worker threads are never
 * involved. A round that does not finish within timeout_ms is abandoned and
 * reported; the ring heals by itself at a later round (see tr_allreduce.c).
 *
 * Membership (allow_loss): a round that makes no progress for the stall
 * time (conf.timeout_ms) probes every rank of the ring; ranks that cannot
 * be reached are declared dead, the ring re-forms among the others and the
 * round restarts there, in the same call. When a rank dies in the
 * all-gather after some survivors finished the round, those that had not
 * end it with the result of one that had (the sum over the old ring), so
 * that every survivor returns the same x. A dead rank never comes back in
 * this ring; one that was declared dead and still runs gets an error from
 * every later call (tr_allreduce_expelled()). */
#ifndef TR_ALLREDUCE_H
#define TR_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tr_allreduce tr_allreduce_t;

/* What tr_allreduce_new() needs; borrowed for the call only. */
struct tr_allreduce_conf {
    uint32_t rank;                 /* this trainer, 0..n-1 */
    uint32_t n;                    /* trainers in the ring */
    const char *const *endpoints;  /* n endpoints; endpoints[rank] is bound here */
    int64_t timeout_ms;            /* a round not finished by then is abandoned (> 0) */
    size_t chunk_floats;           /* pipeline piece size; 0 = default (65536) */
    int64_t max_message_bytes;     /* ZMQ_MAXMSGSIZE (<= 0: unlimited); caps pieces too */
    const struct ss_curve *curve;  /* CURVE keys (ss_auth.h): the ROUTER is a server (the
                                    * context needs a ZAP handler), the DEALER a client;
                                    * NULL or off: plain. Copied */
    const struct ss_cluster *cluster; /* NULL: bind endpoints[rank] as written; else bind
                                    * where the cluster says (its identity is this rank:
                                    * ss_cluster_bind). Borrowed for the call */
    int allow_loss;                /* 1: re-form the ring without ranks found dead
                                    * (job.allow_trainer_loss); 0: rounds just fail */
};

/* Counters of one tr_allreduce. */
struct tr_allreduce_stats {
    uint64_t rounds_ok;       /* calls that returned 0 */
    uint64_t rounds_failed;   /* calls that returned an error */
    uint64_t bytes_sent;      /* payload bytes of the pieces sent */
    uint64_t bytes_received;  /* payload bytes of the pieces accepted */
    uint64_t msgs_stale;      /* pieces of older rounds, dropped */
    uint64_t msgs_bad;        /* malformed or unexpected messages, dropped and logged */
    uint64_t probes;          /* membership probes run (stalled rounds, allow_loss) */
    uint64_t changes;         /* membership changes (the ring re-formed) */
    uint64_t reform_ms;       /* the last change: ms from the round's last progress to
                               * the new ring (detection + probe) */
    uint64_t handshakes_failed; /* CURVE: connections to our endpoint that failed their
                               * handshake (no CURVE, other server key, key refused) */
};

/* Bind endpoints[rank] (ROUTER) and connect a DEALER to the right neighbour
 * endpoints[(rank + 1) % n] with zctx (shared, thread-safe). For n == 1
 * nothing is bound or connected. Copies what it needs from conf. Returns the
 * object, or NULL with err set (bad conf, endpoint in use, bad endpoint).
 * Caller owns; free with tr_allreduce_destroy(). Thread: the creating thread
 * owns the sockets for their life and is the only one to call the others. */
tr_allreduce_t *tr_allreduce_new(void *zctx, const struct tr_allreduce_conf *conf, char *err,
                                 size_t err_len);

/* Close the sockets (pending sends get up to min(timeout_ms, 2000) ms to
 * leave) and free. Sets *self_p to NULL; accepts NULL and *self_p == NULL.
 * Thread: the owning thread. */
void tr_allreduce_destroy(tr_allreduce_t **self_p);

/* In-place SUM of x[0..len) over the ranks of the ring (all ranks, or with
 * allow_loss those still alive: tr_allreduce_size() says how many were
 * summed); len must be equal on all ranks. Blocks until the round is done
 * or timeout_ms has passed since the call (or since the ring last
 * re-formed). Every rank ends with bitwise identical x. With allow_loss a
 * copy of x is kept for the call, so that a round can restart after the
 * ring re-forms. Returns 0; SS_E_TIMEOUT when the
 * round was abandoned, with err naming the rank and endpoint that stalled it
 * ("allreduce round 12: no data from rank 2 (tcp://...) within 5000 ms") or
 * saying that this trainer fell behind the others (then the next call joins
 * their newer round); SS_E_NET or SS_E_STOPPED on a socket error or context
 * termination; SS_E_STOPPED when this rank was declared dead by the others
 * (tr_allreduce_expelled()). After an error x is unspecified (the caller keeps a copy).
 * A later call starts the next round. n == 1 returns 0 at once. Borrows x
 * for the call. Thread: the owning thread. */
int tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err, size_t err_len);

/* After a call that returned 0, the number of ranks whose x was summed (a
 * rank that ended the round with another's result counts that one's ring:
 * every survivor of the round says the same); during and after a call that
 * failed, or once the ring re-forms, the ranks in the ring now (n, less the
 * ranks found dead). Thread: owner. */
uint32_t tr_allreduce_size(const tr_allreduce_t *self);

/* The ranks tr_allreduce_size() counts: bit r set when rank r is one.
 * Thread: owner. */
uint64_t tr_allreduce_members(const tr_allreduce_t *self);

/* 1 when the other ranks have declared this one dead (it was unreachable,
 * e.g. stopped or cut off, while they re-formed the ring): every call then
 * fails with SS_E_STOPPED and err saying so; the trainer must stop, it
 * cannot rejoin. Thread: owner. */
int tr_allreduce_expelled(const tr_allreduce_t *self);

/* The round number the next tr_allreduce_sum() call will run (rounds start
 * at 1; after falling behind it is the newer round seen). Thread: owner. */
uint64_t tr_allreduce_round(const tr_allreduce_t *self);

/* Change the round deadline for later calls (> 0 ms), e.g. a long one for a
 * barrier at which trainers arrive minutes apart. Thread: the owning thread. */
void tr_allreduce_set_timeout(tr_allreduce_t *self, int64_t timeout_ms);

/* Copy the counters into *st (with CURVE, after reading the pending
 * connection events). Thread: the owning thread. */
void tr_allreduce_get_stats(const tr_allreduce_t *self, struct tr_allreduce_stats *st);

#endif
