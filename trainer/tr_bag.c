/* tr_bag.c - pooling of multi-valued categorical fields.
 *
 * DESIGN: every mode is the same weighted sum; mean and sqrtn only change
 * the weights (tr_bag_scale), once per batch, before the pooling and the
 * spread. So the sum path (tr_bag_pool, tr_bag_spread) stays the one tuned
 * loop, and the other modes cost one pass over the weights. */
#include "tr_bag.h"

#include <math.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_cfg.h"
#include "ss_mem.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* y[d] += w * x[d] for d < n: a multiply then an add per element, in 4
 * lanes where SSE2 is there (the compiler leaves this loop scalar at -O2, as
 * y and x may overlap; they never do here), so every path and the scalar
 * tail give identical results. Pooling and its spread spent 12% of a
 * worker's time in the scalar loop. */
static inline void s_axpy(float *y, float w, const float *x, uint32_t n)
{
    uint32_t d = 0;
#if defined(__SSE2__)
    __m128 vw = _mm_set1_ps(w);
    for (; d + 4 <= n; d += 4)
        _mm_storeu_ps(y + d, _mm_add_ps(_mm_loadu_ps(y + d), _mm_mul_ps(vw, _mm_loadu_ps(x + d))));
#endif
    for (; d < n; d++)
        y[d] += w * x[d];
}

void tr_bag_pool(const uint32_t *offs, const float *weights, size_t n_pos,
                 const float *const *vrow, uint32_t dim, float *out)
{
    ss_assert(offs && (weights || n_pos == 0) && (vrow || n_pos == 0) && (out || n_pos == 0));
    for (size_t p = 0; p < n_pos; p++, out += dim) {
        uint32_t i = offs[p], end = offs[p + 1];
        if (end == i + 1 && weights[i] == 1.0f) {
            ss_copy_floats(out, vrow[i], dim);  /* one value: its row, exactly */
            continue;
        }
        memset(out, 0, dim * sizeof(float));
        for (; i < end; i++)
            s_axpy(out, weights[i], vrow[i], dim);
    }
}

void tr_bag_spread(const uint32_t *offs, const float *weights, size_t n_pos, const float *grad,
                   uint32_t dim, float *const *vgrad)
{
    ss_assert(offs && (weights || n_pos == 0) && (grad || n_pos == 0) && (vgrad || n_pos == 0));
    for (size_t p = 0; p < n_pos; p++, grad += dim) {
        for (uint32_t i = offs[p]; i < offs[p + 1]; i++)
            s_axpy(vgrad[i], weights[i], grad, dim);
    }
}

/* The norm of n weights w under mode (enum ss_pooling), in double: mean
 * the count n, sqrtn sqrt(sum w^2) (for a lone float weight, sqrt(w * w) is
 * |w| exactly, so w / norm is 1). */
static double s_norm(const float *w, uint32_t n, int mode)
{
    double acc = 0;
    if (mode == SS_POOL_MEAN)
        return n;
    ss_assert(mode == SS_POOL_SQRTN);
    for (uint32_t i = 0; i < n; i++)
        acc += (double)w[i] * w[i];
    return sqrt(acc);
}

void tr_bag_scale(const uint32_t *offs, const float *weights, size_t n_pos, const uint8_t *mode,
                  uint32_t n_fields, float *eff)
{
    ss_assert(offs && mode && n_fields > 0 && (eff || n_pos == 0));
    ss_assert(weights || offs[n_pos] == offs[0]);
    uint32_t f = 0;
    for (size_t p = 0; p < n_pos; p++, f = f + 1 == n_fields ? 0 : f + 1) {
        uint32_t i = offs[p], end = offs[p + 1];
        if (mode[f] == SS_POOL_SUM) {
            if (end > i)
                memcpy(eff + i, weights + i, (end - i) * sizeof(float));
            continue;
        }
        double norm = s_norm(weights + i, end - i, mode[f]);
        for (; i < end; i++)
            eff[i] = norm > 0 ? (float)((double)weights[i] / norm) : 0.0f;
    }
}
