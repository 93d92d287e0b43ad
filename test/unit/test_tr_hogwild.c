/* test_tr_hogwild.c - unit tests of the racy Hogwild kernels (tr_hogwild).
 *
 * Each kernel against its formula on exact values (odd lengths, so vector loops
 * and their scalar tails both run); copies are bit-exact (-0.0, denormals, NaN
 * payloads). Then threads race on one shared arena through the kernels, the way
 * workers and the shadow thread do: the results stay within the bounds that lost
 * updates allow, and under SANITIZE=thread the run must stay silent (the kernels
 * are excluded from ThreadSanitizer; a report fails the test binary). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ss_hash.h"
#include "ss_mem.h"
#include "tr_hogwild.h"

#define N_SMALL 37          /* odd length: vector body plus scalar tail */
#define RACE_N 4099         /* floats in the raced arena */
#define RACE_STEPS 1000     /* kernel calls per racing thread */

/* w[i] -= lr * g[i] on exactly representable values. */
static void test_sgd(void **state)
{
    (void)state;
    float w[N_SMALL], g[N_SMALL];
    for (int i = 0; i < N_SMALL; i++) {
        w[i] = (float)i;
        g[i] = (float)(i % 5 - 2);
    }
    tr_hogwild_sgd(w, g, N_SMALL, 0.25f, 0.0f);
    for (int i = 0; i < N_SMALL; i++)
        assert_true(w[i] == (float)i - 0.25f * (float)(i % 5 - 2));
    tr_hogwild_sgd(w, g, 0, 1.0f, 0.0f);      /* n = 0 touches nothing */
    assert_true(w[0] == 0.5f);
}

/* acc += g^2; w -= lr g / (sqrt(acc) + eps): one case by hand, then the
 * formula in double on many. */
static void test_adagrad(void **state)
{
    (void)state;
    float w5[5] = {1, 1, 1, 1, 1}, acc5[5] = {0}, g5[5] = {3, 3, 3, 3, 3};
    tr_hogwild_adagrad(w5, acc5, g5, 5, 0.5f, 1.0f, 0.0f);   /* SIMD lanes and the tail */
    for (int i = 0; i < 5; i++) {
        assert_true(acc5[i] == 9.0f);
        assert_true(w5[i] == 0.625f);   /* 1 - 0.5 * 3 / (3 + 1) */
    }
    float w[N_SMALL], acc[N_SMALL], g[N_SMALL];
    for (int i = 0; i < N_SMALL; i++) {
        w[i] = 0.1f * (float)i;
        acc[i] = (float)i;
        g[i] = (float)(i % 7 - 3) * 0.5f;
    }
    tr_hogwild_adagrad(w, acc, g, N_SMALL, 0.1f, 1e-8f, 0.0f);
    for (int i = 0; i < N_SMALL; i++) {
        double a = (double)i + (double)g[i] * g[i];
        double want = (double)(0.1f * (float)i) - 0.1 * g[i] / (sqrt(a) + 1e-8);
        assert_true(acc[i] == (float)a);
        assert_float_equal(w[i], want, 1e-6);
    }
}

/* Every lane width (16 with AVX-512, 4, the scalar tail) gives the bits of
 * the formula in float, operation by operation: 70 floats (4 x 16 + 4 + 2),
 * with l2. */
static void test_adagrad_bits(void **state)
{
    (void)state;
    enum { N = 70 };
    float w[N], acc[N], g[N], wr[N], ar[N];
    uint64_t st = 9;
    for (int i = 0; i < N; i++) {
        w[i] = wr[i] = 2.0f * ss_rand_unit(&st) - 1.0f;
        acc[i] = ar[i] = 0.01f * ss_rand_unit(&st);
        g[i] = 0.1f * (2.0f * ss_rand_unit(&st) - 1.0f);
    }
    for (int step = 0; step < 3; step++) {
        tr_hogwild_adagrad(w, acc, g, N, 0.05f, 1e-8f, 1e-3f);
        for (int i = 0; i < N; i++) {
            float d = g[i] + 1e-3f * wr[i];
            float a = ar[i] + d * d;
            ar[i] = a;
            float num = 0.05f * d, den = sqrtf(a) + 1e-8f;
            wr[i] = wr[i] - num / den;
        }
        assert_memory_equal(acc, ar, sizeof acc);
        assert_memory_equal(w, wr, sizeof w);
    }
}

/* The first steps from zero accumulators (the trainer's start): the first
 * step of every weight has size lr whatever its gradient's scale (lr g /
 * |g|, up to eps), and k equal gradients give steps lr / sqrt(k): the step
 * sizes follow the count of steps, not the gradients' size, until gradients
 * of different sizes mix. Gradients 1e-6 to 10, odd length (SIMD and tail). */
static void test_adagrad_first_steps(void **state)
{
    (void)state;
    enum { N = 7 };
    const float g[N] = {1e-6f, -1e-4f, 0.01f, -0.5f, 1.0f, -3.0f, 10.0f};
    float w[N] = {0}, acc[N] = {0}, prev[N] = {0};
    for (int k = 1; k <= 16; k++) {
        tr_hogwild_adagrad(w, acc, g, N, 0.05f, 1e-8f, 0.0f);
        for (int i = 0; i < N; i++) {
            double step = (double)prev[i] - w[i];
            double want = 0.05 / sqrt((double)k) * (g[i] > 0 ? 1 : -1);
            /* eps 1e-8 against sqrt(k) |g| >= 1e-6: a relative 1e-2 at most */
            if (fabs(step - want) > 1e-2 * fabs(want) + 1e-6)
                fail_msg("step %d of weight %d (g %g): %.9g, want %.9g", k, i, g[i], step,
                         want);
            prev[i] = w[i];
        }
    }
    /* a larger gradient after small ones takes a step near lr again: the
     * accumulator holds only the small ones' squares */
    float w1[1] = {0}, a1[1] = {0}, small[1] = {1e-4f}, big[1] = {1.0f};
    for (int k = 0; k < 15; k++)
        tr_hogwild_adagrad(w1, a1, small, 1, 0.05f, 1e-8f, 0.0f);
    float before = w1[0];
    tr_hogwild_adagrad(w1, a1, big, 1, 0.05f, 1e-8f, 0.0f);
    assert_float_equal(before - w1[0], 0.05 / sqrt(1.0 + 15e-8), 1e-6);
}

/* Weight decay by hand: SGD w -= lr (g + l2 w); Adagrad on d = g + l2 w. Values
 * chosen exact in float: w 2, g 1, l2 0.5 -> d 2; lr 0.25. */
static void test_l2_by_hand(void **state)
{
    (void)state;
    float w[5], g[5], acc[5];
    for (int i = 0; i < 5; i++) {
        w[i] = 2.0f;
        g[i] = 1.0f;
        acc[i] = 0.0f;
    }
    tr_hogwild_sgd(w, g, 5, 0.25f, 0.5f);
    for (int i = 0; i < 5; i++)
        assert_true(w[i] == 1.5f);      /* 2 - 0.25 * (1 + 0.5 * 2) */
    for (int i = 0; i < 5; i++)
        w[i] = 2.0f;
    tr_hogwild_adagrad(w, acc, g, 5, 0.25f, 1.0f, 0.5f);  /* SIMD lanes and the tail */
    for (int i = 0; i < 5; i++) {
        assert_true(acc[i] == 4.0f);    /* d = 2, acc = 0 + 4 */
        assert_true(w[i] == 2.0f - 0.25f * 2.0f / 3.0f);  /* 2 - 0.25 * 2 / (2 + 1) */
    }
    /* a zero gradient still decays: w -> w (1 - lr l2) under SGD */
    float z[3] = {0, 0, 0}, v[3] = {4.0f, -4.0f, 0.0f};
    tr_hogwild_sgd(v, z, 3, 0.5f, 0.25f);
    assert_true(v[0] == 3.5f && v[1] == -3.5f && v[2] == 0.0f);
}

/* l2 = 0 is bit for bit the plain update (the default costs no accuracy). */
static void test_l2_zero_is_plain(void **state)
{
    (void)state;
    float w1[N_SMALL], w2[N_SMALL], a1[N_SMALL], a2[N_SMALL], g[N_SMALL];
    for (int i = 0; i < N_SMALL; i++) {
        w1[i] = w2[i] = 0.3f * (float)i - 5.0f;
        a1[i] = a2[i] = 0.01f * (float)i;
        g[i] = 0.7f * (float)(i % 5) - 1.1f;
    }
    tr_hogwild_adagrad(w1, a1, g, N_SMALL, 0.05f, 1e-8f, 0.0f);
    for (int i = 0; i < N_SMALL; i++) {
        float a = a2[i] + g[i] * g[i];
        a2[i] = a;
        w2[i] -= 0.05f * g[i] / (sqrtf(a) + 1e-8f);
    }
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(a1, a2, sizeof a1);
}

/* model.adagrad_floor by hand, one tensor of 5 floats (vector lanes and the
 * tail): acc 0 or 15, g 1, so acc becomes 1 or 16; with the tensor's mean at
 * 8 and gamma 0.5 the floor is 4, so the small-accumulator weights step
 * 1 / sqrt(4) and the others 1 / sqrt(16); gamma 0 gives 1 / sqrt(1). The
 * mean after the step is (3 * 1 + 2 * 16) / 5 = 7. */
static void test_adagrad_floor_by_hand(void **state)
{
    (void)state;
    const struct tr_hogwild_tensor one = {0, 5};
    for (int on = 0; on <= 1; on++) {
        float w[5] = {1, 1, 1, 1, 1}, acc[5] = {0, 0, 0, 15, 15}, g[5] = {1, 1, 1, 1, 1};
        float mean = 8.0f;
        tr_hogwild_adagrad_tensors(w, acc, g, &one, 1, &mean, 1.0f, 0.0f, 0.0f,
                                   on ? 0.5f : 0.0f);
        for (int i = 0; i < 3; i++) {
            assert_true(acc[i] == 1.0f);
            assert_true(w[i] == (on ? 0.5f : 0.0f));
        }
        for (int i = 3; i < 5; i++) {
            assert_true(acc[i] == 16.0f);
            assert_true(w[i] == 0.75f);
        }
        assert_true(mean == 7.0f);
    }
    float w[5] = {1, 1, 1, 1, 1}, acc[5] = {0, 0, 0, 15, 15}, g[5] = {1, 1, 1, 1, 1};
    assert_true(tr_hogwild_adagrad_floor(w, acc, g, 5, 1.0f, 0.0f, 0.0f, 4.0f) == 35.0);
    assert_true(w[0] == 0.5f && w[4] == 0.75f);
}

/* Two tensors keep means of their own; the first step (means 0) and every
 * step with gamma 0 are tr_hogwild_adagrad's bits; a floor at or below every
 * accumulator changes nothing either; floats outside the tensors stay. */
static void test_adagrad_floor_tensors(void **state)
{
    (void)state;
    enum { N = 70 };
    const struct tr_hogwild_tensor t[2] = {{0, 23}, {23, 40}};  /* 63..69 outside */
    float w1[N], w2[N], a1[N], a2[N], g[N], mean[2];
    uint64_t st = 5;
    for (size_t i = 0; i < N; i++) {
        w1[i] = w2[i] = 4.0f * ss_rand_unit(&st) - 2.0f;
        a1[i] = a2[i] = 0.0f;
        g[i] = (i < 23 ? 0.01f : 1.0f) * (2.0f * ss_rand_unit(&st) - 1.0f);
    }
    mean[0] = mean[1] = 0.0f;
    tr_hogwild_adagrad_tensors(w1, a1, g, t, 2, mean, 0.05f, 1e-8f, 0.0f, 0.5f);
    tr_hogwild_adagrad(w2, a2, g, 63, 0.05f, 1e-8f, 0.0f);
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(a1, a2, sizeof a1);
    double s0 = 0, s1 = 0;
    for (size_t i = 0; i < 23; i++)
        s0 += a1[i];
    for (size_t i = 23; i < 63; i++)
        s1 += a1[i];
    assert_float_equal(mean[0], s0 / 23, 1e-6 * s0 / 23);
    assert_float_equal(mean[1], s1 / 40, 1e-6 * s1 / 40);
    assert_true(mean[1] > 1000 * mean[0]);   /* each tensor its own scale */
    /* gamma 0 with means set: the plain step again */
    tr_hogwild_adagrad_tensors(w1, a1, g, t, 2, mean, 0.05f, 1e-8f, 0.0f, 0.0f);
    tr_hogwild_adagrad(w2, a2, g, 63, 0.05f, 1e-8f, 0.0f);
    assert_memory_equal(w1, w2, sizeof w1);
    assert_memory_equal(a1, a2, sizeof a1);
    /* gamma 1: the weights under their tensor's mean step by the floor */
    float m0 = mean[0];
    tr_hogwild_adagrad_tensors(w1, a1, g, t, 2, mean, 0.05f, 1e-8f, 0.0f, 1.0f);
    for (size_t i = 0; i < 23; i++) {
        float a = a2[i] + g[i] * g[i];
        float d = a > m0 ? a : m0;
        assert_true(a1[i] == a);
        assert_float_equal(w1[i], w2[i] - 0.05f * g[i] / (sqrtf(d) + 1e-8f), 1e-6);
    }
}

/* The plain float loop both length tests check against: lr 0.07, eps 1e-8,
 * l2 0.3, the accumulator floored at floor (0: none, as accumulators are never
 * negative); a multiply then an add each, never fused into an FMA. */
static void s_ref_adagrad(float *w, float *acc, const float *g, size_t n, float floor)
{
    for (size_t i = 0; i < n; i++) {
        volatile float l2w = 0.3f * w[i];  /* volatile: no contraction into an FMA */
        float d = g[i] + l2w;
        volatile float dd = d * d;
        float a = acc[i] + dd;
        acc[i] = a;
        volatile float num = 0.07f * d;
        w[i] -= num / (sqrtf(floor > a ? floor : a) + 1e-8f);  /* a NaN a stays */
    }
}

/* Every length 1..70: the floored step gives exactly the bits of the plain
 * float loop with max(acc, floor) under the root, and with floor 0 those of
 * tr_hogwild_adagrad. */
static void test_adagrad_floor_lengths_bit_exact(void **state)
{
    (void)state;
    enum { N = 70 };
    float w1[N], w2[N], w3[N], a1[N], a2[N], a3[N], g[N];
    uint64_t st = 13;
    for (size_t n = 1; n <= N; n++) {
        for (size_t i = 0; i < N; i++) {
            w1[i] = w2[i] = w3[i] = 4.0f * ss_rand_unit(&st) - 2.0f;
            a1[i] = a2[i] = a3[i] = ss_rand_unit(&st);
            g[i] = 2.0f * ss_rand_unit(&st) - 1.0f;
        }
        tr_hogwild_adagrad_floor(w1, a1, g, n, 0.07f, 1e-8f, 0.3f, 0.8f);
        s_ref_adagrad(w2, a2, g, n, 0.8f);
        if (memcmp(w1, w2, sizeof w1) != 0 || memcmp(a1, a2, sizeof a1) != 0)
            fail_msg("floored adagrad of %zu floats differs from the plain loop", n);
        memcpy(w1, w3, sizeof w1);
        memcpy(a1, a3, sizeof a1);
        tr_hogwild_adagrad_floor(w1, a1, g, n, 0.07f, 1e-8f, 0.3f, 0.0f);
        tr_hogwild_adagrad(w3, a3, g, n, 0.07f, 1e-8f, 0.3f);
        if (memcmp(w1, w3, sizeof w1) != 0 || memcmp(a1, a3, sizeof a1) != 0)
            fail_msg("adagrad with floor 0 of %zu floats differs from tr_hogwild_adagrad", n);
    }
}

/* NaN accumulators (every third float, with a payload, in the vector body
 * and the scalar tail): at every length 1..70 the floored step with floor 0
 * gives tr_hogwild_adagrad's bits, NaN weights included; with a floor above
 * the other accumulators those weights still turn NaN (the floor does not
 * hide the NaN) and the rest follow the plain float loop; a NaN floor (the
 * mean of a tensor that holds a NaN) floors nothing. */
static void test_adagrad_floor_nan_acc(void **state)
{
    (void)state;
    enum { N = 70 };
    const uint32_t nan_bits = 0x7fc01234u;
    float w1[N], w2[N], a1[N], a2[N], g[N];
    const float floors[3] = {0.0f, 0.8f, NAN};
    uint64_t st = 17;
    for (size_t n = 1; n <= N; n++)
        for (int f = 0; f < 3; f++) {
            for (size_t i = 0; i < N; i++) {
                w1[i] = w2[i] = 4.0f * ss_rand_unit(&st) - 2.0f;
                a1[i] = ss_rand_unit(&st);
                if (i % 3 == 1)
                    memcpy(&a1[i], &nan_bits, sizeof(float));
                a2[i] = a1[i];
                g[i] = 2.0f * ss_rand_unit(&st) - 1.0f;
            }
            double sum = tr_hogwild_adagrad_floor(w1, a1, g, n, 0.07f, 1e-8f, 0.3f, floors[f]);
            assert_true(n < 2 || isnan(sum));
            if (f == 1)
                s_ref_adagrad(w2, a2, g, n, floors[f]);
            else
                tr_hogwild_adagrad(w2, a2, g, n, 0.07f, 1e-8f, 0.3f);
            if (memcmp(w1, w2, sizeof w1) != 0 || memcmp(a1, a2, sizeof a1) != 0)
                fail_msg("%zu floats, NaN accumulators, floor %g: the floored step differs "
                         "from the %s", n, (double)floors[f],
                         f == 1 ? "plain loop" : "plain kernel");
            for (size_t i = 1; i < n; i += 3)
                if (!isnan(w1[i]))
                    fail_msg("%zu floats, floor %g: weight %zu is %g, want NaN", n,
                             (double)floors[f], i, (double)w1[i]);
        }
}

/* Every length 1..70 (the vector body and the scalar tail, with weight decay
 * on): Adagrad gives exactly the bits of the plain float loop, a multiply
 * then an add each (never fused into an FMA). */
static void test_adagrad_lengths_bit_exact(void **state)
{
    (void)state;
    enum { N = 70 };
    float w1[N], w2[N], a1[N], a2[N], g[N];
    uint64_t st = 11;
    for (size_t n = 1; n <= N; n++) {
        for (size_t i = 0; i < N; i++) {
            w1[i] = w2[i] = 4.0f * ss_rand_unit(&st) - 2.0f;
            a1[i] = a2[i] = ss_rand_unit(&st);
            g[i] = 2.0f * ss_rand_unit(&st) - 1.0f;
        }
        tr_hogwild_adagrad(w1, a1, g, n, 0.07f, 1e-8f, 0.3f);
        s_ref_adagrad(w2, a2, g, n, 0.0f);
        if (memcmp(w1, w2, sizeof w1) != 0 || memcmp(a1, a2, sizeof a1) != 0)
            fail_msg("adagrad of %zu floats differs from the plain loop", n);
    }
}

/* Fill x with values that an arithmetic copy would change: -0.0, a denormal,
 * a NaN with a payload, infinities. */
static void s_fill_odd(float *x, size_t n)
{
    uint32_t nan_bits = 0x7fc01234u;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i * 0.37f - 3.0f;
    x[0] = -0.0f;
    x[1] = 1e-41f;
    memcpy(&x[2], &nan_bits, sizeof(float));
    x[3] = -INFINITY;
    x[4] = INFINITY;
}

/* snapshot and overwrite are bit-exact copies. */
static void test_copies(void **state)
{
    (void)state;
    float src[N_SMALL], dst[N_SMALL];
    s_fill_odd(src, N_SMALL);
    memset(dst, 0x55, sizeof(dst));
    tr_hogwild_snapshot(dst, src, N_SMALL);
    assert_memory_equal(dst, src, sizeof(src));
    memset(dst, 0x55, sizeof(dst));
    tr_hogwild_overwrite(dst, src, N_SMALL);
    assert_memory_equal(dst, src, sizeof(src));
    tr_hogwild_overwrite(dst, src + 5, 0);
    assert_memory_equal(dst, src, sizeof(src));
}

/* add, add_diff (the delta write-back) and sub on exact values. */
static void test_add_sub(void **state)
{
    (void)state;
    float w[N_SMALL], d[N_SMALL], t[N_SMALL], x[N_SMALL];
    for (int i = 0; i < N_SMALL; i++) {
        w[i] = (float)i;
        d[i] = (float)(i % 3) - 1.5f;
        t[i] = 10.0f + (float)i;
        x[i] = 4.0f * (float)i;
    }
    tr_hogwild_add(w, d, N_SMALL);
    for (int i = 0; i < N_SMALL; i++)
        assert_true(w[i] == (float)i + (float)(i % 3) - 1.5f);
    tr_hogwild_sub(w, d, N_SMALL);
    for (int i = 0; i < N_SMALL; i++)
        assert_true(w[i] == (float)i);
    tr_hogwild_add_diff(w, t, x, N_SMALL);  /* w + (10 + i) - 4 i */
    for (int i = 0; i < N_SMALL; i++)
        assert_true(w[i] == 10.0f - 2.0f * (float)i);
}

/* sum += w, three times: the running sum model.dense_average keeps. */
static void test_accumulate(void **state)
{
    (void)state;
    float w[N_SMALL], sum[N_SMALL];
    for (int i = 0; i < N_SMALL; i++) {
        w[i] = (float)i - 7.5f;
        sum[i] = 0.25f;
    }
    for (int k = 0; k < 3; k++)
        tr_hogwild_accumulate(sum, w, N_SMALL);
    for (int i = 0; i < N_SMALL; i++)
        if (sum[i] != 0.25f + 3.0f * ((float)i - 7.5f))
            fail_msg("sum[%d] = %g, expected %g", i, (double)sum[i],
                     (double)(0.25f + 3.0f * ((float)i - 7.5f)));
}

/* ---- racing threads ------------------------------------------------------------ */

enum race_role {
    ROLE_SGD,           /* w -= 1 per step */
    ROLE_WRITE_BACK,    /* w += target - x = -1 per step */
    ROLE_SUB,           /* w -= 1 */
    ROLE_ADD,           /* w += 1 */
    ROLE_ZERO,          /* w = 0 */
    ROLE_ADAGRAD,       /* adagrad with g = 1 */
    ROLE_WATCH,         /* snapshots, checked against [lo, hi] and integrality */
};

/* The shared arena and the private state of one racing thread. */
struct race {
    float *w;                   /* shared arena [RACE_N] */
    float *acc;                 /* shared Adagrad state [RACE_N] */
    const float *ones;          /* read-only 1.0 [RACE_N] */
    const float *zeros;         /* read-only 0.0 [RACE_N] */
    const float *minus_ones;    /* read-only -1.0 [RACE_N] */
    pthread_barrier_t *start;   /* all threads start together */
    enum race_role role;        /* what this thread does */
    float lo, hi;               /* ROLE_WATCH: bounds of every value */
    int integral;               /* ROLE_WATCH: values must be integers */
    float *snap;                /* ROLE_WATCH: private buffer [RACE_N] */
    size_t bad;                 /* ROLE_WATCH: values out of bounds (result) */
};

/* Check a snapshot against the watcher's bounds. */
static size_t s_count_bad(const struct race *r)
{
    size_t bad = 0;
    for (size_t i = 0; i < RACE_N; i++) {
        float v = r->snap[i];
        if (!(v >= r->lo && v <= r->hi) || (r->integral && v != floorf(v)))
            bad++;
    }
    return bad;
}

/* One racing thread: RACE_STEPS calls of its kernel on the shared arena. */
static void *s_race_main(void *arg)
{
    struct race *r = arg;
    pthread_barrier_wait(r->start);
    for (int s = 0; s < RACE_STEPS; s++) {
        switch (r->role) {
        case ROLE_SGD:
            tr_hogwild_sgd(r->w, r->ones, RACE_N, 1.0f, 0.0f);
            break;
        case ROLE_WRITE_BACK:
            tr_hogwild_add_diff(r->w, r->minus_ones, r->zeros, RACE_N);
            break;
        case ROLE_SUB:
            tr_hogwild_sub(r->w, r->ones, RACE_N);
            break;
        case ROLE_ADD:
            tr_hogwild_add(r->w, r->ones, RACE_N);
            break;
        case ROLE_ZERO:
            tr_hogwild_overwrite(r->w, r->zeros, RACE_N);
            break;
        case ROLE_ADAGRAD:
            tr_hogwild_adagrad(r->w, r->acc, r->ones, RACE_N, 0.01f, 1e-8f, 0.0f);
            break;
        case ROLE_WATCH:
            tr_hogwild_snapshot(r->snap, r->w, RACE_N);
            r->bad += s_count_bad(r);
            break;
        }
    }
    return NULL;
}

/* Shared buffers of a race. */
struct arena {
    float *w, *acc, *ones, *zeros, *minus_ones, *snap;
};

/* Allocate the buffers: w = acc = 0, and the constant vectors. */
static void s_arena_new(struct arena *a)
{
    a->w = ss_aligned_alloc(64, sizeof(float) * RACE_N);
    a->acc = ss_aligned_alloc(64, sizeof(float) * RACE_N);
    a->ones = ss_malloc(sizeof(float) * RACE_N);
    a->zeros = ss_calloc(RACE_N, sizeof(float));
    a->minus_ones = ss_malloc(sizeof(float) * RACE_N);
    a->snap = ss_malloc(sizeof(float) * RACE_N);
    for (size_t i = 0; i < RACE_N; i++) {
        a->w[i] = 0.0f;
        a->acc[i] = 0.0f;
        a->ones[i] = 1.0f;
        a->minus_ones[i] = -1.0f;
    }
}

/* Free what s_arena_new made. */
static void s_arena_free(struct arena *a)
{
    ss_free(a->w);
    ss_free(a->acc);
    ss_free(a->ones);
    ss_free(a->zeros);
    ss_free(a->minus_ones);
    ss_free(a->snap);
}

/* Run n threads with the given roles at once on arena a; a watcher (if any)
 * checks [lo, hi]. Returns the values the watcher found out of bounds. */
static size_t s_race(struct arena *a, const enum race_role *roles, int n, float lo, float hi,
                     int integral)
{
    pthread_t tid[8];
    struct race r[8];
    pthread_barrier_t start;
    size_t bad = 0;
    assert_int_equal(pthread_barrier_init(&start, NULL, (unsigned)n), 0);
    for (int t = 0; t < n; t++) {
        r[t] = (struct race){.w = a->w, .acc = a->acc, .ones = a->ones, .zeros = a->zeros,
                             .minus_ones = a->minus_ones, .start = &start, .role = roles[t],
                             .lo = lo, .hi = hi, .integral = integral, .snap = a->snap};
        assert_int_equal(pthread_create(&tid[t], NULL, s_race_main, &r[t]), 0);
    }
    for (int t = 0; t < n; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
        bad += r[t].bad;
    }
    assert_int_equal(pthread_barrier_destroy(&start), 0);
    return bad;
}

/* A worker's SGD steps race with the shadow thread's delta write-back and its
 * snapshots: every value is an integer in [-2 steps, 0] (updates may be lost,
 * never invented). */
static void test_race_sgd_write_back(void **state)
{
    (void)state;
    struct arena a;
    s_arena_new(&a);
    enum race_role roles[] = {ROLE_SGD, ROLE_WRITE_BACK, ROLE_WATCH};
    assert_int_equal(s_race(&a, roles, 3, -2.0f * RACE_STEPS, 0.0f, 1), 0);
    for (size_t i = 0; i < RACE_N; i++) {
        assert_true(a.w[i] >= -2.0f * RACE_STEPS && a.w[i] <= -1.0f);
        assert_true(a.w[i] == floorf(a.w[i]));
    }
    s_arena_free(&a);
}

/* add, sub and overwrite race (EASGD pull, S-MA overwrite): values stay integers
 * in [-steps, steps]. */
static void test_race_add_sub_overwrite(void **state)
{
    (void)state;
    struct arena a;
    s_arena_new(&a);
    enum race_role roles[] = {ROLE_SUB, ROLE_ADD, ROLE_ZERO, ROLE_WATCH};
    assert_int_equal(s_race(&a, roles, 4, -RACE_STEPS, RACE_STEPS, 1), 0);
    for (size_t i = 0; i < RACE_N; i++) {
        assert_true(fabsf(a.w[i]) <= RACE_STEPS);
        assert_true(a.w[i] == floorf(a.w[i]));
    }
    s_arena_free(&a);
}

/* Two Adagrad workers on the same w and accumulator: acc counts steps (some may
 * be lost, at least one stays), each step moves w down by at most lr. */
static void test_race_adagrad(void **state)
{
    (void)state;
    struct arena a;
    s_arena_new(&a);
    enum race_role roles[] = {ROLE_ADAGRAD, ROLE_ADAGRAD, ROLE_WATCH};
    assert_int_equal(s_race(&a, roles, 3, -0.01f * 2 * RACE_STEPS, 0.0f, 0), 0);
    for (size_t i = 0; i < RACE_N; i++) {
        assert_true(a.acc[i] >= 1.0f && a.acc[i] <= 2 * RACE_STEPS);
        assert_true(a.acc[i] == floorf(a.acc[i]));
        assert_true(a.w[i] < 0.0f && a.w[i] >= -0.01f * 2 * RACE_STEPS);
    }
    s_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adagrad),
        cmocka_unit_test(test_adagrad_bits),
        cmocka_unit_test(test_adagrad_first_steps),
        cmocka_unit_test(test_adagrad_lengths_bit_exact),
        cmocka_unit_test(test_adagrad_floor_by_hand),
        cmocka_unit_test(test_adagrad_floor_tensors),
        cmocka_unit_test(test_adagrad_floor_lengths_bit_exact),
        cmocka_unit_test(test_adagrad_floor_nan_acc),
        cmocka_unit_test(test_l2_by_hand),
        cmocka_unit_test(test_l2_zero_is_plain),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_add_sub),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_race_sgd_write_back),
        cmocka_unit_test(test_race_add_sub_overwrite),
        cmocka_unit_test(test_race_adagrad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
