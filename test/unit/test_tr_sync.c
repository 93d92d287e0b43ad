/* test_tr_sync.c - one round of each sync rule against its formula, with the
 * workers stopped: EASGD against a real sync PS (in-process shadow-ps
 * service on loopback), MA and BMUF through a real ring among threads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "ps_service.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "tr_hogwild.h"
#include "t.h"
#include "tr_sync.h"

#define LEN 103   /* not a multiple of the trainer counts */

/* A free loopback port (t.h), asserted found. */
static int s_port(void)
{
    int port = t_port();
    assert_true(port > 0);
    return port;
}

/* cfg's membership as process index of role, asserted built. */
static ss_cluster_t *s_cl(const struct ss_cfg *cfg, int role, uint32_t index)
{
    char err[512] = "";
    struct ss_cluster_id me = {role, index};
    ss_cluster_t *cl = ss_cluster_new(cfg, &me, NULL, err, sizeof err);
    if (!cl)
        fail_msg("cluster: %s", err);
    return cl;
}

/* A job for n_trainers on loopback ports with algo and n_extra more --set
 * overrides. */
static struct ss_cfg *s_cfg_sets(int n_trainers, const char *algo, const char *const *extra,
                                 size_t n_extra)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char sync[128], tr[1024] = "", algo_set[64];
    const char *sets[16];
    size_t n = 0;
    char err[512] = "";
    snprintf(sync, sizeof sync, "cluster.sync=tcp://127.0.0.1:%d", s_port());
    size_t off = (size_t)snprintf(tr, sizeof tr, "cluster.trainers=");
    for (int i = 0; i < n_trainers; i++)
        off += (size_t)snprintf(tr + off, sizeof tr - off, "%stcp://127.0.0.1:%d", i ? "," : "",
                                s_port());
    snprintf(algo_set, sizeof algo_set, "sync.algorithm=%s", algo);
    sets[n++] = sync;
    sets[n++] = tr;
    sets[n++] = algo_set;
    assert_true(n + n_extra <= sizeof sets / sizeof sets[0]);
    for (size_t i = 0; i < n_extra; i++)
        sets[n++] = extra[i];
    if (ss_cfg_load(cfg, NULL, sets, n, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    return cfg;
}

static struct ss_cfg *s_cfg(int n_trainers, const char *algo, const char *extra)
{
    return s_cfg_sets(n_trainers, algo, &extra, extra ? 1 : 0);
}

/* One group "all" over LEN floats with the cfg's rule. */
static void s_group(const struct ss_cfg *cfg, int n, struct tr_sync_group *g)
{
    char err[256];
    assert_int_equal(tr_sync_groups(cfg, (uint32_t)n, LEN, NULL, NULL, g, 1, err, sizeof err),
                     1);
}

/* ------------------------------------------------------------ EASGD */

/* Stop an in-process sync PS the way shadow-ctl does (a flag written here
 * would race with its service thread). */
static void s_shutdown_ps(ss_conn_t *c)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    char err[256];
    h.type = MSG_TYPE__MSG_SHUTDOWN;
    assert_int_equal(ss_conn_call(c, &h, NULL, 0, -1, &reply, err, sizeof err), 0);
    ss_msg_close(&reply);
}

struct ps_thread_arg {
    ss_cluster_t *cl;
    ps_service_t *svc;
    volatile sig_atomic_t stop;
};

static void *s_ps_main(void *p)
{
    struct ps_thread_arg *a = p;
    ps_service_run(a->svc, &a->stop);
    return NULL;
}

static void test_easgd_round(void **state)
{
    (void)state;
    /* one trainer: its INIT seeds the PS at once (with more, the PS waits
     * for every trainer's: test_easgd_reseed_mean_of_replicas) */
    struct ss_cfg *cfg = s_cfg(1, "s-easgd", "sync.alpha=0.25");
    char err[512] = "";
    ss_cluster_t *pcl = s_cl(cfg, SS_CLUSTER_SYNC, 0), *tcl = s_cl(cfg, SS_CLUSTER_TRAINER, 0);
    struct ps_service_conf pc = {cfg, pcl, NULL, 0};
    struct ps_thread_arg pa = {pcl, ps_service_new(&pc, err, sizeof err), 0};
    assert_non_null(pa.svc);
    pthread_t t;
    pthread_create(&t, NULL, s_ps_main, &pa);

    float w[LEN], c0[LEN], x[LEN], c1[LEN];
    for (int i = 0; i < LEN; i++)
        w[i] = c0[i] = (float)(i % 9) * 0.5f;          /* initial model = center */
    struct tr_sync_env env = {cfg, 0, 1, w, LEN, zmq_ctx_new(), NULL, NULL, 0, NULL, NULL, 0, NULL,
                              tcl};
    struct tr_sync_group g;
    s_group(cfg, 1, &g);
    assert_float_equal(g.alpha, 0.25, 0);
    assert_int_equal(tr_sync_env_open(&env, &g, 1, err, sizeof err), 0);
    assert_int_equal(g.algo->init(&g, &env, err, sizeof err), 0);
    for (int i = 0; i < LEN; i++)
        w[i] = x[i] = (float)(i % 5) - 1.0f;           /* the replica moved */
    struct tr_sync_round r = {0};
    assert_int_equal(g.algo->round(&g, &env, 0, 0, &r, err, sizeof err), 0);
    for (int i = 0; i < LEN; i++) {
        float want_w = 0.75f * x[i] + 0.25f * c0[i];    /* w' = (1 - a) x + a c */
        if (w[i] != want_w)
            fail_msg("w[%d] = %.9g, want %.9g", i, w[i], want_w);
    }
    /* the final round pulls the center: c' = c + a (x - c) */
    assert_int_equal(g.algo->round(&g, &env, 1, 1, &r, err, sizeof err), 0);
    memcpy(c1, w, sizeof c1);
    for (int i = 0; i < LEN; i++) {
        float want_c = c0[i] + 0.25f * (x[i] - c0[i]);
        if (c1[i] != want_c)
            fail_msg("c[%d] = %.9g, want %.9g", i, c1[i], want_c);
    }
    g.algo->destroy(&g);
    s_shutdown_ps(env.sync_conns[0]);
    tr_sync_env_close(&env);
    zmq_ctx_term(env.zctx);
    pthread_join(t, NULL);
    ps_service_destroy(&pa.svc);
    ss_cluster_destroy(&pcl);
    ss_cluster_destroy(&tcl);
    ss_free(cfg);
}

/* Start sync PS shard k of cfg (empty) on a thread. */
static void s_ps_start(const struct ss_cfg *cfg, uint32_t k, struct ps_thread_arg *pa,
                       pthread_t *t)
{
    char err[512] = "";
    pa->cl = s_cl(cfg, SS_CLUSTER_SYNC, k);
    struct ps_service_conf pc = {cfg, pa->cl, NULL, 0};
    pa->stop = 0;
    pa->svc = ps_service_new(&pc, err, sizeof err);
    if (!pa->svc)
        fail_msg("sync PS %u: %s", k, err);
    assert_int_equal(pthread_create(t, NULL, s_ps_main, pa), 0);
}

/* Stop the sync PS behind conn with SHUTDOWN (as shadow-ctl does) and free it. */
static void s_ps_stop(ss_conn_t *conn, struct ps_thread_arg *pa, pthread_t t)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    char err[512] = "";
    h.type = MSG_TYPE__MSG_SHUTDOWN;
    assert_int_equal(ss_conn_call(conn, &h, NULL, 0, -1, &reply, err, sizeof err), 0);
    ss_msg_close(&reply);
    assert_int_equal(pthread_join(t, NULL), 0);
    ps_service_destroy(&pa->svc);
    ss_cluster_destroy(&pa->cl);
}

/* Regression: when the final PULL reached a sync PS that had restarted empty,
 * the trainer zeroed that range of the reply, re-seeded the PS, reported
 * success and wrote the zeros into the model. The range must hold a real
 * center: the values it was just re-seeded with (this replica). */
static void test_issue_easgd_final_pull_empty_ps(void **state)
{
    (void)state;
    char sync_set[160], err[512] = "";
    snprintf(sync_set, sizeof sync_set, "cluster.sync=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d",
             s_port(), s_port());
    const char *sets[] = {sync_set, "sync.alpha=0.25"};
    /* one trainer: the restarted PS takes its replica alone (the mean of
     * two: test_easgd_reseed_mean_of_replicas) */
    struct ss_cfg *cfg = s_cfg_sets(1, "s-easgd", sets, 2);
    struct ps_thread_arg pa[2];
    pthread_t t[2];
    for (uint32_t k = 0; k < 2; k++)
        s_ps_start(cfg, k, &pa[k], &t[k]);

    float w[LEN], c0[LEN], x[LEN], c1[LEN], y[LEN];
    for (int i = 0; i < LEN; i++) {
        w[i] = c0[i] = (float)(i % 9) * 0.5f + 1.0f;   /* initial model = center */
        x[i] = (float)(i % 5) + 2.0f;                   /* the replica after training */
        c1[i] = c0[i] + 0.25f * (x[i] - c0[i]);          /* center after one round */
        y[i] = (float)(i % 7) + 0.25f;                  /* the replica at the end */
    }
    ss_cluster_t *tcl = s_cl(cfg, SS_CLUSTER_TRAINER, 0);
    struct tr_sync_env env = {cfg, 0, 1, w, LEN, zmq_ctx_new(), NULL, NULL, 0, NULL, NULL, 0, NULL,
                              tcl};
    struct tr_sync_group g;
    s_group(cfg, 1, &g);
    assert_int_equal(tr_sync_env_open(&env, &g, 1, err, sizeof err), 0);
    assert_int_equal(env.n_sync, 2);
    assert_int_equal(g.algo->init(&g, &env, err, sizeof err), 0);
    memcpy(w, x, sizeof w);
    struct tr_sync_round r = {0};
    assert_int_equal(g.algo->round(&g, &env, 0, 0, &r, err, sizeof err), 0);
    assert_int_equal(r.reseeds, 0);

    /* sync PS 1 restarts without a checkpoint; the workers end at y */
    s_ps_stop(env.sync_conns[1], &pa[1], t[1]);
    s_ps_start(cfg, 1, &pa[1], &t[1]);
    memcpy(w, y, sizeof w);
    memset(&r, 0, sizeof r);
    int rc = g.algo->round(&g, &env, 1, 1, &r, err, sizeof err);
    if (rc)
        fail_msg("final round: %s", err);
    assert_int_equal(r.reseeds, 1);                      /* reported */
    size_t lo1 = (size_t)env.shard_off[1];
    assert_true(lo1 > 0 && lo1 < LEN);
    for (size_t i = 0; i < LEN; i++) {
        float want = i < lo1 ? c1[i] : y[i];             /* shard 0: the center */
        if (w[i] != want)
            fail_msg("w[%zu] = %.9g, want %.9g (%s)", i, w[i], want,
                     i < lo1 ? "center of sync PS 0" : "re-seeded center of sync PS 1");
    }
    /* the re-seeded PS holds that center: pulling again gives the same model */
    memset(w, 0, sizeof w);
    memset(&r, 0, sizeof r);
    assert_int_equal(g.algo->round(&g, &env, 1, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.reseeds, 0);
    for (size_t i = 0; i < LEN; i++)
        assert_true(w[i] == (i < lo1 ? c1[i] : y[i]));

    g.algo->destroy(&g);
    for (uint32_t k = 0; k < 2; k++)
        s_ps_stop(env.sync_conns[k], &pa[k], t[k]);
    tr_sync_env_close(&env);
    zmq_ctx_term(env.zctx);
    ss_cluster_destroy(&tcl);
    ss_free(cfg);
}

/* Issue 22 item 5: a sync PS restarted empty mid-run is re-seeded with the
 * mean of the trainers' replicas, not with the first replica that reaches
 * it (each round keeps sum(x_i) + c constant, so a center taken from one
 * replica pulls the consensus towards it). Two trainers: rank 1 finds the
 * restarted PS empty first and offers its replica (the PS stays empty); rank
 * 0's final round offers its own and pulls the center: their mean. */
static void test_easgd_reseed_mean_of_replicas(void **state)
{
    (void)state;
    struct ss_cfg *cfg = s_cfg(2, "s-easgd", "sync.alpha=0.25");
    char err[512] = "";
    struct ps_thread_arg pa;
    pthread_t t;
    s_ps_start(cfg, 0, &pa, &t);

    float w0[LEN], w1[LEN], c[LEN];
    for (int i = 0; i < LEN; i++)
        w0[i] = w1[i] = (float)(i % 9) * 0.5f + 1.0f;   /* the initial model */
    ss_cluster_t *tcl[2] = {s_cl(cfg, SS_CLUSTER_TRAINER, 0), s_cl(cfg, SS_CLUSTER_TRAINER, 1)};
    void *zctx = zmq_ctx_new();
    struct tr_sync_env env[2] = {
        {cfg, 0, 2, w0, LEN, zctx, NULL, NULL, 0, NULL, NULL, 0, NULL, tcl[0]},
        {cfg, 1, 2, w1, LEN, zctx, NULL, NULL, 0, NULL, NULL, 0, NULL, tcl[1]},
    };
    struct tr_sync_group g[2];
    for (int r = 0; r < 2; r++) {
        s_group(cfg, 2, &g[r]);
        assert_int_equal(tr_sync_env_open(&env[r], &g[r], 1, err, sizeof err), 0);
        /* rank 0's INIT is collected, rank 1's completes the start */
        assert_int_equal(g[r].algo->init(&g[r], &env[r], err, sizeof err), 0);
    }
    struct tr_sync_round rd = {0};
    assert_int_equal(g[0].algo->round(&g[0], &env[0], 0, 0, &rd, err, sizeof err), 0);
    assert_true(rd.drift == 0);      /* seeded with the start model (the mean of two equal) */

    /* the sync PS restarts without a checkpoint; the replicas moved apart */
    s_ps_stop(env[0].sync_conns[0], &pa, t);
    s_ps_start(cfg, 0, &pa, &t);
    for (int i = 0; i < LEN; i++) {
        w0[i] = (float)(i % 5) + 2.0f;
        w1[i] = (float)(i % 7) * 0.75f - 1.5f;
        c[i] = (float)(((double)w0[i] + (double)w1[i]) / 2.0);
    }
    uint64_t reseeds1 = 0;
    for (int k = 0; k < 4 && reseeds1 == 0; k++) {  /* a round sits out the HELLO again */
        memset(&rd, 0, sizeof rd);
        assert_int_equal(g[1].algo->round(&g[1], &env[1], 0, 0, &rd, err, sizeof err), 0);
        reseeds1 += rd.reseeds;
    }
    assert_int_equal(reseeds1, 1);                   /* rank 1 offered; the PS waits */
    for (int i = 0; i < LEN; i++)                    /* and its replica did not move */
        assert_true(w1[i] == (float)(i % 7) * 0.75f - 1.5f);
    memset(&rd, 0, sizeof rd);
    if (g[0].algo->round(&g[0], &env[0], 1, 1, &rd, err, sizeof err) != 0)
        fail_msg("final round: %s", err);
    assert_int_equal(rd.reseeds, 1);
    for (int i = 0; i < LEN; i++)
        if (w0[i] != c[i])
            fail_msg("w0[%d] = %.9g, want the mean %.9g of %.9g and %.9g (not one replica)", i,
                     w0[i], c[i], (double)(i % 5) + 2.0, (i % 7) * 0.75 - 1.5);

    for (int r = 0; r < 2; r++)
        g[r].algo->destroy(&g[r]);
    s_ps_stop(env[0].sync_conns[0], &pa, t);
    for (int r = 0; r < 2; r++) {
        tr_sync_env_close(&env[r]);
        ss_cluster_destroy(&tcl[r]);
    }
    zmq_ctx_term(zctx);
    ss_free(cfg);
}

/* PULL [0, LEN) of the center from the sync PS behind conn into out.
 * Returns the request's code (SS_E_PEER for an empty PS). */
static int s_pull_all(ss_conn_t *conn, float *out)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    char err[256] = "";
    h.type = MSG_TYPE__MSG_PULL;
    h.has_offset = h.has_length = 1;
    h.offset = 0;
    h.length = LEN;
    int rc = ss_conn_call(conn, &h, NULL, 0, -1, &reply, err, sizeof err);
    if (rc == 0) {
        assert_int_equal(reply.hdr->length, LEN);
        memcpy(out, zmq_msg_data(&reply.frames[0]), LEN * sizeof(float));
    }
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

/* A sync PS restarted empty after the final round's PULL (the center is in
 * every replica) is found by the save: tr_sync_easgd_restore puts that
 * center back at once, although the PS expects two trainers' offers and
 * holds one already (rank 1's, made from its replica before the final
 * round): the center, not a mean with that offer, and no wait for rank 0's
 * offer (the other trainers sit at a barrier). Rank 1's final round then
 * pulls the same center. On a PS that holds a center it changes nothing. */
static void test_easgd_restore_after_final(void **state)
{
    (void)state;
    struct ss_cfg *cfg = s_cfg(2, "s-easgd", "sync.alpha=0.25");
    char err[512] = "";
    struct ps_thread_arg pa;
    pthread_t t;
    s_ps_start(cfg, 0, &pa, &t);

    float w0[LEN], w1[LEN], c[LEN], got[LEN];
    for (int i = 0; i < LEN; i++)
        w0[i] = w1[i] = (float)(i % 9) * 0.5f + 1.0f;
    ss_cluster_t *tcl[2] = {s_cl(cfg, SS_CLUSTER_TRAINER, 0), s_cl(cfg, SS_CLUSTER_TRAINER, 1)};
    void *zctx = zmq_ctx_new();
    struct tr_sync_env env[2] = {
        {cfg, 0, 2, w0, LEN, zctx, NULL, NULL, 0, NULL, NULL, 0, NULL, tcl[0]},
        {cfg, 1, 2, w1, LEN, zctx, NULL, NULL, 0, NULL, NULL, 0, NULL, tcl[1]},
    };
    struct tr_sync_group g[2];
    for (int r = 0; r < 2; r++) {
        s_group(cfg, 2, &g[r]);
        assert_int_equal(tr_sync_env_open(&env[r], &g[r], 1, err, sizeof err), 0);
        assert_int_equal(g[r].algo->init(&g[r], &env[r], err, sizeof err), 0);
    }
    /* rank 0's final round pulls the center (the start model) */
    for (int i = 0; i < LEN; i++)
        w0[i] = (float)(i % 5) + 2.0f;
    struct tr_sync_round rd = {0};
    assert_int_equal(g[0].algo->round(&g[0], &env[0], 1, 1, &rd, err, sizeof err), 0);
    memcpy(c, w0, sizeof c);
    for (int i = 0; i < LEN; i++)
        assert_true(c[i] == (float)(i % 9) * 0.5f + 1.0f);

    /* the PS restarts empty; rank 1 offers its replica (before its final
     * round's pull), the PS waits for rank 0's */
    s_ps_stop(env[0].sync_conns[0], &pa, t);
    s_ps_start(cfg, 0, &pa, &t);
    for (int i = 0; i < LEN; i++)
        w1[i] = (float)(i % 7) * 0.75f - 1.5f;
    uint64_t reseeds1 = 0;
    for (int k = 0; k < 4 && reseeds1 == 0; k++) {  /* a round sits out the HELLO again */
        memset(&rd, 0, sizeof rd);
        assert_int_equal(g[1].algo->round(&g[1], &env[1], 0, 0, &rd, err, sizeof err), 0);
        reseeds1 += rd.reseeds;
    }
    assert_int_equal(reseeds1, 1);
    assert_int_not_equal(s_pull_all(env[0].sync_conns[0], got), 0);  /* still empty */

    /* the save of rank 0 puts its center back: at once, exactly */
    int applied = 0;
    if (tr_sync_easgd_restore(&env[0], 0, w0, &applied, err, sizeof err) != 0)
        fail_msg("restore: %s", err);
    assert_int_equal(applied, 1);
    assert_int_equal(s_pull_all(env[0].sync_conns[0], got), 0);
    for (int i = 0; i < LEN; i++)
        if (got[i] != c[i])
            fail_msg("center[%d] = %.9g, want %.9g (the center rank 0 pulled)", i, got[i], c[i]);
    /* rank 1's final round pulls it too */
    memset(&rd, 0, sizeof rd);
    assert_int_equal(g[1].algo->round(&g[1], &env[1], 1, 1, &rd, err, sizeof err), 0);
    for (int i = 0; i < LEN; i++)
        assert_true(w1[i] == c[i]);
    /* a PS that holds a center keeps it */
    float other[LEN];
    for (int i = 0; i < LEN; i++)
        other[i] = -7.0f;
    assert_int_equal(tr_sync_easgd_restore(&env[1], 0, other, &applied, err, sizeof err), 0);
    assert_int_equal(applied, 0);
    assert_int_equal(s_pull_all(env[0].sync_conns[0], got), 0);
    for (int i = 0; i < LEN; i++)
        assert_true(got[i] == c[i]);
    /* a shard the job does not have is refused */
    assert_int_equal(tr_sync_easgd_restore(&env[0], 1, w0, &applied, err, sizeof err),
                     SS_E_INVAL);

    for (int r = 0; r < 2; r++)
        g[r].algo->destroy(&g[r]);
    s_ps_stop(env[0].sync_conns[0], &pa, t);
    for (int r = 0; r < 2; r++) {
        tr_sync_env_close(&env[r]);
        ss_cluster_destroy(&tcl[r]);
    }
    zmq_ctx_term(zctx);
    ss_free(cfg);
}

/* A sync PS that answers every request with success, and PULL and ELASTIC
 * with one float fewer than asked (a broken or hostile peer), until SHUTDOWN. */
struct short_ps {
    void *zctx;        /* shared context */
    char ep[64];       /* endpoint to bind */
    atomic_int ready;  /* bound */
};

static void *s_short_ps_main(void *p)
{
    struct short_ps *a = p;
    void *sock = zmq_socket(a->zctx, ZMQ_ROUTER);
    int linger = 0;
    assert_non_null(sock);
    assert_int_equal(zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger), 0);
    assert_int_equal(zmq_bind(sock, a->ep), 0);
    atomic_store(&a->ready, 1);
    static const float junk[LEN] = {0};
    for (int done = 0; !done;) {
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len = 0;
        struct ss_msg msg;
        char why[256];
        if (ss_msg_recv(sock, 0, id, &id_len, &msg, why, sizeof why) != 0)
            continue;
        Header h = HEADER__INIT;
        h.version = SS_PROTO_VERSION;
        h.type = msg.hdr->type;
        h.req_id = msg.hdr->req_id;
        h.has_status = 1;
        h.text = "applied";
        struct ss_frame f = {junk, 0};
        size_t n_frames = 0;
        if ((h.type == MSG_TYPE__MSG_PULL || h.type == MSG_TYPE__MSG_ELASTIC) &&
            msg.hdr->length > 1 && msg.hdr->length <= LEN) {
            h.has_length = 1;
            h.length = msg.hdr->length - 1;
            f.len = h.length * sizeof(float);
            n_frames = 1;
        }
        done = h.type == MSG_TYPE__MSG_SHUTDOWN;
        assert_int_equal(ss_msg_send(sock, id, id_len, &h, &f, n_frames), 0);
        ss_msg_close(&msg);
    }
    zmq_close(sock);
    return NULL;
}

/* A PULL or ELASTIC reply with fewer floats than asked is an error, not a
 * read past the reply (the frame is only checked against the reply's own
 * length), and the model is left alone. */
static void test_easgd_short_reply_refused(void **state)
{
    (void)state;
    struct short_ps ps = {.zctx = zmq_ctx_new()};
    snprintf(ps.ep, sizeof ps.ep, "tcp://127.0.0.1:%d", s_port());
    char sync_set[96], err[512] = "";
    snprintf(sync_set, sizeof sync_set, "cluster.sync=%s", ps.ep);
    const char *sets[] = {sync_set};
    struct ss_cfg *cfg = s_cfg_sets(2, "s-easgd", sets, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_short_ps_main, &ps), 0);
    while (!atomic_load(&ps.ready))
        usleep(1000);

    float w[LEN], x[LEN];
    for (int i = 0; i < LEN; i++)
        w[i] = x[i] = (float)i + 1.0f;
    ss_cluster_t *tcl = s_cl(cfg, SS_CLUSTER_TRAINER, 0);
    struct tr_sync_env env = {cfg, 0, 2, w, LEN, ps.zctx, NULL, NULL, 0, NULL, NULL, 0, NULL, tcl};
    struct tr_sync_group g;
    s_group(cfg, 2, &g);
    assert_int_equal(tr_sync_env_open(&env, &g, 1, err, sizeof err), 0);
    assert_int_equal(g.algo->init(&g, &env, err, sizeof err), 0);
    for (int final = 0; final < 2; final++) {
        struct tr_sync_round r = {0};
        err[0] = '\0';
        assert_int_equal(g.algo->round(&g, &env, 1, final, &r, err, sizeof err), SS_E_PROTO);
        if (!strstr(err, "replied 102 floats, asked for 103"))
            fail_msg("error text: '%s'", err);
        assert_memory_equal(w, x, sizeof w);
    }
    g.algo->destroy(&g);
    s_shutdown_ps(env.sync_conns[0]);
    assert_int_equal(pthread_join(t, NULL), 0);
    tr_sync_env_close(&env);
    zmq_ctx_term(ps.zctx);
    ss_cluster_destroy(&tcl);
    ss_free(cfg);
}

/* ------------------------------------------------------------ ring rules */

/* This test is linked with -Wl,--wrap=tr_allreduce_sum (see the Makefile):
 * the rules' allreduce calls come here. A ring thread can make its k-th call
 * run the round to completion (so its peers complete it too) and then report
 * a timeout, as when its own deadline passes just before the last piece
 * arrives. x is scribbled over: it is unspecified after an error. */
int __real_tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err,
                            size_t err_len);
int __wrap_tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err,
                            size_t err_len);

static _Thread_local int t_fail_call;   /* call to fail (1-based), 0: none */
static _Thread_local int t_calls;       /* calls so far on this thread */

int __wrap_tr_allreduce_sum(tr_allreduce_t *self, float *x, size_t len, char *err,
                            size_t err_len)
{
    int rc = __real_tr_allreduce_sum(self, x, len, err, err_len);
    if (++t_calls != t_fail_call || rc != 0)
        return rc;
    for (size_t i = 0; i < len; i++)
        x[i] = NAN;
    snprintf(err, err_len, "injected: round timed out here after the peers completed it");
    return SS_E_TIMEOUT;
}

struct ring_arg {
    const struct ss_cfg *cfg;    /* shared */
    uint32_t rank, n;            /* who */
    int rounds;                  /* rounds to run */
    float (*x)[LEN];             /* x[round][i] of this rank: set before each round */
    float out[8][LEN];           /* w after each round */
    int delay_ms;                /* sleep before each round */
    int rc;                      /* result */
    void *zctx;                  /* shared context */
    float *w;                    /* the replica (exposed for the delta test) */
    atomic_int in_round;         /* set once the round started (publishes w) */
    int fail_round;              /* round whose allreduce reports a timeout, 0: none */
    int round_rc[8];             /* result of each round */
};

static void *s_ring_main(void *p)
{
    struct ring_arg *a = p;
    float w[LEN];
    char err[512] = "";
    ss_cluster_t *cl = s_cl(a->cfg, SS_CLUSTER_TRAINER, a->rank);
    struct tr_sync_env env = {a->cfg, a->rank, a->n, w, LEN, a->zctx, NULL, NULL, 0, NULL, NULL, 0,
                              NULL, cl};
    struct tr_sync_group g;
    a->w = w;
    t_calls = 0;
    t_fail_call = a->fail_round;     /* one allreduce call per round (one group) */
    memcpy(w, a->x[0], sizeof w);    /* common initial model: x[0] of rank 0 is passed */
    tr_sync_groups(a->cfg, a->n, LEN, NULL, NULL, &g, 1, err, sizeof err);
    a->rc = tr_sync_env_open(&env, &g, 1, err, sizeof err);
    if (a->rc == 0)
        a->rc = g.algo->init(&g, &env, err, sizeof err);
    for (int r = 1; r <= a->rounds && a->rc == 0; r++) {
        struct tr_sync_round out = {0};
        memcpy(w, a->x[r], sizeof w);
        if (a->delay_ms)
            usleep((useconds_t)a->delay_ms * 1000);
        atomic_store(&a->in_round, 1);
        a->rc = a->round_rc[r] = g.algo->round(&g, &env, 0, 0, &out, err, sizeof err);
        memcpy(a->out[r], w, sizeof w);
        if (r == a->fail_round && a->rc == SS_E_TIMEOUT)
            a->rc = 0;                   /* the injected failure: go on */
    }
    if (a->rc)
        print_error("rank %u: %s\n", a->rank, err);
    g.algo->destroy(&g);
    tr_sync_env_close(&env);
    ss_cluster_destroy(&cl);
    return NULL;
}

/* Run n ranks; xs[rank][round][i]. */
static void s_run_ring(const struct ss_cfg *cfg, int n, int rounds, float (*xs)[8][LEN],
                       struct ring_arg *args)
{
    pthread_t t[8];
    void *zctx = zmq_ctx_new();
    for (int r = 0; r < n; r++) {
        args[r].cfg = cfg;
        args[r].rank = (uint32_t)r;
        args[r].n = (uint32_t)n;
        args[r].rounds = rounds;
        args[r].x = xs[r];
        args[r].zctx = zctx;
        pthread_create(&t[r], NULL, s_ring_main, &args[r]);
    }
    for (int r = 0; r < n; r++) {
        pthread_join(t[r], NULL);
        assert_int_equal(args[r].rc, 0);
    }
    zmq_ctx_term(zctx);
}

static float (*s_inputs(int n, int rounds))[8][LEN]
{
    float (*xs)[8][LEN] = ss_calloc((size_t)n, sizeof *xs);
    for (int r = 0; r < n; r++)
        for (int k = 0; k <= rounds; k++)
            for (int i = 0; i < LEN; i++)
                xs[r][k][i] = k == 0 ? (float)(i % 4) : (float)((i * 7 + r * 3 + k) % 11) * 0.5f;
    return xs;
}

static void test_ma_exact_mean(void **state)
{
    (void)state;
    for (int n = 2; n <= 6; n++) {
        /* n 2..3: overwrite (w = m exactly); n 4..6 on 2..3 trainers: delta,
         * w = x + (m - x) in float */
        int delta = n > 3;
        if (delta)
            n -= 2;
        struct ss_cfg *cfg = s_cfg(n, "s-ma", delta ? NULL : "sync.writeback=overwrite");
        float (*xs)[8][LEN] = s_inputs(n, 2);
        struct ring_arg *args = ss_calloc((size_t)n, sizeof *args);
        s_run_ring(cfg, n, 2, xs, args);
        for (int k = 1; k <= 2; k++)
            for (int i = 0; i < LEN; i++) {
                float sum = 0;
                for (int r = 0; r < n; r++)
                    sum += xs[r][k][i];
                float mean = sum / (float)n;
                for (int r = 0; r < n; r++) {
                    float want = delta ? xs[r][k][i] + (mean - xs[r][k][i]) : mean;
                    if (args[r].out[k][i] != want)
                        fail_msg("n %d round %d rank %d [%d]: %.9g, want %.9g", n, k, r, i,
                                 args[r].out[k][i], want);
                }
            }
        ss_free(args);
        ss_free(xs);
        ss_free(cfg);
        if (delta)
            n += 2;
    }
}

static void test_bmuf_zero_momentum_is_ma(void **state)
{
    (void)state;
    struct ss_cfg *ma = s_cfg(2, "s-ma", NULL);
    struct ss_cfg *bm = s_cfg(2, "s-bmuf", "sync.block_momentum=0");
    float (*xs)[8][LEN] = s_inputs(2, 3);
    struct ring_arg a_ma[2] = {0}, a_bm[2] = {0};
    s_run_ring(ma, 2, 3, xs, a_ma);
    s_run_ring(bm, 2, 3, xs, a_bm);
    for (int k = 1; k <= 3; k++)
        for (int r = 0; r < 2; r++)
            assert_memory_equal(a_ma[r].out[k], a_bm[r].out[k], sizeof(float) * LEN);
    ss_free(xs);
    ss_free(ma);
    ss_free(bm);
}

static void test_bmuf_momentum_rounds(void **state)
{
    (void)state;
    const double eta = 0.5, zeta = 1.0;
    struct ss_cfg *cfg = s_cfg(2, "s-bmuf", "sync.block_momentum=0.5");
    float (*xs)[8][LEN] = s_inputs(2, 4);
    struct ring_arg args[2] = {0};
    s_run_ring(cfg, 2, 4, xs, args);
    for (int i = 0; i < LEN; i++) {
        double g = xs[0][0][i], d = 0, t = g;   /* g starts at the common initial model */
        for (int k = 1; k <= 4; k++) {
            double m = ((double)xs[0][k][i] + xs[1][k][i]) / 2;
            d = eta * d + zeta * (m - t);  /* block progress from where it started */
            g += d;
            t = g + eta * d;               /* Nesterov target; w = x + t - x = t */
            for (int r = 0; r < 2; r++)
                if (fabs(args[r].out[k][i] - t) > 1e-5 * (1 + fabs(t)))
                    fail_msg("round %d rank %d [%d]: %.9g, want %.9g", k, r, i,
                             args[r].out[k][i], t);
        }
    }
    ss_free(xs);
    ss_free(cfg);
}

/* delta write-back keeps what a worker added while the round was running */
static void test_delta_writeback_keeps_update(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        struct ss_cfg *cfg = s_cfg(2, "s-ma", mode ? "sync.writeback=overwrite" : NULL);
        float (*xs)[8][LEN] = s_inputs(2, 1);
        struct ring_arg args[2] = {0};
        pthread_t t[2];
        void *zctx = zmq_ctx_new();
        for (int r = 0; r < 2; r++) {
            memset(&args[r], 0, sizeof args[r]);
            args[r].cfg = cfg;
            args[r].rank = (uint32_t)r;
            args[r].n = 2;
            args[r].rounds = 1;
            args[r].x = xs[r];
            args[r].zctx = zctx;
            args[r].delay_ms = r == 1 ? 300 : 0;   /* rank 0 waits in the round */
        }
        pthread_create(&t[0], NULL, s_ring_main, &args[0]);
        while (!atomic_load(&args[0].in_round))
            usleep(1000);
        usleep(100000);                             /* rank 0 has taken its snapshot */
        float u[LEN];
        for (int i = 0; i < LEN; i++)
            u[i] = 0.25f;
        tr_hogwild_add(args[0].w, u, LEN);         /* a worker's update mid-round */
        pthread_create(&t[1], NULL, s_ring_main, &args[1]);
        for (int r = 0; r < 2; r++)
            pthread_join(t[r], NULL);
        zmq_ctx_term(zctx);
        for (int i = 0; i < LEN; i++) {
            float mean = (xs[0][1][i] + xs[1][1][i]) / 2;
            float want = mode ? mean : mean + 0.25f;
            if (args[0].out[1][i] != want)
                fail_msg("%s [%d]: %.9g, want %.9g", mode ? "overwrite" : "delta", i,
                         args[0].out[1][i], want);
        }
        ss_free(xs);
        ss_free(cfg);
    }
}

static void test_groups_and_defaults(void **state)
{
    (void)state;
    struct ss_cfg *cfg = s_cfg(3, "s-bmuf", NULL);
    struct tr_sync_group g;
    s_group(cfg, 3, &g);
    assert_true(fabs(g.eta - (1.0 - 1.0 / 3)) < 1e-12);   /* default 1 - 1/N */
    assert_true(fabs(g.alpha - 0.3) < 1e-12);             /* default 0.9 / N */
    assert_true(g.zeta == 1.0);
    assert_true(g.nesterov == 1);
    assert_int_equal(tr_sync_is_foreground(SS_SYNC_FR_MA), 1);
    assert_int_equal(tr_sync_is_foreground(SS_SYNC_S_MA), 0);
    assert_ptr_equal(tr_sync_algo_of(SS_SYNC_FR_BMUF), &tr_sync_bmuf);
    assert_null(tr_sync_algo_of(SS_SYNC_NONE));
    ss_free(cfg);
}

/* Components of a LEN-float arena for tr_sync_groups: bottom [0, 40), top the rest. */
static int s_component_of(const void *model, const char *name, size_t *off, size_t *len)
{
    (void)model;
    if (strcmp(name, "bottom") == 0) {
        *off = 0;
        *len = 40;
        return 0;
    }
    if (strcmp(name, "top") == 0) {
        *off = 40;
        *len = LEN - 40;
        return 0;
    }
    return -1;
}

/* Regression: sync.groups entries ignored sync.alpha, sync.block_momentum and
 * sync.block_lr and took the built-in defaults (0.9/N, 1-1/N, 1). A group
 * inherits each global value unless it sets its own; sync.nesterov and
 * sync.writeback (no per-group key) apply to every group. */
static void test_issue_groups_inherit_globals(void **state)
{
    (void)state;
    static const char *const sets[] = {
        "sync.groups=[{component: bottom, algorithm: s-easgd},"
        " {component: top, algorithm: s-bmuf, alpha: 0.5, block_momentum: 0.25}]",
        "sync.alpha=0.2", "sync.block_momentum=0.6", "sync.block_lr=2",
        "sync.nesterov=false", "sync.writeback=overwrite",
    };
    struct ss_cfg *cfg = s_cfg_sets(3, "none", sets, sizeof sets / sizeof sets[0]);
    struct tr_sync_group g[2];
    char err[256] = "";
    assert_int_equal(tr_sync_groups(cfg, 3, LEN, s_component_of, NULL, g, 2, err, sizeof err), 2);
    assert_string_equal(g[0].component, "bottom");
    assert_int_equal(g[0].offset, 0);
    assert_int_equal(g[0].len, 40);
    assert_ptr_equal(g[0].algo, &tr_sync_easgd);
    assert_float_equal(g[0].alpha, 0.2, 0);        /* inherited */
    assert_float_equal(g[0].eta, 0.6, 0);
    assert_float_equal(g[0].zeta, 2.0, 0);
    assert_string_equal(g[1].component, "top");
    assert_ptr_equal(g[1].algo, &tr_sync_bmuf);
    assert_float_equal(g[1].alpha, 0.5, 0);        /* its own */
    assert_float_equal(g[1].eta, 0.25, 0);         /* its own */
    assert_float_equal(g[1].zeta, 2.0, 0);         /* inherited */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(g[i].nesterov, 0);
        assert_int_equal(g[i].writeback, SS_WRITEBACK_OVERWRITE);
    }
    ss_free(cfg);

    /* Global values left at -1: the group gets the N-dependent defaults. */
    static const char *const defaults[] = {
        "sync.groups=[{component: top, algorithm: s-bmuf}]",
    };
    cfg = s_cfg_sets(3, "none", defaults, 1);
    assert_int_equal(tr_sync_groups(cfg, 3, LEN, s_component_of, NULL, g, 2, err, sizeof err), 1);
    assert_true(fabs(g[0].alpha - 0.3) < 1e-12);           /* 0.9 / N */
    assert_true(fabs(g[0].eta - (1.0 - 1.0 / 3)) < 1e-12);  /* 1 - 1/N */
    assert_float_equal(g[0].zeta, 1.0, 0);
    assert_int_equal(g[0].nesterov, 1);
    assert_int_equal(g[0].writeback, SS_WRITEBACK_DELTA);
    ss_free(cfg);
}

/* Regression: BMUF's g, D and t must stay identical on all trainers. A round
 * that completed on rank 0 but timed out on rank 1 used to leave rank 0 with
 * the round's update and rank 1 without it, and their targets differed from
 * then on. Now the next successful round sees (in the allreduce) that a
 * trainer missed one and every trainer restarts from that round's average:
 * g = t = m, D = 0; the rounds after it follow the rule again. */
static void test_issue_bmuf_state_after_partial_round(void **state)
{
    (void)state;
    const double eta = 0.5, zeta = 1.0;
    const int rounds = 5, failed = 2, restart = 3;
    const char *sets[] = {"sync.block_momentum=0.5", "sync.writeback=overwrite"};
    struct ss_cfg *cfg = s_cfg_sets(2, "s-bmuf", sets, 2);
    float (*xs)[8][LEN] = s_inputs(2, rounds);
    struct ring_arg args[2] = {0};
    args[1].fail_round = failed;
    s_run_ring(cfg, 2, rounds, xs, args);
    for (int k = 1; k <= rounds; k++) {
        assert_int_equal(args[0].round_rc[k], 0);
        assert_int_equal(args[1].round_rc[k], k == failed ? SS_E_TIMEOUT : 0);
    }
    /* the failed round left rank 1's replica alone */
    assert_memory_equal(args[1].out[failed], xs[1][failed], sizeof(float) * LEN);
    /* from the restart on, both trainers hold the same target, bit for bit */
    for (int k = restart; k <= rounds; k++)
        if (memcmp(args[0].out[k], args[1].out[k], sizeof(float) * LEN) != 0)
            fail_msg("round %d: ranks 0 and 1 differ", k);
    for (int i = 0; i < LEN; i++) {
        double g = xs[0][0][i], d = 0, t = g;
        for (int k = 1; k <= rounds; k++) {
            double m = ((double)xs[0][k][i] + xs[1][k][i]) / 2;
            if (k == restart) {
                g = t = m;
                d = 0;
            } else {
                d = eta * d + zeta * (m - t);
                g += d;
                t = g + eta * d;
            }
            for (int r = 0; r < 2; r++) {
                if (k == failed && r == 1)
                    continue;
                if (fabs(args[r].out[k][i] - t) > 1e-5 * (1 + fabs(t)))
                    fail_msg("round %d rank %d [%d]: %.9g, want %.9g", k, r, i,
                             args[r].out[k][i], t);
            }
        }
    }
    ss_free(xs);
    ss_free(cfg);
}

int main(void)
{
    ss_log_init("test", SS_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_and_defaults),
        cmocka_unit_test(test_issue_groups_inherit_globals),
        cmocka_unit_test(test_easgd_round),
        cmocka_unit_test(test_issue_easgd_final_pull_empty_ps),
        cmocka_unit_test(test_easgd_reseed_mean_of_replicas),
        cmocka_unit_test(test_easgd_restore_after_final),
        cmocka_unit_test(test_easgd_short_reply_refused),
        cmocka_unit_test(test_ma_exact_mean),
        cmocka_unit_test(test_bmuf_zero_momentum_is_ma),
        cmocka_unit_test(test_bmuf_momentum_rounds),
        cmocka_unit_test(test_issue_bmuf_state_after_partial_round),
        cmocka_unit_test(test_delta_writeback_keeps_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
