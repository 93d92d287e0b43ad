/* test_ps_rbuf.c - a service thread's reply buffers: a sent reply's buffer
 * is reused, sizes are honoured, at most PS_RBUF_KEEP are kept, the pool
 * outlives its owner while ZeroMQ holds replies, and buffers come back from
 * another thread while the owner takes new ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <zmq.h>

#include "ps_rbuf.h"
#include "ss_log.h"

/* A closed message's buffer is the next message's (last freed, first used),
 * and a message is as long as asked, its whole length writable. */
static void test_reuse(void **state)
{
    (void)state;
    ps_rbuf_t *p = ps_rbuf_new();
    zmq_msg_t m;

    assert_int_equal(ps_rbuf_msg(p, &m, 1000), 0);
    assert_int_equal(zmq_msg_size(&m), 1000);
    void *first = zmq_msg_data(&m);
    assert_int_equal((uintptr_t)first % 64, 0);
    memset(first, 0xab, 1000);
    assert_int_equal(zmq_msg_close(&m), 0);
    assert_int_equal(ps_rbuf_msg(p, &m, 3000), 0);   /* fits the same buffer */
    assert_ptr_equal(zmq_msg_data(&m), first);
    assert_int_equal(zmq_msg_size(&m), 3000);
    assert_int_equal(zmq_msg_close(&m), 0);
    assert_int_equal(ps_rbuf_msg(p, &m, 0), 0);      /* an empty frame */
    assert_int_equal(zmq_msg_size(&m), 0);
    assert_int_equal(zmq_msg_close(&m), 0);
    ps_rbuf_release(&p);
    assert_null(p);
    ps_rbuf_release(&p);   /* NULL is fine */
    ps_rbuf_release(NULL);
}

/* A request larger than the free buffer gets a new one of its size; the
 * contents of messages open at once never overlap. */
static void test_sizes(void **state)
{
    (void)state;
    enum { N = PS_RBUF_KEEP + 4 };
    ps_rbuf_t *p = ps_rbuf_new();
    zmq_msg_t m[N];
    size_t sz[N];

    for (int i = 0; i < N; i++) {
        sz[i] = 1000u + (size_t)i * 37000u;
        assert_int_equal(ps_rbuf_msg(p, &m[i], sz[i]), 0);
        memset(zmq_msg_data(&m[i]), i, sz[i]);
    }
    for (int i = 0; i < N; i++) {
        const unsigned char *d = zmq_msg_data(&m[i]);
        assert_int_equal(zmq_msg_size(&m[i]), sz[i]);
        for (size_t k = 0; k < sz[i]; k += 997)
            assert_int_equal(d[k], i);
        assert_int_equal(d[sz[i] - 1], i);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(zmq_msg_close(&m[i]), 0);
    /* now the largest request again: a kept buffer or a new one, all its bytes */
    assert_int_equal(ps_rbuf_msg(p, &m[0], sz[N - 1]), 0);
    memset(zmq_msg_data(&m[0]), 1, sz[N - 1]);
    assert_int_equal(zmq_msg_close(&m[0]), 0);
    ps_rbuf_release(&p);
}

/* The owner lets go while messages are still open (replies queued in
 * ZeroMQ): they stay valid, and the last one closed frees the pool (ASan
 * sees any leak or use after free). A copy shares the buffer. */
static void test_release_first(void **state)
{
    (void)state;
    ps_rbuf_t *p = ps_rbuf_new();
    zmq_msg_t a, b, c;

    assert_int_equal(ps_rbuf_msg(p, &a, 5000), 0);
    assert_int_equal(ps_rbuf_msg(p, &b, 7000), 0);
    assert_int_equal(zmq_msg_init(&c), 0);
    assert_int_equal(zmq_msg_copy(&c, &b), 0);
    ps_rbuf_release(&p);
    memset(zmq_msg_data(&a), 3, 5000);
    assert_int_equal(zmq_msg_close(&a), 0);
    assert_int_equal(zmq_msg_close(&b), 0);
    memset(zmq_msg_data(&c), 4, 7000);    /* the copy still holds the buffer */
    assert_int_equal(zmq_msg_close(&c), 0);
}

/* Messages closed on another thread (as ZeroMQ's I/O thread does) while
 * the owner takes new ones: every message is whole, nothing is lost. */
struct s_pipe {
    zmq_msg_t q[64];          /* messages handed to the closer */
    _Atomic unsigned head;    /* written by the owner */
    _Atomic unsigned tail;    /* written by the closer */
    unsigned n;               /* messages in all */
    int bad;                  /* the closer saw a message not as written */
};

static void *s_closer(void *arg)
{
    struct s_pipe *pp = arg;
    for (unsigned done = 0; done < pp->n;) {
        unsigned t = atomic_load(&pp->tail);
        if (t == atomic_load(&pp->head)) {
            sched_yield();
            continue;
        }
        zmq_msg_t *m = &pp->q[t % 64];
        const unsigned char *d = zmq_msg_data(m);
        size_t n = zmq_msg_size(m);
        if (n == 0 || d[0] != (unsigned char)t || d[n - 1] != (unsigned char)t)
            pp->bad = 1;
        zmq_msg_close(m);
        atomic_store(&pp->tail, t + 1);
        done++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    static struct s_pipe pp;
    ps_rbuf_t *p = ps_rbuf_new();
    pthread_t th;

    pp.n = 5000;
    atomic_store(&pp.head, 0);
    atomic_store(&pp.tail, 0);
    assert_int_equal(pthread_create(&th, NULL, s_closer, &pp), 0);
    for (unsigned i = 0; i < pp.n; i++) {
        while (i - atomic_load(&pp.tail) >= 64)
            sched_yield();
        size_t n = 100u + (i * 7919u) % 60000u;
        zmq_msg_t *m = &pp.q[i % 64];
        assert_int_equal(ps_rbuf_msg(p, m, n), 0);
        memset(zmq_msg_data(m), (unsigned char)i, n);
        atomic_store(&pp.head, i + 1);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(pp.bad, 0);
    ps_rbuf_release(&p);
}

int main(void)
{
    ss_log_init("test", SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_release_first),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
