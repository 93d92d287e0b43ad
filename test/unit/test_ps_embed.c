/* test_ps_embed.c - the embedding shard: each optimizer against hand-computed
 * values (with and without L2 decay), first-order weights (zero init, their own
 * rowwise accumulator), the deterministic initializer, table range and capacity
 * policy, exact sums from concurrent pushes, bounded memory (admission counts,
 * TTL on an injected clock, LRU order under max_memory_bytes, deletion and
 * reuse under concurrent lookups and pushes), and checkpoint round trips (with
 * evictions too) and rejections. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"
#include "t_embed.h"
#include "t_nomem.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ps_embed.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_rowinit.h"

/* A checkpoint writer that records only its shard number. */
#define WHO(k) (&(struct ps_ckpt_who){.shard = (k)})

/* |got - want| <= tol, printing both values. */
#define ASSERT_NEAR(got, want, tol)                                                   \
    do {                                                                              \
        double g_ = (got), w_ = (want);                                               \
        if (!(fabs(g_ - w_) <= (tol)))                                                \
            fail_msg("%s = %.9g, expected %.9g (tol %g)", #got, g_, w_, (double)(tol)); \
    } while (0)

static struct ps_embed_conf s_conf(int optimizer, uint32_t dim)
{
    struct ps_embed_conf c = {
        .n_tables = 3,
        .dim = dim,
        .optimizer = optimizer,
        .lr = 0.5f,
        .eps = 1.0f,
        .init_acc = 0.0f,
        .init_scale = 0.0f,   /* rows start at 0: values below are hand-computable */
        .seed = 42,
        .capacity_rows = 1u << 16,
        .n_stripes = 8,
    };
    return c;
}

static void test_bad_conf(void **state)
{
    (void)state;
    struct ps_embed_conf good = s_conf(SS_OPT_ROWWISE_ADAGRAD, 4), c;
    ps_embed_t *e = ps_embed_new(&good);
    assert_non_null(e);
    assert_int_equal(ps_embed_row_floats(e), 5);
    ps_embed_destroy(&e);
    assert_null(e);
    ps_embed_destroy(&e);
    ps_embed_destroy(NULL);

#define BAD(field, value)                      \
    do {                                       \
        c = good;                              \
        c.field = value;                       \
        assert_null(ps_embed_new(&c));         \
    } while (0)
    BAD(n_tables, 0);
    BAD(n_tables, UINT32_MAX);
    BAD(dim, 0);
    BAD(dim, 65537);
    BAD(optimizer, 3);
    BAD(optimizer, -1);
    BAD(lr, -0.1f);
    BAD(lr, NAN);
    BAD(eps, -1.0f);
    BAD(init_acc, INFINITY);
    BAD(init_scale, -1.0f);
    BAD(l2, -0.5f);
    BAD(l2, NAN);
    BAD(first_order, 2);
    BAD(capacity_rows, 0);
    BAD(n_stripes, 0);
    BAD(n_stripes, 6);
    BAD(n_stripes, 1u << 17);
    c = good;
    c.eps = 0;
    c.init_acc = 0;
    assert_null(ps_embed_new(&c));   /* Adagrad would divide 0 by 0 */
    c.optimizer = SS_OPT_SGD;
    e = ps_embed_new(&c);            /* SGD does not care */
    assert_non_null(e);
    assert_int_equal(ps_embed_row_floats(e), 4);
    ps_embed_destroy(&e);
    c = good;
    c.first_order = 1;
    e = ps_embed_new(&c);            /* rowwise: one more accumulator */
    assert_non_null(e);
    assert_int_equal(ps_embed_row_floats(e), 6);
    ps_embed_destroy(&e);
    c.dim = 1;
    assert_null(ps_embed_new(&c));   /* no room for an embedding beside the weight */
#undef BAD
}

/* SGD: w -= lr * g, from w = 0 with lr = 0.5. */
static void test_sgd_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 4);
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 12345;
    float g1[4] = {1, -2, 0.5f, 4}, g2[4] = {2, 2, 2, 2};
    float w[4];
    size_t full = 0;

    assert_int_equal(ps_embed_push(e, 1, &key, 1, g1, &full), 0);
    assert_int_equal(ps_embed_lookup(e, 1, &key, 1, w, &full), 0);
    ASSERT_FEQ(w[0], -0.5f);
    ASSERT_FEQ(w[1], 1.0f);
    ASSERT_FEQ(w[2], -0.25f);
    ASSERT_FEQ(w[3], -2.0f);
    assert_int_equal(ps_embed_push(e, 1, &key, 1, g2, &full), 0);
    assert_int_equal(ps_embed_read_row(e, 1, key, w), 0);   /* SGD has no state */
    ASSERT_FEQ(w[0], -1.5f);
    ASSERT_FEQ(w[1], 0.0f);
    ASSERT_FEQ(w[2], -1.25f);
    ASSERT_FEQ(w[3], -3.0f);
    assert_int_equal(full, 0);
    assert_int_equal(ps_embed_rows(e), 1);

    /* the same key in another table is another row */
    assert_int_equal(ps_embed_lookup(e, 2, &key, 1, w, NULL), 0);
    ASSERT_FEQ(w[0], 0.0f);
    assert_int_equal(ps_embed_rows(e), 2);
    ps_embed_destroy(&e);
}

/* SGD from the initializer row: w = init - lr * g (lr * g exact, one rounding). */
static void test_sgd_from_init(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 8);
    c.init_scale = 0.1f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t keys[3] = {7, 0, UINT64_MAX};   /* 0 and all-ones are ordinary keys */
    float g[3 * 8], init[8], w[3 * 8];

    for (size_t i = 0; i < 3 * 8; i++)
        g[i] = 0.25f * (float)((int)i - 12);
    assert_int_equal(ps_embed_push(e, 0, keys, 3, g, NULL), 0);
    assert_int_equal(ps_embed_lookup(e, 0, keys, 3, w, NULL), 0);
    for (size_t k = 0; k < 3; k++) {
        ps_embed_init_row(e, 0, keys[k], init);
        for (size_t i = 0; i < 8; i++)
            ASSERT_FEQ(w[k * 8 + i], init[i] - 0.5f * g[k * 8 + i]);
    }
    assert_int_equal(ps_embed_rows(e), 3);
    ps_embed_destroy(&e);
}

/* Adagrad, lr 0.5, eps 1, acc0 0:
 *   g = (3, 4): acc = (9, 16), w = (-0.5*3/(3+1), -0.5*4/(4+1)) = (-0.375, -0.4)
 *   g = (0, 3): acc = (9, 25), w1 = -0.4 - 0.5*3/(5+1) = -0.65 */
static void test_adagrad_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ADAGRAD, 2);
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 99;
    float g1[2] = {3, 4}, g2[2] = {0, 3};
    float r[4];

    assert_int_equal(ps_embed_row_floats(e), 4);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), SS_E_NOTFOUND);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    ASSERT_NEAR(r[0], -0.375, 1e-7);
    ASSERT_NEAR(r[1], -0.4, 1e-7);
    ASSERT_FEQ(r[2], 9.0f);
    ASSERT_FEQ(r[3], 16.0f);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    ASSERT_NEAR(r[0], -0.375, 1e-7);
    ASSERT_NEAR(r[1], -0.65, 1e-7);
    ASSERT_FEQ(r[2], 9.0f);
    ASSERT_FEQ(r[3], 25.0f);

    /* duplicates in one call apply one after another: the same as two calls,
     * not as the summed gradient (3, 7), which would give w1 = -0.5*7/8 */
    uint64_t dup[2] = {5, 5};
    float gd[4] = {3, 4, 0, 3};
    assert_int_equal(ps_embed_push(e, 0, dup, 2, gd, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, 5, r), 0);
    ASSERT_NEAR(r[1], -0.65, 1e-7);
    ASSERT_FEQ(r[3], 25.0f);
    ps_embed_destroy(&e);
}

/* Adagrad with init_acc: acc0 = 0.5, eps = 0.01, g = 1.5: acc = 2.75,
 * w = -lr * 1.5 / (sqrt(2.75) + 0.01). */
static void test_adagrad_init_acc(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ADAGRAD, 3);
    c.init_acc = 0.5f;
    c.eps = 0.01f;
    c.lr = 0.1f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 3;
    float g[3] = {1.5f, 0, -1}, r[6];

    assert_int_equal(ps_embed_lookup(e, 2, &key, 1, r, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 2, key, r), 0);
    ASSERT_FEQ(r[3], 0.5f);   /* fresh accumulators */
    ASSERT_FEQ(r[5], 0.5f);
    assert_int_equal(ps_embed_push(e, 2, &key, 1, g, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 2, key, r), 0);
    ASSERT_NEAR(r[0], -0.1 * 1.5 / (sqrt(2.75) + 0.01), 1e-7);
    ASSERT_FEQ(r[1], 0.0f);
    ASSERT_NEAR(r[2], 0.1 * 1.0 / (sqrt(1.5) + 0.01), 1e-7);
    ASSERT_FEQ(r[3], 2.75f);
    ASSERT_FEQ(r[4], 0.5f);
    ASSERT_FEQ(r[5], 1.5f);
    ps_embed_destroy(&e);
}

/* Rowwise Adagrad, lr 0.5, eps 1, acc0 3.5:
 *   g = (3, 4): acc += (9+16)/2 = 12.5 -> 16; step 0.5/(4+1) = 0.1; w = (-0.3, -0.4)
 *   g = (1, -7): acc += 25 -> 41; w -= 0.5/(sqrt(41)+1) * g */
static void test_rowwise_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 2);
    c.init_acc = 3.5f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 1;
    float g1[2] = {3, 4}, g2[2] = {1, -7};
    float r[3];

    assert_int_equal(ps_embed_row_floats(e), 3);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    ASSERT_NEAR(r[0], -0.3, 1e-7);
    ASSERT_NEAR(r[1], -0.4, 1e-7);
    ASSERT_FEQ(r[2], 16.0f);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    double step = 0.5 / (sqrt(41.0) + 1.0);
    ASSERT_NEAR(r[0], -0.3 - step * 1.0, 1e-6);
    ASSERT_NEAR(r[1], -0.4 + step * 7.0, 1e-6);
    ASSERT_FEQ(r[2], 41.0f);
    ps_embed_destroy(&e);
}

/* L2 under SGD, lr 0.5, l2 0.5, w = g - lr (g + l2 w):
 *   g = (1, -2) from w = 0: w = (-0.5, 1)
 *   g = (1, 1): w = (-0.5 - 0.5 (1 - 0.25), 1 - 0.5 (1 + 0.5)) = (-0.875, 0.25)
 *   g = (0, 0): the row still decays: w = w (1 - 0.25) = (-0.65625, 0.1875) */
static void test_l2_sgd_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 2);
    c.l2 = 0.5f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 8, other = 9;
    float g1[2] = {1, -2}, g2[2] = {1, 1}, g0[2] = {0, 0}, w[2];

    assert_int_equal(ps_embed_push(e, 0, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, w), 0);
    ASSERT_FEQ(w[0], -0.5f);
    ASSERT_FEQ(w[1], 1.0f);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, w), 0);
    ASSERT_FEQ(w[0], -0.875f);
    ASSERT_FEQ(w[1], 0.25f);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g0, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, w), 0);
    ASSERT_FEQ(w[0], -0.65625f);
    ASSERT_FEQ(w[1], 0.1875f);
    /* lazy: a lookup does not decay, and rows not pushed are not touched */
    assert_int_equal(ps_embed_push(e, 0, &other, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_lookup(e, 0, &key, 1, w, NULL), 0);
    ASSERT_FEQ(w[0], -0.65625f);
    ASSERT_FEQ(w[1], 0.1875f);
    ps_embed_destroy(&e);
}

/* L2 under Adagrad (lr 0.5, eps 1, l2 0.5): the decayed gradient d = g + l2 w
 * goes into the accumulator too.
 *   g = (3, 4) from w = 0: as test_adagrad_exact, w = (-0.375, -0.4), acc (9, 16)
 *   g = (0, 3): d = (-0.1875, 2.8), acc = (9.03515625, 23.84),
 *               w -= 0.5 d / (sqrt(acc) + 1) */
static void test_l2_adagrad_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ADAGRAD, 2);
    c.l2 = 0.5f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 99;
    float g1[2] = {3, 4}, g2[2] = {0, 3}, r[4];

    assert_int_equal(ps_embed_push(e, 0, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    ASSERT_NEAR(r[0], -0.375 + 0.5 * 0.1875 / (sqrt(9.03515625) + 1.0), 1e-7);
    ASSERT_NEAR(r[1], -0.4 - 0.5 * 2.8 / (sqrt(23.84) + 1.0), 1e-7);
    ASSERT_FEQ(r[2], 9.03515625f);
    ASSERT_NEAR(r[3], 23.84, 1e-5);
    ps_embed_destroy(&e);
}

/* L2 under rowwise Adagrad (lr 0.5, eps 1, acc0 3.5, l2 0.5):
 *   g = (3, 4): as test_rowwise_exact, w = (-0.3, -0.4), acc 16
 *   g = (1, -7): d = (0.85, -7.2), acc += (0.7225 + 51.84) / 2 -> 42.28125,
 *                w -= 0.5 / (sqrt(42.28125) + 1) d */
static void test_l2_rowwise_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 2);
    c.init_acc = 3.5f;
    c.l2 = 0.5f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 1;
    float g1[2] = {3, 4}, g2[2] = {1, -7}, r[3];

    assert_int_equal(ps_embed_push(e, 0, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    ASSERT_NEAR(r[0], -0.3, 1e-7);
    ASSERT_FEQ(r[2], 16.0f);
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    double step = 0.5 / (sqrt(42.28125) + 1.0);
    ASSERT_NEAR(r[0], -0.3 - step * 0.85, 1e-6);
    ASSERT_NEAR(r[1], -0.4 + step * 7.2, 1e-6);
    ASSERT_NEAR(r[2], 42.28125, 1e-5);
    ps_embed_destroy(&e);
}

/* First-order rows: the first dim - 1 floats are the initializer row of a shard
 * without first-order weights (same draws), the last starts at 0. */
static void test_first_order_init(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 5), c0 = s_conf(SS_OPT_SGD, 4);
    c.first_order = 1;
    c.init_scale = c0.init_scale = 0.05f;
    ps_embed_t *e = ps_embed_new(&c), *e0 = ps_embed_new(&c0);
    float row[5], row0[4], r[7];
    size_t nonzero = 0;

    assert_int_equal(ps_embed_row_floats(e), 7);   /* 5 + embedding acc + weight acc */
    for (uint64_t key = 0; key < 50; key++) {
        ps_embed_init_row(e, 2, key, row);
        ps_embed_init_row(e0, 2, key, row0);
        assert_memory_equal(row, row0, sizeof row0);
        ASSERT_FEQ(row[4], 0.0f);
        for (int i = 0; i < 4; i++)
            nonzero += row[i] != 0.0f;
        assert_int_equal(ps_embed_lookup(e, 2, &key, 1, r, NULL), 0);
        assert_memory_equal(r, row, sizeof row);
    }
    assert_int_equal(nonzero, 200);
    assert_int_equal(ps_embed_read_row(e, 2, 3, r), 0);
    ASSERT_FEQ(r[5], 0.0f);    /* both accumulators start at init_acc */
    ASSERT_FEQ(r[6], 0.0f);
    ps_embed_destroy(&e);
    ps_embed_destroy(&e0);
}

/* Rowwise Adagrad with a first-order weight (dim 3 = 2 + 1, lr 0.5, eps 1): each
 * part has its own accumulator.
 *   g = (2, 2 | 3): acc_e = (4 + 4) / 2 = 4, w_e = -0.5 / (2 + 1) * 2 each;
 *                   acc_u = 9, w_u = -0.5 * 3 / (3 + 1) = -0.375
 *   g = (0, 0 | 4): acc_e stays 4 and w_e stays (a big first-order gradient
 *                   does not shrink the embedding's steps); acc_u = 25,
 *                   w_u = -0.375 - 0.5 * 4 / (5 + 1)
 * One shared accumulator would have given acc = (4 + 4 + 9) / 3 after the first
 * push instead. */
static void test_first_order_rowwise_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 3);
    c.first_order = 1;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 11;
    float g1[3] = {2, 2, 3}, g2[3] = {0, 0, 4}, r[5];
    float we = -(0.5f / 3.0f) * 2.0f;

    assert_int_equal(ps_embed_push(e, 1, &key, 1, g1, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 1, key, r), 0);
    ASSERT_FEQ(r[0], we);
    ASSERT_FEQ(r[1], we);
    ASSERT_FEQ(r[2], -0.375f);
    ASSERT_FEQ(r[3], 4.0f);
    ASSERT_FEQ(r[4], 9.0f);
    assert_int_equal(ps_embed_push(e, 1, &key, 1, g2, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 1, key, r), 0);
    ASSERT_FEQ(r[0], we);
    ASSERT_FEQ(r[1], we);
    ASSERT_NEAR(r[2], -0.375 - 2.0 / 6.0, 1e-7);
    ASSERT_FEQ(r[3], 4.0f);
    ASSERT_FEQ(r[4], 25.0f);
    ps_embed_destroy(&e);
}

/* The initializer depends on (seed, table, key) only: two shards with different
 * stripe counts, fed the keys in opposite orders, agree bit for bit. */
static void test_init_deterministic(void **state)
{
    (void)state;
    enum { N = 1000, D = 16 };
    struct ps_embed_conf c1 = s_conf(SS_OPT_ROWWISE_ADAGRAD, D);
    c1.init_scale = 0.05f;
    c1.n_stripes = 1;
    struct ps_embed_conf c2 = c1;
    c2.n_stripes = 64;
    ps_embed_t *a = ps_embed_new(&c1), *b = ps_embed_new(&c2);
    uint64_t *keys = malloc(N * sizeof *keys), *rev = malloc(N * sizeof *rev);
    float *ra = malloc(N * D * sizeof(float)), *rb = malloc(N * D * sizeof(float));
    float init[D], other[D];
    double sum = 0, sum_sq = 0;

    for (size_t i = 0; i < N; i++) {
        keys[i] = ss_key_make(1, i);
        rev[N - 1 - i] = keys[i];
    }
    ps_embed_init_row(a, 1, keys[0], init);
    assert_int_equal(ps_embed_rows(a), 0);   /* init_row does not touch the map */
    assert_int_equal(ps_embed_lookup(a, 1, keys, N, ra, NULL), 0);
    for (size_t off = 0; off < N; off += 100)   /* in pieces, reversed */
        assert_int_equal(ps_embed_lookup(b, 1, rev + off, 100, rb + off * D, NULL), 0);
    for (size_t i = 0; i < N; i++) {
        assert_memory_equal(ra + i * D, rb + (N - 1 - i) * D, D * sizeof(float));
        ps_embed_init_row(a, 1, keys[i], init);
        assert_memory_equal(ra + i * D, init, sizeof init);
        for (size_t j = 0; j < D; j++) {
            float v = ra[i * D + j];
            assert_true(v >= -0.05f && v < 0.05f);
            sum += v;
            sum_sq += (double)v * v;
        }
    }
    /* uniform on [-s, s): mean 0, variance s^2/3 (16000 samples) */
    ASSERT_NEAR(sum / (N * D), 0.0, 0.05 * 0.03);
    ASSERT_NEAR(sum_sq / (N * D), 0.05 * 0.05 / 3, 0.05 * 0.05 / 3 * 0.05);
    assert_int_equal(ps_embed_rows(a), N);
    assert_int_equal(ps_embed_rows(b), N);

    /* a second lookup returns the stored rows unchanged */
    assert_int_equal(ps_embed_lookup(b, 1, keys, N, rb, NULL), 0);
    assert_memory_equal(ra, rb, N * D * sizeof(float));
    assert_int_equal(ps_embed_rows(b), N);

    /* other table, other seed: other rows */
    ps_embed_init_row(a, 1, keys[5], init);
    ps_embed_init_row(a, 2, keys[5], other);
    assert_memory_not_equal(init, other, sizeof init);
    c1.seed = 43;
    ps_embed_t *s43 = ps_embed_new(&c1);
    ps_embed_init_row(s43, 1, keys[5], other);
    assert_memory_not_equal(init, other, sizeof init);
    ps_embed_destroy(&s43);

    free(keys);
    free(rev);
    free(ra);
    free(rb);
    ps_embed_destroy(&a);
    ps_embed_destroy(&b);
}

/* A whole request at once (ps_embed_*_groups) gives bit-identical rows to one
 * call per table in order: same key in two tables, a key repeated within a
 * table (applied in call order), many stripes; and a bad table anywhere
 * refuses the whole request before touching anything. */
static void test_groups_equal_per_table(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 5);
    c.init_scale = 0.1f;
    c.first_order = 1;
    ps_embed_t *a = ps_embed_new(&c), *b = ps_embed_new(&c);
    enum { N = 300 };
    uint64_t keys[N], st = 7;
    uint32_t tables[3] = {2, 0, 1}, counts[3] = {100, 120, 80};
    float grads[N * 5], ra[N * 5], rb[N * 5];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            keys[i] = (st >> 33) % 90;  /* repeats within and across tables */
            for (int d = 0; d < 5; d++)
                grads[i * 5 + d] = (float)((int)((st >> (8 + d)) % 17) - 8) / 16.0f;
        }
        assert_int_equal(ps_embed_push_groups(a, 3, tables, counts, keys, grads, NULL), 0);
        assert_int_equal(ps_embed_lookup_groups(a, 3, tables, counts, keys, ra, NULL), 0);
        for (int g = 0, off = 0; g < 3; off += (int)counts[g++]) {
            assert_int_equal(ps_embed_push(b, tables[g], keys + off, counts[g],
                                           grads + off * 5, NULL), 0);
            assert_int_equal(ps_embed_lookup(b, tables[g], keys + off, counts[g],
                                             rb + off * 5, NULL), 0);
        }
        assert_memory_equal(ra, rb, sizeof ra);
    }
    assert_int_equal(ps_embed_rows(a), ps_embed_rows(b));
    uint32_t bad[3] = {0, 3, 1};
    size_t rows = ps_embed_rows(a);
    keys[150] = 1000;  /* new key in the bad run's neighbour: must not be stored */
    assert_int_equal(ps_embed_lookup_groups(a, 3, bad, counts, keys, ra, NULL), SS_E_RANGE);
    assert_int_equal(ps_embed_push_groups(a, 3, bad, counts, keys, grads, NULL), SS_E_RANGE);
    assert_int_equal(ps_embed_rows(a), rows);
    ps_embed_destroy(&a);
    ps_embed_destroy(&b);
}

/* The prefetch pipeline of a whole request (home slots rolling across
 * stripes, rows, gradients and admission lines ahead of use) changes no
 * result: a shard fed requests of the job's shape (PUSH_LOOKUP-like: a push
 * of the keys looked up two requests before, then a lookup; 26 tables, 64
 * stripes, admission after 3 pushes, first-order rows) agrees bit for bit
 * with one fed the same keys one per call, where no pipeline runs: every
 * lookup, and at the end every row with its optimizer state and the
 * admission counters. */
static void test_requests_equal_single_keys(void **state)
{
    (void)state;
    enum { T = 26, PER = 30, N = T * PER, D = 5, ROUNDS = 40, LAG = 2 };
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, D);
    c.n_tables = T;
    c.first_order = 1;
    c.init_scale = 0.1f;
    c.init_acc = 0.01f;
    c.n_stripes = 64;
    c.admit_after = 3;
    c.admit_sketch_bytes = 1u << 16;
    ps_embed_t *a = ps_embed_new(&c), *b = ps_embed_new(&c);
    uint32_t tables[T], counts[T];
    uint64_t (*keys)[N] = malloc((LAG + 1) * sizeof *keys), rng = 99;
    float (*grads)[N * D] = malloc((LAG + 1) * sizeof *grads);
    float *ra = malloc(N * D * sizeof(float)), *rb = malloc(N * D * sizeof(float));

    for (uint32_t t = 0; t < T; t++) {
        tables[t] = t;
        counts[t] = PER;
    }
    for (int q = 0; q < ROUNDS; q++) {
        uint64_t *k = keys[q % (LAG + 1)];
        float *g = grads[q % (LAG + 1)];
        for (int i = 0; i < N; i++)   /* a heavy tail: few hot keys, many rare */
            k[i] = (uint64_t)exp(ss_rand_unit_d(&rng) * 9.0) * 7919u + (uint64_t)(i % PER);
        for (int i = 0; i < N * D; i++)
            g[i] = ss_rand_unit(&rng) - 0.5f;
        if (q >= LAG) {
            const uint64_t *pk = keys[(q - LAG) % (LAG + 1)];
            const float *pg = grads[(q - LAG) % (LAG + 1)];
            assert_int_equal(ps_embed_push_groups(a, T, tables, counts, pk, pg, NULL), 0);
            for (int i = 0; i < N; i++)
                assert_int_equal(ps_embed_push(b, (uint32_t)(i / PER), pk + i, 1, pg + i * D,
                                               NULL), 0);
        }
        assert_int_equal(ps_embed_lookup_groups(a, T, tables, counts, k, ra, NULL), 0);
        for (int i = 0; i < N; i++)
            assert_int_equal(ps_embed_lookup(b, (uint32_t)(i / PER), k + i, 1, rb + i * D,
                                             NULL), 0);
        assert_memory_equal(ra, rb, N * D * sizeof(float));
    }
    struct ps_embed_stats sa, sb;
    ps_embed_stats(a, &sa);
    ps_embed_stats(b, &sb);
    assert_true(sa.keys_not_admitted > 0 && sa.rows_admitted > 0);   /* admission ran */
    assert_int_equal(sa.keys_not_admitted, sb.keys_not_admitted);
    assert_int_equal(sa.rows_admitted, sb.rows_admitted);
    assert_int_equal(ps_embed_rows(a), ps_embed_rows(b));
    t_embed_rows_equal(a, b, keys[0], LAG + 1, N, PER);
    free(keys);
    free(grads);
    free(ra);
    free(rb);
    ps_embed_destroy(&a);
    ps_embed_destroy(&b);
}

static void test_table_range(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 4);
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t keys[2] = {1, 2};
    float out[8], g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    size_t full = 0;

    for (size_t i = 0; i < 8; i++)
        out[i] = 123.0f;
    assert_int_equal(ps_embed_lookup(e, 3, keys, 2, out, &full), SS_E_RANGE);
    assert_int_equal(ps_embed_lookup(e, UINT32_MAX, keys, 2, out, &full), SS_E_RANGE);
    assert_int_equal(ps_embed_push(e, 3, keys, 2, g, &full), SS_E_RANGE);
    assert_int_equal(ps_embed_read_row(e, 3, 1, out), SS_E_RANGE);
    for (size_t i = 0; i < 8; i++)
        ASSERT_FEQ(out[i], 123.0f);
    assert_int_equal(full, 0);
    assert_int_equal(ps_embed_rows(e), 0);
    /* n = 0 is a valid empty call */
    assert_int_equal(ps_embed_lookup(e, 0, keys, 0, out, &full), 0);
    assert_int_equal(ps_embed_rows(e), 0);
    ps_embed_destroy(&e);
}

/* Capacity 3: unknown keys past it get the initializer row, unstored, counted;
 * pushes to them are dropped and counted; stored rows keep being updated. */
static void test_capacity(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 4);
    c.capacity_rows = 3;
    c.init_scale = 0.5f;
    c.lr = 1.0f;
    c.n_stripes = 4;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t keys[7] = {11, 22, 33, 44, 55, 66, 77};
    float out[7 * 4], g[7 * 4], init[4], r[4];
    size_t full = 0;
    int stored[7], n_stored = 0;

    assert_int_equal(ps_embed_lookup(e, 0, keys, 5, out, &full), 0);
    assert_int_equal(full, 2);
    assert_int_equal(ps_embed_rows(e), 3);
    for (size_t k = 0; k < 5; k++) {
        ps_embed_init_row(e, 0, keys[k], init);
        assert_memory_equal(out + k * 4, init, sizeof init);
        stored[k] = ps_embed_read_row(e, 0, keys[k], r) == 0;
        n_stored += stored[k];
    }
    assert_int_equal(n_stored, 3);
    stored[5] = stored[6] = 0;

    for (size_t i = 0; i < 7 * 4; i++)
        g[i] = 0.25f;
    full = 0;
    assert_int_equal(ps_embed_push(e, 0, keys, 7, g, &full), 0);
    assert_int_equal(full, 4);                 /* 2 refused before + 2 never seen */
    assert_int_equal(ps_embed_rows(e), 3);
    assert_int_equal(ps_embed_lookup(e, 0, keys, 7, out, &full), 0);
    assert_int_equal(full, 8);                 /* incremented, not reset */
    for (size_t k = 0; k < 7; k++) {
        ps_embed_init_row(e, 0, keys[k], init);
        for (size_t i = 0; i < 4; i++)
            ASSERT_FEQ(out[k * 4 + i], stored[k] ? init[i] - 0.25f : init[i]);
    }
    /* NULL n_full is allowed */
    assert_int_equal(ps_embed_lookup(e, 1, keys, 7, out, NULL), 0);
    assert_int_equal(ps_embed_rows(e), 3);
    ps_embed_destroy(&e);
}

/* Enough rows to grow every stripe's slot array and slabs many times. */
static void test_many_rows(void **state)
{
    (void)state;
    enum { N = 100000, D = 4 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.capacity_rows = 1u << 20;
    c.n_stripes = 4;
    c.init_scale = 1.0f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *out = malloc((size_t)N * D * sizeof(float));
    float *g = malloc((size_t)N * D * sizeof(float));
    float init[D];
    size_t bytes0 = ps_embed_bytes(e);

    for (size_t i = 0; i < N; i++)
        keys[i] = i * 7919;   /* structured keys: the map must still spread them */
    for (size_t i = 0; i < (size_t)N * D; i++)
        g[i] = 2.0f;
    assert_int_equal(ps_embed_push(e, 2, keys, N, g, NULL), 0);
    assert_int_equal(ps_embed_rows(e), N);
    assert_true(ps_embed_bytes(e) >= bytes0 + (size_t)N * D * sizeof(float) + N * 16);
    assert_int_equal(ps_embed_lookup(e, 2, keys, N, out, NULL), 0);
    for (size_t k = 0; k < N; k++) {
        ps_embed_init_row(e, 2, keys[k], init);
        for (size_t i = 0; i < D; i++)
            if (out[k * D + i] != init[i] - 1.0f)
                fail_msg("key %zu [%zu]: %.9g, expected %.9g", k, i, (double)out[k * D + i],
                         (double)(init[i] - 1.0f));
    }
    free(keys);
    free(out);
    free(g);
    ps_embed_destroy(&e);
}

/* Grouping keys by stripe keeps call order for duplicates on every path (one
 * stripe; insertion sort, qsort and counting sort for few or many stripes), so
 * the result of order-sensitive rowwise Adagrad does not depend on n_stripes. */
static void test_stripe_counts_agree(void **state)
{
    (void)state;
    enum { D = 3, KEYS = 3000 };
    uint32_t stripes[4] = {1, 2, 64, 16384};
    size_t sizes[6] = {1, 7, 40, 300, 5000, 33};
    float *ref = malloc(KEYS * D * sizeof(float)), *out = malloc(KEYS * D * sizeof(float));
    uint64_t *all = malloc(KEYS * sizeof *all);

    for (size_t k = 0; k < KEYS; k++)
        all[k] = k * 2654435761u;
    for (int si = 0; si < 4; si++) {
        struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, D);
        c.n_stripes = stripes[si];
        c.init_scale = 0.1f;
        c.init_acc = 0.1f;
        ps_embed_t *e = ps_embed_new(&c);
        uint64_t rng = 77;
        for (int round = 0; round < 3; round++) {
            for (int z = 0; z < 6; z++) {
                size_t n = sizes[z];
                uint64_t *keys = malloc(n * sizeof *keys);
                float *g = malloc(n * D * sizeof(float));
                for (size_t i = 0; i < n; i++)
                    keys[i] = all[ss_rand_next(&rng) % (n < 50 ? 5 : KEYS)];   /* many dups */
                for (size_t i = 0; i < n * D; i++)
                    g[i] = ss_rand_unit(&rng) - 0.5f;
                assert_int_equal(ps_embed_push(e, 1, keys, n, g, NULL), 0);
                free(keys);
                free(g);
            }
        }
        assert_int_equal(ps_embed_lookup(e, 1, all, KEYS, si ? out : ref, NULL), 0);
        if (si)
            assert_memory_equal(out, ref, KEYS * D * sizeof(float));
        ps_embed_destroy(&e);
    }
    free(ref);
    free(out);
    free(all);
}

/* --- concurrency --- */

enum { C_THREADS = 4, C_KEYS = 2048, C_ROUNDS = 40, C_BATCH = 128, C_DIM = 8 };

struct pusher {
    ps_embed_t *e;        /* shared shard */
    int id;               /* thread number: gradient 0.25 * (id + 1) */
    int rounds;           /* passes over the keys */
    atomic_int *stop;     /* for readers: set when pushers are done */
    atomic_int *done;     /* for pushers, if not NULL: incremented when finished */
    int bad;              /* readers: values that are not possible states */
};

/* Push 0.25 * (id + 1) to every key once per round, in a thread-specific order;
 * keys with key % 16 == 15 are pushed twice in a row in the same call. */
static void *s_pusher(void *arg)
{
    struct pusher *p = arg;
    uint64_t keys[2 * C_BATCH];
    float g[2 * C_BATCH * C_DIM];
    uint64_t rng = 1000 + (uint64_t)p->id;

    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        g[i] = 0.25f * (float)(p->id + 1);
    for (int r = 0; r < p->rounds; r++) {
        uint64_t start = ss_rand_next(&rng) % C_KEYS;
        for (size_t b = 0; b < C_KEYS; b += C_BATCH) {
            size_t n = 0;
            for (size_t i = 0; i < C_BATCH; i++) {
                uint64_t k = (start + (b + i) * 17) % C_KEYS;   /* a permutation */
                keys[n++] = k;
                if (k % 16 == 15)
                    keys[n++] = k;
            }
            if (ps_embed_push(p->e, 0, keys, n, g, NULL) != 0)
                p->bad++;
        }
    }
    if (p->done)
        atomic_fetch_add(p->done, 1);
    return NULL;
}

/* Readers see only possible states: -0.25 * k, 0 >= w >= the final value. */
static void *s_reader(void *arg)
{
    struct pusher *p = arg;
    uint64_t keys[C_BATCH];
    float out[C_BATCH * C_DIM];
    while (!atomic_load(p->stop)) {
        for (size_t i = 0; i < C_BATCH; i++)
            keys[i] = (uint64_t)(i * 13) % C_KEYS;
        ps_embed_lookup(p->e, 0, keys, C_BATCH, out, NULL);
        for (size_t i = 0; i < C_BATCH * C_DIM; i++) {
            float q = out[i] / -0.25f;
            if (q != floorf(q) || q < 0 || q > 2 * 10 * C_ROUNDS)
                p->bad++;
        }
    }
    return NULL;
}

static void test_concurrent_pushes_exact(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, C_DIM);
    c.lr = 1.0f;
    c.n_stripes = 16;
    ps_embed_t *e = ps_embed_new(&c);
    pthread_t th[C_THREADS + 1];
    struct pusher p[C_THREADS + 1];
    atomic_int stop;
    float *out = malloc(C_KEYS * C_DIM * sizeof(float));
    uint64_t *keys = malloc(C_KEYS * sizeof *keys);

    atomic_init(&stop, 0);
    for (int t = 0; t <= C_THREADS; t++) {
        p[t] = (struct pusher){.e = e, .id = t, .rounds = C_ROUNDS, .stop = &stop};
        assert_int_equal(pthread_create(&th[t], NULL, t < C_THREADS ? s_pusher : s_reader,
                                        &p[t]), 0);
    }
    for (int t = 0; t < C_THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(p[t].bad, 0);
    }
    atomic_store(&stop, 1);
    assert_int_equal(pthread_join(th[C_THREADS], NULL), 0);
    assert_int_equal(p[C_THREADS].bad, 0);

    /* per round, the 4 threads push 0.25 + 0.5 + 0.75 + 1 = 2.5 to every key,
     * twice to keys 15 mod 16; all partial sums are exact in float */
    for (size_t k = 0; k < C_KEYS; k++)
        keys[k] = k;
    assert_int_equal(ps_embed_lookup(e, 0, keys, C_KEYS, out, NULL), 0);
    assert_int_equal(ps_embed_rows(e), C_KEYS);
    for (size_t k = 0; k < C_KEYS; k++) {
        float want = -2.5f * C_ROUNDS * (k % 16 == 15 ? 2 : 1);
        for (size_t i = 0; i < C_DIM; i++)
            if (out[k * C_DIM + i] != want)
                fail_msg("key %zu [%zu] = %.9g, expected %.9g", k, i,
                         (double)out[k * C_DIM + i], (double)want);
    }
    free(out);
    free(keys);
    ps_embed_destroy(&e);
}

/* Threads race to create rows against a small capacity: exactly capacity rows
 * end up stored and every refused key is counted once. */
struct racer {
    ps_embed_t *e;     /* shared shard */
    int id;            /* thread number */
    size_t full;       /* refused keys */
};

static void *s_racer(void *arg)
{
    struct racer *r = arg;
    uint64_t keys[100];
    float out[100 * 2];
    for (int b = 0; b < 10; b++) {
        for (int i = 0; i < 100; i++)
            keys[i] = (uint64_t)r->id * 1000000 + (uint64_t)b * 100 + (uint64_t)i;
        ps_embed_lookup(r->e, 0, keys, 100, out, &r->full);
    }
    return NULL;
}

static void test_concurrent_capacity(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, 2);
    c.capacity_rows = 1500;
    ps_embed_t *e = ps_embed_new(&c);
    pthread_t th[4];
    struct racer r[4];
    size_t full = 0;

    for (int t = 0; t < 4; t++) {
        r[t] = (struct racer){.e = e, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, s_racer, &r[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        full += r[t].full;
    }
    assert_int_equal(ps_embed_rows(e), 1500);
    assert_int_equal(full, 4000 - 1500);
    ps_embed_destroy(&e);
}

/* --- bounded memory: delete, admission, TTL, LRU --- */

/* A one-key helper: push g (dim floats) to key of table 0. */
static void s_push1(ps_embed_t *e, uint64_t key, const float *g)
{
    assert_int_equal(ps_embed_push(e, 0, &key, 1, g, NULL), 0);
}

/* Is key of table 0 stored? */
static int s_stored(ps_embed_t *e, uint64_t key)
{
    float r[64];
    int rc = ps_embed_read_row(e, 0, key, r);
    assert_true(rc == 0 || rc == SS_E_NOTFOUND);
    return rc == 0;
}

static struct ps_embed_stats s_stats(ps_embed_t *e)
{
    struct ps_embed_stats s;
    ps_embed_stats(e, &s);
    return s;
}

/* The new keys are off by default, and bad values are refused. */
static void test_bound_conf(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 4);
    ps_embed_t *e;

    c.admit_after = 256;
    assert_null(ps_embed_new(&c));
    c.admit_after = 2;
    c.admit_sketch_bytes = 0;
    assert_null(ps_embed_new(&c));              /* admission needs a sketch */
    c = s_conf(SS_OPT_ROWWISE_ADAGRAD, 4);
    c.max_memory_bytes = 1000;                  /* not even the stripe structs */
    assert_null(ps_embed_new(&c));
    c.max_memory_bytes = 16384;                 /* structs fit, 8 stripes of maps do not */
    assert_null(ps_embed_new(&c));
    c.max_memory_bytes = 1u << 20;
    e = ps_embed_new(&c);
    assert_non_null(e);
    assert_true(ps_embed_bytes(e) <= c.max_memory_bytes);
    assert_int_equal(ps_embed_verify(e), 0);
    ps_embed_destroy(&e);

    /* the sketch is part of the bytes: 8 stripes x 1024 bytes (8000 rounds down) */
    c = s_conf(SS_OPT_SGD, 4);
    e = ps_embed_new(&c);
    size_t plain = ps_embed_bytes(e);
    ps_embed_destroy(&e);
    c.admit_after = 2;
    c.admit_sketch_bytes = 8000 * 8;
    e = ps_embed_new(&c);
    assert_int_equal(ps_embed_bytes(e) - plain, 8 * 4096);
    ps_embed_destroy(&e);
}

/* admit_after 3: a key pushed k < 3 times has no row and looks up as its
 * initializer row (lookups do not count); the third push stores it with that
 * push's gradient applied; others are not disturbed. */
static void test_admission(void **state)
{
    (void)state;
    enum { D = 4, N = 2000 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.init_scale = 0.5f;
    c.lr = 1.0f;
    c.admit_after = 3;
    c.admit_sketch_bytes = 1u << 16;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t key = 4242, *keys = malloc(N * sizeof *keys);
    float g[D] = {0.25f, 0.5f, -1, 2}, init[D], out[D], r[D];
    float *gs = malloc(N * D * sizeof(float)), *outs = malloc(N * D * sizeof(float));

    ps_embed_init_row(e, 0, key, init);
    for (int k = 1; k <= 2; k++) {
        s_push1(e, key, g);
        for (int l = 0; l < 5; l++) {   /* lookups: init row, no count, no row */
            assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);
            assert_memory_equal(out, init, sizeof init);
        }
        assert_false(s_stored(e, key));
        assert_int_equal(ps_embed_rows(e), 0);
        assert_int_equal(s_stats(e).keys_not_admitted, (uint64_t)k);
    }
    s_push1(e, key, g);                  /* the third push admits */
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    for (size_t i = 0; i < D; i++)
        ASSERT_FEQ(r[i], init[i] - g[i]);
    assert_int_equal(s_stats(e).rows_admitted, 1);
    s_push1(e, key, g);                  /* and from then on it trains */
    assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);
    for (size_t i = 0; i < D; i++)
        ASSERT_FEQ(out[i], init[i] - 2 * g[i]);

    /* many keys in one call, pushed twice: none stored; a third time: all */
    for (size_t i = 0; i < N; i++)
        keys[i] = ss_key_make(0, 100000 + i);
    for (size_t i = 0; i < N * D; i++)
        gs[i] = 0.5f;
    for (int k = 0; k < 2; k++)
        assert_int_equal(ps_embed_push(e, 0, keys, N, gs, NULL), 0);
    assert_int_equal(ps_embed_rows(e), 1);
    assert_int_equal(s_stats(e).keys_not_admitted, 2 + 2 * N);
    assert_int_equal(ps_embed_push(e, 0, keys, N, gs, NULL), 0);
    assert_int_equal(ps_embed_rows(e), N + 1);
    assert_int_equal(s_stats(e).rows_admitted, N + 1);
    assert_int_equal(ps_embed_lookup(e, 0, keys, N, outs, NULL), 0);
    for (size_t k = 0; k < N; k++) {
        ps_embed_init_row(e, 0, keys[k], init);
        for (size_t i = 0; i < D; i++)
            ASSERT_FEQ(outs[k * D + i], init[i] - 0.5f);
    }
    assert_int_equal(ps_embed_verify(e), 0);
    free(keys);
    free(gs);
    free(outs);
    ps_embed_destroy(&e);
}

/* Check a stored row of table 0: every float equals want. */
static void s_assert_row(ps_embed_t *e, uint64_t key, size_t dim, float want)
{
    float r[64];
    assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
    for (size_t i = 0; i < dim; i++)
        ASSERT_FEQ(r[i], want);
}

/* Tick from first to last (inclusive); returns the rows they deleted. */
static size_t s_ticks(ps_embed_t *e, uint32_t first, uint32_t last)
{
    size_t n = 0;
    for (uint32_t t = first; t <= last; t++)
        n += ps_embed_tick(e, t);
    return n;
}

/* TTL 10 s on an injected clock (sweep period 10 / 4 = 2 s): a row last
 * touched at second t is kept through t + 10 and gone by t + 10 + 2 + 1;
 * lookups and pushes renew; memory goes back. */
static void test_ttl(void **state)
{
    (void)state;
    enum { D = 4, N = 3000, H = N / 2 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.lr = 1.0f;
    c.ttl_s = 10;
    c.n_stripes = 4;
    c.capacity_rows = 8192;   /* small slabs: the spare slab per stripe stays small */
    ps_embed_t *e = ps_embed_new(&c);
    size_t bytes0 = ps_embed_bytes(e);
    uint64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    float *g = malloc(N * D * sizeof(float)), *out = malloc(N * D * sizeof(float));

    for (size_t i = 0; i < N; i++) {
        a[i] = 1000000 + i;
        b[i] = 2000000 + i;
    }
    for (size_t i = 0; i < N * D; i++)
        g[i] = 0.25f;
    assert_int_equal(ps_embed_tick(e, 0), 0);
    assert_int_equal(ps_embed_push(e, 0, a, N, g, NULL), 0);     /* a: t = 0 */
    assert_int_equal(s_ticks(e, 1, 5), 0);
    assert_int_equal(ps_embed_push(e, 0, b, N, g, NULL), 0);     /* b: t = 5 */
    assert_int_equal(s_ticks(e, 6, 8), 0);
    assert_int_equal(ps_embed_lookup(e, 0, a, H, out, NULL), 0); /* a[0..H): t = 8 */
    size_t peak = ps_embed_bytes(e);
    assert_true(peak > bytes0 + 2 * N * (16 + D * 4));
    assert_int_equal(s_ticks(e, 9, 10), 0);                      /* 0 + 10 is not < 10 */
    assert_int_equal(ps_embed_rows(e), 2 * N);
    assert_int_equal(s_ticks(e, 11, 13), N - H);                 /* a[H..N) expire */
    assert_int_equal(ps_embed_verify(e), 0);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(s_stored(e, a[i]), i < H);
        assert_true(s_stored(e, b[i]));
    }
    s_assert_row(e, a[0], D, -0.25f);
    assert_int_equal(ps_embed_tick(e, 14), 0);
    assert_int_equal(ps_embed_push(e, 0, b, H, g, NULL), 0);     /* b[0..H): t = 14 */
    assert_int_equal(ps_embed_tick(e, 15), 0);
    assert_int_equal(s_ticks(e, 16, 18), N - H);                 /* b[H..N) expire */
    assert_int_equal(s_ticks(e, 19, 21), H);                     /* a[0..H) expire */
    assert_int_equal(ps_embed_rows(e), H);
    s_assert_row(e, b[0], D, -0.5f);
    assert_int_equal(ps_embed_tick(e, 3), 0);                    /* the clock never goes back */
    assert_int_equal(s_ticks(e, 22, 24), 0);
    assert_int_equal(s_ticks(e, 25, 27), H);                     /* b[0..H) expire */
    assert_int_equal(ps_embed_rows(e), 0);
    assert_int_equal(s_stats(e).rows_evicted_ttl, 2 * N);
    assert_int_equal(s_stats(e).rows_evicted_memory, 0);
    assert_int_equal(ps_embed_verify(e), 0);
    /* memory went back: a stripe keeps one spare slab (at most 8 KiB here) and
     * its slab table (at most 16 pointers); its slot array is back to 16 slots */
    assert_true(ps_embed_bytes(e) <= bytes0 + 4 * (8192 + 16 * 8));
    /* an expired key starts again from its initializer row */
    assert_int_equal(ps_embed_lookup(e, 0, a, 1, out, NULL), 0);
    ASSERT_FEQ(out[0], 0.0f);
    assert_int_equal(ps_embed_rows(e), 1);
    free(a);
    free(b);
    free(g);
    free(out);
    ps_embed_destroy(&e);
}

/* Under max_memory_bytes the least recently touched row goes first, and a
 * row touched again survives the rows that were not (CLOCK: the hand passes
 * over it once). One stripe, so the order is the shard's. */
static void test_lru_order(void **state)
{
    (void)state;
    enum { D = 4 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.n_stripes = 1;
    c.max_memory_bytes = 64 * 1024;
    ps_embed_t *e = ps_embed_new(&c);
    float out[D];
    uint64_t key;

    assert_non_null(e);
    ps_embed_tick(e, 1);
    for (key = 1; s_stats(e).rows_evicted_memory == 0; key++) {
        assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);
        assert_true(ps_embed_bytes(e) <= c.max_memory_bytes);
    }
    uint64_t last = key - 1;                 /* inserting it evicted key 1 */
    size_t rows = ps_embed_rows(e);
    assert_int_equal(rows, last - 1);
    assert_true(rows > 500);
    assert_false(s_stored(e, 1));
    for (key = 2; key <= last; key++)
        assert_true(s_stored(e, key));
    ps_embed_tick(e, 2);
    key = 2;
    assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);   /* 2 is now newest */
    for (size_t j = 1; j <= rows; j++) {
        uint64_t fresh = 1000000 + j;
        assert_int_equal(ps_embed_lookup(e, 0, &fresh, 1, out, NULL), 0);
        assert_true(ps_embed_bytes(e) <= c.max_memory_bytes);
        assert_int_equal(ps_embed_rows(e), rows);
        if (j < rows) {
            /* evicted in order 3, 4, ..., last; 2 stays */
            assert_false(s_stored(e, 2 + j));
            if (2 + j < last)
                assert_true(s_stored(e, 3 + j));
            assert_true(s_stored(e, 2));
        } else {
            assert_false(s_stored(e, 2));    /* then 2, the least recent now */
        }
    }
    assert_int_equal(s_stats(e).rows_evicted_memory, 1 + rows);
    assert_int_equal(s_stats(e).rows_evicted_ttl, 0);
    assert_int_equal(ps_embed_verify(e), 0);
    ps_embed_destroy(&e);
}

/* issue 22 item 7: a read-only lookup (eval, predict) answers stored rows as
 * they are and the initializer row for the others, and changes nothing: no
 * row stored, none evicted, no recency bit (the CLOCK hand then takes the
 * peeked row first, where a plain lookup would have saved it). */
static void test_peek_read_only(void **state)
{
    (void)state;
    enum { D = 4 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.n_stripes = 1;
    c.init_scale = 0.5f;
    c.max_memory_bytes = 64 * 1024;
    ps_embed_t *e = ps_embed_new(&c);
    float out[2 * D], want[D];
    uint64_t key;

    assert_non_null(e);
    ps_embed_tick(e, 1);
    for (key = 1; s_stats(e).rows_evicted_memory == 0; key++)
        assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);
    size_t rows = ps_embed_rows(e);
    struct ps_embed_stats before = s_stats(e);
    ps_embed_tick(e, 2);
    uint64_t keys[2] = {2, 5000000};   /* stored (next victim), never seen */
    uint32_t t0 = 0, n2 = 2;
    assert_int_equal(ps_embed_peek_groups(e, 1, &t0, &n2, keys, out), 0);
    assert_int_equal(ps_embed_read_row(e, 0, 2, want), 0);
    for (int i = 0; i < D; i++)
        ASSERT_FEQ(out[i], want[i]);
    ps_embed_init_row(e, 0, 5000000, want);
    for (int i = 0; i < D; i++)
        ASSERT_FEQ(out[D + i], want[i]);
    assert_int_equal(ps_embed_rows(e), rows);
    assert_false(s_stored(e, 5000000));
    assert_int_equal(s_stats(e).rows_admitted, before.rows_admitted);
    assert_int_equal(s_stats(e).rows_evicted_memory, before.rows_evicted_memory);
    uint32_t tbad = 3;
    assert_int_equal(ps_embed_peek_groups(e, 1, &tbad, &n2, keys, out), SS_E_RANGE);
    /* no recency bit: the next new row evicts key 2, the hand's next victim */
    key = 6000000;
    assert_int_equal(ps_embed_lookup(e, 0, &key, 1, out, NULL), 0);
    assert_false(s_stored(e, 2));
    assert_true(s_stored(e, 3));
    assert_int_equal(ps_embed_verify(e), 0);
    ps_embed_destroy(&e);
}

/* A read-only lookup of many keys over several stripes and tables (grouped
 * by stripe inside, with duplicates, an empty run and a stored row changed
 * by a push) answers each key as a lookup of it alone: the stored weights,
 * else the initializer row. Small and large calls (stack and heap scratch,
 * both ways of grouping). */
static void test_peek_grouped(void **state)
{
    (void)state;
    enum { D = 4, N = 1200 };
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, D);
    c.n_stripes = 16;
    c.init_scale = 0.5f;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *out = malloc((size_t)N * D * sizeof *out), *grad = malloc((size_t)N * D * sizeof *grad);
    float row[D + 1], one[D];
    assert_non_null(e);
    assert_true(keys && out && grad);
    for (size_t i = 0; i < N; i++) {
        keys[i] = (i * 2654435761u) % 900;  /* repeats */
        for (int d = 0; d < D; d++)
            grad[i * D + d] = 0.01f * (float)((i + d) % 7);
    }
    /* store every other key of table 1, and push to a third of them */
    for (size_t i = 0; i < N; i += 2)
        assert_int_equal(ps_embed_lookup(e, 1, &keys[i], 1, out, NULL), 0);
    for (size_t i = 0; i < N; i += 6)
        assert_int_equal(ps_embed_push(e, 1, &keys[i], 1, &grad[i * D], NULL), 0);
    size_t rows = ps_embed_rows(e);
    const uint32_t sizes[] = {3, 40, 256, 257, N};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        uint32_t n = sizes[s], tables[3] = {1, 0, 1}, counts[3] = {n / 2, 0, n - n / 2};
        assert_int_equal(ps_embed_peek_groups(e, 3, tables, counts, keys, out), 0);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t t = 1;
            if (ps_embed_read_row(e, t, keys[i], row) == 0) {
                assert_memory_equal(&out[(size_t)i * D], row, D * sizeof(float));
            } else {
                ps_embed_init_row(e, t, keys[i], one);
                assert_memory_equal(&out[(size_t)i * D], one, D * sizeof(float));
            }
        }
    }
    assert_int_equal(ps_embed_rows(e), rows);
    assert_int_equal(ps_embed_verify(e), 0);
    free(keys);
    free(out);
    free(grad);
    ps_embed_destroy(&e);
}

/* Many random keys through a small bound on 4 stripes, mixed lookups and
 * pushes with a TTL sweep now and then: the bound holds after every call,
 * the invariants hold, and stored rows hold only states they can have. */
static void test_evict_random(void **state)
{
    (void)state;
    enum { D = 8, B = 200, CALLS = 390, SPACE = 30000 };
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, D);
    c.lr = 1.0f;
    c.n_stripes = 4;
    c.ttl_s = 2;
    c.max_memory_bytes = 160 * 1024;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t keys[B], rng = 99;
    float g[B * D], out[B * D];
    uint32_t now = 0;

    for (size_t i = 0; i < B * D; i++)
        g[i] = 0.25f;
    for (int call = 0; call < CALLS; call++) {
        for (size_t i = 0; i < B; i++) {   /* skewed: low keys come back often */
            uint64_t k = ss_rand_next(&rng) % SPACE;
            keys[i] = k >> (ss_rand_next(&rng) % 8);
        }
        if (call % 2)
            assert_int_equal(ps_embed_push(e, 0, keys, B, g, NULL), 0);
        else
            assert_int_equal(ps_embed_lookup(e, 0, keys, B, out, NULL), 0);
        assert_true(ps_embed_bytes(e) <= c.max_memory_bytes);
        if (call % 10 == 9)   /* a second is 10 calls, and a quiet spell every 100 */
            ps_embed_tick(e, now += call % 100 == 99 ? 5 : 1);
        if (call % 100 == 99)
            assert_int_equal(ps_embed_verify(e), 0);
    }
    struct ps_embed_stats s = s_stats(e);
    print_message("evicted for memory %llu, for the TTL %llu, rows %zu\n",
                  (unsigned long long)s.rows_evicted_memory,
                  (unsigned long long)s.rows_evicted_ttl, ps_embed_rows(e));
    assert_true(s.rows_evicted_memory > 1000);
    assert_true(s.rows_evicted_ttl > 0);
    assert_int_equal(s.rows_admitted - s.rows_evicted_memory - s.rows_evicted_ttl,
                     ps_embed_rows(e));
    for (uint64_t k = 0; k < SPACE; k++) {
        float r[D];
        if (ps_embed_read_row(e, 0, k, r) != 0)
            continue;
        float q = r[0] / -0.25f;
        assert_true(q == floorf(q) && q >= 0 && q <= CALLS / 2 * B);
        for (size_t i = 1; i < D; i++)
            ASSERT_FEQ(r[i], r[0]);
    }
    ps_embed_destroy(&e);
}

/* Several threads look up and push (like trainers) a key set far larger than
 * the bound, another only looks up, another watches the byte count: rows are
 * evicted and their places reused under the stripe locks while other threads
 * probe the same stripes. Hot keys that every batch uses are never evicted and
 * end exact; the reader only ever sees possible states; the bound holds
 * throughout. */
enum { E_THREADS = 3, E_BATCH = 128, E_HOT = 8, E_ROUNDS = 150, E_SPACE = 200000 };

struct evictor {
    ps_embed_t *e;        /* shared shard */
    int id;               /* thread number, picks the cold keys */
    int push;             /* 1: push 0.25 to everything, 0: look up and check */
    atomic_int *stop;     /* the watcher and readers run until it is set */
    size_t limit;         /* max_memory_bytes, for the watcher */
    int bad;              /* impossible values or bound violations seen */
};

static void s_evictor_keys(struct evictor *p, uint64_t *rng, uint64_t *keys)
{
    for (size_t i = 0; i < E_HOT; i++)
        keys[i] = 1 + i;
    for (size_t i = E_HOT; i < E_BATCH; i++)
        keys[i] = 1000 + ss_rand_next(rng) % E_SPACE;
}

/* Like a trainer: look a batch up, then push it. */
static void *s_evict_pusher(void *arg)
{
    struct evictor *p = arg;
    uint64_t keys[E_BATCH], rng = 500 + (uint64_t)p->id;
    float g[E_BATCH * C_DIM], out[E_BATCH * C_DIM];
    for (size_t i = 0; i < E_BATCH * C_DIM; i++)
        g[i] = 0.25f;
    for (int r = 0; r < E_ROUNDS; r++) {
        s_evictor_keys(p, &rng, keys);
        p->bad += ps_embed_lookup(p->e, 0, keys, E_BATCH, out, NULL) != 0;
        p->bad += ps_embed_push(p->e, 0, keys, E_BATCH, g, NULL) != 0;
    }
    return NULL;
}

static void *s_evict_reader(void *arg)
{
    struct evictor *p = arg;
    uint64_t keys[E_BATCH], rng = 900 + (uint64_t)p->id;
    float out[E_BATCH * C_DIM];
    while (!atomic_load(p->stop)) {
        s_evictor_keys(p, &rng, keys);
        p->bad += ps_embed_lookup(p->e, 0, keys, E_BATCH, out, NULL) != 0;
        for (size_t i = 0; i < E_BATCH * C_DIM; i++) {
            float q = out[i] / -0.25f;
            p->bad += q != floorf(q) || q < 0 || q > E_THREADS * E_ROUNDS;
        }
    }
    return NULL;
}

static void *s_evict_watcher(void *arg)
{
    struct evictor *p = arg;
    while (!atomic_load(p->stop))
        p->bad += ps_embed_bytes(p->e) > p->limit;
    return NULL;
}

static void test_concurrent_evictions(void **state)
{
    (void)state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, C_DIM);
    c.lr = 1.0f;
    c.n_stripes = 4;
    c.max_memory_bytes = 512 * 1024;
    ps_embed_t *e = ps_embed_new(&c);
    pthread_t th[E_THREADS + 2];
    struct evictor p[E_THREADS + 2];
    atomic_int stop;

    atomic_init(&stop, 0);
    for (int t = 0; t < E_THREADS + 2; t++) {
        p[t] = (struct evictor){.e = e, .id = t, .stop = &stop, .limit = c.max_memory_bytes};
        void *(*fn)(void *) = t < E_THREADS ? s_evict_pusher
                              : t == E_THREADS ? s_evict_reader : s_evict_watcher;
        assert_int_equal(pthread_create(&th[t], NULL, fn, &p[t]), 0);
    }
    for (int t = 0; t < E_THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    atomic_store(&stop, 1);
    for (int t = E_THREADS; t < E_THREADS + 2; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < E_THREADS + 2; t++)
        assert_int_equal(p[t].bad, 0);
    assert_true(s_stats(e).rows_evicted_memory > 10000);
    assert_int_equal(ps_embed_verify(e), 0);
    for (uint64_t k = 1; k <= E_HOT; k++)   /* never evicted: every push counted */
        s_assert_row(e, k, C_DIM, -0.25f * E_THREADS * E_ROUNDS);
    ps_embed_destroy(&e);
}

/* --- checkpoints --- */

static int setup(void **state)
{
    return t_fix_setup(state, "embed", "embed.ckpt");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

enum { K_ROWS = 500, K_DIM = 6 };

/* A shard with K_ROWS rows over 3 tables after a few pushes of varied grads
 * (rows of K_DIM floats, the last a first-order weight when first_order). */
static ps_embed_t *s_trained_fo(int optimizer, uint32_t n_stripes, uint32_t first_order)
{
    struct ps_embed_conf c = s_conf(optimizer, K_DIM);
    c.first_order = first_order;
    c.init_scale = 0.1f;
    c.init_acc = 0.1f;
    c.eps = 1e-6f;
    c.lr = 0.05f;
    c.n_stripes = n_stripes;
    ps_embed_t *e = ps_embed_new(&c);
    uint64_t keys[K_ROWS];
    float g[K_ROWS * K_DIM];
    uint64_t rng = 5;

    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < K_ROWS; i++)
            keys[i] = ss_key_make((uint32_t)(i % 3), i);
        for (size_t i = 0; i < K_ROWS * K_DIM; i++)
            g[i] = ss_rand_unit(&rng) - 0.5f;
        for (uint32_t t = 0; t < 3; t++)   /* keys of table t sit at i % 3 == t */
            for (size_t i = t; i < K_ROWS; i += 3)
                assert_int_equal(ps_embed_push(e, t, &keys[i], 1, g + i * K_DIM, NULL), 0);
    }
    return e;
}

static ps_embed_t *s_trained(int optimizer, uint32_t n_stripes)
{
    return s_trained_fo(optimizer, n_stripes, 0);
}

/* Every row of a equals the row in b, state included. */
static void s_assert_same(ps_embed_t *a, ps_embed_t *b)
{
    size_t rf = ps_embed_row_floats(a);
    float ra[2 * K_DIM], rb[2 * K_DIM];
    assert_int_equal(ps_embed_rows(a), ps_embed_rows(b));
    for (size_t i = 0; i < K_ROWS; i++) {
        uint32_t t = (uint32_t)(i % 3);
        uint64_t key = ss_key_make(t, i);
        assert_int_equal(ps_embed_read_row(a, t, key, ra), 0);
        assert_int_equal(ps_embed_read_row(b, t, key, rb), 0);
        assert_memory_equal(ra, rb, rf * sizeof(float));
    }
}

static void test_checkpoint_round_trip(void **state)
{
    struct t_fix *f = *state;
    int opts[3] = {SS_OPT_SGD, SS_OPT_ADAGRAD, SS_OPT_ROWWISE_ADAGRAD};

    for (int o = 0; o < 6; o++) {   /* each optimizer without, then with first order */
        uint32_t fo = o >= 3;
        ps_embed_t *a = s_trained_fo(opts[o % 3], 8, fo);
        ps_embed_t *b = s_trained_fo(opts[o % 3], 32, fo);   /* other stripes: fine */
        float r[2 * K_DIM];
        uint64_t extra = 424242;
        float g[K_DIM] = {1, 1, 1, 1, 1, 1};

        assert_int_equal(ps_embed_rows(a), K_ROWS);
        assert_int_equal(ps_embed_push(b, 0, &extra, 1, g, NULL), 0);   /* only in b */
        assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(2)), 0);
        assert_int_equal(ps_embed_restore(b, f->path, 2), 0);
        s_assert_same(a, b);
        assert_int_equal(ps_embed_read_row(b, 0, extra, r), SS_E_NOTFOUND);   /* replaced */

        /* the restored shard keeps working: the same pushes to old and new keys
         * give the same rows, and new rows do not overwrite restored ones */
        uint64_t key = ss_key_make(1, 4);
        uint64_t fresh[200];
        float gf[200 * K_DIM];
        for (size_t i = 0; i < 200; i++)
            fresh[i] = 900000 + i;
        for (size_t i = 0; i < 200 * K_DIM; i++)
            gf[i] = 0.125f * (float)(i % 7);
        assert_int_equal(ps_embed_push(a, 1, &key, 1, g, NULL), 0);
        assert_int_equal(ps_embed_push(b, 1, &key, 1, g, NULL), 0);
        assert_int_equal(ps_embed_push(a, 0, fresh, 200, gf, NULL), 0);
        assert_int_equal(ps_embed_push(b, 0, fresh, 200, gf, NULL), 0);
        s_assert_same(a, b);
        for (size_t i = 0; i < 200; i++) {
            float rb[2 * K_DIM];
            assert_int_equal(ps_embed_read_row(a, 0, fresh[i], r), 0);
            assert_int_equal(ps_embed_read_row(b, 0, fresh[i], rb), 0);
            assert_memory_equal(r, rb, ps_embed_row_floats(a) * sizeof(float));
        }
        /* and checkpoints again: a second generation equals the first shard */
        ps_embed_t *c2 = s_trained_fo(opts[o % 3], 1, fo);
        assert_int_equal(ps_embed_checkpoint(b, f->path, WHO(2)), 0);
        assert_int_equal(ps_embed_restore(c2, f->path, 2), 0);
        s_assert_same(a, c2);
        assert_int_equal(ps_embed_rows(c2), K_ROWS + 200);
        ps_embed_destroy(&c2);
        ps_embed_destroy(&a);
        ps_embed_destroy(&b);
    }
}

/* Corrupt one byte of path in place. */
static void s_flip(const char *path, long at)
{
    assert_int_equal(t_flip_byte(path, at, 0x40), 0);
}

static long s_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* target holds one marker row; a failed restore must leave exactly that. */
static void s_assert_unchanged(ps_embed_t *target)
{
    float r[2 * K_DIM];
    assert_int_equal(ps_embed_rows(target), 1);
    assert_int_equal(ps_embed_read_row(target, 0, 777, r), 0);
}

static void test_checkpoint_rejects(void **state)
{
    struct t_fix *f = *state;
    ps_embed_t *a = s_trained(SS_OPT_ROWWISE_ADAGRAD, 8);
    struct ps_embed_conf c = *ps_embed_conf(a);
    ps_embed_t *target = ps_embed_new(&c);
    uint64_t marker = 777;
    float row[K_DIM];

    assert_int_equal(ps_embed_lookup(target, 0, &marker, 1, row, NULL), 0);
    assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(1)), 0);
    long size = s_size(f->path);
    assert_int_equal(size, PS_CKPT_HDR_BYTES + K_ROWS * (16 + (K_DIM + 1) * 4));

    /* wrong shard */
    assert_int_equal(ps_embed_restore(target, f->path, 0), SS_E_CORRUPT);
    s_assert_unchanged(target);

    /* wrong shape: dim, n_tables, optimizer */
    struct ps_embed_conf w = c;
    w.dim = K_DIM + 1;
    ps_embed_t *x = ps_embed_new(&w);
    assert_int_equal(ps_embed_restore(x, f->path, 1), SS_E_CORRUPT);
    assert_int_equal(ps_embed_rows(x), 0);
    ps_embed_destroy(&x);
    w = c;
    w.n_tables = 4;
    x = ps_embed_new(&w);
    assert_int_equal(ps_embed_restore(x, f->path, 1), SS_E_CORRUPT);
    ps_embed_destroy(&x);
    w = c;
    w.optimizer = SS_OPT_ADAGRAD;
    x = ps_embed_new(&w);
    assert_int_equal(ps_embed_restore(x, f->path, 1), SS_E_CORRUPT);
    ps_embed_destroy(&x);
    w = c;
    w.first_order = 1;   /* same dim, but the last float would mean another thing */
    x = ps_embed_new(&w);
    assert_int_equal(ps_embed_restore(x, f->path, 1), SS_E_CORRUPT);
    ps_embed_destroy(&x);

    /* too small a capacity is its own error */
    w = c;
    w.capacity_rows = K_ROWS - 1;
    x = ps_embed_new(&w);
    assert_int_equal(ps_embed_restore(x, f->path, 1), SS_E_FULL);
    assert_int_equal(ps_embed_rows(x), 0);
    ps_embed_destroy(&x);

    /* one flipped payload byte: in a key, in a float */
    s_flip(f->path, PS_CKPT_HDR_BYTES + 3);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
    s_assert_unchanged(target);
    assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(1)), 0);
    s_flip(f->path, size - 2);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
    s_assert_unchanged(target);

    /* truncated: by one byte, mid-payload, mid-header, empty */
    long cuts[4] = {size - 1, size / 2, 50, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(1)), 0);
        assert_int_equal(truncate(f->path, cuts[i]), 0);
        assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
        s_assert_unchanged(target);
    }

    /* a sync checkpoint is the wrong kind; a missing file is an I/O error */
    ps_ckpt_writer_t *wr;
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_SYNC, .shard = 1, .shape = {0, 4, 0, 0}};
    float v[4] = {0};
    assert_int_equal(ps_ckpt_begin(f->path, &wr), 0);
    assert_int_equal(ps_ckpt_write(wr, v, sizeof v), 0);
    assert_int_equal(ps_ckpt_commit(&wr, &hdr), 0);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
    assert_int_equal(unlink(f->path), 0);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_IO);
    s_assert_unchanged(target);

    /* a well-formed file with a duplicate row or a bad table id */
    unsigned char rec[16 + (K_DIM + 1) * 4];
    uint32_t table = 0;
    memset(rec, 0, sizeof rec);
    memcpy(rec, &marker, 8);
    hdr = (struct ps_ckpt_hdr){.kind = PS_CKPT_EMBED, .shard = 1,
                               .shape = {3, K_DIM, SS_OPT_ROWWISE_ADAGRAD, 2}};
    assert_int_equal(ps_ckpt_begin(f->path, &wr), 0);
    assert_int_equal(ps_ckpt_write(wr, rec, sizeof rec), 0);
    assert_int_equal(ps_ckpt_write(wr, rec, sizeof rec), 0);
    assert_int_equal(ps_ckpt_commit(&wr, &hdr), 0);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
    table = 3;
    memcpy(rec + 8, &table, 4);
    hdr.shape[3] = 1;
    assert_int_equal(ps_ckpt_begin(f->path, &wr), 0);
    assert_int_equal(ps_ckpt_write(wr, rec, sizeof rec), 0);
    assert_int_equal(ps_ckpt_commit(&wr, &hdr), 0);
    assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
    s_assert_unchanged(target);

    /* a well-formed file (checksum right) whose row holds a NaN, then an
     * infinity: a diverged run's save is refused, not spread to trainers */
    table = 0;
    memcpy(rec + 8, &table, 4);
    hdr.shape[3] = 1;
    float bad[2] = {NAN, -INFINITY};
    for (int i = 0; i < 2; i++) {
        memset(rec + 16, 0, sizeof rec - 16);
        memcpy(rec + 16 + (i ? K_DIM : 2) * 4, &bad[i], 4);
        assert_int_equal(ps_ckpt_begin(f->path, &wr), 0);
        assert_int_equal(ps_ckpt_write(wr, rec, sizeof rec), 0);
        assert_int_equal(ps_ckpt_commit(&wr, &hdr), 0);
        assert_int_equal(ps_embed_restore(target, f->path, 1), SS_E_CORRUPT);
        s_assert_unchanged(target);
    }
    /* the same record with finite values loads (the refusal above is the NaN's) */
    memset(rec + 16, 0, sizeof rec - 16);
    assert_int_equal(ps_ckpt_begin(f->path, &wr), 0);
    assert_int_equal(ps_ckpt_write(wr, rec, sizeof rec), 0);
    assert_int_equal(ps_ckpt_commit(&wr, &hdr), 0);
    ps_embed_t *y = ps_embed_new(&c);
    assert_int_equal(ps_embed_restore(y, f->path, 1), 0);
    assert_int_equal(ps_embed_rows(y), 1);
    ps_embed_destroy(&y);

    ps_embed_destroy(&a);
    ps_embed_destroy(&target);
}

static int s_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_checkpoint_bad_dir(void **state)
{
    struct t_fix *f = *state;
    ps_embed_t *a = s_trained(SS_OPT_SGD, 4);
    char p[400];

    snprintf(p, sizeof p, "%s/missing/embed.ckpt", f->dir);
    assert_int_equal(ps_embed_checkpoint(a, p, WHO(0)), SS_E_IO);
    assert_int_equal(s_dir_entries(f->dir), 0);   /* no temp file anywhere */
    if (geteuid() != 0) {
        assert_int_equal(chmod(f->dir, 0555), 0);
        assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(0)), SS_E_IO);
        assert_int_equal(chmod(f->dir, 0755), 0);
    } else {
        assert_int_equal(ps_embed_checkpoint(a, "/proc/ss_test_embed.ckpt", WHO(0)), SS_E_IO);
    }
    assert_int_equal(s_dir_entries(f->dir), 0);
    ps_embed_destroy(&a);
}

/* Checkpoints taken while threads push hold only states the rows really had:
 * with SGD, lr 1 and gradients of 0.25 from 0, multiples of -0.25. */
static void test_checkpoint_while_pushing(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, C_DIM);
    c.lr = 1.0f;
    c.n_stripes = 16;
    ps_embed_t *e = ps_embed_new(&c);
    pthread_t th[2];
    struct pusher p[2];
    float *out = malloc(C_KEYS * C_DIM * sizeof(float));
    uint64_t *keys = malloc(C_KEYS * sizeof *keys);

    atomic_int done;
    int n_ckpt = 0;

    atomic_init(&done, 0);
    for (size_t k = 0; k < C_KEYS; k++)
        keys[k] = k;
    for (int t = 0; t < 2; t++) {
        p[t] = (struct pusher){.e = e, .id = 0, .rounds = 10, .done = &done};
        assert_int_equal(pthread_create(&th[t], NULL, s_pusher, &p[t]), 0);
    }
    while (n_ckpt < 3 || atomic_load(&done) < 2) {
        assert_int_equal(ps_embed_checkpoint(e, f->path, WHO(0)), 0);
        n_ckpt++;
    }
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);

    ps_embed_t *b = ps_embed_new(&c);
    assert_int_equal(ps_embed_restore(b, f->path, 0), 0);
    size_t rows = ps_embed_rows(b);
    assert_true(rows <= C_KEYS);
    for (size_t k = 0; k < C_KEYS; k++) {
        float r[C_DIM];
        if (ps_embed_read_row(b, 0, keys[k], r) != 0)
            continue;
        for (size_t i = 0; i < C_DIM; i++) {
            double q = r[i] / -0.25;
            assert_true(q == floor(q) && q >= 0 && q <= 2 * 10 * 2);
            ASSERT_FEQ(r[i], r[0]);
        }
    }
    /* the final state, checkpointed at rest, round-trips exactly */
    assert_int_equal(ps_embed_checkpoint(e, f->path, WHO(0)), 0);
    assert_int_equal(ps_embed_restore(b, f->path, 0), 0);
    assert_int_equal(ps_embed_rows(b), C_KEYS);
    float *back = malloc(C_KEYS * C_DIM * sizeof(float));
    assert_int_equal(ps_embed_lookup(e, 0, keys, C_KEYS, out, NULL), 0);
    assert_int_equal(ps_embed_lookup(b, 0, keys, C_KEYS, back, NULL), 0);
    assert_memory_equal(out, back, C_KEYS * C_DIM * sizeof(float));
    free(back);
    free(out);
    free(keys);
    ps_embed_destroy(&b);
    ps_embed_destroy(&e);
}

/* A thread that races the online RESTOREs on a shard. */
struct restore_racer {
    ps_embed_t *e;           /* shared shard */
    atomic_int *stop;        /* set when the restores are done */
    atomic_size_t n_calls;   /* calls made (pushes or ticks) */
};

/* Insert new keys (K_DIM floats, table 0) until *stop: the online RESTORE's
 * concurrent writer (a request that creates rows while the shard swaps). */
static void *s_inserter(void *arg)
{
    struct restore_racer *p = arg;
    uint64_t keys[16];
    float g[16 * K_DIM];
    uint64_t next = 0;

    for (size_t i = 0; i < 16 * K_DIM; i++)
        g[i] = 0.125f;
    while (!atomic_load(p->stop)) {
        for (size_t i = 0; i < 16; i++)
            keys[i] = 1000000 + (next++ % 4096);   /* lost to a swap, created again */
        assert_int_equal(ps_embed_push(p->e, 0, keys, 16, g, NULL), 0);
        atomic_fetch_add(&p->n_calls, 1);
    }
    return NULL;
}

/* Move the clock of a shard with a TTL one second per call until *stop, so
 * that its sweeps delete rows (the PS's main-thread tick). */
static void *s_ticker(void *arg)
{
    struct restore_racer *p = arg;
    for (uint32_t now = 1; !atomic_load(p->stop) && now < (1u << 30); now++) {
        ps_embed_tick(p->e, now);
        atomic_fetch_add(&p->n_calls, 1);
    }
    return NULL;
}

/* Checkpoint src into path, then restore e from it 300 times while an
 * inserter (and, when tick, a ticker) runs on e, both started before the
 * first restore (a loaded machine may start them late); then the threads
 * are joined and e's counts must match its stripes (ps_embed_verify). */
static void s_restore_racing(ps_embed_t *src, ps_embed_t *e, const char *path, int tick)
{
    atomic_int stop;
    struct restore_racer r[2] = {{.e = e, .stop = &stop}, {.e = e, .stop = &stop}};
    void *(*const run[2])(void *) = {s_inserter, s_ticker};
    pthread_t th[2];
    int n_th = tick ? 2 : 1;

    assert_int_equal(ps_embed_checkpoint(src, path, WHO(0)), 0);
    atomic_init(&stop, 0);
    for (int t = 0; t < n_th; t++)
        assert_int_equal(pthread_create(&th[t], NULL, run[t], &r[t]), 0);
    for (int t = 0; t < n_th; t++)
        while (atomic_load(&r[t].n_calls) == 0)
            sched_yield();
    for (int i = 0; i < 300; i++)
        assert_int_equal(ps_embed_restore(e, path, 0), 0);
    atomic_store(&stop, 1);
    for (int t = 0; t < n_th; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    assert_int_equal(ps_embed_verify(e), 0);
}

/* An online restore (ps_embed.h: safe while other threads push) leaves the
 * shard-wide row and byte counts equal to what the stripes hold, even when
 * rows are created during the swap (ps_embed_verify() checks both). */
static void test_restore_while_inserting(void **state)
{
    struct t_fix *f = *state;
    ps_embed_t *e = s_trained(SS_OPT_SGD, 256);   /* many stripes: a long swap */
    s_restore_racing(e, e, f->path, 0);
    ps_embed_destroy(&e);
}

/* The same with rows deleted by TTL ticks during the swaps as well: the
 * counts stay exact (the PS service also keeps its tick off a RESTORE, by
 * ckpt_lock, but the shard does not rely on it). */
static void test_restore_while_ticking(void **state)
{
    struct t_fix *f = *state;
    ps_embed_t *a = s_trained(SS_OPT_SGD, 256);
    struct ps_embed_conf c = *ps_embed_conf(a);
    c.ttl_s = 1;
    ps_embed_t *e = ps_embed_new(&c);
    s_restore_racing(a, e, f->path, 1);
    ps_embed_destroy(&e);
    ps_embed_destroy(&a);
}

/* Admission counts do not survive a restore (ps_embed.h): a key pushed
 * twice after the save, with admit_after 3, needs three more pushes after
 * going back to the save, as in a shard started from it. */
static void test_restore_clears_admission(void **state)
{
    struct t_fix *f = *state;
    struct ps_embed_conf c = s_conf(SS_OPT_SGD, K_DIM);
    c.admit_after = 3;
    c.admit_sketch_bytes = 1u << 14;
    ps_embed_t *e = ps_embed_new(&c), *b = ps_embed_new(&c);
    uint64_t saved = 5, late = 123456;
    float g[K_DIM] = {0.5f}, r[K_DIM];

    for (int i = 0; i < 3; i++)
        assert_int_equal(ps_embed_push(e, 0, &saved, 1, g, NULL), 0);
    assert_int_equal(ps_embed_checkpoint(e, f->path, WHO(0)), 0);
    for (int i = 0; i < 2; i++)   /* counted after the save, not admitted */
        assert_int_equal(ps_embed_push(e, 0, &late, 1, g, NULL), 0);
    assert_int_equal(ps_embed_read_row(e, 0, late, r), SS_E_NOTFOUND);
    assert_int_equal(ps_embed_restore(e, f->path, 0), 0);
    assert_int_equal(ps_embed_restore(b, f->path, 0), 0);   /* started from the save */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ps_embed_push(e, 0, &late, 1, g, NULL), 0);
        assert_int_equal(ps_embed_push(b, 0, &late, 1, g, NULL), 0);
        assert_int_equal(ps_embed_read_row(e, 0, late, r), SS_E_NOTFOUND);
        assert_int_equal(ps_embed_read_row(b, 0, late, r), SS_E_NOTFOUND);
    }
    assert_int_equal(ps_embed_push(e, 0, &late, 1, g, NULL), 0);   /* the third */
    assert_int_equal(ps_embed_read_row(e, 0, late, r), 0);
    assert_int_equal(ps_embed_read_row(e, 0, saved, r), 0);
    assert_int_equal(ps_embed_verify(e), 0);
    ps_embed_destroy(&b);
    ps_embed_destroy(&e);
}

enum { M_ROWS = 200000, M_DIM = 16, M_EXTRA = 1000, M_STEP = 97 };

/* The rows of keys 0, M_STEP, 2 M_STEP, ... below M_ROWS + M_EXTRA, state
 * included, as they are now (NaN where none is stored). */
static void s_snapshot(ps_embed_t *e, float *out)
{
    size_t rf = ps_embed_row_floats(e);
    for (uint64_t k = 0, i = 0; k < M_ROWS + M_EXTRA; k += M_STEP, i++)
        if (ps_embed_read_row(e, 0, k, out + i * rf) != 0)
            for (size_t j = 0; j < rf; j++)
                out[i * rf + j] = NAN;
}

/* In a forked child: a shard of M_ROWS rows (bounded: with max_memory_bytes,
 * so no pool) saved, then trained on; a RESTORE under an address-space limit
 * margin bytes above what the process holds must fail with SS_E_NOMEM and
 * leave every row as it was, serving; with the limit lifted it succeeds.
 * Exits 0 when all holds. */
struct no_memory_case {
    const char *path;   /* the checkpoint file */
    int bounded;        /* with max_memory_bytes (no pool) */
    int reshard;        /* restore from a set of 2 shards' files (PATH.set) into 1 */
    size_t margin;      /* bytes left to the restore */
};

/* Write the rows of keys[0..n) with grads g (M_DIM floats each), as 2
 * shards would hold them, as the set dir/embedding-K.ckpt of a job of 2
 * embedding shards. */
static void s_write_set(const struct ps_embed_conf *c, const char *dir, const uint64_t *keys,
                        size_t n, const float *g)
{
    uint64_t *k = malloc(n * sizeof *k);
    float *kg = malloc(n * M_DIM * sizeof *kg);
    char p[700];
    T_CHILD_CHECK(k && kg && (mkdir(dir, 0755) == 0 || errno == EEXIST));
    for (uint32_t sh = 0; sh < 2; sh++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (ss_key_shard(keys[i], 2) == sh) {
                k[m] = keys[i];
                memcpy(kg + m++ * M_DIM, g + i * M_DIM, M_DIM * sizeof *kg);
            }
        ps_embed_t *a = ps_embed_new(c);
        T_CHILD_CHECK(a && ps_embed_push(a, 0, k, m, kg, NULL) == 0);
        ps_ckpt_path(p, sizeof p, dir, PS_CKPT_NAME_EMBED, sh);
        T_CHILD_CHECK(ps_embed_checkpoint(a, p, &(struct ps_ckpt_who){sh, 2, 0, 0}) == 0);
        ps_embed_destroy(&a);
    }
    free(k);
    free(kg);
}

/* The restore of case nc: its own file, or the set of 2 shards into 1. */
static int s_no_memory_restore(ps_embed_t *e, const struct no_memory_case *nc)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s.set", nc->path);
    return nc->reshard ? ps_embed_restore_dir(e, dir, 0, 1) : ps_embed_restore(e, nc->path, 0);
}

static void s_no_memory_child(void *arg)
{
    const struct no_memory_case *nc = arg;
    const char *path = nc->path;
    int bounded = nc->bounded;
    size_t margin = nc->margin;
    struct ps_embed_conf c = s_conf(SS_OPT_ADAGRAD, M_DIM);
    c.init_scale = 0.01f;
    c.capacity_rows = 1u << 20;
    c.n_stripes = 16;
    if (bounded)
        c.max_memory_bytes = 256u << 20;
    ps_embed_t *e = ps_embed_new(&c);
    size_t rf = ps_embed_row_floats(e), n_snap = (M_ROWS + M_EXTRA) / M_STEP + 1;
    uint64_t *keys = malloc(M_ROWS * sizeof *keys);
    float *g = malloc(M_ROWS * M_DIM * sizeof(float));
    float *before = malloc(n_snap * rf * sizeof(float)), *after = malloc(n_snap * rf * 4);
    T_CHILD_CHECK(e && keys && g && before && after);
    uint64_t seed = 7;
    for (size_t i = 0; i < M_ROWS; i++)
        keys[i] = i;
    for (size_t i = 0; i < (size_t)M_ROWS * M_DIM; i++)
        g[i] = ss_rand_unit(&seed) - 0.5f;
    T_CHILD_CHECK(ps_embed_push(e, 0, keys, M_ROWS, g, NULL) == 0);
    T_CHILD_CHECK(ps_embed_checkpoint(e, path, WHO(0)) == 0);
    if (nc->reshard) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s.set", path);
        s_write_set(&c, dir, keys, M_ROWS, g);
    }
    for (size_t i = 0; i < M_EXTRA; i++)   /* trained after the save: new rows, moved rows */
        keys[i] = M_ROWS + i, keys[M_EXTRA + i] = i * 3;
    T_CHILD_CHECK(ps_embed_push(e, 0, keys, 2 * M_EXTRA, g, NULL) == 0);
    s_snapshot(e, before);
    size_t rows = ps_embed_rows(e), bytes = ps_embed_bytes(e);

    struct t_nomem *ball = malloc(sizeof *ball);
    T_CHILD_CHECK(ball);
    t_nomem_begin(ball, margin);
    int rc = s_no_memory_restore(e, nc);
    size_t need = ps_embed_restore_need(e);
    /* what the attempt took is back to the process, not idle in the pool:
     * the PS has memory to serve with (its replies, its lookups' scratch) */
    void *room = margin >= T_BIG ? malloc(T_BIG / 2) : NULL;
    int room_ok = margin < T_BIG || room != NULL;
    free(room);
    /* a CHECKPOINT with no memory to spare fails too, the saved file kept
     * (the restore below reads it) */
    int ckpt_rc = margin == 0 ? ps_embed_checkpoint(e, path, WHO(0)) : SS_E_NOMEM;
    t_nomem_end(ball);
    free(ball);
    if (rc != SS_E_NOMEM)
        fprintf(stderr, "restore child: restore under the limit returned %d\n", rc);
    T_CHILD_CHECK(rc == SS_E_NOMEM);
    /* the bytes it needed: at least the rows' floats, less than 4 times as much
     * (0 when not even the file's read buffer could be had: margin 0) */
    int in_range = need >= (size_t)M_ROWS * rf * 4 && need <= (size_t)M_ROWS * rf * 16;
    if (!in_range && !(margin == 0 && need == 0))
        fprintf(stderr, "restore child: need %zu bytes for %d rows of %zu floats\n", need,
                M_ROWS, rf);
    T_CHILD_CHECK(in_range || (margin == 0 && need == 0));
    T_CHILD_CHECK(room_ok);
    T_CHILD_CHECK(ckpt_rc == SS_E_NOMEM);
    /* the shard as it was, serving */
    T_CHILD_CHECK(ps_embed_verify(e) == 0);
    T_CHILD_CHECK(ps_embed_rows(e) == rows);
    T_CHILD_CHECK(bounded ? ps_embed_bytes(e) == bytes : ps_embed_bytes(e) <= bytes);
    s_snapshot(e, after);
    T_CHILD_CHECK(memcmp(before, after, n_snap * rf * sizeof(float)) == 0);
    T_CHILD_CHECK(ps_embed_push(e, 0, keys, 2 * M_EXTRA, g, NULL) == 0);
    T_CHILD_CHECK(ps_embed_lookup(e, 0, keys, M_EXTRA, g, NULL) == 0);
    /* with the memory, the same restore goes back to the save */
    T_CHILD_CHECK(s_no_memory_restore(e, nc) == 0);
    T_CHILD_CHECK(ps_embed_restore_need(e) == 0);
    T_CHILD_CHECK(ps_embed_rows(e) == M_ROWS);
    T_CHILD_CHECK(ps_embed_verify(e) == 0);
    ps_embed_destroy(&e);
}

/* A RESTORE that cannot get the memory to load the save aside fails cleanly
 * (SS_E_NOMEM, the bytes it needed), for a pooled and a bounded shard and a
 * re-sharding restore, with no memory left, with room for the file's read
 * buffer and a little, and with room for part of the load: in forked
 * children under an address-space cap (t_nomem.h). Not under a sanitizer,
 * whose shadow memory needs an unlimited address space. */
static void test_restore_no_memory(void **state)
{
    struct t_fix *f = *state;
    if (T_SANITIZED) {
        fprintf(stderr, "test_restore_no_memory: skipped under a sanitizer\n");
        skip();
    }
    /* none; the read buffer and a little; about 1/3 of what the load needs */
    size_t margins[3] = {0, T_BIG, 3 * T_BIG};
    for (int kind = 0; kind < 3; kind++) {   /* pooled, bounded, re-sharding */
        for (int m = 0; m < 3; m++) {
            struct no_memory_case c = {f->path, kind == 1, kind == 2, margins[m]};
            int st = t_nomem_fork(s_no_memory_child, &c);
            if (st != 0)
                fail_msg("case %d margin %zu: the child's wait status is %d", kind,
                         margins[m], st);
        }
    }
}

enum { F_ROWS = 3000, F_MOVED = 700 };

/* Every row of keys [0, 2 F_ROWS) of table 0 into out (NaN where none). */
static void s_fail_snapshot(ps_embed_t *e, float *out)
{
    size_t rf = ps_embed_row_floats(e);
    for (uint64_t k = 0; k < 2 * F_ROWS; k++)
        if (ps_embed_read_row(e, 0, k, out + k * rf) != 0)
            for (size_t j = 0; j < rf; j++)
                out[k * rf + j] = NAN;
}

/* The shard of test_fail_each_allocation before its restore: F_ROWS rows
 * pushed (saved to path first when path, and as a set of 2 shards' files in
 * set when set), then F_MOVED new rows and F_MOVED rows moved. The same
 * rows every call. */
static ps_embed_t *s_fail_shard(const struct ps_embed_conf *c, const char *path, const char *set)
{
    ps_embed_t *e = ps_embed_new(c);
    uint64_t *keys = malloc(F_ROWS * sizeof *keys), seed = 11;
    float *g = malloc((size_t)F_ROWS * M_DIM * sizeof *g);
    assert_true(e && keys && g);
    for (size_t i = 0; i < F_ROWS; i++)
        keys[i] = i;
    for (size_t i = 0; i < (size_t)F_ROWS * M_DIM; i++)
        g[i] = ss_rand_unit(&seed) - 0.5f;
    assert_int_equal(ps_embed_push(e, 0, keys, F_ROWS, g, NULL), 0);
    if (path)
        assert_int_equal(ps_embed_checkpoint(e, path, WHO(0)), 0);
    if (set)
        s_write_set(c, set, keys, F_ROWS, g);
    for (size_t i = 0; i < F_MOVED; i++)
        keys[i] = F_ROWS + i, keys[F_MOVED + i] = i * 3;
    assert_int_equal(ps_embed_push(e, 0, keys, 2 * F_MOVED, g, NULL), 0);
    free(keys);
    free(g);
    return e;
}

/* Each fallible allocation of a RESTORE, then of a CHECKPOINT, failed in
 * turn (ss_mem_fail_at: the k-th for k = 1, 2, ... until one runs through
 * without meeting it), for a pooled and a bounded shard and a re-sharding
 * restore. A failure either returns SS_E_NOMEM and leaves the shard as it
 * was (every row bit for bit, counts, structure) and the checkpoint file as
 * it was (no PATH.tmp left), or was one the call can do without (the pool's
 * trim scratch) and the call did all its work; nothing leaks (the
 * sanitizers' leak check at exit sees every early return). Unlike
 * test_restore_no_memory's address-space cap, this runs under ASan and
 * TSan. */
static void test_fail_each_allocation(void **state)
{
    struct t_fix *f = *state;
    char set[600], ck2[600], ck2tmp[610];
    snprintf(set, sizeof set, "%s.set", f->path);
    snprintf(ck2, sizeof ck2, "%s.2", f->path);
    snprintf(ck2tmp, sizeof ck2tmp, "%s.tmp", ck2);
    for (int kind = 0; kind < 3; kind++) {   /* pooled, bounded, re-sharding */
        struct ps_embed_conf c = s_conf(SS_OPT_ADAGRAD, M_DIM);
        c.init_scale = 0.01f;
        if (kind == 1)
            c.max_memory_bytes = 64u << 20;
        ps_embed_t *e = s_fail_shard(&c, f->path, kind == 2 ? set : NULL);
        size_t rf = ps_embed_row_floats(e), snap = 2 * F_ROWS * rf * sizeof(float);
        float *before = malloc(snap), *after = malloc(snap);
        assert_true(before && after);
        s_fail_snapshot(e, before);
        size_t rows = ps_embed_rows(e), bytes = ps_embed_bytes(e);
        ps_embed_destroy(&e);

        long k, refused = 0;
        for (k = 1; k < 1000; k++) {
            e = s_fail_shard(&c, NULL, NULL);
            ss_mem_fail_at(k);
            int rc = kind == 2 ? ps_embed_restore_dir(e, set, 0, 1)
                               : ps_embed_restore(e, f->path, 0);
            long fired = ss_mem_fail_fired();
            ss_mem_fail_at(0);
            assert_int_equal(ps_embed_verify(e), 0);
            if (rc == 0) {   /* restored: the save's rows */
                assert_int_equal(ps_embed_rows(e), F_ROWS);
            } else {
                if (rc != SS_E_NOMEM || !fired)
                    fail_msg("kind %d: the restore with allocation %ld failed returned %d",
                             kind, k, rc);
                refused++;
                assert_int_equal(ps_embed_rows(e), rows);
                if (kind == 1)
                    assert_int_equal(ps_embed_bytes(e), bytes);
                s_fail_snapshot(e, after);
                if (memcmp(before, after, snap) != 0)
                    fail_msg("kind %d: the restore with allocation %ld failed changed rows",
                             kind, k);
            }
            ps_embed_destroy(&e);
            if (!fired)
                break;
        }
        assert_true(k < 1000 && refused > 0);

        /* CHECKPOINT: the file of an older state, kept whole by every failure */
        e = s_fail_shard(&c, ck2, NULL);
        size_t n_old = 0, n_now = 0;
        unsigned char *old = t_slurp(ck2, &n_old), *now;
        assert_non_null(old);
        for (k = 1, refused = 0; k < 1000; k++) {
            ss_mem_fail_at(k);
            int rc = ps_embed_checkpoint(e, ck2, WHO(0));
            long fired = ss_mem_fail_fired();
            ss_mem_fail_at(0);
            assert_non_null(now = t_slurp(ck2, &n_now));
            int same = n_now == n_old && memcmp(now, old, n_old) == 0;
            free(now);
            assert_int_equal(access(ck2tmp, F_OK), -1);
            assert_int_equal(ps_embed_verify(e), 0);
            if (rc == 0) {   /* written: the state now, then the old file back */
                assert_false(same);
                assert_int_equal(t_spill(ck2, old, n_old), 0);
            } else {
                if (rc != SS_E_NOMEM || !fired)
                    fail_msg("kind %d: the checkpoint with allocation %ld failed returned %d",
                             kind, k, rc);
                refused++;
                assert_true(same);
            }
            if (!fired)
                break;
        }
        assert_true(k < 1000 && refused > 0);
        ps_embed_destroy(&e);
        free(old);
        free(before);
        free(after);
    }
}

/* Every key of [0, n) of table 0: stored in both a and b with equal rows
 * (state included), or in neither. Returns how many are stored. */
static size_t s_assert_same_keys(ps_embed_t *a, ps_embed_t *b, uint64_t n)
{
    size_t rf = ps_embed_row_floats(a), stored = 0;
    float ra[2 * K_DIM], rb[2 * K_DIM];
    for (uint64_t k = 0; k < n; k++) {
        int ia = ps_embed_read_row(a, 0, k, ra) == 0, ib = ps_embed_read_row(b, 0, k, rb) == 0;
        if (ia != ib)
            fail_msg("key %llu: stored %d in one shard, %d in the other", (unsigned long long)k,
                     ia, ib);
        if (ia)
            assert_memory_equal(ra, rb, rf * sizeof(float));
        stored += (size_t)ia;
    }
    return stored;
}

/* Push k distinct keys first + 0..k-1 with varied gradients, one call. */
static void s_push_range(ps_embed_t *e, uint64_t first, size_t k, uint64_t seed)
{
    uint64_t *keys = malloc(k * sizeof *keys);
    float *g = malloc(k * K_DIM * sizeof(float));
    for (size_t i = 0; i < k; i++)
        keys[i] = first + i;
    for (size_t i = 0; i < k * K_DIM; i++)
        g[i] = ss_rand_unit(&seed) - 0.5f;
    assert_int_equal(ps_embed_push(e, 0, keys, k, g, NULL), 0);
    free(keys);
    free(g);
}

/* A bounded shard after many evictions checkpoints only its live rows; a
 * restore with the same bound reproduces rows and LRU order exactly (the
 * same later pushes evict the same rows); a restore into a smaller bound
 * keeps the most recently used rows that fit and warns. */
static void test_checkpoint_evictions(void **state)
{
    struct t_fix *f = *state;
    enum { SPACE = 6000 };
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, K_DIM);
    c.init_scale = 0.1f;
    c.init_acc = 0.1f;
    c.n_stripes = 1;
    c.max_memory_bytes = 160 * 1024;
    ps_embed_t *a = ps_embed_new(&c), *b = ps_embed_new(&c);

    for (uint64_t first = 0; first < SPACE; first += 500)   /* each key once, in order */
        s_push_range(a, first, 500, first);
    size_t rows = ps_embed_rows(a);
    assert_true(rows > 500 && rows < SPACE / 2);
    assert_int_equal(s_stats(a).rows_evicted_memory, SPACE - rows);
    assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(0)), 0);
    assert_int_equal(s_size(f->path),
                     PS_CKPT_HDR_BYTES + (long)rows * (16 + (K_DIM + 1) * 4));   /* live only */
    assert_int_equal(ps_embed_restore(b, f->path, 0), 0);
    assert_int_equal(ps_embed_verify(b), 0);
    assert_int_equal(s_assert_same_keys(a, b, SPACE), rows);
    for (uint64_t k = SPACE - rows; k < SPACE; k++)   /* the newest rows */
        assert_true(s_stored(a, k));
    /* same CLOCK order (no row had its bit set when the file was written):
     * the same new keys and updates evict the same rows */
    s_push_range(a, SPACE, 300, 7);
    s_push_range(b, SPACE, 300, 7);
    s_push_range(a, SPACE - 100, 50, 8);   /* updates of live rows */
    s_push_range(b, SPACE - 100, 50, 8);
    s_push_range(a, SPACE + 300, 400, 9);
    s_push_range(b, SPACE + 300, 400, 9);
    assert_int_equal(s_assert_same_keys(a, b, SPACE + 700), rows);

    /* a smaller bound: the least recently used go, with a warning */
    struct ps_embed_conf small = c;
    small.max_memory_bytes = 80 * 1024;
    ps_embed_t *s = ps_embed_new(&small);
    assert_int_equal(ps_embed_checkpoint(a, f->path, WHO(0)), 0);
    assert_int_equal(ps_embed_restore(s, f->path, 0), 0);
    size_t kept = ps_embed_rows(s);
    assert_true(kept > 100 && kept < rows);
    assert_int_equal(s_stats(s).rows_evicted_memory, rows - kept);
    assert_true(ps_embed_bytes(s) <= small.max_memory_bytes);
    assert_int_equal(ps_embed_verify(s), 0);
    size_t n_kept = 0;
    for (uint64_t k = 0; k < SPACE + 700; k++) {
        float ra[2 * K_DIM], rs[2 * K_DIM];
        if (ps_embed_read_row(s, 0, k, rs) != 0)
            continue;
        assert_int_equal(ps_embed_read_row(a, 0, k, ra), 0);
        assert_memory_equal(ra, rs, (K_DIM + 1) * sizeof(float));
        n_kept++;
    }
    assert_int_equal(n_kept, kept);
    for (uint64_t k = SPACE + 700 - kept; k < SPACE + 700; k++)   /* the newest kept */
        assert_true(s_stored(s, k));
    ps_embed_destroy(&s);
    ps_embed_destroy(&a);
    ps_embed_destroy(&b);
}

/* issue 22 item 3: a gradient of 1e30 overflowed the Adagrad accumulator to
 * infinity (g^2 = 1e60), and the row never moved again (step lr / inf = 0).
 * The accumulator is held at FLT_MAX: later pushes still move the row. The
 * PS refuses such a push (security.max_abs_value); this guards the store. */
static void test_adagrad_acc_overflow(void **state)
{
    (void)state;
    for (int opt = SS_OPT_ADAGRAD; opt <= SS_OPT_ROWWISE_ADAGRAD; opt++) {
        struct ps_embed_conf c = s_conf(opt, 2);
        ps_embed_t *e = ps_embed_new(&c);
        uint64_t key = 7;
        float huge[2] = {1e30f, -1e30f}, small[2] = {1e25f, 1e25f};
        float r[4], before[4];

        assert_int_equal(ps_embed_push(e, 0, &key, 1, huge, NULL), 0);
        assert_int_equal(ps_embed_read_row(e, 0, key, before), 0);
        for (size_t i = 0; i < ps_embed_row_floats(e); i++)
            if (!isfinite(before[i]))
                fail_msg("optimizer %d: row float %zu is %g after a 1e30 push", opt, i,
                         (double)before[i]);
        assert_int_equal(ps_embed_push(e, 0, &key, 1, small, NULL), 0);
        assert_int_equal(ps_embed_read_row(e, 0, key, r), 0);
        if (!(r[0] < before[0]) || !(r[1] < before[1]))
            fail_msg("optimizer %d: row did not move: (%g, %g) -> (%g, %g)", opt,
                     (double)before[0], (double)before[1], (double)r[0], (double)r[1]);
        ps_embed_destroy(&e);
    }
}

/* Initial rows are ss_rowinit_row()'s bit for bit on every path (the shard
 * seeds them from its map hash, 8 weights at a time where AVX-512 is
 * allowed; SS_ISA=portable runs the plain path): ps_embed_init_row(), a
 * lookup's new row, and a lookup of a key not admitted, for every dim with
 * and without the first-order weight. */
static void test_init_rows_match(void **state)
{
    (void)state;
    enum { N = 50 };
    uint64_t keys[N];
    float want[N * 41], got[N * 41], one[41];

    for (int k = 0; k < N; k++)
        keys[k] = ss_mix64((uint64_t)k + 1000);
    for (uint32_t dim = 1; dim <= 40; dim++) {
        for (uint32_t fo = 0; fo <= 1 && fo < dim; fo++) {
            for (uint32_t admit = 0; admit <= 3; admit += 3) {
                struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, dim);
                c.first_order = fo;
                c.init_scale = 0.05f;
                c.seed = 7 + dim;
                c.admit_after = admit;
                c.admit_sketch_bytes = 1u << 16;
                ps_embed_t *e = ps_embed_new(&c);
                assert_non_null(e);
                for (int k = 0; k < N; k++)
                    ss_rowinit_row(c.seed, c.init_scale, dim, fo, 2, keys[k], want + k * dim);
                assert_int_equal(ps_embed_lookup(e, 2, keys, N, got, NULL), 0);
                assert_memory_equal(got, want, N * dim * sizeof(float));
                for (int k = 0; k < N; k++) {
                    ps_embed_init_row(e, 2, keys[k], one);
                    assert_memory_equal(one, want + k * dim, dim * sizeof(float));
                }
                assert_int_equal(ps_embed_rows(e), admit ? 0 : N);
                ps_embed_destroy(&e);
            }
        }
    }
}

/* A small shard under the job's settings touches little memory: the default
 * job's shape (capacity_rows 10M, 64 stripes, rows of 17 + 2 floats) with
 * 20,000 rows (a small job's shard, 1.9 MB of rows). Its resident memory
 * grows by a few MiB (rows, slots, a few 2 MiB chunks of its pool), not by a
 * huge page per stripe (128 MiB: slabs advised one by one, each zeroed whole
 * at its first touch, cost a small job 0.3 s of system time per PS). */
static void test_small_shard_touches_little(void **state)
{
    (void)state;
    enum { N = 20000, D = 17 };
    struct ps_embed_conf c = s_conf(SS_OPT_ROWWISE_ADAGRAD, D);
    c.first_order = 1;
    c.n_tables = 26;
    c.capacity_rows = 10000000;
    c.n_stripes = 64;
    uint64_t *keys = malloc(N * sizeof *keys);
    float *g = calloc((size_t)N * D, sizeof *g);

    for (size_t i = 0; i < N; i++)
        keys[i] = ss_mix64(i + 1);
    size_t rss0 = ss_mem_rss();
    ps_embed_t *e = ps_embed_new(&c);
    assert_int_equal(ps_embed_push(e, 5, keys, N, g, NULL), 0);
    assert_int_equal(ps_embed_rows(e), N);
    size_t rss1 = ss_mem_rss();
    assert_true(rss0 > 0);
    assert_in_range(rss1 > rss0 ? rss1 - rss0 : 0, 0, 48u << 20);
    /* what it counts: at least the rows, and no more than its pool's chunks
     * plus the slab tables and fixed structs */
    assert_true(ps_embed_bytes(e) >= (size_t)N * (16 + (D + 2) * 4));
    assert_in_range(ps_embed_bytes(e), 0, 16u << 20);
    assert_int_equal(ps_embed_verify(e), 0);
    ps_embed_destroy(&e);
    free(keys);
    free(g);
}

int main(void)
{
    /* SS_TEST_LOG=1 shows the error lines the failure tests provoke */
    ss_log_init("test", getenv("SS_TEST_LOG") ? SS_LOG_DEBUG : SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_conf),
        cmocka_unit_test(test_sgd_exact),
        cmocka_unit_test(test_sgd_from_init),
        cmocka_unit_test(test_adagrad_exact),
        cmocka_unit_test(test_adagrad_init_acc),
        cmocka_unit_test(test_adagrad_acc_overflow),
        cmocka_unit_test(test_rowwise_exact),
        cmocka_unit_test(test_l2_sgd_exact),
        cmocka_unit_test(test_l2_adagrad_exact),
        cmocka_unit_test(test_l2_rowwise_exact),
        cmocka_unit_test(test_first_order_init),
        cmocka_unit_test(test_first_order_rowwise_exact),
        cmocka_unit_test(test_init_deterministic),
        cmocka_unit_test(test_table_range),
        cmocka_unit_test(test_groups_equal_per_table),
        cmocka_unit_test(test_requests_equal_single_keys),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_many_rows),
        cmocka_unit_test(test_stripe_counts_agree),
        cmocka_unit_test(test_concurrent_pushes_exact),
        cmocka_unit_test(test_concurrent_capacity),
        cmocka_unit_test(test_bound_conf),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_ttl),
        cmocka_unit_test(test_lru_order),
        cmocka_unit_test(test_peek_read_only),
        cmocka_unit_test(test_peek_grouped),
        cmocka_unit_test(test_evict_random),
        cmocka_unit_test(test_concurrent_evictions),
        cmocka_unit_test_setup_teardown(test_checkpoint_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_bad_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_while_pushing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_while_inserting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_while_ticking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_clears_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_no_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_each_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_evictions, setup, teardown),
        cmocka_unit_test(test_small_shard_touches_little),
        cmocka_unit_test(test_init_rows_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
