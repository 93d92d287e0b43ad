/* test_tr_admin.c - unit tests of a trainer's admin endpoint (tr_admin):
 * nothing but HELLO before HELLO, a HELLO with another config hash refused
 * by name, then PING, STATS (the text the trainer's stats function gives),
 * CONFIG (the running value; an unknown key is an error), a request type it
 * does not serve answered with an error, and a taken port stopping it at
 * start with the port named. Over real TCP on 127.0.0.1. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_msg_types.h"
#include "ss_net.h"
#include "t.h"
#include "tr_admin.h"

static char *s_stats(void *arg, size_t max)
{
    (void)max;
    atomic_fetch_add((atomic_int *)arg, 1);  /* the admin thread; the test reads it */
    return ss_strdup("{\"rank\":1,\"examples\":42}");
}

struct fix {
    struct ss_cfg *cfg;
    ss_cluster_t *cl;
    void *zctx;
    char ep[64];
    atomic_int stats_calls;
};

/* Trainer 1 of 2 with admin endpoints on free ports; --set batch 77. */
static void s_setup(struct fix *f)
{
    char err[512] = "", tr[160], ad[160];
    memset(f, 0, sizeof *f);
    int p0 = t_port(), p1 = t_port(), a0 = t_port(), a1 = t_port();
    assert_true(p0 && p1 && a0 && a1);
    snprintf(tr, sizeof tr, "cluster.trainers=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d", p0, p1);
    snprintf(ad, sizeof ad, "cluster.trainer_admin=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d", a0,
             a1);
    snprintf(f->ep, sizeof f->ep, "tcp://127.0.0.1:%d", a1);
    const char *sets[] = {tr, ad, "trainer.batch_size=77"};
    f->cfg = ss_calloc(1, sizeof *f->cfg);
    if (ss_cfg_load(f->cfg, NULL, sets, 3, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    struct ss_cluster_id me = {SS_CLUSTER_TRAINER, 1};
    f->cl = ss_cluster_new(f->cfg, &me, NULL, err, sizeof err);
    if (!f->cl)
        fail_msg("cluster: %s", err);
    f->zctx = zmq_ctx_new();
}

static void s_teardown(struct fix *f)
{
    zmq_ctx_term(f->zctx);
    ss_cluster_destroy(&f->cl);
    ss_free(f->cfg);
}

/* One request of type (text: the CONFIG key) on c; returns rc, reply text
 * (or the error) in out. */
static int s_call(ss_conn_t *c, int type, const char *text, char *out, size_t len)
{
    Header h = HEADER__INIT;
    struct ss_msg reply = {0};
    char err[512] = "";
    h.type = (MsgType)type;
    h.text = (char *)text;
    int rc = ss_conn_call(c, &h, NULL, 0, 3000, &reply, err, sizeof err);
    snprintf(out, len, "%s", rc == 0 ? (reply.hdr->text ? reply.hdr->text : "") : err);
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

static void test_requests(void **state)
{
    (void)state;
    struct fix f;
    char err[512] = "", out[1024];
    s_setup(&f);
    struct tr_admin_conf ac = {f.zctx, f.cl, f.cfg, NULL, s_stats, &f.stats_calls};
    tr_admin_t *adm = tr_admin_new(&ac, err, sizeof err);
    if (!adm)
        fail_msg("admin: %s", err);
    struct ss_conn_opts o = {.max_message_bytes = 1 << 20, .timeout_ms = 3000};
    ss_conn_t *c = ss_conn_new(f.zctx, f.ep, &o);
    assert_non_null(c);

    assert_int_equal(s_call(c, MSG_TYPE__MSG_PING, NULL, out, sizeof out), SS_E_PEER);
    assert_non_null(strstr(out, "say HELLO first"));
    assert_int_equal(ss_conn_hello(c, 12345, err, sizeof err), SS_E_PEER);
    assert_non_null(strstr(err, "hash mismatch"));
    assert_int_equal(ss_conn_hello(c, ss_cluster_hello_hash(f.cl, SS_CLUSTER_TRAINER, 0), err,
                                   sizeof err),
                     SS_E_PEER);  /* trainer 0's hash: another trainer */

    assert_int_equal(ss_conn_hello(c, ss_cluster_hello_hash(f.cl, SS_CLUSTER_TRAINER, 1), err,
                                   sizeof err),
                     0);
    assert_int_equal(s_call(c, MSG_TYPE__MSG_PING, NULL, out, sizeof out), 0);
    assert_string_equal(out, "pong");
    assert_int_equal(s_call(c, MSG_TYPE__MSG_STATS, NULL, out, sizeof out), 0);
    assert_string_equal(out, "{\"rank\":1,\"examples\":42}");
    assert_int_equal(atomic_load(&f.stats_calls), 1);
    assert_int_equal(s_call(c, MSG_TYPE__MSG_CONFIG, "trainer.batch_size", out, sizeof out), 0);
    assert_string_equal(out, "77");
    assert_int_equal(s_call(c, MSG_TYPE__MSG_CONFIG, "no.such.key", out, sizeof out),
                     SS_E_PEER);
    assert_non_null(strstr(out, "no config key 'no.such.key'"));
    assert_int_equal(s_call(c, MSG_TYPE__MSG_CHECKPOINT, NULL, out, sizeof out), SS_E_PEER);
    assert_non_null(strstr(out, "not served by a trainer (only HELLO, PING, STATS, CONFIG)"));
    assert_int_equal(tr_admin_requests(adm), 9);  /* every request above */

    ss_conn_destroy(&c);
    tr_admin_destroy(&adm);
    assert_null(adm);
    tr_admin_destroy(&adm);
    s_teardown(&f);
}

/* The admin endpoint serves what ss_msg_types.h gives a trainer handler,
 * and only read-only types (tr_admin.h: nothing here changes the trainer). */
static void test_serves_read_only_rows(void **state)
{
    (void)state;
    size_t n_served = 0;
    for (size_t i = 0; i < SS_MSG_N_TYPES; i++) {
        const struct ss_msg_type *t = ss_msg_type_at(i);
        if (!tr_admin_serves(t->type))
            continue;
        n_served++;
        if (!t->read_only)
            fail_msg("%s has a trainer handler but changes what a server holds", t->name);
        assert_int_equal(t->admin, 0);
    }
    assert_int_equal(n_served, 4);  /* HELLO, PING, STATS, CONFIG */
    assert_true(tr_admin_serves(MSG_TYPE__MSG_CONFIG));
    assert_false(tr_admin_serves(MSG_TYPE__MSG_SHUTDOWN));
    assert_false(tr_admin_serves(MSG_TYPE__MSG_NONE));
    assert_false(tr_admin_serves(9));  /* no MsgType value */
}

static void test_port_taken(void **state)
{
    (void)state;
    struct fix f;
    char err[512] = "";
    s_setup(&f);
    void *holder = zmq_socket(f.zctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(holder, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(holder, f.ep), 0);
    struct tr_admin_conf ac = {f.zctx, f.cl, f.cfg, NULL, s_stats, &f.stats_calls};
    tr_admin_t *adm = tr_admin_new(&ac, err, sizeof err);
    assert_null(adm);
    if (!strstr(err, "cannot bind") || !strstr(err, f.ep + 16))
        fail_msg("error: %s", err);
    zmq_close(holder);
    s_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_serves_read_only_rows),
        cmocka_unit_test(test_port_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
