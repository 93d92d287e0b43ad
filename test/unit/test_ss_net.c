/* test_ss_net.c - unit tests of the client connection (ss_net): replies
 * matched by request id whatever their order, the stash of early replies and
 * its overflow, timeouts that leave the caller's reply empty, and destroy with
 * replies still stashed, and HELLO said again when a restarted server asks for
 * it. A ROUTER socket in the same thread (inproc) plays the server, so every
 * order is exact. Run under ASan by make test: a reply freed
 * twice or used after the stash gave it up fails the binary. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "ss_err.h"
#include "ss_msg.h"
#include "ss_net.h"
#include "ss_time.h"

#define EP "inproc://test-ss-net"

struct srv {
    void *zctx;              /* shared by server and client */
    void *router;            /* the fake server */
    ss_conn_t *conn;         /* the client under test */
    uint8_t id[SS_MSG_MAX_ID];
    size_t id_len;           /* the client's identity, from its first request */
};

static int s_setup(void **state)
{
    static struct srv s;
    struct ss_conn_opts o = {.max_message_bytes = 1 << 20, .timeout_ms = 2000};
    memset(&s, 0, sizeof s);
    s.zctx = zmq_ctx_new();
    s.router = zmq_socket(s.zctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(s.router, EP), 0);
    s.conn = ss_conn_new(s.zctx, EP, &o);
    assert_non_null(s.conn);
    *state = &s;
    return 0;
}

static int s_teardown(void **state)
{
    struct srv *s = *state;
    ss_conn_destroy(&s->conn);
    assert_null(s->conn);
    ss_conn_destroy(&s->conn);  /* accepts NULL */
    zmq_close(s->router);
    zmq_ctx_term(s->zctx);
    return 0;
}

/* Send a PING; returns its request id. */
static uint64_t s_ping(struct srv *s)
{
    Header h = HEADER__INIT;
    uint64_t id = 0;
    h.type = MSG_TYPE__MSG_PING;
    assert_int_equal(ss_conn_send(s->conn, &h, NULL, 0, &id), 0);
    return id;
}

/* The server takes one request and returns its id (remembers the peer). */
static uint64_t s_take(struct srv *s)
{
    struct ss_msg m;
    char err[256];
    assert_int_equal(ss_msg_recv(s->router, 0, s->id, &s->id_len, &m, err, sizeof err), 0);
    uint64_t id = m.hdr->req_id;
    ss_msg_close(&m);
    return id;
}

/* The server answers request id with status rc and text as error. */
static void s_answer(struct srv *s, uint64_t id, int rc, const char *text)
{
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = MSG_TYPE__MSG_PING;
    h.req_id = id;
    h.has_status = 1;
    h.status = rc;
    h.error = (char *)text;
    assert_int_equal(ss_msg_send(s->router, s->id, s->id_len, &h, NULL, 0), 0);
}

/* Three requests answered in reverse order: each wait gets its own reply. */
static void test_out_of_order(void **state)
{
    struct srv *s = *state;
    struct ss_msg r;
    char err[256];
    uint64_t a = s_ping(s), b = s_ping(s), c = s_ping(s);
    assert_true(a < b && b < c);
    assert_int_equal(s_take(s), a);
    assert_int_equal(s_take(s), b);
    assert_int_equal(s_take(s), c);
    s_answer(s, c, 0, NULL);
    s_answer(s, b, SS_E_RANGE, "b failed");
    s_answer(s, a, 0, NULL);
    assert_int_equal(ss_conn_wait(s->conn, a, 1000, &r, err, sizeof err), 0);
    assert_int_equal(r.hdr->req_id, a);
    ss_msg_close(&r);
    assert_int_equal(ss_conn_wait(s->conn, c, 1000, &r, err, sizeof err), 0);  /* stashed */
    assert_int_equal(r.hdr->req_id, c);
    ss_msg_close(&r);
    assert_int_equal(ss_conn_wait(s->conn, b, 1000, &r, err, sizeof err), SS_E_PEER);
    assert_int_equal(r.hdr->req_id, b);
    assert_non_null(strstr(err, "b failed"));
    ss_msg_close(&r);
}

/* A wait that times out after stashing another request's reply leaves the
 * caller's reply empty (closing it is a no-op), and the stashed reply is
 * still there for its own wait afterwards. This is the shape that freed a
 * stashed reply twice before. */
static void test_timeout_after_stash(void **state)
{
    struct srv *s = *state;
    struct ss_msg r;
    char err[256];
    uint64_t a = s_ping(s), b = s_ping(s);
    assert_int_equal(s_take(s), a);
    assert_int_equal(s_take(s), b);
    s_answer(s, b, 0, NULL);  /* a stalls */
    memset(&r, 0xa5, sizeof r);
    assert_int_equal(ss_conn_wait(s->conn, a, 50, &r, err, sizeof err), SS_E_TIMEOUT);
    assert_null(r.hdr);
    assert_int_equal(r.n_frames, 0);
    assert_int_equal(r.has_packed, 0);  /* else the close reads a packed frame of garbage */
    ss_msg_close(&r);
    assert_non_null(strstr(err, "no reply from " EP));
    assert_int_equal(ss_conn_wait(s->conn, b, 1000, &r, err, sizeof err), 0);
    assert_int_equal(r.hdr->req_id, b);
    ss_msg_close(&r);
    s_answer(s, a, 0, NULL);  /* late: dropped or stashed, never returned for another id */
    uint64_t c = s_ping(s);
    assert_int_equal(s_take(s), c);
    s_answer(s, c, 0, NULL);
    assert_int_equal(ss_conn_wait(s->conn, c, 1000, &r, err, sizeof err), 0);
    assert_int_equal(r.hdr->req_id, c);
    ss_msg_close(&r);
    /* a wait that received nothing at all leaves the reply empty too */
    uint64_t d = s_ping(s);
    assert_int_equal(s_take(s), d);
    memset(&r, 0xa5, sizeof r);
    assert_int_equal(ss_conn_wait(s->conn, d, 20, &r, err, sizeof err), SS_E_TIMEOUT);
    assert_null(r.hdr);
    assert_int_equal(r.n_frames, 0);
    assert_int_equal(r.has_packed, 0);
    ss_msg_close(&r);
}

/* More early replies than the stash holds: the oldest go, the rest are kept
 * and each is returned to its own wait exactly once. */
static void test_stash_overflow(void **state)
{
    struct srv *s = *state;
    enum { N = 80 };  /* the stash holds 64 */
    uint64_t ids[N];
    struct ss_msg r;
    char err[256];
    for (int i = 0; i < N; i++)
        ids[i] = s_ping(s);
    for (int i = 0; i < N; i++)
        assert_int_equal(s_take(s), ids[i]);
    for (int i = 0; i < N; i++)
        s_answer(s, ids[i], 0, NULL);
    /* waiting for the last reads and stashes all the others */
    assert_int_equal(ss_conn_wait(s->conn, ids[N - 1], 1000, &r, err, sizeof err), 0);
    ss_msg_close(&r);
    int found = 0, lost = 0;
    for (int i = N - 2; i >= 0; i--) {
        int rc = ss_conn_wait(s->conn, ids[i], 20, &r, err, sizeof err);
        if (rc == 0) {
            assert_int_equal(r.hdr->req_id, ids[i]);
            found++;
        } else {
            assert_int_equal(rc, SS_E_TIMEOUT);
            assert_null(r.hdr);
            lost++;
        }
        ss_msg_close(&r);
    }
    assert_int_equal(found, 64);
    assert_int_equal(lost, N - 1 - 64);
    /* the ones kept are the newest */
    assert_int_equal(ss_conn_wait(s->conn, ids[N - 2], 20, &r, err, sizeof err), SS_E_TIMEOUT);
}

/* Destroy with replies still stashed: every one is freed once (ASan). */
static void test_destroy_with_stash(void **state)
{
    struct srv *s = *state;
    struct ss_msg r;
    char err[256];
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = s_ping(s);
    for (int i = 0; i < 5; i++)
        assert_int_equal(s_take(s), ids[i]);
    for (int i = 4; i >= 0; i--)
        s_answer(s, ids[i], 0, NULL);
    assert_int_equal(ss_conn_wait(s->conn, ids[0], 1000, &r, err, sizeof err), 0);
    ss_msg_close(&r);
    /* ids[1..4] are stashed now; teardown destroys the connection */
}

/* A server thread that forgets its client once: it answers HELLO, then the
 * first PING with SS_E_NOHELLO (as a restarted PS does), then HELLO and PING
 * normally. It records the request types in order. */
struct forgetful {
    void *zctx;                 /* shared */
    void *router;               /* bound by the test, used by the thread */
    int types[8];               /* request types seen */
    int n;                      /* count */
};

static void *s_forgetful_main(void *arg)
{
    struct forgetful *f = arg;
    int pings = 0;
    while (f->n < 4) {
        uint8_t id[SS_MSG_MAX_ID];
        size_t id_len;
        struct ss_msg m;
        char err[256];
        if (ss_msg_recv(f->router, 0, id, &id_len, &m, err, sizeof err) != 0)
            break;
        Header h = HEADER__INIT;
        h.version = SS_PROTO_VERSION;
        h.type = m.hdr->type;
        h.req_id = m.hdr->req_id;
        h.has_status = 1;
        f->types[f->n++] = m.hdr->type;
        if (m.hdr->type == MSG_TYPE__MSG_PING && pings++ == 0) {
            h.status = SS_E_NOHELLO;
            h.error = "say HELLO first";
        } else {
            h.text = m.hdr->type == MSG_TYPE__MSG_PING ? "pong" : "hello";
        }
        ss_msg_send(f->router, id, id_len, &h, NULL, 0);
        ss_msg_close(&m);
    }
    return NULL;
}

/* A server that answers "HELLO required" after HELLO (it restarted): the
 * connection says HELLO again and ss_conn_call() sends the request once more. */
static void test_hello_again(void **state)
{
    (void)state;
    struct forgetful f = {0};
    struct ss_conn_opts o = {.max_message_bytes = 1 << 20, .timeout_ms = 2000};
    struct ss_msg r;
    char err[256];
    pthread_t t;
    f.zctx = zmq_ctx_new();
    f.router = zmq_socket(f.zctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(f.router, "inproc://test-hello-again"), 0);
    ss_conn_t *c = ss_conn_new(f.zctx, "inproc://test-hello-again", &o);
    assert_non_null(c);
    assert_int_equal(pthread_create(&t, NULL, s_forgetful_main, &f), 0);
    assert_int_equal(ss_conn_hello(c, 42, err, sizeof err), 0);
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_PING;
    assert_int_equal(ss_conn_call(c, &h, NULL, 0, -1, &r, err, sizeof err), 0);
    assert_string_equal(r.hdr->text, "pong");
    ss_msg_close(&r);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(f.n, 4);
    assert_int_equal(f.types[0], MSG_TYPE__MSG_HELLO);
    assert_int_equal(f.types[1], MSG_TYPE__MSG_PING);
    assert_int_equal(f.types[2], MSG_TYPE__MSG_HELLO);  /* said again before the resend */
    assert_int_equal(f.types[3], MSG_TYPE__MSG_PING);
    ss_conn_destroy(&c);
    zmq_close(f.router);
    zmq_ctx_term(f.zctx);
}

/* A server at work (test_progress): takes one request, then says "still
 * working" each every_ms until work_ms have passed (never when every_ms is
 * 0), also once for another request id (to be ignored), keeps quiet for
 * quiet_ms, then answers. */
struct worker {
    void *router;
    int every_ms, work_ms, quiet_ms;
};

static void *s_worker_main(void *arg)
{
    struct worker *w = arg;
    uint8_t id[SS_MSG_MAX_ID];
    size_t id_len;
    struct ss_msg m;
    char err[256];
    if (ss_msg_recv(w->router, 0, id, &id_len, &m, err, sizeof err) != 0)
        return NULL;
    Header h = HEADER__INIT;
    h.version = SS_PROTO_VERSION;
    h.type = m.hdr->type;
    h.req_id = m.hdr->req_id;
    h.has_status = 1;
    ss_msg_close(&m);
    uint64_t t0 = ss_now_ms();
    h.has_progress_ms = 1;
    h.req_id++;   /* another request's: not this wait's */
    h.text = "working: someone else's";
    ss_msg_send(w->router, id, id_len, &h, NULL, 0);
    h.req_id--;
    h.text = "working: 1 of 2 MiB";
    while (w->every_ms && ss_now_ms() - t0 < (uint64_t)w->work_ms) {
        ss_msg_send(w->router, id, id_len, &h, NULL, 0);
        usleep((useconds_t)w->every_ms * 1000);
    }
    usleep((useconds_t)w->quiet_ms * 1000);
    h.has_progress_ms = 0;
    h.text = "done";
    ss_msg_send(w->router, id, id_len, &h, NULL, 0);
    return NULL;
}

/* One request to a worker server; returns the wait's result, its ms in *ms
 * and the "still working" replies it took in *n_prog. */
static int s_progress_case(int every_ms, int work_ms, int quiet_ms, uint64_t *ms,
                           uint64_t *n_prog)
{
    struct worker w = {NULL, every_ms, work_ms, quiet_ms};
    struct ss_conn_opts o = {.max_message_bytes = 1 << 20, .timeout_ms = 400};
    struct ss_msg r;
    char err[256];
    pthread_t t;
    uint64_t id;
    void *zctx = zmq_ctx_new();
    int linger = 0;
    w.router = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(w.router, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_bind(w.router, "inproc://test-progress"), 0);
    ss_conn_t *c = ss_conn_new(zctx, "inproc://test-progress", &o);
    assert_non_null(c);
    assert_int_equal(pthread_create(&t, NULL, s_worker_main, &w), 0);
    Header h = HEADER__INIT;
    h.type = MSG_TYPE__MSG_CHECKPOINT;
    h.has_progress_ms = 1;
    h.progress_ms = (uint32_t)every_ms;
    uint64_t t0 = ss_now_ms();
    assert_int_equal(ss_conn_send(c, &h, NULL, 0, &id), 0);
    int rc = ss_conn_wait(c, id, -1, &r, err, sizeof err);
    *ms = ss_now_ms() - t0;
    *n_prog = ss_conn_progress(c);
    if (rc == 0) {
        assert_string_equal(r.hdr->text, "done");
        assert_int_equal(r.hdr->req_id, id);
        ss_msg_close(&r);
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    ss_conn_destroy(&c);
    zmq_close(w.router);
    zmq_ctx_term(zctx);
    return rc;
}

/* "Still working" replies (Header progress_ms) keep a wait going past its
 * timeout (400 ms) while they come: a server at work for 1.5 s saying so
 * every 50 ms is waited for, each word counted, none returned as the reply,
 * one for another request ignored; one that stops saying so is given up
 * about a timeout after its last word; one that never says so is given up
 * after the timeout, as before. */
static void test_progress(void **state)
{
    (void)state;
    uint64_t ms, n;
    assert_int_equal(s_progress_case(50, 1500, 0, &ms, &n), 0);
    if (ms < 1400 || n < 10)
        fail_msg("waited %llu ms, %llu words: expected the whole 1.5 s and about 30",
                 (unsigned long long)ms, (unsigned long long)n);
    assert_int_equal(s_progress_case(50, 600, 1500, &ms, &n), SS_E_TIMEOUT);
    if (ms < 900 || ms > 2500 || n < 4)   /* 600 + 400 (+ its 300 ms last look) */
        fail_msg("gave up after %llu ms, %llu words: expected about 1.0-1.3 s",
                 (unsigned long long)ms, (unsigned long long)n);
    assert_int_equal(s_progress_case(0, 0, 1000, &ms, &n), SS_E_TIMEOUT);
    if (ms > 1300 || n != 0)
        fail_msg("gave up after %llu ms, %llu words: expected about 0.4-0.7 s, none",
                 (unsigned long long)ms, (unsigned long long)n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_out_of_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_timeout_after_stash, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_stash_overflow, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_destroy_with_stash, s_setup, s_teardown),
        cmocka_unit_test(test_hello_again),
        cmocka_unit_test(test_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
