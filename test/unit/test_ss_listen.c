/* test_ss_listen.c - unit tests of the connection monitor (ss_listen): open
 * and accepted counts as clients come and go, a failed handshake (a client
 * without CURVE at a CURVE server) counted, connections beyond the bound shut
 * by one ss_listen_catch_up() however many came in, and the open-file limit
 * helper. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <zmq.h>

#include "ss_listen.h"
#include "ss_time.h"
#include "t.h"

/* Drain until cond holds on the stats or ms pass; returns the last stats. */
static struct ss_listen_stats s_wait(ss_listen_t *l, int64_t open, uint64_t failed, int ms)
{
    struct ss_listen_stats st;
    uint64_t t0 = ss_now_ms();
    for (;;) {
        zmq_pollitem_t it = {ss_listen_socket(l), 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 20);
        ss_listen_drain(l);
        ss_listen_get_stats(l, &st);
        if ((st.open == open && st.handshake_failed >= failed) ||
            (int)(ss_now_ms() - t0) > ms)
            return st;
    }
}

static void *s_dealer(void *zctx, const char *ep)
{
    int linger = 0;
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

static void test_counts(void **state)
{
    (void)state;
    char dir[256], ep[300], err[256];
    void *zctx = zmq_ctx_new(), *c[3];
    int linger = 0;
    assert_int_equal(t_tmpdir(dir, sizeof dir, "listen"), 0);
    snprintf(ep, sizeof ep, "ipc://%s/sock", dir);
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    ss_listen_t *l = ss_listen_new(zctx, router, "test", 100, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(zmq_bind(router, ep), 0);
    for (int i = 0; i < 3; i++)
        c[i] = s_dealer(zctx, ep);
    struct ss_listen_stats st = s_wait(l, 3, 0, 3000);
    assert_int_equal(st.open, 3);
    assert_int_equal(st.accepted, 3);
    assert_int_equal(st.accept_failed, 0);
    assert_true(st.capacity > 0 && st.capacity <= 100);
    zmq_close(c[1]);
    st = s_wait(l, 2, 0, 3000);
    assert_int_equal(st.open, 2);
    zmq_close(c[0]);
    zmq_close(c[2]);
    ss_listen_destroy(&l);
    assert_null(l);
    ss_listen_destroy(&l);
    zmq_close(router);
    zmq_ctx_term(zctx);
    t_rmtree(dir);
}

/* A client without CURVE at a CURVE server: the handshake fails, counted. */
static void test_handshake_failed(void **state)
{
    (void)state;
    char dir[256], ep[300], err[256], pub[41], secret[41];
    void *zctx = zmq_ctx_new();
    int one = 1, linger = 0;
    assert_int_equal(t_tmpdir(dir, sizeof dir, "listen"), 0);
    snprintf(ep, sizeof ep, "ipc://%s/sock", dir);
    assert_int_equal(zmq_curve_keypair(pub, secret), 0);
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, secret, 40);
    ss_listen_t *l = ss_listen_new(zctx, router, "test", 100, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(zmq_bind(router, ep), 0);
    void *c = s_dealer(zctx, ep);
    zmq_send(c, "x", 1, 0);
    struct ss_listen_stats st = s_wait(l, 0, 1, 3000);
    assert_true(st.handshake_failed >= 1);
    assert_true(st.open <= 1);
    zmq_close(c);
    ss_listen_destroy(&l);
    zmq_close(router);
    zmq_ctx_term(zctx);
    t_rmtree(dir);
}

/* 300 clients at a socket that takes 4, each with a message in: nothing was
 * drained while they came (a busy owner). One ss_listen_catch_up() reads
 * every ACCEPTED event (more than one ss_listen_drain() reads) and shuts the
 * 296 beyond the bound; their disconnections then bring the count to 4. */
static void test_catch_up(void **state)
{
    (void)state;
    enum { N = 300, MAX = 4 };
    char dir[256], ep[300], err[256], buf[8];
    void *zctx = zmq_ctx_new(), *c[N];
    int linger = 0, timeout = 10000;
    assert_true(ss_fd_limit_raise(4096) >= 3 * N);
    assert_int_equal(t_tmpdir(dir, sizeof dir, "listen"), 0);
    snprintf(ep, sizeof ep, "ipc://%s/sock", dir);
    void *router = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ss_listen_t *l = ss_listen_new(zctx, router, "test", MAX, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(zmq_bind(router, ep), 0);
    for (int i = 0; i < N; i++) {
        c[i] = s_dealer(zctx, ep);
        assert_int_equal(zmq_send(c[i], "x", 1, 0), 1);
    }
    for (int i = 0; i < N; i++) {  /* routing id, then "x": every client is in */
        assert_true(zmq_recv(router, buf, sizeof buf, 0) >= 0);
        assert_int_equal(zmq_recv(router, buf, sizeof buf, 0), 1);
    }
    ss_listen_catch_up(l);
    struct ss_listen_stats st;
    ss_listen_get_stats(l, &st);
    assert_int_equal(st.accepted, N);
    assert_int_equal(st.accept_failed, N - MAX);
    st = s_wait(l, MAX, 0, 10000);
    assert_int_equal(st.open, MAX);
    for (int i = 0; i < N; i++)
        zmq_close(c[i]);
    ss_listen_destroy(&l);
    zmq_close(router);
    zmq_ctx_term(zctx);
    t_rmtree(dir);
}

static void test_fd_limit(void **state)
{
    (void)state;
    int64_t now = ss_fd_limit_raise(0), fds = ss_fd_count();
    assert_true(now > 0);
    assert_true(fds > 2 && fds < now);
    assert_true(ss_fd_limit_raise(now) >= now);  /* never lowers it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_handshake_failed),
        cmocka_unit_test(test_catch_up),
        cmocka_unit_test(test_fd_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
