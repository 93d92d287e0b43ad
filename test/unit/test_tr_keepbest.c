/* test_tr_keepbest.c - unit tests of trainer/tr_keepbest: the leader's
 * keep-best state packed into the vote, summed with the other trainers'
 * zeros, read back bit for bit; its 64-bit words (the job checkpoint's
 * form) likewise; refusals; whether a vote's sum holds a state (the
 * leader was in it); what a new leader goes on from. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ss_err.h"
#include "tr_keepbest.h"

static struct tr_keepbest s_sample(void)
{
    struct tr_keepbest s = {.have_eval = 1, .saved = 1, .kept_current = 1,
                            .save_id = 0xfedcba9876543211ULL, .best_epoch = 1,
                            .n_evals = 3, .evals_since_best = 2};
    s.best = (struct tr_eval_result){123456789012ULL, 4242, 0.4149316123456789,
                                     0.8765432109876543, 0.7312, NAN, 0.034, -0.0};
    return s;
}

/* as tr_train_barrier sums: the leader's floats plus zeros from others */
static void s_sum_with_zeros(float *v, int others)
{
    for (int t = 0; t < others; t++)
        for (int i = 0; i < TR_KB_FLOATS; i++)
            v[i] += 0.0f;
}

static void test_roundtrip_exact(void **state)
{
    (void)state;
    struct tr_keepbest s = s_sample(), got;
    float v[TR_KB_FLOATS];
    char err[256] = "";
    tr_keepbest_pack(&s, v);
    s_sum_with_zeros(v, 5);
    memset(&got, 0x5a, sizeof got);
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), 1);
    assert_int_equal(got.have_eval, 1);
    assert_int_equal(got.saved, 1);
    assert_int_equal(got.kept_current, 1);
    assert_true(got.save_id == s.save_id);
    assert_true(got.best_epoch == 1);
    assert_int_equal(got.n_evals, 3);
    assert_int_equal(got.evals_since_best, 2);
    assert_true(got.best.rows == s.best.rows && got.best.positives == 4242);
    /* doubles travel as their bits: equal bit for bit, NaN and -0 included */
    assert_memory_equal(&got.best.logloss, &s.best.logloss, sizeof(double));
    assert_memory_equal(&got.best.ne, &s.best.ne, sizeof(double));
    assert_memory_equal(&got.best.calibration, &s.best.calibration, sizeof(double));
    assert_memory_equal(&got.best.mean_pred, &s.best.mean_pred, sizeof(double));
}

static void test_flags_off(void **state)
{
    (void)state;
    struct tr_keepbest s = {0}, got;
    float v[TR_KB_FLOATS];
    char err[256] = "";
    tr_keepbest_pack(&s, v);  /* a leader with no validation yet still sends the format */
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), 1);
    assert_int_equal(got.have_eval, 0);
    assert_int_equal(got.saved, 0);
    assert_int_equal(got.kept_current, 0);
    assert_true(got.save_id == 0);
}

static void test_none_sent(void **state)
{
    (void)state;
    float v[TR_KB_FLOATS] = {0};
    struct tr_keepbest got = s_sample();
    char err[256] = "";
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), 0);
    assert_true(got.save_id == s_sample().save_id);  /* untouched */
}

static void test_two_senders_refused(void **state)
{
    (void)state;
    struct tr_keepbest s = s_sample(), got = {0};
    float a[TR_KB_FLOATS], b[TR_KB_FLOATS];
    char err[256] = "";
    tr_keepbest_pack(&s, a);
    tr_keepbest_pack(&s, b);
    for (int i = 0; i < TR_KB_FLOATS; i++)
        a[i] += b[i];  /* limbs above 65535 */
    assert_int_equal(tr_keepbest_unpack(a, &got, err, sizeof err), SS_E_PROTO);
    assert_non_null(strstr(err, "keep-best state"));
    assert_int_equal(got.have_eval, 0);

    struct tr_keepbest z = {0};
    tr_keepbest_pack(&z, a);
    tr_keepbest_pack(&z, b);
    for (int i = 0; i < TR_KB_FLOATS; i++)
        a[i] += b[i];  /* format word 2 */
    assert_int_equal(tr_keepbest_unpack(a, &got, err, sizeof err), SS_E_PROTO);
    assert_non_null(strstr(err, "format"));
}

static void test_garbage_refused(void **state)
{
    (void)state;
    float v[TR_KB_FLOATS] = {0};
    struct tr_keepbest got = {0};
    char err[256] = "";
    v[3] = 0.5f;
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), SS_E_PROTO);
    v[3] = NAN;
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), SS_E_PROTO);
    v[3] = -1.0f;
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), SS_E_PROTO);
    v[3] = 0.0f;
    v[0] = 7.0f;  /* format 7 */
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), SS_E_PROTO);
    v[0] = 1.0f;
    v[3] = 1.0f;  /* flag bits above the known ones */
    assert_int_equal(tr_keepbest_unpack(v, &got, err, sizeof err), SS_E_PROTO);
}

/* tr_keepbest_sent, from which every trainer decides whether the leader was
 * lost in the vote's barrier (a second vote): a leader's state is never all
 * zeros, with nothing kept yet or with a state, summed with the others'
 * zeros; the sum of no state is; a sum it cannot read (two senders) still
 * holds one (it is not a lost leader). */
static void test_sent(void **state)
{
    (void)state;
    struct tr_keepbest empty = {0}, s = s_sample();
    float v[TR_KB_FLOATS] = {0}, two[TR_KB_FLOATS];
    assert_int_equal(tr_keepbest_sent(v), 0);
    tr_keepbest_pack(&empty, v);
    s_sum_with_zeros(v, 3);
    assert_int_equal(tr_keepbest_sent(v), 1);
    tr_keepbest_pack(&s, v);
    s_sum_with_zeros(v, 3);
    assert_int_equal(tr_keepbest_sent(v), 1);
    tr_keepbest_pack(&s, two);
    for (int i = 0; i < TR_KB_FLOATS; i++)
        two[i] += v[i];
    assert_int_equal(tr_keepbest_sent(two), 1);
    memset(v, 0, sizeof v);
    v[TR_KB_FLOATS - 1] = 1.0f;  /* the last float counts too */
    assert_int_equal(tr_keepbest_sent(v), 1);
}

/* The words (what the job checkpoint stores) give the state back bit for
 * bit, are the vote's limbs put together, and a word 0 of another format or
 * with unknown flags is refused, the state untouched. */
static void test_words(void **state)
{
    (void)state;
    struct tr_keepbest s = s_sample(), got;
    uint64_t w[TR_KB_WORDS];
    float v[TR_KB_FLOATS];
    char err[256] = "";
    tr_keepbest_encode(&s, w);
    memset(&got, 0x5a, sizeof got);
    assert_int_equal(tr_keepbest_decode(w, &got, err, sizeof err), 0);
    assert_int_equal(got.have_eval, 1);
    assert_int_equal(got.saved, 1);
    assert_int_equal(got.kept_current, 1);
    assert_true(got.save_id == s.save_id && got.best_epoch == s.best_epoch);
    assert_int_equal(got.n_evals, 3);
    assert_int_equal(got.evals_since_best, 2);
    assert_memory_equal(&got.best, &s.best, sizeof s.best);
    tr_keepbest_pack(&s, v);
    for (int i = 0; i < TR_KB_WORDS; i++) {
        uint64_t u = 0;
        for (int k = 0; k < 4; k++)
            u |= (uint64_t)v[i * 4 + k] << (16 * k);
        assert_true(u == w[i]);
    }
    uint64_t bad[2] = {w[0] + 1, w[0] | (uint64_t)1 << 11};  /* format 2; a flag unknown */
    for (int i = 0; i < 2; i++) {
        w[0] = bad[i];
        memset(&got, 0x5a, sizeof got);
        assert_int_equal(tr_keepbest_decode(w, &got, err, sizeof err), SS_E_PROTO);
        assert_non_null(strstr(err, "format word"));
        assert_int_equal(got.have_eval, 0x5a5a5a5a);
    }
}

static void test_adopt(void **state)
{
    (void)state;
    struct tr_keepbest mine = {.have_eval = 1, .best_epoch = 3, .n_evals = 5,
                               .evals_since_best = 0, .kept_current = 1},
                       got = s_sample();
    mine.best.ne = 0.5;
    /* nothing received: its own history */
    struct tr_keepbest s = tr_keepbest_adopt(&mine, &got, 0, 0);
    assert_true(s.best_epoch == 3 && s.best.ne == 0.5 && s.kept_current == 1);
    /* received before this barrier: the lost leader's, not current */
    s = tr_keepbest_adopt(&mine, &got, 1, 0);
    assert_true(s.best_epoch == 1 && s.save_id == got.save_id && s.saved == 1);
    assert_true(s.best.ne == got.best.ne);
    assert_int_equal(s.evals_since_best, 2);  /* patience counts on */
    assert_int_equal(s.kept_current, 0);
    assert_int_equal(s.n_evals, 5);           /* the larger count */
    /* received in this very barrier: kept_current holds */
    s = tr_keepbest_adopt(&mine, &got, 1, 1);
    assert_int_equal(s.kept_current, 1);
    mine.n_evals = 1;
    s = tr_keepbest_adopt(&mine, &got, 1, 1);
    assert_int_equal(s.n_evals, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_exact),
        cmocka_unit_test(test_flags_off),
        cmocka_unit_test(test_none_sent),
        cmocka_unit_test(test_two_senders_refused),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_sent),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_adopt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
