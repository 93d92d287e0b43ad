/* ps_service_int.h - PRIVATE to the shadow-ps service's files.
 *
 * The service is one job in four files:
 *   ps_service.c       sockets, service threads, start, run loop, stop, reset
 *   ps_handlers.c      one request: read, check, gate, route, handle, reply
 *   ps_service_ckpt.c  checkpoint folders: writes, restores (RESTORE), the
 *                      request's folder, the recovery timer
 *   ps_stats.c         the figures: snapshot, STATS JSON, Prometheus
 * This header is what they share: the service and thread structs, the
 * request a handler answers, and the calls across files. The public API is
 * ps_service.h.
 *
 * Threads: ps_service.h says who calls what; each function here says it
 * again. */
#ifndef PS_SERVICE_INT_H
#define PS_SERVICE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_embed.h"
#include "ps_service.h"
#include "ps_stats.h"
#include "ps_sync.h"
#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_listen.h"
#include "ss_metrics.h"
#include "ss_msg.h"
#include "ss_msg_types.h"
#include "ss_peers.h"
#include "ss_stats.h"

#define PS_STATS_MAX (64u << 10)     /* most bytes of a STATS reply's JSON */

/* One service thread: its socket, its connections, its counters. */
struct ps_thread {
    ps_service_t *svc;               /* owner */
    struct ss_hist lat[SS_MSG_LAT_N]; /* handling time by request type, this thread's */
    pthread_t tid;                   /* the thread */
    int index;                       /* 0..threads-1 */
    _Atomic uint64_t *ctr;           /* its counter slot in svc->ctrs (PS_C_*) */
    int started;                     /* tid is a running thread */
    void *sock;                      /* its ROUTER, owned; used by this thread only */
    ss_listen_t *listen;             /* sock's connections (this thread; stats: any) */
    ss_peers_t *peers;               /* sock's connections that said HELLO */
    char bound[SS_CLUSTER_EP_MAX];   /* the endpoint sock is bound at */
} __attribute__((aligned(64)));

struct ps_service {
    const struct ss_cfg *cfg;        /* borrowed */
    int role;                        /* enum ps_role */
    uint32_t shard;                  /* shard index */
    int noop;                        /* benchmark mode */
    const ss_cluster_t *cluster;     /* membership, borrowed */
    uint32_t n_shards;               /* embedding shards of the job */
    char endpoint[SS_CFG_MAX_STR];   /* advertised endpoint (what clients connect to) */
    uint64_t config_hash;            /* ss_cluster_hello_hash of this PS */
    uint64_t start_ms;               /* for uptime */
    void *zctx;                      /* ZeroMQ context, owned */
    struct ss_curve curve;           /* this PS's CURVE keys (curve.on: security.curve) */
    char admin_token[SS_ADMIN_TOKEN_MAX]; /* admin requests carry it; "" = none (ss_auth.h) */
    ss_auth_t *auth;                 /* ZAP handler when CURVE is on, owned */
    ps_embed_t *embed;               /* role embedding: the shard */
    ps_sync_t *sync;                 /* role sync: the center range */
    int n_threads;                   /* service threads */
    struct ps_thread *threads;       /* n_threads entries */
    ss_ctrs_t *ctrs;                 /* one counter slot per service thread */
    atomic_int shutdown_requested;   /* set by a SHUTDOWN request */
    atomic_int threads_stop;         /* tells service threads to exit */
    int wake_fd;                     /* eventfd every service thread polls: readable once
                                      * a stop is asked (ps_svc_wake_all), so that idle
                                      * threads sleep without a timeout; -1: none */
    atomic_int threads_ready;        /* count of threads that started */
    pthread_mutex_t ckpt_lock;       /* one checkpoint at a time (requests, timer) */
    uint64_t next_ckpt_ms;           /* next recovery checkpoint, 0 = none; main thread */
};

/* What a handler needs to answer one request. */
struct ps_req {
    struct ps_thread *th;            /* calling thread */
    void *sock;                      /* its ROUTER */
    uint8_t id[SS_MSG_MAX_ID];       /* client identity */
    size_t id_len;                   /* bytes of id */
    int fd;                          /* its connection's descriptor (ZMQ_SRCFD), -1: unknown */
    int admin;                       /* the client may SHUTDOWN, CHECKPOINT, INIT, RESTORE */
    char key[SS_Z85_KEY_LEN + 1];    /* its CURVE public key, "" without CURVE */
    struct ss_msg msg;               /* the request */
};

/* Bump counter PS_C_<field> of thread th by n; returns the value before. */
#define COUNT(th, field, n) ss_ctr_add((th)->ctr, PS_C_##field, (uint64_t)(n))

/* ps_handlers.c: read and handle one request waiting on sock (th's ROUTER,
 * or a test's), on th's thread. Returns 1 when a message was read (served,
 * refused or bad), 0 when none waited. */
int ps_svc_serve_one(ps_service_t *self, struct ps_thread *th, void *sock);

/* How long an empty sync shard waits for the trainers'
 * replicas after the first (ps_sync_expect()): twice sync.timeout_ms, as a
 * trainer finds a restarted PS only after its round to the dead one timed
 * out, and its next round after a rest (sync.cpu_share). */
static inline uint64_t ps_svc_reseed_wait_ms(const struct ss_cfg *cfg)
{
    return 2 * (uint64_t)cfg->sync_timeout_ms;
}

/* ps_service.c: wake every service thread from its poll (after setting
 * shutdown_requested or threads_stop): it stays readable until
 * ps_service_reset(). Any thread. */
void ps_svc_wake_all(ps_service_t *self);

/* ps_service.c: shards of this PS's role in the job (cluster.embedding or
 * cluster.sync). Any thread. */
uint32_t ps_svc_n_shards(const ps_service_t *self);

/* ps_service_ckpt.c: write this shard's checkpoint into folder dir (created
 * when missing), recording the job's shard count and save_id (0: none); path
 * receives the file. Takes ckpt_lock: one at a time. Returns 0 or an SS_E_*
 * with err. Any service thread. */
int ps_svc_write_ckpt(ps_service_t *self, const char *dir, uint64_t save_id, char *path,
                      size_t path_len, char *err, size_t len);

/* ps_service_ckpt.c: the folder a CHECKPOINT, CHECKPOINT_DONE or RESTORE request
 * names in its text (or the checkpoint folder when it names none), checked
 * to lie inside job.run_dir or the checkpoint folder. Returns 0 or
 * SS_E_INVAL with err. Any service thread. */
int ps_svc_request_dir(ps_service_t *self, const Header *h, char *out, size_t out_len,
                       char *err, size_t len);

/* ps_service_ckpt.c: replace this shard with its file of the committed
 * save named dir (DIR/ROLE-K.ckpt, or DIR.new-ID's when that holds it) and
 * save_id (0: any); path receives the file. Checks the file (there, whole,
 * of that save) first; the shard's restore (ps_embed_restore_dir or
 * ps_sync_restore_dir) leaves it as it was on any error. Takes ckpt_lock.
 * Returns 0 or an SS_E_* with err naming the file. Any service thread. */
int ps_svc_restore(ps_service_t *self, const char *dir, uint64_t save_id, char *path,
                   size_t path_len, char *err, size_t len);

/* ps_service_ckpt.c: the recovery checkpoint when it is due
 * (checkpoint.interval_s). Main thread, between requests. */
void ps_svc_recovery_ckpt(ps_service_t *self);

#endif
