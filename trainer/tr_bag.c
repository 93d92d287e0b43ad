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
#include "ss_isa.h"
#include "ss_mem.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TR_BAG_HAVE_AVX512 1
#else
#define TR_BAG_HAVE_AVX512 0
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

/* Tails of at most this many floats go one by one: a masked 64-byte load of
 * y's tail reaches into the next row, which a store may just have written,
 * and then waits for that store (in the job, an eighth of the spread's time
 * sat on the masked load of rows of 17 floats). */
#define TR_BAG_SCALAR_TAIL 4u

/* y[d] += w * x[d] for d < n with AVX-512 (16 lanes, a long tail masked): the
 * same multiply then add per element as s_axpy, so the same bits. */
#if TR_BAG_HAVE_AVX512
__attribute__((target("avx512f"))) static inline void s_axpy512(float *y, float w,
                                                              const float *x, uint32_t n)
{
    __m512 vw = _mm512_set1_ps(w);
    uint32_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(y + d, _mm512_add_ps(_mm512_loadu_ps(y + d),
                                              _mm512_mul_ps(vw, _mm512_loadu_ps(x + d))));
    if (n - d > TR_BAG_SCALAR_TAIL) {
        __mmask16 k = (__mmask16)((1u << (n - d)) - 1u);
        __m512 wx = _mm512_mul_ps(vw, _mm512_maskz_loadu_ps(k, x + d));
        _mm512_mask_storeu_ps(y + d, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + d), wx));
        return;
    }
    for (; d < n; d++)
        y[d] += w * x[d];
}

/* y[d] = x[d] for d < n: 16 floats at a time, a short tail one by one. */
__attribute__((target("avx512f"))) static inline void s_copy512(float *y, const float *x,
                                                              uint32_t n)
{
    uint32_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(y + d, _mm512_loadu_ps(x + d));
    if (n - d > TR_BAG_SCALAR_TAIL) {
        __mmask16 k = (__mmask16)((1u << (n - d)) - 1u);
        _mm512_mask_storeu_ps(y + d, k, _mm512_maskz_loadu_ps(k, x + d));
        return;
    }
    for (; d < n; d++)
        y[d] = x[d];
}

/* tr_bag_pool with s_copy512 and s_axpy512 (the same bits). */
__attribute__((target("avx512f"))) static void s_pool512(const uint32_t *offs,
                                                         const float *weights, size_t n_pos,
                                                         const float *const *vrow,
                                                         uint32_t dim, float *out)
{
    for (size_t p = 0; p < n_pos; p++, out += dim) {
        uint32_t i = offs[p], end = offs[p + 1];
        if (tr_bag_plain(offs, weights, p)) {
            s_copy512(out, vrow[i], dim);  /* one value: its row, exactly */
            continue;
        }
        memset(out, 0, dim * sizeof(float));
        for (; i < end; i++)
            s_axpy512(out, weights[i], vrow[i], dim);
    }
}

/* tr_bag_spread with s_axpy512. */
__attribute__((target("avx512f"))) static void s_spread512(const uint32_t *offs,
                                                           const float *weights, size_t n_pos,
                                                           const float *grad, uint32_t dim,
                                                           float *const *vgrad)
{
    for (size_t p = 0; p < n_pos; p++, grad += dim)
        for (uint32_t i = offs[p]; i < offs[p + 1]; i++)
            s_axpy512(vgrad[i], weights[i], grad, dim);
}
#endif

void tr_bag_pool(const uint32_t *offs, const float *weights, size_t n_pos,
                 const float *const *vrow, uint32_t dim, float *out)
{
    ss_assert(offs && (weights || n_pos == 0) && (vrow || n_pos == 0) && (out || n_pos == 0));
#if TR_BAG_HAVE_AVX512
    if (ss_isa_get() >= SS_ISA_AVX512) {
        s_pool512(offs, weights, n_pos, vrow, dim, out);
        return;
    }
#endif
    for (size_t p = 0; p < n_pos; p++, out += dim) {
        uint32_t i = offs[p], end = offs[p + 1];
        if (tr_bag_plain(offs, weights, p)) {
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
#if TR_BAG_HAVE_AVX512
    if (ss_isa_get() >= SS_ISA_AVX512) {
        s_spread512(offs, weights, n_pos, grad, dim, vgrad);
        return;
    }
#endif
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
