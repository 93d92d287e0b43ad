/* test_tr_eval.c - unit tests of trainer/tr_eval: logloss, NE, AUC, calibration.
 *
 * Hand-computed values for small cases, a brute-force O(n^2) AUC for random
 * cases with many ties, and a closed-form AUC for a two-million-row case. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "ss_hash.h"
#include "tr_eval.h"

static void s_eval(const float *pred, const float *label, size_t n, struct tr_eval_result *r)
{
    tr_eval_t *ev = tr_eval_new(2);     /* small on purpose: exercises growth */
    tr_eval_add_batch(ev, pred, label, n);
    tr_eval_result(ev, r);
    tr_eval_destroy(&ev);
    assert_null(ev);
}

static double s_auc_of(const float *pred, const float *label, size_t n)
{
    struct tr_eval_result r;
    s_eval(pred, label, n, &r);
    return r.auc;
}

/* O(n^2) reference AUC, ties one half. */
static double s_auc_brute(const float *pred, const float *label, size_t n)
{
    double num = 0.0;
    double pairs = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (label[i] != 1.0f)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (label[j] != 0.0f)
                continue;
            pairs += 1.0;
            num += pred[i] > pred[j] ? 1.0 : (pred[i] == pred[j] ? 0.5 : 0.0);
        }
    }
    return num / pairs;
}

static void test_logloss_hand(void **state)
{
    const float pred[] = {0.9f, 0.2f, 0.6f};
    const float label[] = {1, 0, 0};
    struct tr_eval_result r;
    s_eval(pred, label, 3, &r);
    /* -(ln 0.9 + ln 0.8 + ln 0.4) / 3 = (0.1053605 + 0.2231436 + 0.9162907) / 3 */
    assert_float_equal(r.logloss, 0.4149316, 1e-6);
    assert_int_equal(r.rows, 3);
    assert_int_equal(r.positives, 1);
    assert_float_equal(r.base_rate, 1.0 / 3.0, 1e-12);
    assert_float_equal(r.mean_pred, 1.7 / 3.0, 1e-7);
    assert_float_equal(r.calibration, 1.7, 1e-6);     /* (1.7/3) / (1/3) */
    /* H(1/3) = ln 3 - (2/3) ln 2 = 0.6365142 */
    assert_float_equal(r.ne, 0.4149316 / 0.6365142, 1e-6);
    assert_float_equal(r.auc, 1.0, 1e-12);          /* the positive scores highest */
}

static void test_logloss_clip(void **state)
{
    const float pred[] = {0.0f, 1.0f, 0.0f, 1.0f};
    const float label[] = {1, 0, 0, 1};
    struct tr_eval_result r;
    s_eval(pred, label, 4, &r);
    /* Two rows at -ln(1e-7) = 16.1180957, two at -ln(1 - 1e-7) ~ 1e-7. */
    assert_float_equal(r.logloss, (2 * 16.1180957 + 2 * 1.00000005e-7) / 4, 1e-6);
    assert_true(isfinite(r.ne));
    assert_float_equal(tr_eval_bce(0.0f, 1.0f), 16.11809565, 1e-7);
    assert_float_equal(tr_eval_bce(1.0f, 0.0f), 16.11809565, 1e-6);
    assert_float_equal(tr_eval_bce(0.5f, 0.0f), 0.69314718, 1e-8);
}

/* NE of the constant predictor at the base rate is 1 (to 1e-9). */
static void test_ne_constant_predictor(void **state)
{
    static const size_t n_pos[] = {250, 237, 1, 999};
    for (size_t c = 0; c < 4; c++) {
        size_t n = 1000;
        float *pred = malloc(n * sizeof(*pred));
        float *label = malloc(n * sizeof(*label));
        assert_true(pred && label);
        for (size_t i = 0; i < n; i++) {
            pred[i] = (float)n_pos[c] / (float)n;
            label[i] = (i * 7919 % n) < n_pos[c] ? 1.0f : 0.0f;    /* scattered */
        }
        struct tr_eval_result r;
        s_eval(pred, label, n, &r);
        assert_int_equal(r.positives, n_pos[c]);
        if (fabs(r.ne - 1.0) > 1e-9)
            fail_msg("NE %.12f for rate %zu/1000", r.ne, n_pos[c]);
        assert_float_equal(r.calibration, 1.0, 1e-7);
        assert_float_equal(r.auc, 0.5, 1e-12);      /* all tied */
        struct tr_eval_prog pg;
        tr_eval_prog_init(&pg);
        tr_eval_prog_add_batch(&pg, pred, label, n);
        tr_eval_prog_result(&pg, &r);
        if (fabs(r.ne - 1.0) > 1e-9)
            fail_msg("progressive NE %.12f", r.ne);
        assert_true(isnan(r.auc));
        free(pred);
        free(label);
    }
    /* A better-than-constant predictor has NE < 1, a worse one > 1. */
    const float label[] = {1, 0, 0, 0};
    const float good[] = {0.7f, 0.1f, 0.1f, 0.1f};
    const float bad[] = {0.1f, 0.7f, 0.7f, 0.7f};
    struct tr_eval_result r;
    s_eval(good, label, 4, &r);
    assert_true(r.ne < 1.0);
    s_eval(bad, label, 4, &r);
    assert_true(r.ne > 1.0);
}

/* NE is NaN (documented) when the base rate is 0 or 1 or there are no rows. */
static void test_ne_undefined(void **state)
{
    const float pred[] = {0.2f, 0.3f};
    const float zeros[] = {0, 0};
    const float ones[] = {1, 1};
    struct tr_eval_result r;
    s_eval(pred, zeros, 2, &r);
    assert_true(isnan(r.ne));
    assert_true(isnan(r.auc));
    assert_true(isnan(r.calibration));
    assert_true(isfinite(r.logloss));
    s_eval(pred, ones, 2, &r);
    assert_true(isnan(r.ne));
    assert_true(isnan(r.auc));
    assert_float_equal(r.calibration, 0.25, 1e-7);
    s_eval(pred, ones, 0, &r);
    assert_int_equal(r.rows, 0);
    assert_true(isnan(r.ne) && isnan(r.logloss) && isnan(r.base_rate));
    assert_float_equal(tr_eval_entropy(0.0), 0.0, 0);
    assert_float_equal(tr_eval_entropy(0.5), 0.69314718056, 1e-10);
}

static void test_auc_small_cases(void **state)
{
    const float label[] = {0, 0, 1, 1};
    const float up[] = {0.1f, 0.2f, 0.3f, 0.4f};
    const float down[] = {0.4f, 0.3f, 0.2f, 0.1f};
    const float tied[] = {0.5f, 0.5f, 0.5f, 0.5f};
    assert_float_equal(s_auc_of(up, label, 4), 1.0, 1e-12);
    assert_float_equal(s_auc_of(down, label, 4), 0.0, 1e-12);
    assert_float_equal(s_auc_of(tied, label, 4), 0.5, 1e-12);
    /* Positive at 0.5 ties both negatives (1/2 + 1/2), positive at 0.9 beats
     * both (2): 3 of 4 pairs. */
    const float p1[] = {0.5f, 0.5f, 0.5f, 0.9f};
    const float l1[] = {1, 0, 0, 1};
    assert_float_equal(s_auc_of(p1, l1, 4), 0.75, 1e-12);
    /* Positive at 0.4 beats 0.1 and ties 0.4; positive at 0.8 beats both: 3.5/4. */
    const float p2[] = {0.1f, 0.4f, 0.4f, 0.8f};
    const float l2[] = {0, 0, 1, 1};
    assert_float_equal(s_auc_of(p2, l2, 4), 0.875, 1e-12);
    /* Order of insertion does not matter; -0 ties +0; negative scores sort. */
    const float p3[] = {0.0f, -0.0f, -1.0f, 2.0f, -0.5f};
    const float l3[] = {1, 0, 0, 1, 1};
    /* pos 0 vs negs {-0, -1}: 0.5 + 1; pos 2: 2; pos -0.5: vs -1 -> 1: 4.5 / 6 */
    assert_float_equal(s_auc_of(p3, l3, 5), 0.75, 1e-12);
}

/* Random predictions with heavy ties against the brute-force reference. */
static void test_auc_random_vs_brute(void **state)
{
    uint64_t rng = 99;
    size_t n = 1500;
    float *pred = malloc(n * sizeof(*pred));
    float *label = malloc(n * sizeof(*label));
    assert_true(pred && label);
    for (int round = 0; round < 5; round++) {
        int levels = round == 0 ? 2 : 7 * round;
        for (size_t i = 0; i < n; i++) {
            int lv = (int)(ss_rand_next(&rng) % (uint64_t)levels);
            pred[i] = (float)lv / (float)levels - 0.3f;
            /* Labels correlated with the level, so AUC is far from 0.5. */
            label[i] = ss_rand_unit(&rng) < 0.1f + 0.8f * (float)lv / (float)levels;
        }
        double got = s_auc_of(pred, label, n);
        double want = s_auc_brute(pred, label, n);
        if (fabs(got - want) > 1e-12)
            fail_msg("levels %d: auc %.15f, brute %.15f", levels, got, want);
        assert_true(want > 0.6);
    }
    free(pred);
    free(label);
}

/* 2^21 distinct predictions i/n, label 1 iff i % 4 == 0: the positive at
 * i = 4m has 3m negatives below, so AUC = (M - 1) / (2M) with M = n / 4. */
static void test_auc_millions(void **state)
{
    size_t n = (size_t)1 << 21;
    tr_eval_t *ev = tr_eval_new(0);
    /* Insert in a scrambled order. */
    for (size_t k = 0; k < n; k++) {
        size_t i = (k * 2654435761u) & (n - 1);
        tr_eval_add(ev, (float)i / (float)n, (i % 4 == 0) ? 1.0f : 0.0f);
    }
    struct tr_eval_result r;
    tr_eval_result(ev, &r);
    double m = (double)n / 4;
    assert_int_equal(r.rows, n);
    assert_int_equal(r.positives, n / 4);
    assert_float_equal(r.auc, (m - 1) / (2 * m), 1e-12);
    /* Adding after a result keeps working (rows were sorted in place). */
    tr_eval_add(ev, 2.0f, 1.0f);
    tr_eval_result(ev, &r);
    assert_int_equal(r.rows, n + 1);
    assert_true(r.auc > (m - 1) / (2 * m));
    tr_eval_destroy(&ev);
}

/* Merging shards equals scoring everything in one accumulator; progressive
 * sums agree with the exact accumulator. */
static void test_merge_and_progressive(void **state)
{
    uint64_t rng = 5;
    size_t n = 3000;
    float *pred = malloc(n * sizeof(*pred));
    float *label = malloc(n * sizeof(*label));
    assert_true(pred && label);
    for (size_t i = 0; i < n; i++) {
        pred[i] = ss_rand_unit(&rng);
        label[i] = ss_rand_unit(&rng) < pred[i] ? 1.0f : 0.0f;
    }
    struct tr_eval_result all;
    s_eval(pred, label, n, &all);
    tr_eval_t *part[3];
    struct tr_eval_prog pg[3];
    for (int k = 0; k < 3; k++) {
        part[k] = tr_eval_new(16);
        tr_eval_prog_init(&pg[k]);
        tr_eval_add_batch(part[k], pred + k * 1000, label + k * 1000, 1000);
        tr_eval_prog_add_batch(&pg[k], pred + k * 1000, label + k * 1000, 1000);
    }
    tr_eval_merge(part[0], part[1]);
    tr_eval_merge(part[0], part[2]);
    tr_eval_prog_merge(&pg[0], &pg[1]);
    tr_eval_prog_merge(&pg[0], &pg[2]);
    struct tr_eval_result m;
    tr_eval_result(part[0], &m);
    assert_int_equal(m.rows, n);
    assert_int_equal(m.positives, all.positives);
    assert_float_equal(m.auc, all.auc, 1e-15);
    assert_float_equal(m.logloss, all.logloss, 1e-12);
    assert_float_equal(m.ne, all.ne, 1e-12);
    assert_float_equal(m.calibration, all.calibration, 1e-12);
    assert_true(all.auc > 0.7 && all.ne < 1.0);     /* a calibrated, informative predictor */
    assert_float_equal(all.calibration, 1.0, 0.05);
    struct tr_eval_result pr;
    tr_eval_prog_result(&pg[0], &pr);
    assert_int_equal(pr.rows, n);
    assert_float_equal(pr.logloss, all.logloss, 1e-12);
    assert_float_equal(pr.ne, all.ne, 1e-12);
    /* Delta of two snapshots = the rows in between (shard 2's). */
    struct tr_eval_prog before = pg[0];
    tr_eval_prog_add_batch(&pg[0], pred, label, 10);
    struct tr_eval_prog d;
    tr_eval_prog_delta(&pg[0], &before, &d);
    struct tr_eval_result dr, ref;
    tr_eval_prog_result(&d, &dr);
    s_eval(pred, label, 10, &ref);
    assert_int_equal(dr.rows, 10);
    assert_float_equal(dr.logloss, ref.logloss, 1e-9);
    /* Reset empties the accumulator. */
    tr_eval_reset(part[0]);
    tr_eval_result(part[0], &m);
    assert_int_equal(m.rows, 0);
    for (int k = 0; k < 3; k++)
        tr_eval_destroy(&part[k]);
    free(pred);
    free(label);
}

/* A NaN prediction (diverged model) poisons logloss, NE and AUC. */
static void test_nan_prediction(void **state)
{
    const float pred[] = {0.2f, NAN, 0.7f};
    const float label[] = {0, 1, 1};
    struct tr_eval_result r;
    s_eval(pred, label, 3, &r);
    assert_true(isnan(r.logloss));
    assert_true(isnan(r.ne));
    assert_true(isnan(r.auc));
}

/* issue 22 item 8: keep-best counted a NaN eval as an improvement
 * (!(NaN >= best)). A non-finite measure is never better, even first; a
 * one-label eval set (NE undefined) compares logloss. */
static void test_keep_best(void **state)
{
    (void)state;
    struct tr_eval_result good = {.logloss = 0.4, .ne = 0.9, .base_rate = 0.25};
    struct tr_eval_result worse = good, nan = good, inf = good;
    worse.ne = 0.95;
    nan.ne = NAN;
    nan.logloss = NAN;
    inf.ne = INFINITY;
    assert_int_equal(tr_eval_better(&good, NULL), 1);
    assert_int_equal(tr_eval_better(&worse, &good), 0);
    assert_int_equal(tr_eval_better(&good, &worse), 1);
    assert_int_equal(tr_eval_better(&good, &good), 0);      /* equal: keep the earlier */
    assert_int_equal(tr_eval_better(&nan, &good), 0);
    assert_int_equal(tr_eval_better(&nan, NULL), 0);
    assert_int_equal(tr_eval_better(&inf, &good), 0);
    assert_int_equal(tr_eval_better(&good, &nan), 1);
    struct tr_eval_result neg1 = {.logloss = 0.2, .ne = NAN, .base_rate = 0.0};
    struct tr_eval_result neg2 = {.logloss = 0.1, .ne = NAN, .base_rate = 0.0};
    assert_int_equal(tr_eval_better(&neg1, NULL), 1);
    assert_int_equal(tr_eval_better(&neg2, &neg1), 1);
    assert_int_equal(tr_eval_better(&neg1, &neg2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logloss_hand),
        cmocka_unit_test(test_logloss_clip),
        cmocka_unit_test(test_ne_constant_predictor),
        cmocka_unit_test(test_ne_undefined),
        cmocka_unit_test(test_auc_small_cases),
        cmocka_unit_test(test_auc_random_vs_brute),
        cmocka_unit_test(test_auc_millions),
        cmocka_unit_test(test_merge_and_progressive),
        cmocka_unit_test(test_nan_prediction),
        cmocka_unit_test(test_keep_best),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
