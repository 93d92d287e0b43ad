/* test_ps_admit.c - the admission sketch: exact counts for a few keys, the
 * conservative update, saturation, halving, few false counts when loaded,
 * the job's counters split over its shards, and no page touched at start. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"

#include <string.h>

#include "ps_admit.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

/* A few keys in a large sketch count exactly; an unseen key reads 0. */
static void test_exact_counts(void **state)
{
    (void)state;
    struct ps_admit a;
    ps_admit_init(&a, 1u << 16);
    assert_int_equal(ps_admit_bytes(&a), 1u << 16);
    for (unsigned k = 1; k <= 20; k++)
        for (unsigned n = 0; n < k; n++)
            assert_int_equal(ps_admit_add(&a, ss_mix64(k)), n + 1);
    for (unsigned k = 1; k <= 20; k++)
        assert_int_equal(ps_admit_count(&a, ss_mix64(k)), k);
    assert_int_equal(ps_admit_count(&a, ss_mix64(999)), 0);
    ps_admit_fini(&a);
    assert_int_equal(ps_admit_bytes(&a), 0);
    ps_admit_fini(&a);   /* an unused sketch is fine */
}

/* One line of 64 counters (the smallest sketch): colliding keys can only
 * raise a count, and the conservative update raises only the minima, so a
 * key's count never drops below its true count until a halving. */
static void test_collisions_only_raise(void **state)
{
    (void)state;
    struct ps_admit a;
    unsigned truth[6] = {0};
    ps_admit_init(&a, 64);   /* halves every 8 adds: check in between */
    for (unsigned step = 0; step < 7; step++) {
        unsigned k = step % 3;
        truth[k]++;
        unsigned got = ps_admit_add(&a, ss_mix64(k + 100));
        assert_true(got >= truth[k]);
        for (unsigned j = 0; j < 3; j++)
            assert_true(ps_admit_count(&a, ss_mix64(j + 100)) >= truth[j]);
    }
    ps_admit_fini(&a);
}

/* Counts saturate at 255; the halving every bytes / 8 adds halves them. */
static void test_saturate_and_halve(void **state)
{
    (void)state;
    struct ps_admit a;
    uint64_t h = ss_mix64(7);
    ps_admit_init(&a, 4096);   /* halves after 512 adds */
    for (unsigned n = 1; n <= 300; n++)
        assert_int_equal(ps_admit_add(&a, h), n < PS_ADMIT_MAX ? n : PS_ADMIT_MAX);
    assert_int_equal(ps_admit_count(&a, h), 255);
    for (unsigned n = 0; n < 211; n++)   /* adds 301..511 */
        ps_admit_add(&a, ss_mix64(1000 + n));
    assert_int_equal(ps_admit_count(&a, h), 255);
    ps_admit_add(&a, ss_mix64(5000));    /* the 512th add halves everything */
    assert_int_equal(ps_admit_count(&a, h), 127);
    ps_admit_fini(&a);
}

/* Loaded to its halving period with distinct keys, a sketch gives few of
 * them a count of 2 after one add: the false admission rate at
 * admit_after = 2 over a whole period (measured 0.87% here; allow 2%). */
static void test_false_admissions(void **state)
{
    (void)state;
    struct ps_admit a;
    size_t bytes = 1u << 16, n = bytes / 8 - 1, high = 0;
    ps_admit_init(&a, bytes);
    for (size_t i = 0; i < n; i++)
        high += ps_admit_add(&a, ss_mix64(i + 1)) >= 2;
    print_message("%zu of %zu keys seen once count 2 or more\n", high, n);
    assert_true(high * 50 <= n);
    ps_admit_fini(&a);
}

/* The job's counters split over E shards (ss_cfg_admit_shard_bytes), each
 * shard counting the keys it owns: with distinct keys seen once, as many
 * false admissions as one sketch of the whole size counting every key (the
 * same counters and halving period per key), and both few. */
static void test_split_over_shards(void **state)
{
    (void)state;
    enum { E = 8 };
    struct ss_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.admit_sketch_bytes = 1 << 16;
    assert_int_equal(ss_cfg_admit_shard_bytes(&cfg, 1), 1 << 16);
    assert_int_equal(ss_cfg_admit_shard_bytes(&cfg, E), (1 << 16) / E);
    assert_int_equal(ss_cfg_admit_shard_bytes(&cfg, 64), 4096);  /* the floor */
    struct ps_admit whole, part[E];
    size_t bytes = (size_t)cfg.admit_sketch_bytes, n = bytes / 8 - 1 - E, high1 = 0, highE = 0;
    ps_admit_init(&whole, bytes);
    for (int s = 0; s < E; s++)
        ps_admit_init(&part[s], (size_t)ss_cfg_admit_shard_bytes(&cfg, E));
    for (size_t i = 0; i < n; i++) {
        uint64_t h = ss_mix64(i + 1);
        high1 += ps_admit_add(&whole, h) >= 2;
        highE += ps_admit_add(&part[ss_key_shard(i + 1, E)], h) >= 2;
    }
    print_message("%zu keys seen once: %zu count 2 in one sketch, %zu in %d split\n", n, high1,
                  highE, E);
    assert_true(high1 * 50 <= n && highE * 50 <= n);
    assert_true(highE * 2 >= high1 && highE <= high1 * 2);
    ps_admit_fini(&whole);
    for (int s = 0; s < E; s++)
        ps_admit_fini(&part[s]);
}

/* Setting a sketch up touches none of its pages: they are given back, not
 * written, so a PS that counts few keys never pays for the rest (a memset
 * made all of a 64 MiB sketch resident at start). */
static void test_init_touches_nothing(void **state)
{
    (void)state;
    size_t bytes = (size_t)64 << 20, rss0 = ss_mem_rss();
    if (rss0 == 0)
        skip();  /* no /proc */
    struct ps_admit a;
    ps_admit_init(&a, bytes);
    size_t rss1 = ss_mem_rss();
    print_message("RSS %zu -> %zu KiB after a %zu MiB sketch\n", rss0 >> 10, rss1 >> 10,
                  bytes >> 20);
    assert_true(rss1 < rss0 + ((size_t)8 << 20));
    assert_int_equal(ps_admit_count(&a, ss_mix64(7)), 0);  /* reads as zero */
    assert_int_equal(ps_admit_add(&a, ss_mix64(7)), 1);
    ps_admit_fini(&a);
}

int main(void)
{
    ss_log_init("test", SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_counts),
        cmocka_unit_test(test_collisions_only_raise),
        cmocka_unit_test(test_saturate_and_halve),
        cmocka_unit_test(test_false_admissions),
        cmocka_unit_test(test_split_over_shards),
        cmocka_unit_test(test_init_touches_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
