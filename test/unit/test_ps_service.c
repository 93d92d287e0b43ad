/* test_ps_service.c - unit tests of ps_service_reset(): after HELLO, pushes,
 * lookups and a SHUTDOWN, a reset service holds no rows, has forgotten the
 * HELLO (a LOOKUP is refused with SS_E_NOHELLO until the client says HELLO
 * again), counts from zero, serves as before on the same sockets, and no
 * longer stops ps_service_run() for the SHUTDOWN.
 * Requests go through ps_service_serve_one() on a ROUTER the test owns, the
 * way the fuzz harness test/fuzz/fuzz_ps_msg.c drives the service. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "ps_service.h"
#include "ps_service_int.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_msg_types.h"
#include "ss_net.h"
#include "ss_time.h"
#include "t_ps.h"
#include "t_nomem.h"

#define DIM 4

struct fixture {
    struct ss_cfg *cfg;
    ss_cluster_t *cl;
    ps_service_t *svc;
    void *zctx;        /* the test's context: the ROUTER and the client */
    void *router;      /* what ps_service_serve_one() reads */
    ss_conn_t *conn;   /* the client */
};

/* The service and a client; run_dir: job.run_dir, or NULL for the default;
 * extra: one more "key=value" setting, or NULL. */
static void s_setup_with(struct fixture *f, const char *run_dir, const char *extra)
{
    char err[512] = "", rd[600];
    const char *sets[] = {
        "cluster.embedding=inproc://t-ps-emb", "cluster.sync=inproc://t-ps-sync",
        "cluster.trainers=inproc://t-ps-tr", "data.format=libffm", "data.fields=2",
        "model.embedding_dim=4", "model.first_order=false", "model.bottom_mlp=8,4",
        "tables.count=2",
        "tables.admit_after=0", "tables.admit_sketch_bytes=4096", NULL, NULL,
    };
    size_t n_sets = sizeof sets / sizeof sets[0] - 2;  /* room for run_dir and extra */
    if (run_dir) {
        snprintf(rd, sizeof rd, "job.run_dir=%s", run_dir);
        sets[n_sets++] = rd;
    }
    if (extra)
        sets[n_sets++] = extra;
    ss_log_level_now = SS_LOG_ERROR + 1;  /* the NOHELLO refusal logs on purpose */
    f->cfg = ss_calloc(1, sizeof *f->cfg);
    if (ss_cfg_load(f->cfg, NULL, sets, n_sets, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    struct ss_cluster_id me = {SS_CLUSTER_EMBEDDING, 0};
    f->cl = ss_cluster_new(f->cfg, &me, NULL, err, sizeof err);
    if (!f->cl)
        fail_msg("cluster: %s", err);
    struct ps_service_conf conf = {f->cfg, f->cl, NULL, 0};
    f->svc = ps_service_new(&conf, err, sizeof err);
    if (!f->svc)
        fail_msg("ps_service_new: %s", err);
    f->zctx = zmq_ctx_new();
    f->router = zmq_socket(f->zctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(f->router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(f->router, "inproc://t-ps-router"), 0);
    struct ss_conn_opts opts = {.max_message_bytes = 1 << 20, .timeout_ms = 5000};
    f->conn = ss_conn_new(f->zctx, "inproc://t-ps-router", &opts);
    assert_non_null(f->conn);
}

static void s_setup_in(struct fixture *f, const char *run_dir)
{
    s_setup_with(f, run_dir, NULL);
}

static void s_setup(struct fixture *f)
{
    s_setup_in(f, NULL);
}

static void s_teardown(struct fixture *f)
{
    ss_conn_destroy(&f->conn);
    zmq_close(f->router);
    zmq_ctx_term(f->zctx);
    ps_service_destroy(&f->svc);
    ss_cluster_destroy(&f->cl);
    ss_free(f->cfg);
}

/* One request served by the service: send, serve it, wait for the reply.
 * Returns the reply's status (0 or an SS_E_*); with text_n, a successful
 * reply's text read as a number into *text_n. */
static int s_call_text(struct fixture *f, Header *h, const struct ss_frame *frames, size_t n,
                       long *text_n)
{
    struct ss_msg reply;
    char err[512] = "";
    uint64_t req_id;
    assert_int_equal(ss_conn_send(f->conn, h, frames, n, &req_id), 0);
    zmq_pollitem_t item = {f->router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&item, 1, 5000), 1);
    ps_service_serve_one(f->svc, f->router);
    int rc = ss_conn_wait(f->conn, req_id, 5000, &reply, err, sizeof err);
    assert_true(rc == 0 || rc == SS_E_PEER);
    int status = reply.hdr->status;
    assert_int_equal(status == 0, rc == 0);
    if (status == 0 && text_n)
        *text_n = strtol(reply.hdr->text, NULL, 10);
    ss_msg_close(&reply);
    return status;
}

static int s_call(struct fixture *f, Header *h, const struct ss_frame *frames, size_t n)
{
    return s_call_text(f, h, frames, n, NULL);
}

static int s_hello(struct fixture *f)
{
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_HELLO;
    h.has_config_hash = 1;
    h.config_hash = ss_cluster_hello_hash(f->cl, SS_CLUSTER_EMBEDDING, 0);
    return s_call(f, &h, NULL, 0);
}

/* PUSH (push = 1, gradient 0.25) or LOOKUP of n keys of table 0. */
static int s_keys(struct fixture *f, int push, size_t n)
{
    struct t_ps_keys r;
    t_ps_keys(&r, push, n, DIM, 0.25f);
    return s_call(f, &r.h, r.frames, r.n_frames);
}

/* LOOKUP of n distinct keys of table 0 (any n). */
static int s_lookup_n(struct fixture *f, size_t n)
{
    uint64_t *keys = ss_calloc(n, sizeof *keys);
    uint32_t tables[1] = {0}, counts[1] = {(uint32_t)n};
    for (size_t i = 0; i < n; i++)
        keys[i] = ss_key_make(0, 1000 + i);
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_LOOKUP;
    h.n_tables = h.n_counts = 1;
    h.tables = tables;
    h.counts = counts;
    struct ss_frame frames[1] = {{keys, n * sizeof keys[0]}};
    int status = s_call(f, &h, frames, 1);
    ss_free(keys);
    return status;
}

static int s_shutdown(struct fixture *f)
{
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_SHUTDOWN;
    return s_call(f, &h, NULL, 0);
}

static volatile sig_atomic_t s_stop;  /* ps_service_run()'s stop flag */

static void s_on_usr1(int sig)
{
    (void)sig;
    s_stop = 1;
}

/* After 300 ms, signals thread *arg (the main thread), whose handler sets
 * s_stop: the flag is written where ps_service_run() reads it, as a real
 * signal does (a write from this thread would be a data race). */
static void *s_stopper(void *arg)
{
    usleep(300 * 1000);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

/* limits.max_message_bytes 8192: a reply holds 4096 bytes of rows at most
 * (PS_REPLY_SLACK keeps the rest), 256 rows of 4 floats. A lookup of 256
 * keys is served, one of 257 is refused with SS_E_TOOBIG (the client could
 * not receive the reply), counted, and the PS serves on. */
static void test_reply_over_max_message(void **state)
{
    (void)state;
    struct fixture f;
    s_setup_with(&f, NULL, "limits.max_message_bytes=8192");
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_lookup_n(&f, 256), 0);
    assert_int_equal(s_lookup_n(&f, 257), SS_E_TOOBIG);
    assert_int_equal(s_lookup_n(&f, 4000), SS_E_TOOBIG);
    assert_int_equal(s_lookup_n(&f, 10), 0);
    assert_true(t_stat_is(f.svc, "bad_requests", 2));
    s_teardown(&f);
}

static void test_reset(void **state)
{
    (void)state;
    struct fixture f;
    s_setup(&f);
    assert_int_equal(s_keys(&f, 0, 1), SS_E_NOHELLO);
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_keys(&f, 1, 5), 0);
    assert_int_equal(s_keys(&f, 0, 3), 0);
    assert_int_equal(s_shutdown(&f), 0);
    assert_true(t_stat_is(f.svc, "rows", 5));
    assert_true(t_stat_is(f.svc, "req_push", 1));
    assert_true(t_stat_is(f.svc, "req_hello", 1));
    assert_true(t_stat_is(f.svc, "refused_no_hello", 1));
    assert_true(t_stat_is(f.svc, "hello_peers", 1));

    char err[512] = "";
    assert_int_equal(ps_service_reset(f.svc, err, sizeof err), 0);
    assert_true(t_stat_is(f.svc, "rows", 0));
    assert_true(t_stat_is(f.svc, "req_push", 0));
    assert_true(t_stat_is(f.svc, "req_lookup", 0));
    assert_true(t_stat_is(f.svc, "req_hello", 0));
    assert_true(t_stat_is(f.svc, "req_shutdown", 0));
    assert_true(t_stat_is(f.svc, "refused_no_hello", 0));
    assert_true(t_stat_is(f.svc, "bytes_in", 0));
    assert_true(t_stat_is(f.svc, "hello_peers", 0));

    /* the HELLO is forgotten, the same sockets serve on */
    assert_int_equal(s_keys(&f, 0, 2), SS_E_NOHELLO);
    assert_true(t_stat_is(f.svc, "refused_no_hello", 1));
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_keys(&f, 1, 2), 0);
    assert_true(t_stat_is(f.svc, "rows", 2));
    assert_true(t_stat_is(f.svc, "req_push", 1));

    /* the SHUTDOWN is forgotten too: ps_service_run() (inline, ps.threads
     * = 1) returns at once after a SHUTDOWN, and serves on after a reset
     * until its stop flag is set */
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_usr1;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old_sa), 0);
    s_stop = 0;
    assert_int_equal(s_shutdown(&f), 0);
    uint64_t t0 = ss_now_ms();
    assert_int_equal(ps_service_run(f.svc, &s_stop), 0);
    assert_true(ss_now_ms() - t0 < 1000);
    assert_int_equal(ps_service_reset(f.svc, err, sizeof err), 0);
    pthread_t t, self = pthread_self();
    assert_int_equal(pthread_create(&t, NULL, s_stopper, &self), 0);
    t0 = ss_now_ms();
    assert_int_equal(ps_service_run(f.svc, &s_stop), 0);
    assert_true(ss_now_ms() - t0 >= 250);
    assert_int_equal(s_stop, 1);
    pthread_join(t, NULL);
    sigaction(SIGUSR1, &old_sa, NULL);
    assert_int_equal(ps_service_reset(f.svc, err, sizeof err), 0);
    assert_true(t_stat_is(f.svc, "rows", 0));
    s_teardown(&f);
}

/* CHECKPOINT folder text; returns the reply's status. */
static int s_checkpoint(struct fixture *f, const char *dir)
{
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_CHECKPOINT;
    h.text = (char *)dir;
    return s_call(f, &h, NULL, 0);
}

/* A CHECKPOINT writes only inside the PS's run directory or checkpoint
 * folder: relative folders there, absolute ones only when inside; an
 * absolute folder elsewhere (or a ".." component) is refused and nothing is
 * created. */
static void test_checkpoint_folder(void **state)
{
    (void)state;
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600], p[800];
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    struct fixture f;
    s_setup_in(&f, run);
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_keys(&f, 1, 3), 0);

    assert_int_equal(s_checkpoint(&f, "model.new-1"), 0);  /* relative: in the run dir */
    snprintf(p, sizeof p, "%s/model.new-1/embedding-0.ckpt", run);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/jobckpt.new-2", run);            /* absolute, inside */
    assert_int_equal(s_checkpoint(&f, p), 0);
    snprintf(p, sizeof p, "%s/jobckpt.new-2/embedding-0.ckpt", run);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(s_checkpoint(&f, NULL), 0);              /* none: RUN_DIR/ckpt */
    snprintf(p, sizeof p, "%s/ckpt/embedding-0.ckpt", run);
    assert_int_equal(access(p, F_OK), 0);

    snprintf(p, sizeof p, "%s/elsewhere", base);               /* absolute, outside */
    assert_int_equal(s_checkpoint(&f, p), SS_E_INVAL);
    assert_int_equal(access(p, F_OK), -1);
    snprintf(p, sizeof p, "%s-x/model", run);                  /* a prefix, not inside */
    assert_int_equal(s_checkpoint(&f, p), SS_E_INVAL);
    snprintf(p, sizeof p, "%s-x", run);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(s_checkpoint(&f, "../up"), SS_E_INVAL);
    snprintf(p, sizeof p, "%s/a/../../up", run);
    assert_int_equal(s_checkpoint(&f, p), SS_E_INVAL);
    snprintf(p, sizeof p, "%s/up", base);
    assert_int_equal(access(p, F_OK), -1);
    s_teardown(&f);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* CHECKPOINT_DONE FOLDER: returns the reply's status; *n: its count. */
static int s_checkpoint_done(struct fixture *f, const char *dir, long *n)
{
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_CHECKPOINT_DONE;
    h.text = (char *)dir;
    return s_call_text(f, &h, NULL, 0, n);
}

static int s_exists(const char *run, const char *rel)
{
    char p[900];
    snprintf(p, sizeof p, "%s/%s", run, rel);
    return access(p, F_OK) == 0;
}

/* After a save is committed, CHECKPOINT_DONE naming its folder removes this
 * PS's file from the folders of the other saves of that name (earlier ones,
 * failed ones) and each folder left empty; it never touches the committed
 * folder, another name's folders, or files that are not this PS's. */
static void test_checkpoint_done(void **state)
{
    (void)state;
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600], p[900];
    const char *a = "jobckpt.new-00000000000000a1", *b = "jobckpt.new-00000000000000b2",
               *c = "jobckpt.new-00000000000000c3", *m = "model.new-00000000000000a1";
    long n = -1;
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    struct fixture f;
    s_setup_in(&f, run);
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_keys(&f, 1, 3), 0);
    assert_int_equal(s_checkpoint(&f, a), 0);
    assert_int_equal(s_checkpoint(&f, b), 0);
    assert_int_equal(s_checkpoint(&f, c), 0);
    assert_int_equal(s_checkpoint(&f, m), 0);
    snprintf(p, sizeof p, "%s/%s/trainer-1.state", run, b);  /* another process's part */
    FILE *o = fopen(p, "w");
    assert_non_null(o);
    fclose(o);

    assert_int_equal(s_checkpoint_done(&f, c, &n), 0);  /* c committed */
    assert_int_equal(n, 2);
    assert_false(s_exists(run, a));                       /* emptied: removed */
    assert_false(s_exists(run, "jobckpt.new-00000000000000b2/embedding-0.ckpt"));
    assert_true(s_exists(run, "jobckpt.new-00000000000000b2/trainer-1.state"));
    assert_true(s_exists(run, "jobckpt.new-00000000000000c3/embedding-0.ckpt"));
    assert_true(s_exists(run, "model.new-00000000000000a1/embedding-0.ckpt"));
    assert_int_equal(s_checkpoint_done(&f, c, &n), 0);  /* again: nothing left to drop */
    assert_int_equal(n, 0);
    assert_true(s_exists(run, "jobckpt.new-00000000000000c3/embedding-0.ckpt"));

    assert_int_equal(s_checkpoint_done(&f, "jobckpt", &n), SS_E_INVAL);  /* not a save's */
    assert_int_equal(s_checkpoint_done(&f, "../jobckpt.new-00000000000000c3", &n), SS_E_INVAL);
    assert_int_equal(s_checkpoint_done(&f, "", &n), SS_E_INVAL);
    assert_true(s_exists(run, "jobckpt.new-00000000000000c3/embedding-0.ckpt"));
    s_teardown(&f);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* A request of type naming folder dir (NULL: none) with save_id (0: none)
 * and admin token (NULL: none); returns the reply's status. */
static int s_admin_req(struct fixture *f, int type, const char *dir, uint64_t save_id,
                       const char *token)
{
    Header h = HEADER__INIT;
    h.type = type;
    h.text = (char *)dir;
    h.has_save_id = save_id != 0;
    h.save_id = save_id;
    h.admin_token = (char *)token;
    return s_call(f, &h, NULL, 0);
}

/* RESTORE FOLDER SAVE_ID: the shard goes back to its file of that save,
 * online, and the reply comes when it is done; the committed save's
 * DIR.new-ID is read when it holds the file. A RESTORE with no folder, a
 * folder outside the run directory or with "..", a missing file, a file of
 * another save, a corrupt or a truncated one is refused, counted, and leaves the shard as
 * it was; the PS serves on. Without the admin token it is refused
 * (SS_E_DENIED). */
static void test_restore(void **state)
{
    (void)state;
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600], p[900], q[900], tok[700], set[760];
    const char *token = "restore-test-token-0123456789";
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    snprintf(tok, sizeof tok, "%s/admin.token", base);
    FILE *o = fopen(tok, "w");
    assert_non_null(o);
    fprintf(o, "%s\n", token);
    fclose(o);
    assert_int_equal(chmod(tok, 0600), 0);
    snprintf(set, sizeof set, "security.admin_token_file=%s", tok);
    struct fixture f;
    s_setup_with(&f, run, set);
    int R = MSG_TYPE__MSG_RESTORE, C = MSG_TYPE__MSG_CHECKPOINT;
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_keys(&f, 1, 3), 0);
    assert_int_equal(s_admin_req(&f, C, "model", 0xa1, token), 0);
    assert_int_equal(s_admin_req(&f, C, "m2.new-00000000000000c3", 0xc3, token), 0);
    assert_int_equal(s_keys(&f, 1, 6), 0);  /* training went on: 3 more rows */
    assert_true(t_stat_is(f.svc, "rows", 6));

    /* refusals: the shard stays as it is, each counted, the PS serves on */
    assert_int_equal(s_admin_req(&f, R, "model", 0xa1, NULL), SS_E_DENIED);
    assert_int_equal(s_admin_req(&f, R, "model", 0xa1, "not-the-token-0000000"), SS_E_DENIED);
    assert_true(t_stat_is(f.svc, "refused_not_admin", 2));
    assert_int_equal(s_admin_req(&f, R, NULL, 0xa1, token), SS_E_INVAL);
    assert_int_equal(s_admin_req(&f, R, "", 0xa1, token), SS_E_INVAL);
    assert_int_equal(s_admin_req(&f, R, "../model", 0xa1, token), SS_E_INVAL);
    snprintf(p, sizeof p, "%s/model", base);                   /* absolute, outside */
    assert_int_equal(s_admin_req(&f, R, p, 0xa1, token), SS_E_INVAL);
    assert_int_equal(s_admin_req(&f, R, "nosuch", 0xa1, token), SS_E_NOTFOUND);
    assert_int_equal(s_admin_req(&f, R, "model", 0xb2, token), SS_E_CORRUPT);  /* other save */
    snprintf(p, sizeof p, "%s/model/embedding-0.ckpt", run);   /* a corrupt copy */
    snprintf(q, sizeof q, "%s/bad", run);
    assert_int_equal(mkdir(q, 0755), 0);
    snprintf(q, sizeof q, "%s/bad/embedding-0.ckpt", run);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && printf 'XXXX' | dd of='%s' bs=1 seek=200 "
             "conv=notrunc 2>/dev/null", p, q, q);
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(s_admin_req(&f, R, "bad", 0, token), 0);
    snprintf(q, sizeof q, "%s/trunc", run);                    /* a truncated copy */
    assert_int_equal(mkdir(q, 0755), 0);
    snprintf(q, sizeof q, "%s/trunc/embedding-0.ckpt", run);
    snprintf(cmd, sizeof cmd, "head -c $(( $(stat -c %%s '%s') - 40 )) '%s' > '%s'", p, p, q);
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(s_admin_req(&f, R, "trunc", 0, token), 0);
    assert_int_not_equal(s_admin_req(&f, R, "trunc", 0xa1, token), 0);
    assert_true(t_stat_is(f.svc, "bad_requests", 9));
    assert_true(t_stat_is(f.svc, "req_restore", 9));  /* counted apart from CHECKPOINT */
    assert_true(t_stat_is(f.svc, "req_checkpoint", 2));
    assert_true(t_stat_is(f.svc, "rows", 6));
    assert_int_equal(s_keys(&f, 0, 6), 0);  /* serves on */

    /* the kept save, by its folder; then one whose folder kept its .new-ID name */
    assert_int_equal(s_admin_req(&f, R, "model", 0xa1, token), 0);
    assert_true(t_stat_is(f.svc, "rows", 3));
    assert_int_equal(s_keys(&f, 1, 8), 0);
    assert_true(t_stat_is(f.svc, "rows", 8));
    assert_int_equal(s_admin_req(&f, R, "m2", 0xc3, token), 0);
    assert_true(t_stat_is(f.svc, "rows", 3));
    snprintf(p, sizeof p, "%s/model", run);                    /* absolute, inside; any save */
    assert_int_equal(s_admin_req(&f, R, p, 0, token), 0);
    assert_true(t_stat_is(f.svc, "rows", 3));
    assert_int_equal(s_keys(&f, 0, 3), 0);
    assert_true(t_stat_is(f.svc, "req_restore", 12));
    assert_true(t_stat_is(f.svc, "req_checkpoint", 2));
    s_teardown(&f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* LOOKUP of n distinct keys of table 0 from first on (stored: rows). */
static int s_lookup_from(struct fixture *f, uint64_t first, size_t n)
{
    uint64_t *keys = ss_calloc(n, sizeof *keys);
    uint32_t tables[1] = {0}, counts[1] = {(uint32_t)n};
    for (size_t i = 0; i < n; i++)
        keys[i] = ss_key_make(0, first + i);
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_LOOKUP;
    h.n_tables = h.n_counts = 1;
    h.tables = tables;
    h.counts = counts;
    struct ss_frame frames[1] = {{keys, n * sizeof keys[0]}};
    int status = s_call(f, &h, frames, 1);
    ss_free(keys);
    return status;
}

enum { NM_ROWS = 300000, NM_CALL = 50000 };

/* In a forked child (t_nomem.h): a PS of NM_ROWS rows saves "model", moves
 * on, and gets a RESTORE of it while the process has about margin bytes to
 * spare: the reply is an error naming the file, the bytes and the fix,
 * restores_no_memory counts it, the shard holds and serves what it held;
 * with the memory the same RESTORE goes back to the save. */
static void s_restore_no_memory_child(void *arg)
{
    const char *run = ((const char **)arg)[0];
    size_t margin = *(const size_t *)((void **)arg)[1];
    struct fixture f;
    struct ss_msg reply;
    char err[1024] = "", want[700];
    uint64_t req_id;
    s_setup_in(&f, run);
    T_CHILD_CHECK(s_hello(&f) == 0);
    for (uint64_t k = 0; k < NM_ROWS; k += NM_CALL)
        T_CHILD_CHECK(s_lookup_from(&f, k, NM_CALL) == 0);
    T_CHILD_CHECK(s_admin_req(&f, MSG_TYPE__MSG_CHECKPOINT, "model", 0xa1, NULL) == 0);
    T_CHILD_CHECK(s_lookup_from(&f, NM_ROWS, 1000) == 0);   /* moved on: 1,000 more rows */
    T_CHILD_CHECK(t_stat_is(f.svc, "rows", NM_ROWS + 1000));

    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_RESTORE;
    h.text = "model";
    h.has_save_id = 1;
    h.save_id = 0xa1;
    T_CHILD_CHECK(ss_conn_send(f.conn, &h, NULL, 0, &req_id) == 0);
    zmq_pollitem_t item = {f.router, 0, ZMQ_POLLIN, 0};
    T_CHILD_CHECK(zmq_poll(&item, 1, 5000) == 1);
    struct t_nomem *ball = malloc(sizeof *ball);
    T_CHILD_CHECK(ball);
    t_nomem_begin(ball, margin);
    ps_service_serve_one(f.svc, f.router);
    t_nomem_end(ball);
    free(ball);
    T_CHILD_CHECK(ss_conn_wait(f.conn, req_id, 5000, &reply, err, sizeof err) == SS_E_PEER);
    T_CHILD_CHECK(reply.hdr->status == SS_E_NOMEM);
    ss_msg_close(&reply);
    fprintf(stderr, "RESTORE under the cap (margin %zu): %s\n", margin, err);
    snprintf(want, sizeof want, "RESTORE from %s/model/embedding-0.ckpt refused: not enough "
             "memory", run);
    T_CHILD_CHECK(strstr(err, want) != NULL);
    T_CHILD_CHECK(strstr(err, "the shard is as it was and serves on"));
    T_CHILD_CHECK(strstr(err, "shadow-ps --restore"));
    T_CHILD_CHECK(margin == 0 || strstr(err, " bytes more)"));
    T_CHILD_CHECK(t_stat_is(f.svc, "restores_no_memory", 1));
    T_CHILD_CHECK(t_stat_is(f.svc, "req_restore", 1));
    T_CHILD_CHECK(t_stat_is(f.svc, "rows", NM_ROWS + 1000));
    T_CHILD_CHECK(s_lookup_from(&f, NM_ROWS - 500, 1500) == 0);   /* serves on */
    T_CHILD_CHECK(t_stat_is(f.svc, "rows", NM_ROWS + 1000));
    T_CHILD_CHECK(s_admin_req(&f, MSG_TYPE__MSG_RESTORE, "model", 0xa1, NULL) == 0);
    T_CHILD_CHECK(t_stat_is(f.svc, "rows", NM_ROWS));
    T_CHILD_CHECK(t_stat_is(f.svc, "restores_no_memory", 1));
    s_teardown(&f);
}

/* A RESTORE the PS cannot get the memory for is refused cleanly (issue 24):
 * an error reply with what to do, a counter, the shard serving on; with no
 * memory to spare at all and with a little (t_nomem.h). Not under a
 * sanitizer. */
static void test_restore_no_memory(void **state)
{
    (void)state;
    if (T_SANITIZED) {
        fprintf(stderr, "test_restore_no_memory: skipped under a sanitizer\n");
        skip();
    }
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600], cmd[700];
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    size_t margins[2] = {0, T_BIG};
    for (int m = 0; m < 2; m++) {
        const void *arg[2] = {run, &margins[m]};
        int st = t_nomem_fork(s_restore_no_memory_child, arg);
        if (st != 0)
            fail_msg("margin %zu: the child's wait status is %d", margins[m], st);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* Each row of ss_msg_types.h that names a PS role has a PS handler, and
 * the route table serves it on that role only. */
static void test_routes_follow_table(void **state)
{
    (void)state;
    size_t n_embed = 0, n_sync = 0;
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        int embed = t->ps == SS_MSG_PS_BOTH || t->ps == SS_MSG_PS_EMBED;
        int sync = t->ps == SS_MSG_PS_BOTH || t->ps == SS_MSG_PS_SYNC;
        if (ps_service_serves(t->type, PS_ROLE_EMBEDDING) != embed ||
            ps_service_serves(t->type, PS_ROLE_SYNC) != sync)
            fail_msg("%s: the route table and its row of ss_msg_types.h disagree", t->name);
        n_embed += (size_t)embed;
        n_sync += (size_t)sync;
    }
    assert_int_equal(n_embed, 11);  /* 8 for both roles, LOOKUP, PUSH, PUSH_LOOKUP */
    assert_int_equal(n_sync, 11);   /* 8 for both roles, INIT, ELASTIC, PULL */
    assert_false(ps_service_serves(MSG_TYPE__MSG_AR_CHUNK, PS_ROLE_EMBEDDING));
    assert_false(ps_service_serves(MSG_TYPE__MSG_NONE, PS_ROLE_SYNC));
}

/* PUSH of n keys first, first + 1, ... of table 0, gradient 0.25 each. */
static int s_push_range(struct fixture *f, uint64_t first, size_t n)
{
    uint64_t *keys = ss_calloc(n, sizeof *keys);
    float *g = ss_calloc(n * DIM, sizeof *g);
    uint32_t tables[1] = {0}, counts[1] = {(uint32_t)n};
    for (size_t i = 0; i < n; i++)
        keys[i] = ss_key_make(0, first + i);
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = 0.25f;
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_PUSH;
    h.n_tables = h.n_counts = 1;
    h.tables = tables;
    h.counts = counts;
    h.has_dim = 1;
    h.dim = DIM;
    struct ss_frame frames[2] = {{keys, n * sizeof *keys}, {g, n * DIM * sizeof *g}};
    int status = s_call(f, &h, frames, 2);
    ss_free(keys);
    ss_free(g);
    return status;
}

/* A request of type on a raw DEALER (dir in text, progress_ms 0 when
 * progress), served; the replies it got, in order, into out (at most
 * max); returns how many. */
static size_t s_raw_replies(struct fixture *f, void *dealer, int type, const char *dir,
                            int progress, uint64_t req_id, struct ss_msg *out, size_t max)
{
    Header h = HEADER__INIT;
    char err[256];
    h.version = SS_PROTO_VERSION;
    h.type = type;
    h.req_id = req_id;
    h.text = (char *)dir;
    h.has_progress_ms = progress;
    h.progress_ms = 0;
    assert_int_equal(ss_msg_send(dealer, NULL, 0, &h, NULL, 0), 0);
    zmq_pollitem_t item = {f->router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&item, 1, 5000), 1);
    ps_service_serve_one(f->svc, f->router);
    size_t n = 0;
    while (n < max && ss_msg_recv(dealer, ZMQ_DONTWAIT, NULL, NULL, &out[n], err,
                                  sizeof err) == 0)
        n++;
    return n;
}

/* A raw DEALER on the service's ROUTER that has said HELLO (its replies
 * read one by one with ss_msg_recv). */
static void *s_raw_dealer(struct fixture *f)
{
    void *dealer = zmq_socket(f->zctx, ZMQ_DEALER);
    int linger = 0;
    struct ss_msg r;
    char err[256];
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(dealer, "inproc://t-ps-router"), 0);
    Header hello = HEADER__INIT;
    hello.version = SS_PROTO_VERSION;
    hello.type = MSG_TYPE__MSG_HELLO;
    hello.req_id = 1;
    hello.has_config_hash = 1;
    hello.config_hash = ss_cluster_hello_hash(f->cl, SS_CLUSTER_EMBEDDING, 0);
    assert_int_equal(ss_msg_send(dealer, NULL, 0, &hello, NULL, 0), 0);
    ps_service_serve_one(f->svc, f->router);
    assert_int_equal(ss_msg_recv(dealer, 0, NULL, NULL, &r, err, sizeof err), 0);
    assert_int_equal(r.hdr->status, 0);
    ss_msg_close(&r);
    return dealer;
}

/* A CHECKPOINT or RESTORE that asks for "still working" replies
 * (progress_ms; 0: one each MiB of the file) gets one per MiB written or
 * read before its reply: each with the request's type and req_id, status 0,
 * progress_ms set and a text naming the file and how far it is (of how
 * much, when read); the last reply is the usual one, without progress_ms.
 * The same requests without progress_ms get the one reply. */
static void test_progress_replies(void **state)
{
    (void)state;
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600];
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    struct fixture f;
    s_setup_in(&f, run);
    assert_int_equal(s_hello(&f), 0);
    for (uint64_t k = 0; k < 4; k++)   /* 100,000 rows: a file of about 3.8 MiB */
        assert_int_equal(s_push_range(&f, k * 25000, 25000), 0);
    assert_true(t_stat_is(f.svc, "rows", 100000));

    void *dealer = s_raw_dealer(&f);
    struct ss_msg r[64];

    int types[2] = {MSG_TYPE__MSG_CHECKPOINT, MSG_TYPE__MSG_RESTORE};
    const char *words[2] = {" written", " read"};
    for (int t = 0; t < 2; t++) {
        uint64_t id = 10 + (uint64_t)t;
        size_t n = s_raw_replies(&f, dealer, types[t], "model", 1, id, r, 64);
        if (n < 4)
            fail_msg("%s: %zu replies, expected one each MiB of a 3.8 MiB file and the last",
                     words[t], n);
        for (size_t i = 0; i < n; i++) {
            const Header *h = r[i].hdr;
            assert_int_equal(h->type, types[t]);
            assert_int_equal(h->req_id, id);
            assert_int_equal(h->status, 0);
            assert_int_equal(h->has_progress_ms, i + 1 < n);  /* the last is the reply */
            assert_non_null(h->text);
            assert_non_null(strstr(h->text, "embedding-0.ckpt"));
            if (i + 1 < n) {
                assert_non_null(strstr(h->text, "working: "));
                assert_non_null(strstr(h->text, words[t]));
                assert_true(t == 0 || strstr(h->text, " MiB of ") != NULL);
            }
            ss_msg_close(&r[i]);
        }
        /* without progress_ms: the one reply */
        n = s_raw_replies(&f, dealer, types[t], "model", 0, id + 10, r, 64);
        assert_int_equal(n, 1);
        assert_false(r[0].hdr->has_progress_ms);
        assert_int_equal(r[0].hdr->status, 0);
        ss_msg_close(&r[0]);
    }
    assert_true(t_stat_is(f.svc, "rows", 100000));
    zmq_close(dealer);
    s_teardown(&f);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* Holds the service's ckpt_lock for about 800 ms (another CHECKPOINT, or
 * the recovery checkpoint, writing a large file on another thread). */
struct s_holder {
    ps_service_t *svc;
    int held;           /* set once the lock is held (atomically read) */
};

static void *s_hold_ckpt_lock(void *arg)
{
    struct s_holder *h = arg;
    assert_int_equal(pthread_mutex_lock(&h->svc->ckpt_lock), 0);
    __atomic_store_n(&h->held, 1, __ATOMIC_RELEASE);
    usleep(800000);
    assert_int_equal(pthread_mutex_unlock(&h->svc->ckpt_lock), 0);
    return NULL;
}

/* A CHECKPOINT or RESTORE that asked for "still working" replies and waits
 * for another checkpoint of the shard (ckpt_lock) gets them while it waits,
 * not only while it writes or reads: else a client gives up on a PS whose
 * other thread (or recovery timer) writes a file longer than its timeout. */
static void test_progress_while_waiting(void **state)
{
    (void)state;
    char base[] = "/tmp/ss-ps-service-XXXXXX", run[600];
    assert_non_null(mkdtemp(base));
    snprintf(run, sizeof run, "%s/run", base);
    struct fixture f;
    s_setup_in(&f, run);
    assert_int_equal(s_hello(&f), 0);
    assert_int_equal(s_push_range(&f, 0, 1000), 0);

    void *dealer = s_raw_dealer(&f);
    struct ss_msg r[64];

    int types[2] = {MSG_TYPE__MSG_CHECKPOINT, MSG_TYPE__MSG_RESTORE};
    for (int t = 0; t < 2; t++) {
        struct s_holder h = {f.svc, 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, s_hold_ckpt_lock, &h), 0);
        while (!__atomic_load_n(&h.held, __ATOMIC_ACQUIRE))
            usleep(1000);
        uint64_t id = 20 + (uint64_t)t;
        size_t n = s_raw_replies(&f, dealer, types[t], "model", 1, id, r, 64);
        assert_int_equal(pthread_join(th, NULL), 0);
        size_t waiting = 0;
        for (size_t i = 0; i < n; i++) {
            const Header *hd = r[i].hdr;
            assert_int_equal(hd->req_id, id);
            assert_int_equal(hd->status, 0);
            assert_int_equal(hd->has_progress_ms, i + 1 < n);
            if (i + 1 < n) {
                assert_non_null(hd->text);
                assert_non_null(strstr(hd->text, "working: "));
                waiting += strstr(hd->text, "working: waiting") != NULL;
            }
            ss_msg_close(&r[i]);
        }
        if (waiting < 2)
            fail_msg("type %d: %zu 'working: waiting' replies (of %zu) while the checkpoint "
                     "lock was held 800 ms, expected about one each 250 ms", types[t], waiting,
                     n);
    }
    zmq_close(dealer);
    s_teardown(&f);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_follow_table),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_reply_over_max_message),
        cmocka_unit_test(test_checkpoint_folder),
        cmocka_unit_test(test_checkpoint_done),
        cmocka_unit_test(test_restore),
        cmocka_unit_test(test_restore_no_memory),
        cmocka_unit_test(test_progress_replies),
        cmocka_unit_test(test_progress_while_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
