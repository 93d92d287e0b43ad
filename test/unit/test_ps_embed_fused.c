/* test_ps_embed_fused.c - ps_embed_push_lookup_groups(), the one-pass push
 * then lookup of a PUSH_LOOKUP request, against ps_embed_push_groups() then
 * ps_embed_lookup_groups() on a second shard fed the same requests: every
 * lookup, the refusal counts, and at the end every row with its optimizer
 * state, the stats and the shard's invariants must be the same, bit for bit.
 * Under admission, under a memory bound (CLOCK eviction, recency stamps),
 * with no admission (lookups create rows), and at capacity (where the call
 * runs the two parts one after the other). Requests repeat keys within a
 * part and share keys between the push and the lookup; a bad table refuses
 * the whole call. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"
#include "t_embed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_embed.h"
#include "ss_cfg.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"

enum { T = 26, PER = 24, N = T * PER, D = 5, LAG = 2 };

/* The job's shape, small: 26 tables, 64 stripes, first-order rows under
 * rowwise Adagrad; each test changes what it is about. */
static struct ps_embed_conf s_conf(void)
{
    struct ps_embed_conf c = {
        .n_tables = T, .dim = D, .first_order = 1, .optimizer = SS_OPT_ROWWISE_ADAGRAD,
        .lr = 0.5f, .eps = 1e-3f, .init_acc = 0.01f, .init_scale = 0.1f, .seed = 42,
        .capacity_rows = 1u << 20, .n_stripes = 64,
    };
    return c;
}

/* Feed shard a (fused calls) and shard b (two calls) `rounds` requests:
 * request q pushes the keys looked up at q - LAG and looks up fresh keys
 * (a heavy tail over `span` ranks per table, repeats within a table, some
 * keys of the push again). Checks every lookup and refusal count, then the
 * rows of the last requests, the stats and ps_embed_verify(). Returns the
 * stats, and in *n_full the keys refused at capacity. */
static struct ps_embed_stats s_run(const struct ps_embed_conf *c, int rounds, double span,
                                   size_t *n_full)
{
    ps_embed_t *a = ps_embed_new(c), *b = ps_embed_new(c);
    uint32_t tables[T], counts[T];
    uint64_t (*keys)[N] = malloc((LAG + 1) * sizeof *keys), rng = 5;
    float (*grads)[N * D] = malloc((LAG + 1) * sizeof *grads);
    float *ra = malloc(N * D * sizeof(float)), *rb = malloc(N * D * sizeof(float));

    *n_full = 0;
    assert_non_null(a);
    assert_non_null(b);
    for (uint32_t t = 0; t < T; t++) {
        tables[t] = t;
        counts[t] = PER;
    }
    for (int q = 0; q < rounds; q++) {
        uint64_t *k = keys[q % (LAG + 1)];
        float *g = grads[q % (LAG + 1)];
        for (int i = 0; i < N; i++)
            k[i] = (uint64_t)exp(ss_rand_unit_d(&rng) * log(span)) * 7919u + (uint64_t)(i % 3);
        if (q >= LAG)   /* a few keys of the push looked up again */
            for (int i = 0; i < N; i += 7)
                k[i] = keys[(q - LAG) % (LAG + 1)][i];
        for (int i = 0; i < N * D; i++)
            g[i] = ss_rand_unit(&rng) - 0.5f;
        size_t fpa = 0, fla = 0, fpb = 0, flb = 0;
        if (q >= LAG) {
            const uint64_t *pk = keys[(q - LAG) % (LAG + 1)];
            const float *pg = grads[(q - LAG) % (LAG + 1)];
            struct ps_embed_groups push = {T, tables, counts, pk};
            struct ps_embed_groups look = {T, tables, counts, k};
            assert_int_equal(ps_embed_push_lookup_groups(a, &push, pg, &look, ra, &fpa, &fla),
                             0);
            assert_int_equal(ps_embed_push_groups(b, T, tables, counts, pk, pg, &fpb), 0);
        } else {
            struct ps_embed_groups none = {0, NULL, NULL, NULL};
            struct ps_embed_groups look = {T, tables, counts, k};
            assert_int_equal(ps_embed_push_lookup_groups(a, &none, NULL, &look, ra, &fpa, &fla),
                             0);
        }
        assert_int_equal(ps_embed_lookup_groups(b, T, tables, counts, k, rb, &flb), 0);
        assert_memory_equal(ra, rb, N * D * sizeof(float));
        assert_int_equal(fpa, fpb);
        assert_int_equal(fla, flb);
        *n_full += fpa + fla;
    }
    struct ps_embed_stats sa, sb;
    ps_embed_stats(a, &sa);
    ps_embed_stats(b, &sb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    assert_int_equal(ps_embed_rows(a), ps_embed_rows(b));
    assert_int_equal(ps_embed_bytes(a), ps_embed_bytes(b));
    t_embed_rows_equal(a, b, keys[0], LAG + 1, N, PER);
    assert_int_equal(ps_embed_verify(b), 0);
    free(keys);
    free(grads);
    free(ra);
    free(rb);
    ps_embed_destroy(&a);
    ps_embed_destroy(&b);
    return sa;
}

/* make run's settings: admission after 3 pushes (lookups store nothing). */
static void test_fused_admission(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf();
    c.admit_after = 3;
    c.admit_sketch_bytes = 1u << 16;
    size_t full;
    struct ps_embed_stats st = s_run(&c, 40, 2000.0, &full);
    assert_true(st.keys_not_admitted > 0 && st.rows_admitted > 0);
}

/* No admission: a lookup stores the rows it does not find. */
static void test_fused_no_admission(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf();
    size_t full;
    struct ps_embed_stats st = s_run(&c, 30, 5000.0, &full);
    assert_true(st.rows_admitted > 0 && full == 0);
}

/* A memory bound: CLOCK evicts under both, with the same victims; recency
 * stamps and bits on, a TTL as well. */
static void test_fused_memory_bound(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf();
    c.n_stripes = 4;
    c.max_memory_bytes = 4 * (256u << 10);
    c.ttl_s = 100;
    size_t full;
    struct ps_embed_stats st = s_run(&c, 60, 1e6, &full);
    assert_true(st.rows_evicted_memory > 0);
}

/* At capacity the two parts run one after the other: the same keys are
 * refused (and counted) as with two calls. */
static void test_fused_capacity(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf();
    c.capacity_rows = 1500;
    size_t full;
    s_run(&c, 20, 1e5, &full);
    assert_true(full > 0);
}

/* A bad table in either part refuses the call before anything is done. */
static void test_fused_bad_table(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf();
    ps_embed_t *a = ps_embed_new(&c);
    uint32_t good[2] = {0, 1}, bad[2] = {1, T}, counts[2] = {2, 2};
    uint64_t keys[4] = {1, 2, 3, 4};
    float grads[4 * D] = {0}, rows[4 * D];
    struct ps_embed_groups g = {2, good, counts, keys}, x = {2, bad, counts, keys};
    assert_int_equal(ps_embed_push_lookup_groups(a, &x, grads, &g, rows, NULL, NULL),
                     SS_E_RANGE);
    assert_int_equal(ps_embed_push_lookup_groups(a, &g, grads, &x, rows, NULL, NULL),
                     SS_E_RANGE);
    assert_int_equal(ps_embed_rows(a), 0);
    assert_int_equal(ps_embed_push_lookup_groups(a, &g, grads, &g, rows, NULL, NULL), 0);
    assert_int_equal(ps_embed_rows(a), 4);
    ps_embed_destroy(&a);
}

int main(void)
{
    ss_log_init("test", getenv("SS_TEST_LOG") ? SS_LOG_DEBUG : SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_admission),
        cmocka_unit_test(test_fused_no_admission),
        cmocka_unit_test(test_fused_memory_bound),
        cmocka_unit_test(test_fused_capacity),
        cmocka_unit_test(test_fused_bad_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
