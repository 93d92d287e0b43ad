/* tr_admin.h - a trainer's admin endpoint: what shadow-ctl asks a trainer.
 *
 * One thread owns one ROUTER socket bound at the trainer's admin endpoint
 * (cluster.trainer_admin[rank], ss_cluster.h) and answers, with the PS's
 * rules: HELLO first on every connection (protocol version and the config
 * hash ss_cluster_hello_hash(TRAINER, rank)), else SS_E_NOHELLO; with
 * security.curve on the socket is a CURVE server admitted by the trainer's
 * ZAP handler (ss_auth.h: listed keys only). Requests:
 *   PING    "pong"
 *   STATS   the trainer's figures now, one JSON object (the snapshot of
 *           ss_stats.h that its /metrics endpoint serves)
 *   CONFIG  the value this trainer runs with for the key in text (the job
 *           file plus its --set options)
 * Anything else is answered SS_E_PROTO. Nothing here changes the trainer:
 * only read-only types of ss_msg_types.h have a trainer handler (its tr_fn
 * column; test_tr_admin checks). */
#ifndef TR_ADMIN_H
#define TR_ADMIN_H

#include <stddef.h>

#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"

typedef struct tr_admin tr_admin_t;

/* STATS: the JSON text (caller frees with ss_free()), at most max bytes.
 * Called on the admin thread. */
typedef char *(*tr_admin_stats_fn)(void *arg, size_t max);

/* What the admin thread borrows for its whole life. */
struct tr_admin_conf {
    void *zctx;                    /* the trainer's ZeroMQ context (its ZAP handler) */
    const ss_cluster_t *cluster;   /* this trainer's identity and admin endpoint */
    const struct ss_cfg *cfg;      /* CONFIG answers, limits */
    const struct ss_curve *curve;  /* server keys; NULL or off: plain */
    tr_admin_stats_fn stats;       /* STATS */
    void *stats_arg;               /* its argument */
};

/* Bind the admin endpoint and start the thread (it answers once this
 * returns). Returns NULL with err (the bind failed: port taken, ...).
 * Caller owns; tr_admin_destroy() before the context ends. Main thread. */
tr_admin_t *tr_admin_new(const struct tr_admin_conf *conf, char *err, size_t err_len);

/* Stop and join the thread, close the socket, free; accepts NULL. */
void tr_admin_destroy(tr_admin_t **self_p);

/* 1 when a trainer's admin endpoint serves requests of MsgType type (its
 * row of ss_msg_types.h names a trainer handler), else 0. Any thread. */
int tr_admin_serves(int type);

/* Requests answered so far (any thread). */
unsigned long long tr_admin_requests(const tr_admin_t *self);

#endif
