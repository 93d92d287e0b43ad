/* tr_sync.h - the sync algorithms behind one small interface.
 *
 * A sync *group* is one component of the dense arena (all of it, or "bottom"
 * / "top") with its rule: EASGD against the sync PSs, model averaging or
 * block-momentum averaging through the ring AllReduce. Each rule is one file
 * (tr_sync_easgd.c, tr_sync_ma.c, tr_sync_bmuf.c) exporting one struct
 * tr_sync_algo; which algorithm runs which rule, and each algorithm's traits
 * (foreground, ring, sync PSs), are rows of the sync table, common/ss_sync.h.
 * A new rule is one new file plus one row there (docs/howto-sync-rule.md).
 *
 * Rounds run on one thread at a time: the shadow thread (s-*), or the
 * worker(s) that hold the foreground pause (fr-*). The replica w may change
 * under a background round (workers keep training): rules read it with
 * tr_hogwild_snapshot and write back with the racy kernels of tr_hogwild.h. */
#ifndef TR_SYNC_H
#define TR_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_net.h"
#include "ss_sync.h"
#include "tr_allreduce.h"

struct tr_sync_group;

/* What the rounds of one thread share. Owned by whoever runs the rounds. */
struct tr_sync_env {
    const struct ss_cfg *cfg;      /* job config */
    uint32_t rank, n;              /* this trainer, trainers */
    float *w;                      /* the dense replica (Hogwild-shared) */
    size_t n_params;               /* floats in w */
    void *zctx;                    /* ZeroMQ context */
    tr_allreduce_t *ring;          /* ring among trainers, or NULL */
    ss_conn_t **sync_conns;        /* one per sync PS, or NULL */
    size_t n_sync;                 /* sync PSs */
    uint64_t *shard_off;           /* center range of each sync PS: first float */
    size_t *shard_len;             /* and length */
    int ring_borrowed;             /* ring belongs to the trainer: open/close leave it */
    const struct ss_curve *curve;  /* CURVE keys (ss_auth.h), NULL or off: plain sockets */
    const ss_cluster_t *cluster;   /* membership: sync PS and trainer endpoints; borrowed */
};

/* Per-round figures a rule reports. */
struct tr_sync_round {
    double drift;                  /* |w - c| / |c| or |w - mean| / |mean| */
    float done_sum;                /* ring rules: trainers that are done (sum of flags) */
    uint32_t ring_size;            /* ring rules: trainers in the round (done_sum's "all") */
    uint64_t reseeds;              /* EASGD: sync PS shards re-seeded this round */
    uint64_t ring_bytes_sent;      /* the ring's totals after the round (tr_shadow fills) */
    uint64_t ring_bytes_received;
};

/* A rule's functions (its traits are its rows of the sync table). */
struct tr_sync_algo {
    /* Set up state for g (buffers, initial global model). */
    int (*init)(struct tr_sync_group *g, struct tr_sync_env *env, char *err, size_t len);
    /* One round. done: this trainer's workers have finished (ring rules
     * carry it so that every trainer sees the same final round, the one in
     * which all are done, and write the average into w then). final
     * (EASGD): write the center into w. */
    int (*round)(struct tr_sync_group *g, struct tr_sync_env *env, float done, int final,
                 struct tr_sync_round *out, char *err, size_t len);
    void (*destroy)(struct tr_sync_group *g);
    /* The rule's own state between rounds, for a job checkpoint (NULL when it
     * keeps none beyond the replica and the sync PSs): how many floats,
     * copy them out, copy them back in (after init; the state then counts
     * as every trainer's common one). Main thread, rounds stopped. */
    size_t (*state_len)(const struct tr_sync_group *g);
    void (*state_get)(const struct tr_sync_group *g, float *out);
    void (*state_set)(struct tr_sync_group *g, const float *in);
};

/* One component with its rule and parameters. */
struct tr_sync_group {
    char component[16];            /* "all", "bottom", "top" */
    size_t offset, len;            /* the component in w */
    int algorithm;                 /* enum ss_sync_algo */
    const struct tr_sync_algo *algo; /* its rule */
    const struct ss_sync_traits *traits; /* its row of the sync table (ss_sync.h) */
    double alpha;                  /* EASGD moving rate (resolved default) */
    double eta;                    /* BMUF block momentum (resolved default) */
    double zeta;                   /* BMUF block learning rate */
    int nesterov;                  /* BMUF Nesterov target */
    int writeback;                 /* enum ss_writeback */
    void *state;                   /* the rule's state */
};

/* The rule of an algorithm (s-x and fr-x share one); NULL for none and
 * values outside the table. */
const struct tr_sync_algo *tr_sync_algo_of(int algorithm);

/* 1 for the fr-* baselines (the foreground trait). */
int tr_sync_is_foreground(int algorithm);

/* Resolve cfg's sync settings into groups (sync.groups, or one group "all"
 * with sync.algorithm), with N-dependent defaults filled in. Returns the
 * count (0 for none) or a negative error with err. component_of maps a
 * name to its range in the arena. */
int tr_sync_groups(const struct ss_cfg *cfg, uint32_t n_trainers, size_t n_params,
                   int (*component_of)(const void *model, const char *name, size_t *off,
                                       size_t *len),
                   const void *model, struct tr_sync_group *groups, size_t max_groups,
                   char *err, size_t len);

/* Build env's connections for the groups: the ring (when a group needs it,
 * binding cluster.trainers[rank], unless env->ring is already set and
 * env->ring_borrowed, the trainer's own ring) and the sync PS connections (when one
 * needs them). Call on the thread that will run the rounds. */
int tr_sync_env_open(struct tr_sync_env *env, const struct tr_sync_group *groups, size_t n,
                     char *err, size_t len);
void tr_sync_env_close(struct tr_sync_env *env);

/* Init every group's state. */
int tr_sync_init_groups(struct tr_sync_group *groups, size_t n, struct tr_sync_env *env,
                        char *err, size_t len);
void tr_sync_destroy_groups(struct tr_sync_group *groups, size_t n);

/* EASGD, between segments (rounds stopped, after the final round): put the
 * center back into sync PS k, found empty (restarted after the final
 * round's PULL), from model, the dense arena that holds the center every
 * trainer pulled (shard k's whole range, INIT without a sender: taken at
 * once, not offered towards a mean). *applied: 1 when it seeded the PS, 0
 * when the PS held a center already (kept). Returns 0 or an error with err.
 * The thread that owns env's connections (tr_sync_easgd.c). */
int tr_sync_easgd_restore(struct tr_sync_env *env, size_t k, const float *model, int *applied,
                          char *err, size_t len);

/* Rule implementations, one file each: tr_sync_RULE.c defines tr_sync_RULE
 * for each rule of the table (a rule shared by two rows is declared twice). */
#define TR_SYNC_RULE_DECL(id, name, rule, fg, ring, sync_ps, lose) \
    extern const struct tr_sync_algo tr_sync_##rule;
SS_SYNC_TABLE(TR_SYNC_RULE_DECL)
#undef TR_SYNC_RULE_DECL

#endif
