/* test_tr_bag.c - unit tests of trainer/tr_bag: sum-pooling of multi-valued
 * fields and the spread of their gradients, on exact numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "tr_bag.h"

/* Three positions of dim 3: one value of weight 1 (copied bit for bit, -0.0
 * included), two weighted values, none (zeros). */
static void test_pool(void **state)
{
    (void)state;
    const float r0[3] = {-0.0f, 1.5f, -2.25f}, r1[3] = {1, 2, 4}, r2[3] = {0.5f, -1, 8};
    const float *vrow[3] = {r0, r1, r2};
    const uint32_t offs[4] = {0, 1, 3, 3};
    const float weights[3] = {1.0f, 0.5f, 2.0f};
    float out[9];
    memset(out, 0x7f, sizeof out);
    tr_bag_pool(offs, weights, 3, vrow, 3, out);
    assert_memory_equal(out, r0, sizeof r0);
    assert_true(signbit(out[0]));
    const float want1[3] = {0.5f * 1 + 2.0f * 0.5f, 0.5f * 2 + 2.0f * -1, 0.5f * 4 + 2.0f * 8};
    assert_memory_equal(out + 3, want1, sizeof want1);   /* 1.5, -1, 18 */
    assert_true(out[3] == 1.5f && out[4] == -1.0f && out[5] == 18.0f);
    for (int d = 6; d < 9; d++)
        assert_true(out[d] == 0.0f);
}

/* The spread adds weight * the position's gradient into each value's row; a
 * row shared by two values (a key seen twice) sums both. */
static void test_spread(void **state)
{
    (void)state;
    float g_a[2] = {0, 0}, g_b[2] = {10, 20};
    float *vgrad[4] = {g_a, g_b, g_a, g_b};
    const uint32_t offs[3] = {0, 1, 4};
    const float weights[4] = {1.0f, 0.25f, 3.0f, -1.0f};
    const float grad[4] = {0.5f, -1.0f, 2.0f, 4.0f};
    tr_bag_spread(offs, weights, 2, grad, 2, vgrad);
    /* g_a: 1 * (0.5, -1) + 3 * (2, 4); g_b: 10,20 + 0.25 * (2, 4) - (2, 4) */
    assert_true(g_a[0] == 6.5f && g_a[1] == 11.0f);
    assert_true(g_b[0] == 8.5f && g_b[1] == 17.0f);
}

/* Pooling is linear in the rows and the spread is its adjoint: for any u,
 * <pool(rows), u> == sum_i <rows_i, spread(u)_i>. */
static void test_adjoint(void **state)
{
    (void)state;
    enum { D = 4, V = 5, P = 3 };
    float rows[V][D], g[V][D], out[P * D], u[P * D];
    const float *vrow[V];
    float *vgrad[V];
    const uint32_t offs[P + 1] = {0, 2, 3, 5};
    const float w[V] = {0.5f, 1.5f, 1.0f, -2.0f, 0.25f};
    for (int i = 0; i < V; i++) {
        for (int d = 0; d < D; d++) {
            rows[i][d] = (float)(i * D + d) / 8.0f - 1.0f;
            g[i][d] = 0.0f;
        }
        vrow[i] = rows[i];
        vgrad[i] = g[i];
    }
    for (int k = 0; k < P * D; k++)
        u[k] = (float)(k % 5) - 2.0f;
    tr_bag_pool(offs, w, P, vrow, D, out);
    tr_bag_spread(offs, w, P, u, D, vgrad);
    double lhs = 0, rhs = 0;
    for (int k = 0; k < P * D; k++)
        lhs += (double)out[k] * u[k];
    for (int i = 0; i < V; i++)
        for (int d = 0; d < D; d++)
            rhs += (double)rows[i][d] * g[i][d];
    assert_true(fabs(lhs - rhs) < 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_adjoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
