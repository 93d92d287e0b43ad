/* test_tr_bag.c - unit tests of trainer/tr_bag: pooling of multi-valued
 * fields (sum, mean, sqrtn) and the spread of their gradients, on exact
 * numbers and against finite differences of a double reference. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ss_cfg.h"
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


/* ------------------------------------------------------ mean and sqrtn */

enum { FD_F = 3, FD_B = 3, FD_P = FD_F * FD_B, FD_D = 3, FD_MAXV = 16 };

/* A batch of FD_B examples of FD_F fields: empty positions, lone values of
 * weight 1 and of other weights, bags with mixed signs, a key repeated in
 * one bag and across positions (rows are shared through vrow/vgrad). */
static const uint32_t s_offs[FD_P + 1] = {0, 1, 4, 4, 6, 7, 11, 12, 12, 15};
static const float s_w[15] = {1.0f,  2.0f, -0.5f, 3.0f,  0.25f, 4.0f, 2.5f, 1.0f,
                              -2.0f, 0.75f, 6.0f, -1.5f, 9.0f,  0.1f, 1.0f};
static const int s_row_of[15] = {0, 1, 2, 3, 4, 1, 5, 0, 6, 7, 7, 2, 3, 5, 6};
enum { FD_ROWS = 8 };

/* Position p's norm under mode, from the definitions (tr_bag.h): 1, the
 * count of values, the root of the sum of squared weights. */
static double s_ref_norm(size_t p, int mode)
{
    double sq = 0;
    for (uint32_t i = s_offs[p]; i < s_offs[p + 1]; i++)
        sq += (double)s_w[i] * s_w[i];
    return mode == SS_POOL_SUM ? 1.0 : mode == SS_POOL_MEAN ? s_offs[p + 1] - s_offs[p] : sqrt(sq);
}

/* Double reference loss of the pooled batch: sum_pd c_pd o_pd + o_pd^2 / 2
 * with o_p = sum_i w_i r_i / norm_p (0 where the norm is 0); field f of
 * each example uses modes[f]. */
static double s_ref_loss(const double rows[FD_ROWS][FD_D], const int *modes)
{
    double loss = 0;
    for (size_t p = 0; p < FD_P; p++) {
        double norm = s_ref_norm(p, modes[p % FD_F]);
        for (int d = 0; d < FD_D; d++) {
            double o = 0, c = (double)((p * FD_D + d) % 7) / 4.0 - 0.75;
            for (uint32_t i = s_offs[p]; i < s_offs[p + 1]; i++)
                o += s_w[i] * rows[s_row_of[i]][d];
            o = norm > 0 ? o / norm : 0;
            loss += c * o + o * o / 2;
        }
    }
    return loss;
}

/* Pool the batch with tr_bag_scale's weights, take the reference loss's
 * gradient by position (c + o) and spread it: the rows' gradients, which
 * must match central differences of s_ref_loss. The pooled values must
 * match the reference's too. */
static void s_check_fd(const int *modes)
{
    float rows[FD_ROWS][FD_D], g[FD_ROWS][FD_D] = {{0}}, eff[15], out[FD_P * FD_D],
          grad[FD_P * FD_D];
    double rd[FD_ROWS][FD_D];
    const float *vrow[15];
    float *vgrad[15];
    uint8_t mode8[FD_F];
    for (int f = 0; f < FD_F; f++)
        mode8[f] = (uint8_t)modes[f];
    for (int r = 0; r < FD_ROWS; r++)
        for (int d = 0; d < FD_D; d++)
            rd[r][d] = rows[r][d] = (float)((r * 5 + d * 3) % 11) / 8.0f - 0.6f;
    for (int i = 0; i < 15; i++) {
        vrow[i] = rows[s_row_of[i]];
        vgrad[i] = g[s_row_of[i]];
    }
    tr_bag_scale(s_offs, s_w, FD_P, mode8, FD_F, eff);
    tr_bag_pool(s_offs, eff, FD_P, vrow, FD_D, out);
    for (size_t p = 0; p < FD_P; p++) {
        double norm = s_ref_norm(p, modes[p % FD_F]);
        for (int d = 0; d < FD_D; d++) {
            double o = 0, c = (double)((p * FD_D + d) % 7) / 4.0 - 0.75;
            for (uint32_t i = s_offs[p]; i < s_offs[p + 1]; i++)
                o += s_w[i] * rd[s_row_of[i]][d];
            o = norm > 0 ? o / norm : 0;
            assert_true(fabs(out[p * FD_D + d] - o) <= 1e-5 * (1 + fabs(o)));
            grad[p * FD_D + d] = (float)(c + out[p * FD_D + d]);
        }
    }
    tr_bag_spread(s_offs, eff, FD_P, grad, FD_D, vgrad);
    for (int r = 0; r < FD_ROWS; r++)
        for (int d = 0; d < FD_D; d++) {
            const double h = 1e-6, keep = rd[r][d];
            rd[r][d] = keep + h;
            double up = s_ref_loss(rd, modes);
            rd[r][d] = keep - h;
            double down = s_ref_loss(rd, modes);
            rd[r][d] = keep;
            double fd = (up - down) / (2 * h);
            if (fabs(g[r][d] - fd) > 1e-4 * (1 + fabs(fd)))
                fail_msg("modes %d %d %d row %d dim %d: spread %.7g, finite difference %.7g",
                         modes[0], modes[1], modes[2], r, d, (double)g[r][d], fd);
        }
}

/* The gradient of every row through each mode, and through fields of mixed
 * modes, equals the finite difference of the reference. */
static void test_fd_gradient(void **state)
{
    (void)state;
    static const int modes[][FD_F] = {
        {SS_POOL_SUM, SS_POOL_SUM, SS_POOL_SUM},
        {SS_POOL_MEAN, SS_POOL_MEAN, SS_POOL_MEAN},
        {SS_POOL_SQRTN, SS_POOL_SQRTN, SS_POOL_SQRTN},
        {SS_POOL_MEAN, SS_POOL_SUM, SS_POOL_SQRTN},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        s_check_fd(modes[m]);
}

/* Exact effective weights: sum copies the weights bit for bit; mean divides
 * by the count, sqrtn by sqrt(sum w^2), where a lone value of any positive
 * weight gets exactly 1 (so its row is copied); weights of 0 stay 0. */
static void test_scale(void **state)
{
    (void)state;
    const uint32_t offs[5] = {0, 2, 3, 3, 5};
    const float w[5] = {3.0f, -1.0f, 0.3f, 0.0f, 0.0f};
    float eff[5];
    uint8_t mode = SS_POOL_SUM;
    memset(eff, 0x7f, sizeof eff);
    tr_bag_scale(offs, w, 4, &mode, 1, eff);
    assert_memory_equal(eff, w, sizeof w);
    mode = SS_POOL_MEAN;
    tr_bag_scale(offs, w, 4, &mode, 1, eff);
    assert_true(eff[0] == 1.5f && eff[1] == -0.5f && eff[2] == 0.3f);
    assert_true(eff[3] == 0.0f && eff[4] == 0.0f);
    mode = SS_POOL_SQRTN;
    tr_bag_scale(offs, w, 4, &mode, 1, eff);
    assert_true(eff[0] == (float)(3.0 / sqrt(10.0)) && eff[1] == (float)(-1.0 / sqrt(10.0)));
    assert_true(eff[2] == 1.0f && eff[3] == 0.0f && eff[4] == 0.0f);  /* norm 0: not NaN */
}

/* Under every mode: an empty position pools to zeros and spreads nothing;
 * one value of weight 1 is its row bit for bit (-0.0 included). Under sqrtn
 * one value of weight 2.5 is its row too; under sum and mean, 2.5 times
 * it. sum through tr_bag_scale is bit-identical to pooling with the
 * weights themselves. */
static void test_modes_edges(void **state)
{
    (void)state;
    const float r0[3] = {-0.0f, 1.5f, -2.25f}, r1[3] = {0.1f, -0.7f, 3.3f};
    const float *vrow[2] = {r0, r1};
    const uint32_t offs[4] = {0, 1, 1, 2};
    const float w[2] = {1.0f, 2.5f};
    for (int m = SS_POOL_SUM; m <= SS_POOL_SQRTN; m++) {
        uint8_t mode = (uint8_t)m;
        float eff[2], out[9], g0[3] = {0}, g1[3] = {0}, grad[9];
        float *vgrad[2] = {g0, g1};
        memset(out, 0x7f, sizeof out);
        tr_bag_scale(offs, w, 3, &mode, 1, eff);
        tr_bag_pool(offs, eff, 3, vrow, 3, out);
        assert_memory_equal(out, r0, sizeof r0);
        for (int d = 3; d < 6; d++)
            assert_true(out[d] == 0.0f);
        for (int d = 0; d < 3; d++)
            assert_true(out[6 + d] == (m == SS_POOL_SQRTN ? r1[d] : 2.5f * r1[d]));
        for (int k = 0; k < 9; k++)
            grad[k] = (float)k + 1.0f;
        tr_bag_spread(offs, eff, 3, grad, 3, vgrad);
        for (int d = 0; d < 3; d++) {
            assert_true(g0[d] == grad[d]);
            assert_true(g1[d] == (m == SS_POOL_SQRTN ? 1.0f : 2.5f) * grad[6 + d]);
        }
    }
    /* sum: the weights pass through untouched, so pooling is the old path */
    const uint32_t offs2[3] = {0, 3, 5};
    const float w2[5] = {0.3f, -1.7f, 2.9f, 0.1f, 7.0f};
    const float *vrow2[5] = {r0, r1, r0, r1, r1};
    uint8_t sum = SS_POOL_SUM;
    float eff2[5], a[6], b[6];
    tr_bag_scale(offs2, w2, 2, &sum, 1, eff2);
    tr_bag_pool(offs2, w2, 2, vrow2, 3, a);
    tr_bag_pool(offs2, eff2, 2, vrow2, 3, b);
    assert_memory_equal(a, b, sizeof a);
}

/* Every dim from 1 to 40 (the vector paths' full blocks and masked tails;
 * 17 is the default row): pooling and spread give exactly the bits of a
 * plain multiply-then-add loop in value order, on bags of 0 to 3 values with
 * rows shared between positions, and the spread leaves the floats past each
 * row untouched. Run plain and with SS_ISA=portable (test/unit/tags). */
static void test_dims_bit_exact(void **state)
{
    (void)state;
    enum { P = 24, V = 36, R = 11, MAXD = 40 };
    static float rows[R][MAXD + 1], g[R][MAXD + 1], want_g[R][MAXD + 1];
    static float grad[P * MAXD], out[P * MAXD], want[P * MAXD];
    uint32_t offs[P + 1];
    float w[V];
    const float *vrow[V];
    float *vgrad[V];
    int row_of[V];
    uint32_t n = 0;
    for (int p = 0; p < P; p++) {
        offs[p] = n;
        for (int k = 0; k < (p * 7) % 4 && n < V; k++, n++) {
            row_of[n] = (int)((n * 5) % R);
            w[n] = (n % 3 == 0) ? 1.0f : 0.37f * (float)n - 2.1f;
        }
    }
    offs[P] = n;
    for (uint32_t dim = 1; dim <= MAXD; dim++) {
        for (int r = 0; r < R; r++)
            for (uint32_t d = 0; d <= MAXD; d++) {
                rows[r][d] = 0.013f * (float)(r * 41 + (int)d) - 0.7f;
                g[r][d] = want_g[r][d] = 0.5f - 0.011f * (float)(r + 3 * (int)d);
            }
        for (uint32_t k = 0; k < P * dim; k++)
            grad[k] = 0.021f * (float)(k % 97) - 1.0f;
        for (uint32_t i = 0; i < n; i++) {
            vrow[i] = rows[row_of[i]];
            vgrad[i] = g[row_of[i]];
        }
        memset(want, 0, sizeof want);
        for (int p = 0; p < P; p++)
            for (uint32_t i = offs[p]; i < offs[p + 1]; i++)
                for (uint32_t d = 0; d < dim; d++) {
                    if (offs[p + 1] - offs[p] == 1 && w[i] == 1.0f)
                        want[p * dim + d] = rows[row_of[i]][d];
                    else
                        want[p * dim + d] += w[i] * rows[row_of[i]][d];
                    want_g[row_of[i]][d] += w[i] * grad[p * dim + d];
                }
        tr_bag_pool(offs, w, P, vrow, dim, out);
        tr_bag_spread(offs, w, P, grad, dim, vgrad);
        if (memcmp(out, want, sizeof(float) * P * dim) != 0)
            fail_msg("pool differs at dim %u", dim);
        /* tr_bag_plain: exactly the positions pooled to their one row */
        for (int p = 0; p < P; p++) {
            int lone = offs[p + 1] == offs[p] + 1 && w[offs[p]] == 1.0f;
            if (tr_bag_plain(offs, w, (size_t)p) != lone)
                fail_msg("plain: position %d", p);
            if (lone && memcmp(out + p * dim, vrow[offs[p]], sizeof(float) * dim) != 0)
                fail_msg("plain: position %d is not its row at dim %u", p, dim);
        }
        if (memcmp(g, want_g, sizeof g) != 0)
            fail_msg("spread differs at dim %u", dim);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_adjoint),
        cmocka_unit_test(test_dims_bit_exact),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_modes_edges),
        cmocka_unit_test(test_fd_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
