/* test_ps_sync.c - the EASGD center shard: init-once semantics, the re-seed
 * from the mean of the trainers' offers (exact floats, the bounded wait), the
 * elastic rule against its formula with exactly representable numbers, range
 * checks, atomicity of rounds under concurrent callers, and checkpoints. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "t.h"
#include "t_nomem.h"

#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_ckpt.h"
#include "ps_sync.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

/* A checkpoint writer that records only its shard number. */
#define WHO(k) (&(struct ps_ckpt_who){.shard = (k)})

/* Exact float comparison that prints both values and the index. */
#define ASSERT_VEC_EQ(got, want, n)                                                   \
    do {                                                                              \
        for (size_t i_ = 0; i_ < (n); i_++)                                           \
            if ((got)[i_] != (want)[i_])                                              \
                fail_msg("%s[%zu] = %.9g, expected %.9g", #got, i_, (double)(got)[i_], \
                         (double)(want)[i_]);                                         \
    } while (0)

/* A float equal to a double constant rounded to float. */
#define ASSERT_FEQ_D(got, want)                                                     \
    do {                                                                            \
        if ((got) != (float)(want))                                                 \
            fail_msg("%s = %.9g, expected %.9g", #got, (double)(got), (double)(float)(want)); \
    } while (0)

static void test_new_and_empty(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(0);
    float x[4] = {0}, d[4];
    uint64_t off = 99;
    size_t len = 99;

    assert_null(s);
    s = ps_sync_new(16);
    assert_non_null(s);
    assert_int_equal(ps_sync_is_empty(s), 1);
    ps_sync_range(s, &off, &len);
    assert_int_equal(off, 0);
    assert_int_equal(len, 0);
    assert_int_equal(ps_sync_elastic(s, 0, x, 4, 0.5f, d), SS_E_EMPTY);
    assert_int_equal(ps_sync_pull(s, 0, d, 4), SS_E_EMPTY);
    assert_int_equal(ps_sync_rounds(s), 0);
    ps_sync_destroy(&s);
    assert_null(s);
    ps_sync_destroy(&s);
    ps_sync_destroy(NULL);
}

static void test_init_once(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(8);
    float a[4] = {1, 2, 3, 4}, b[4] = {9, 9, 9, 9}, out[4];
    float big[9] = {0};
    int applied = -1;
    uint64_t off;
    size_t len;

    assert_int_equal(ps_sync_init(s, 100, big, 9, &applied), SS_E_TOOBIG);
    assert_int_equal(applied, 0);
    assert_int_equal(ps_sync_init(s, 100, a, 0, &applied), SS_E_INVAL);
    assert_int_equal(ps_sync_init(s, UINT64_MAX - 2, a, 4, &applied), SS_E_RANGE);
    assert_int_equal(ps_sync_is_empty(s), 1);

    assert_int_equal(ps_sync_init(s, 100, a, 4, &applied), 0);
    assert_int_equal(applied, 1);
    assert_int_equal(ps_sync_is_empty(s), 0);
    ps_sync_range(s, &off, &len);
    assert_int_equal(off, 100);
    assert_int_equal(len, 4);

    /* a second INIT of the same range is a no-op: the values stay */
    applied = -1;
    assert_int_equal(ps_sync_init(s, 100, b, 4, &applied), 0);
    assert_int_equal(applied, 0);
    assert_int_equal(ps_sync_pull(s, 100, out, 4), 0);
    ASSERT_VEC_EQ(out, a, 4);

    /* a different range is an error, also a no-op */
    applied = -1;
    assert_int_equal(ps_sync_init(s, 101, b, 4, &applied), SS_E_RANGE);
    assert_int_equal(applied, 0);
    assert_int_equal(ps_sync_init(s, 100, b, 3, &applied), SS_E_RANGE);
    assert_int_equal(ps_sync_pull(s, 100, out, 4), 0);
    ASSERT_VEC_EQ(out, a, 4);
    ps_sync_destroy(&s);
}

/* The mean of the offers, as the shard must compute it: the sum in double
 * in the order given, divided by the count, rounded to float once. */
static float s_mean(const float *const *xs, size_t k, size_t i)
{
    double sum = 0;
    for (size_t j = 0; j < k; j++)
        sum += (double)xs[j][i];
    return (float)(sum / (double)k);
}

/* Issue 22 item 5: an empty shard expecting 3 trainers takes the first offer
 * of each rank and is seeded, at the third, with their mean, exactly; until
 * then it serves nothing. */
static void test_offer_mean_of_replicas(void **state)
{
    (void)state;
    enum { L = 6 };
    ps_sync_t *s = ps_sync_new(16);
    float a[L] = {1.5f, -2.0f, 0.1f, 1e8f, 3.0f, -7.25f};
    float b[L] = {-2.25f, 4.0f, 0.2f, 1e8f, -1.0f / 3.0f, 0.0f};
    float c[L] = {6.0f, 1.0f, 0.3f, -3e7f, 2.0f / 7.0f, 7.25f};
    float other[L] = {99, 99, 99, 99, 99, 99}, got[L], d[L];
    const float *xs[] = {a, b, c};
    int res;
    uint32_t n;

    ps_sync_expect(s, 3, 1000);
    assert_int_equal(ps_sync_offer(s, 2, 40, b, L, 5000, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_COLLECTED);
    assert_int_equal(n, 1);
    assert_int_equal(ps_sync_is_empty(s), 1);       /* one of three: still empty */
    assert_int_equal(ps_sync_pull(s, 40, got, L), SS_E_EMPTY);
    assert_int_equal(ps_sync_elastic(s, 40, a, L, 0.5f, d), SS_E_EMPTY);
    /* a rank's second offer changes nothing (it would count twice) */
    assert_int_equal(ps_sync_offer(s, 2, 40, other, L, 5001, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_REPEATED);
    assert_int_equal(n, 1);
    /* another range than the one collected, a rank the job lacks */
    assert_int_equal(ps_sync_offer(s, 0, 41, a, L, 5002, &res, &n), SS_E_RANGE);
    assert_int_equal(res, 0);
    assert_int_equal(ps_sync_offer(s, 3, 40, a, L, 5002, &res, &n), SS_E_INVAL);
    assert_int_equal(ps_sync_offer(s, 0, 40, a, L, 5003, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_COLLECTED);
    assert_int_equal(n, 2);
    assert_int_equal(ps_sync_settle(s, 5500), 0);   /* the wait is not over */
    assert_int_equal(ps_sync_is_empty(s), 1);
    assert_int_equal(ps_sync_offer(s, 1, 40, c, L, 5004, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_SEEDED);
    assert_int_equal(n, 3);
    assert_int_equal(ps_sync_pull(s, 40, got, L), 0);
    for (size_t i = 0; i < L; i++)
        if (got[i] != s_mean(xs, 3, i))
            fail_msg("center[%zu] = %.9g, want the mean %.9g of %.9g, %.9g, %.9g", i,
                     (double)got[i], (double)s_mean(xs, 3, i), (double)a[i], (double)b[i],
                     (double)c[i]);
    ASSERT_FEQ_D(got[0], 1.75);                      /* (1.5 - 2.25 + 6) / 3 */
    ASSERT_FEQ_D(got[1], 1.0);
    ASSERT_FEQ_D(got[3], 17e7 / 3.0);                /* no float overflow or rounding of the sum */
    ASSERT_FEQ_D(got[5], 0.0);
    assert_int_equal(ps_sync_rounds(s), 0);
    /* seeded: an offer is kept out */
    assert_int_equal(ps_sync_offer(s, 0, 40, other, L, 5005, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_KEPT);
    assert_int_equal(ps_sync_pull(s, 40, d, L), 0);
    ASSERT_VEC_EQ(d, got, L);
    assert_int_equal(ps_sync_offer(s, 0, 41, other, L, 5005, &res, &n), SS_E_RANGE);
    ps_sync_destroy(&s);
}

/* A trainer that never offers (lost, stalled) keeps the shard empty for at
 * most the wait: at the first request after it (an offer or a settle), the
 * shard takes the mean of the offers it has. */
static void test_offer_bounded_wait(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(8);
    float a[4] = {1, 2, 3, 4}, b[4] = {3, 2, 1, 0}, got[4];
    int res;
    uint32_t n;

    ps_sync_expect(s, 3, 250);
    assert_int_equal(ps_sync_settle(s, 100), 0);     /* nothing offered: nothing to settle */
    assert_int_equal(ps_sync_offer(s, 1, 0, a, 4, 1000, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_COLLECTED);
    assert_int_equal(ps_sync_settle(s, 1249), 0);
    assert_int_equal(ps_sync_is_empty(s), 1);
    assert_int_equal(ps_sync_settle(s, 1250), 1);    /* one offer, the wait over */
    assert_int_equal(ps_sync_pull(s, 0, got, 4), 0);
    ASSERT_VEC_EQ(got, a, 4);

    /* an offer that comes when the wait is over still counts, and seeds */
    ps_sync_t *t = ps_sync_new(8);
    ps_sync_expect(t, 3, 250);
    assert_int_equal(ps_sync_offer(t, 0, 0, a, 4, 1000, &res, &n), 0);
    assert_int_equal(ps_sync_offer(t, 2, 0, b, 4, 1300, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_SEEDED);
    assert_int_equal(n, 2);
    assert_int_equal(ps_sync_pull(t, 0, got, 4), 0);
    float two[4] = {2, 2, 2, 2};
    ASSERT_VEC_EQ(got, two, 4);

    /* one trainer, or none expected: the first offer seeds at once */
    ps_sync_t *u = ps_sync_new(8);
    assert_int_equal(ps_sync_offer(u, 7, 0, b, 4, 0, &res, &n), 0);
    assert_int_equal(res, PS_SYNC_SEEDED);
    assert_int_equal(n, 1);
    assert_int_equal(ps_sync_pull(u, 0, got, 4), 0);
    ASSERT_VEC_EQ(got, b, 4);
    /* an INIT without a rank while offers wait: its values, at once, and the
     * offers are dropped */
    ps_sync_t *v = ps_sync_new(8);
    int applied = 0;
    ps_sync_expect(v, 2, 250);
    assert_int_equal(ps_sync_offer(v, 0, 0, a, 4, 0, &res, &n), 0);
    assert_int_equal(ps_sync_init(v, 0, b, 4, &applied), 0);
    assert_int_equal(applied, 1);
    assert_int_equal(ps_sync_settle(v, 10000), 0);
    assert_int_equal(ps_sync_pull(v, 0, got, 4), 0);
    ASSERT_VEC_EQ(got, b, 4);
    ps_sync_destroy(&s);
    ps_sync_destroy(&t);
    ps_sync_destroy(&u);
    ps_sync_destroy(&v);
}

/* c' = c + alpha (x - c), d = alpha (x - c), with numbers exact in binary. */
static void test_elastic_rule(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(4);
    float c0[4] = {1, 2, 3, 4};
    float x[4] = {3, 2, -1, 4.5f};
    float d[4], c[4];
    int applied;

    assert_int_equal(ps_sync_init(s, 8, c0, 4, &applied), 0);
    assert_int_equal(ps_sync_elastic(s, 8, x, 4, 0.25f, d), 0);
    float d1[4] = {0.5f, 0.0f, -1.0f, 0.125f};
    float c1[4] = {1.5f, 2.0f, 2.0f, 4.125f};
    ASSERT_VEC_EQ(d, d1, 4);
    assert_int_equal(ps_sync_pull(s, 8, c, 4), 0);
    ASSERT_VEC_EQ(c, c1, 4);
    assert_int_equal(ps_sync_rounds(s), 1);

    /* second round, alpha 0.5, d written over x in place */
    float x2[4] = {2.5f, -2.0f, 2.0f, 0.125f};
    assert_int_equal(ps_sync_elastic(s, 8, x2, 4, 0.5f, x2), 0);
    float d2[4] = {0.5f, -2.0f, 0.0f, -2.0f};
    float c2[4] = {2.0f, 0.0f, 2.0f, 2.125f};
    ASSERT_VEC_EQ(x2, d2, 4);
    assert_int_equal(ps_sync_pull(s, 8, c, 4), 0);
    ASSERT_VEC_EQ(c, c2, 4);

    /* alpha 1 moves the center onto x; alpha 0 leaves it */
    float x3[4] = {7, 7, 7, 7};
    assert_int_equal(ps_sync_elastic(s, 8, x3, 4, 0.0f, d), 0);
    float zero[4] = {0, 0, 0, 0};
    ASSERT_VEC_EQ(d, zero, 4);
    assert_int_equal(ps_sync_elastic(s, 8, x3, 4, 1.0f, d), 0);
    assert_int_equal(ps_sync_pull(s, 8, c, 4), 0);
    ASSERT_VEC_EQ(c, x3, 4);
    assert_int_equal(ps_sync_rounds(s), 4);

    /* wrong range, bad alpha: errors that change nothing and count no round */
    assert_int_equal(ps_sync_elastic(s, 9, x, 4, 0.5f, d), SS_E_RANGE);
    assert_int_equal(ps_sync_elastic(s, 8, x, 5, 0.5f, d), SS_E_RANGE);
    assert_int_equal(ps_sync_elastic(s, 7, x, 2, 0.5f, d), SS_E_RANGE);
    assert_int_equal(ps_sync_elastic(s, 8, x, 0, 0.5f, d), SS_E_RANGE);
    assert_int_equal(ps_sync_pull(s, 0, c, 4), SS_E_RANGE);
    assert_int_equal(ps_sync_elastic(s, 8, x, 4, 1.5f, d), SS_E_INVAL);
    assert_int_equal(ps_sync_elastic(s, 8, x, 4, NAN, d), SS_E_INVAL);
    assert_int_equal(ps_sync_elastic(s, 8, x, 4, -0.1f, d), SS_E_INVAL);
    assert_int_equal(ps_sync_rounds(s), 4);
    assert_int_equal(ps_sync_pull(s, 8, c, 4), 0);
    ASSERT_VEC_EQ(c, x3, 4);

    /* a sub-range (a sync group's component) moves only its elements */
    float xs[2] = {5, 9}, ds[2], cs[4];
    assert_int_equal(ps_sync_elastic(s, 9, xs, 2, 0.5f, ds), 0);
    float want_ds[2] = {-1.0f, 1.0f}, want_cs[4] = {7, 6, 8, 7};
    ASSERT_VEC_EQ(ds, want_ds, 2);
    assert_int_equal(ps_sync_pull(s, 8, cs, 4), 0);
    ASSERT_VEC_EQ(cs, want_cs, 4);
    assert_int_equal(ps_sync_pull(s, 10, cs, 2), 0);
    ASSERT_VEC_EQ(cs, want_cs + 2, 2);
    ps_sync_destroy(&s);
}

/* EASGD over many rounds against a double-precision reference of the rule. */
static void test_elastic_many_rounds(void **state)
{
    (void)state;
    enum { N = 1000, R = 20 };
    ps_sync_t *s = ps_sync_new(N);
    float *x = malloc(N * sizeof *x), *d = malloc(N * sizeof *d), *c = malloc(N * sizeof *c);
    double *ref = malloc(N * sizeof *ref);
    int applied;

    for (size_t i = 0; i < N; i++) {
        x[i] = (float)sin((double)i);
        ref[i] = x[i];
    }
    assert_int_equal(ps_sync_init(s, 0, x, N, &applied), 0);
    for (int r = 0; r < R; r++) {
        float alpha = 0.9f / 4;
        for (size_t i = 0; i < N; i++)
            x[i] = (float)cos((double)(i * (r + 1)));
        assert_int_equal(ps_sync_elastic(s, 0, x, N, alpha, d), 0);
        for (size_t i = 0; i < N; i++) {
            double dr = alpha * ((double)x[i] - ref[i]);
            if (fabs(d[i] - dr) > 1e-5)
                fail_msg("round %d d[%zu] = %.9g, expected %.9g", r, i, (double)d[i], dr);
            ref[i] += dr;
        }
    }
    assert_int_equal(ps_sync_pull(s, 0, c, N), 0);
    for (size_t i = 0; i < N; i++)
        if (fabs(c[i] - ref[i]) > 1e-5)
            fail_msg("c[%zu] = %.9g, expected %.9g", i, (double)c[i], ref[i]);
    assert_int_equal(ps_sync_rounds(s), R);
    free(x);
    free(d);
    free(c);
    free(ref);
    ps_sync_destroy(&s);
}

enum { T_THREADS = 4, T_LEN = 512, T_ROUNDS = 300 };

struct worker {
    ps_sync_t *s;      /* shared shard */
    int id;            /* thread number */
    int bad;           /* rounds whose d was not uniform */
};

/* Each thread sends a uniform x = id + 1. Since c starts uniform and every round
 * is atomic, c stays uniform, so every reply d is uniform too. */
static void *s_worker(void *arg)
{
    struct worker *w = arg;
    float x[T_LEN], d[T_LEN];
    for (int r = 0; r < T_ROUNDS; r++) {
        for (size_t i = 0; i < T_LEN; i++)
            x[i] = (float)(w->id + 1);
        if (ps_sync_elastic(w->s, 64, x, T_LEN, 0.5f, d) != 0) {
            w->bad++;
            continue;
        }
        for (size_t i = 1; i < T_LEN; i++)
            if (d[i] != d[0]) {
                w->bad++;
                break;
            }
    }
    return NULL;
}

static void test_concurrent_rounds_are_atomic(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(T_LEN);
    float c0[T_LEN], c[T_LEN];
    pthread_t th[T_THREADS];
    struct worker w[T_THREADS];
    int applied;

    for (size_t i = 0; i < T_LEN; i++)
        c0[i] = 0.0f;
    assert_int_equal(ps_sync_init(s, 64, c0, T_LEN, &applied), 0);
    for (int t = 0; t < T_THREADS; t++) {
        w[t] = (struct worker){.s = s, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, s_worker, &w[t]), 0);
    }
    for (int t = 0; t < T_THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(w[t].bad, 0);
    }
    assert_int_equal(ps_sync_rounds(s), T_THREADS * T_ROUNDS);
    assert_int_equal(ps_sync_pull(s, 64, c, T_LEN), 0);
    for (size_t i = 0; i < T_LEN; i++) {
        assert_true(c[i] == c[0]);
        assert_true(c[i] >= 0.999f && c[i] <= 4.0f);   /* a convex mix of 0 and the x's */
    }
    ps_sync_destroy(&s);
}

/* Concurrent INITs: exactly one applies. */
static void *s_initer(void *arg)
{
    struct worker *w = arg;
    float x[8];
    int applied = 0;
    for (size_t i = 0; i < 8; i++)
        x[i] = (float)w->id;
    if (ps_sync_init(w->s, 0, x, 8, &applied) != 0)
        w->bad = -1;
    else
        w->bad = applied;
    return NULL;
}

static void test_concurrent_init(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(8);
    pthread_t th[T_THREADS];
    struct worker w[T_THREADS];
    float c[8];
    int winners = 0, winner = -1;

    for (int t = 0; t < T_THREADS; t++) {
        w[t] = (struct worker){.s = s, .id = t + 1};
        assert_int_equal(pthread_create(&th[t], NULL, s_initer, &w[t]), 0);
    }
    for (int t = 0; t < T_THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_true(w[t].bad == 0 || w[t].bad == 1);
        if (w[t].bad == 1) {
            winners++;
            winner = w[t].id;
        }
    }
    assert_int_equal(winners, 1);
    assert_int_equal(ps_sync_pull(s, 0, c, 8), 0);
    for (size_t i = 0; i < 8; i++)
        assert_true(c[i] == (float)winner);
    ps_sync_destroy(&s);
}

/* --- checkpoints --- */

static int setup(void **state)
{
    return t_fix_setup(state, "sync", "sync.ckpt");
}

static int teardown(void **state)
{
    return t_fix_teardown(state);
}

/* A shard at [offset 1000, +6) after two rounds. */
static ps_sync_t *s_trained(void)
{
    ps_sync_t *s = ps_sync_new(16);
    float c0[6] = {1, -2, 3, -4, 5, -6};
    float x[6] = {2, 2, 2, 2, 2, 2};
    float d[6];
    int applied;
    assert_int_equal(ps_sync_init(s, 1000, c0, 6, &applied), 0);
    assert_int_equal(ps_sync_elastic(s, 1000, x, 6, 0.25f, d), 0);
    assert_int_equal(ps_sync_elastic(s, 1000, x, 6, 0.5f, d), 0);
    return s;
}

static void test_checkpoint_round_trip(void **state)
{
    struct t_fix *f = *state;
    ps_sync_t *a = s_trained();
    ps_sync_t *b = ps_sync_new(16);
    ps_sync_t *e = ps_sync_new(16);
    float ca[6], cb[6];
    uint64_t off;
    size_t len;

    assert_int_equal(ps_sync_checkpoint(e, f->path, WHO(3)), SS_E_EMPTY);
    assert_int_equal(access(f->path, F_OK), -1);
    assert_int_equal(ps_sync_checkpoint(a, f->path, WHO(3)), 0);
    assert_int_equal(ps_sync_restore(b, f->path, 3), 0);
    ps_sync_range(b, &off, &len);
    assert_int_equal(off, 1000);
    assert_int_equal(len, 6);
    assert_int_equal(ps_sync_rounds(b), 2);
    assert_int_equal(ps_sync_pull(a, 1000, ca, 6), 0);
    assert_int_equal(ps_sync_pull(b, 1000, cb, 6), 0);
    ASSERT_VEC_EQ(cb, ca, 6);
    /* hand-computed: c = 1 -> 1.25 -> 1.625; c = -6 -> -4 -> -1 */
    assert_true(cb[0] == 1.625f);
    assert_true(cb[5] == -1.0f);

    /* restoring over a shard holding the same range replaces values and rounds */
    float x[6] = {0, 0, 0, 0, 0, 0}, d[6];
    assert_int_equal(ps_sync_elastic(b, 1000, x, 6, 1.0f, d), 0);
    assert_int_equal(ps_sync_restore(b, f->path, 3), 0);
    assert_int_equal(ps_sync_pull(b, 1000, cb, 6), 0);
    ASSERT_VEC_EQ(cb, ca, 6);
    assert_int_equal(ps_sync_rounds(b), 2);
    ps_sync_destroy(&a);
    ps_sync_destroy(&b);
    ps_sync_destroy(&e);
}

enum { N_LEN = 8u << 20 };   /* 32 MiB of center values */

/* In a forked child: a sync shard of N_LEN values saved, then moved on; a
 * restore with about margin bytes to spare fails with SS_E_NOMEM and the
 * bytes it needed, and the shard holds and serves what it held; with the
 * memory it goes back to the save. */
static void s_no_memory_child(void *arg)
{
    const struct t_fix *f = ((void **)arg)[0];
    size_t margin = *(const size_t *)((void **)arg)[1];
    ps_sync_t *s = ps_sync_new(N_LEN);
    float *x = malloc(N_LEN * sizeof *x), *c = malloc(N_LEN * sizeof *c);
    int applied;
    T_CHILD_CHECK(s && x && c);
    for (size_t i = 0; i < N_LEN; i++)
        x[i] = (float)(i % 1000) - 500.0f;
    T_CHILD_CHECK(ps_sync_init(s, 0, x, N_LEN, &applied) == 0 && applied);
    T_CHILD_CHECK(ps_sync_checkpoint(s, f->path, WHO(0)) == 0);
    for (size_t i = 0; i < N_LEN; i++)
        x[i] = 1.0f;
    T_CHILD_CHECK(ps_sync_elastic(s, 0, x, N_LEN, 0.5f, c) == 0);   /* moved on */

    struct t_nomem *ball = malloc(sizeof *ball);
    T_CHILD_CHECK(ball);
    t_nomem_begin(ball, margin);
    int rc = ps_sync_restore(s, f->path, 0);
    size_t need = ps_sync_restore_need(s);
    /* a CHECKPOINT with no memory to spare fails too, the saved file kept */
    int ckpt_rc = margin == 0 ? ps_sync_checkpoint(s, f->path, WHO(0)) : SS_E_NOMEM;
    t_nomem_end(ball);
    free(ball);
    if (rc != SS_E_NOMEM)
        fprintf(stderr, "child: restore under the cap returned %d\n", rc);
    T_CHILD_CHECK(rc == SS_E_NOMEM);
    T_CHILD_CHECK(ckpt_rc == SS_E_NOMEM);
    /* the values' bytes, unless not even the read buffer could be had */
    T_CHILD_CHECK(need == (size_t)N_LEN * sizeof(float) || (margin == 0 && need == 0));
    T_CHILD_CHECK(ps_sync_rounds(s) == 1);
    T_CHILD_CHECK(ps_sync_pull(s, 0, c, N_LEN) == 0);
    for (size_t i = 0; i < N_LEN; i += 4099) {
        float c0 = (float)(i % 1000) - 500.0f;   /* saved; moved half way to 1 since */
        T_CHILD_CHECK(c[i] == c0 + 0.5f * (1.0f - c0));
    }
    T_CHILD_CHECK(ps_sync_elastic(s, 0, x, 16, 0.5f, c) == 0);   /* serves on */
    T_CHILD_CHECK(ps_sync_restore(s, f->path, 0) == 0);
    T_CHILD_CHECK(ps_sync_restore_need(s) == 0);
    T_CHILD_CHECK(ps_sync_rounds(s) == 0);
    T_CHILD_CHECK(ps_sync_pull(s, 0, c, 4) == 0 && c[1] == -499.0f);
    ps_sync_destroy(&s);
}

/* A restore that cannot get the memory for its second copy of the center
 * fails cleanly (SS_E_NOMEM) with no memory left and with room for the read
 * buffer only, in forked children under an address-space cap (t_nomem.h). */
static void test_restore_no_memory(void **state)
{
    struct t_fix *f = *state;
    if (T_SANITIZED) {
        fprintf(stderr, "test_restore_no_memory: skipped under a sanitizer\n");
        skip();
    }
    size_t margins[2] = {0, T_BIG};
    for (int m = 0; m < 2; m++) {
        void *arg[2] = {f, &margins[m]};
        int st = t_nomem_fork(s_no_memory_child, arg);
        if (st != 0)
            fail_msg("margin %zu: the child's wait status is %d", margins[m], st);
    }
}

enum { F_LEN = 10000 };

/* Each fallible allocation of a RESTORE (its own file, and a set of 2
 * shards' files re-sliced into 1), then of a CHECKPOINT, failed in turn
 * (ss_mem_fail_at: the k-th for k = 1, 2, ... until one runs through
 * without meeting it): every failure returns SS_E_NOMEM and leaves the
 * center's values and round count, and the checkpoint file, as they were;
 * nothing leaks (the sanitizers' leak check sees every early return). Runs
 * under ASan and TSan, unlike test_restore_no_memory. */
static void test_fail_each_allocation(void **state)
{
    struct t_fix *f = *state;
    char dir[400], p[600], tmp[610];
    float *x = malloc(F_LEN * sizeof *x), *ones = malloc(F_LEN * sizeof *ones);
    float *c = malloc(F_LEN * sizeof *c), *before = malloc(F_LEN * sizeof *before);
    int applied;
    assert_true(x && ones && c && before);
    for (size_t i = 0; i < F_LEN; i++)
        x[i] = (float)(i % 100) - 50.0f, ones[i] = 1.0f;
    snprintf(dir, sizeof dir, "%s/set", f->dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (uint32_t sh = 0; sh < 2; sh++) {   /* the set: 2 shards' halves */
        uint64_t off, len;
        ss_range_split(F_LEN, 2, sh, &off, &len);
        ps_sync_t *a = ps_sync_new(F_LEN);
        assert_int_equal(ps_sync_init(a, off, x + off, len, &applied), 0);
        ps_ckpt_path(p, sizeof p, dir, PS_CKPT_NAME_SYNC, sh);
        assert_int_equal(ps_sync_checkpoint(a, p, &(struct ps_ckpt_who){sh, 2, 0, 0}), 0);
        ps_sync_destroy(&a);
    }
    ps_sync_t *s = ps_sync_new(F_LEN);
    assert_int_equal(ps_sync_init(s, 0, x, F_LEN, &applied), 0);
    assert_int_equal(ps_sync_checkpoint(s, f->path, WHO(0)), 0);
    assert_int_equal(ps_sync_elastic(s, 0, ones, F_LEN, 0.5f, c), 0);   /* moved on */
    assert_int_equal(ps_sync_pull(s, 0, before, F_LEN), 0);

    for (int kind = 0; kind < 2; kind++) {   /* its own file, the set */
        long k, refused = 0;
        for (k = 1; k < 1000; k++) {
            ss_mem_fail_at(k);
            int rc = kind ? ps_sync_restore_dir(s, dir, 0, 1) : ps_sync_restore(s, f->path, 0);
            long fired = ss_mem_fail_fired();
            ss_mem_fail_at(0);
            assert_int_equal(ps_sync_pull(s, 0, c, F_LEN), 0);
            if (rc == 0) {   /* the save's values; then moved on as before */
                assert_int_equal(ps_sync_rounds(s), 0);
                assert_memory_equal(c, x, F_LEN * sizeof *c);
                assert_int_equal(ps_sync_elastic(s, 0, ones, F_LEN, 0.5f, c), 0);
            } else {
                if (rc != SS_E_NOMEM || !fired)
                    fail_msg("kind %d: the restore with allocation %ld failed returned %d",
                             kind, k, rc);
                refused++;
                assert_int_equal(ps_sync_rounds(s), 1);
                assert_memory_equal(c, before, F_LEN * sizeof *c);
            }
            if (!fired)
                break;
        }
        assert_true(k < 1000 && refused > 0);
    }

    /* CHECKPOINT: the save of x, kept whole by every failure */
    size_t n_old = 0, n_now = 0;
    unsigned char *old = t_slurp(f->path, &n_old), *now;
    long k, refused = 0;
    assert_non_null(old);
    snprintf(tmp, sizeof tmp, "%s.tmp", f->path);
    for (k = 1; k < 1000; k++) {
        ss_mem_fail_at(k);
        int rc = ps_sync_checkpoint(s, f->path, WHO(0));
        long fired = ss_mem_fail_fired();
        ss_mem_fail_at(0);
        assert_non_null(now = t_slurp(f->path, &n_now));
        int same = n_now == n_old && memcmp(now, old, n_old) == 0;
        free(now);
        assert_int_equal(access(tmp, F_OK), -1);
        if (rc == 0) {   /* written: the values now; the save back for the next k */
            assert_false(same);
            assert_int_equal(t_spill(f->path, old, n_old), 0);
        } else {
            if (rc != SS_E_NOMEM || !fired)
                fail_msg("the checkpoint with allocation %ld failed returned %d", k, rc);
            refused++;
            assert_true(same);
        }
        if (!fired)
            break;
    }
    assert_true(k < 1000 && refused > 0);
    free(old);
    ps_sync_destroy(&s);
    free(x);
    free(ones);
    free(c);
    free(before);
}

/* Corrupt one byte of path in place. */
static void s_flip(const char *path, long at)
{
    assert_int_equal(t_flip_byte(path, at, 1), 0);
}

static void s_assert_untouched(ps_sync_t *s)
{
    float c[4], want[4] = {5, 6, 7, 8};
    assert_int_equal(ps_sync_pull(s, 1000, c, 4), SS_E_RANGE);   /* still its own range */
    assert_int_equal(ps_sync_pull(s, 0, c, 4), 0);
    ASSERT_VEC_EQ(c, want, 4);
    assert_int_equal(ps_sync_rounds(s), 0);
}

static void test_checkpoint_rejects(void **state)
{
    struct t_fix *f = *state;
    ps_sync_t *a = s_trained();
    ps_sync_t *other = ps_sync_new(16);    /* holds [0, +4): wrong shape for the file */
    ps_sync_t *small = ps_sync_new(4);     /* cannot hold 6 floats */
    ps_sync_t *fresh = ps_sync_new(16);
    float v[4] = {5, 6, 7, 8};
    int applied;
    char bad_path[400];

    assert_int_equal(ps_sync_init(other, 0, v, 4, &applied), 0);
    assert_int_equal(ps_sync_checkpoint(a, f->path, WHO(3)), 0);

    assert_int_equal(ps_sync_restore(other, f->path, 3), SS_E_CORRUPT);
    s_assert_untouched(other);
    assert_int_equal(ps_sync_restore(small, f->path, 3), SS_E_TOOBIG);
    assert_int_equal(ps_sync_is_empty(small), 1);
    assert_int_equal(ps_sync_restore(fresh, f->path, 4), SS_E_CORRUPT);   /* other shard */
    assert_int_equal(ps_sync_is_empty(fresh), 1);

    /* one flipped payload byte */
    s_flip(f->path, PS_CKPT_HDR_BYTES + 5);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);
    assert_int_equal(ps_sync_is_empty(fresh), 1);

    /* truncated by one byte, and to half the header */
    assert_int_equal(ps_sync_checkpoint(a, f->path, WHO(3)), 0);
    assert_int_equal(truncate(f->path, PS_CKPT_HDR_BYTES + 23), 0);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);
    assert_int_equal(truncate(f->path, 40), 0);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);
    assert_int_equal(ps_sync_is_empty(fresh), 1);

    /* an embedding checkpoint is the wrong kind */
    ps_ckpt_writer_t *w;
    struct ps_ckpt_hdr hdr = {.kind = PS_CKPT_EMBED, .shard = 3, .shape = {1000, 6, 2, 0}};
    float payload[6] = {0};
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, payload, sizeof payload), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);

    /* a sync file whose payload size disagrees with its len */
    hdr.kind = PS_CKPT_SYNC;
    hdr.shape[1] = 5;
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, payload, sizeof payload), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);
    assert_int_equal(ps_sync_is_empty(fresh), 1);

    /* a well-formed file (checksum right) holding a NaN: refused, nothing set */
    hdr.shape[1] = 6;
    payload[4] = NAN;
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, payload, sizeof payload), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    assert_int_equal(ps_sync_restore(fresh, f->path, 3), SS_E_CORRUPT);
    assert_int_equal(ps_sync_is_empty(fresh), 1);
    payload[4] = 0;   /* and finite, the same file loads */
    assert_int_equal(ps_ckpt_begin(f->path, &w), 0);
    assert_int_equal(ps_ckpt_write(w, payload, sizeof payload), 0);
    assert_int_equal(ps_ckpt_commit(&w, &hdr), 0);
    ps_sync_t *ok = ps_sync_new(16);
    assert_int_equal(ps_sync_restore(ok, f->path, 3), 0);
    assert_int_equal(ps_sync_is_empty(ok), 0);
    ps_sync_destroy(&ok);

    /* missing file; checkpoint into a missing directory leaves no temp file */
    snprintf(bad_path, sizeof bad_path, "%s/nope/sync.ckpt", f->dir);
    assert_int_equal(ps_sync_restore(fresh, bad_path, 3), SS_E_IO);
    assert_int_equal(ps_sync_checkpoint(a, bad_path, WHO(3)), SS_E_IO);
    snprintf(bad_path, sizeof bad_path, "%s/nope", f->dir);
    assert_int_equal(access(bad_path, F_OK), -1);

    ps_sync_destroy(&a);
    ps_sync_destroy(&other);
    ps_sync_destroy(&small);
    ps_sync_destroy(&fresh);
}

/* issue 22 item 3: an ELASTIC of +-3.4e38 against a center near -3.4e38 made
 * x - c overflow in float: the center went to -inf, then NaN. It stays finite
 * and moves by alpha toward x; ordinary values keep the float rule exactly. */
static void test_elastic_huge_stays_finite(void **state)
{
    (void)state;
    ps_sync_t *s = ps_sync_new(4);
    float c0[4] = {-3.4e38f, 3.4e38f, 1, 2};
    float x[4] = {3.4e38f, -3.4e38f, 3, 2};
    float d[4], c[4];
    int applied;

    assert_int_equal(ps_sync_init(s, 0, c0, 4, &applied), 0);
    assert_int_equal(ps_sync_elastic(s, 0, x, 4, 0.5f, d), 0);
    assert_int_equal(ps_sync_pull(s, 0, c, 4), 0);
    for (int i = 0; i < 4; i++)
        if (!isfinite(c[i]) || !isfinite(d[i]))
            fail_msg("element %d: center %g, d %g: not finite", i, (double)c[i], (double)d[i]);
    float want_c[4] = {0, 0, 2, 2};   /* halfway: 0 in double, exact */
    ASSERT_VEC_EQ(c, want_c, 4);
    ASSERT_FEQ_D(d[0], 3.4e38);
    ASSERT_FEQ_D(d[1], -3.4e38);
    /* a second round from there is ordinary again */
    assert_int_equal(ps_sync_elastic(s, 0, x, 4, 1.0f, d), 0);
    assert_int_equal(ps_sync_pull(s, 0, c, 4), 0);
    ASSERT_VEC_EQ(c, x, 4);
    ps_sync_destroy(&s);
}

int main(void)
{
    /* SS_TEST_LOG=1 shows the error lines the failure tests provoke */
    ss_log_init("test", getenv("SS_TEST_LOG") ? SS_LOG_DEBUG : SS_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_empty),
        cmocka_unit_test(test_init_once),
        cmocka_unit_test(test_offer_mean_of_replicas),
        cmocka_unit_test(test_offer_bounded_wait),
        cmocka_unit_test(test_elastic_rule),
        cmocka_unit_test(test_elastic_many_rounds),
        cmocka_unit_test(test_elastic_huge_stays_finite),
        cmocka_unit_test(test_concurrent_rounds_are_atomic),
        cmocka_unit_test(test_concurrent_init),
        cmocka_unit_test_setup_teardown(test_checkpoint_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_no_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_each_allocation, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
