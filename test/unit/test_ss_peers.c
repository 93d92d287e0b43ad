/* test_ss_peers.c - unit tests of the set of connections that said HELLO
 * (ss_peers): membership, the oldest forgotten first when full (checked
 * against a plain list over thousands of adds, so the backward-shift
 * deletion keeps every entry reachable), repeated adds, long identities,
 * clearing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ss_peers.h"

/* A ZeroMQ-like identity: 0 then a 4-byte counter (big-endian). */
static void s_id(uint32_t n, uint8_t id[5])
{
    id[0] = 0;
    id[1] = (uint8_t)(n >> 24);
    id[2] = (uint8_t)(n >> 16);
    id[3] = (uint8_t)(n >> 8);
    id[4] = (uint8_t)n;
}

static void test_add_has(void **state)
{
    (void)state;
    ss_peers_t *p = ss_peers_new(4);
    uint8_t a[5], b[5];
    s_id(1, a);
    s_id(2, b);
    assert_int_equal(ss_peers_has(p, a, 5), 0);
    assert_int_equal(ss_peers_add(p, a, 5), 0);
    assert_int_equal(ss_peers_has(p, a, 5), 1);
    assert_int_equal(ss_peers_has(p, b, 5), 0);
    assert_int_equal(ss_peers_has(p, a, 4), 0);               /* a prefix is another id */
    assert_int_equal(ss_peers_add(p, a, 5), 0);               /* twice: still one entry */
    assert_int_equal(ss_peers_count(p), 1);
    uint8_t big[SS_PEER_ID_MAX + 1] = {0};
    assert_int_equal(ss_peers_add(p, big, sizeof big), -1);
    assert_int_equal(ss_peers_add(p, big, 0), -1);
    assert_int_equal(ss_peers_add(p, big, SS_PEER_ID_MAX), 0);
    assert_int_equal(ss_peers_has(p, big, SS_PEER_ID_MAX), 1);
    ss_peers_destroy(&p);
    assert_null(p);
    ss_peers_destroy(&p);
}

/* Add many ids to a small set: exactly the newest `cap` are remembered. */
static void test_oldest_forgotten(void **state)
{
    (void)state;
    enum { CAP = 37, N = 5000 };
    ss_peers_t *p = ss_peers_new(CAP);
    uint8_t id[5];
    int forgotten = 0;
    for (uint32_t i = 0; i < N; i++) {
        s_id(i * 2654435761u, id);  /* scattered over the index */
        forgotten += ss_peers_add(p, id, 5);
        if (i % 97 == 0)
            for (uint32_t j = 0; j <= i; j++) {
                s_id(j * 2654435761u, id);
                assert_int_equal(ss_peers_has(p, id, 5), i - j < CAP);
            }
    }
    assert_int_equal(forgotten, N - CAP);
    assert_int_equal(ss_peers_count(p), CAP);
    ss_peers_destroy(&p);
}

/* Clear forgets everything and leaves a set that works like a new one. */
static void test_clear(void **state)
{
    (void)state;
    enum { CAP = 13 };
    ss_peers_t *p = ss_peers_new(CAP);
    uint8_t id[5];
    ss_peers_clear(p);                                         /* empty: nothing to do */
    assert_int_equal(ss_peers_count(p), 0);
    for (uint32_t i = 0; i < 3 * CAP; i++) {                   /* wrapped ring */
        s_id(i * 2654435761u, id);
        ss_peers_add(p, id, 5);
    }
    assert_int_equal(ss_peers_count(p), CAP);
    ss_peers_clear(p);
    assert_int_equal(ss_peers_count(p), 0);
    for (uint32_t i = 0; i < 3 * CAP; i++) {
        s_id(i * 2654435761u, id);
        assert_int_equal(ss_peers_has(p, id, 5), 0);
    }
    /* refilled: the same forgetting order as a new set */
    int forgotten = 0;
    for (uint32_t i = 0; i < CAP + 5; i++) {
        s_id(i * 40503u + 7, id);
        forgotten += ss_peers_add(p, id, 5);
    }
    assert_int_equal(forgotten, 5);
    assert_int_equal(ss_peers_count(p), CAP);
    for (uint32_t i = 0; i < CAP + 5; i++) {
        s_id(i * 40503u + 7, id);
        assert_int_equal(ss_peers_has(p, id, 5), i >= 5);
    }
    ss_peers_destroy(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_has),
        cmocka_unit_test(test_oldest_forgotten),
        cmocka_unit_test(test_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
