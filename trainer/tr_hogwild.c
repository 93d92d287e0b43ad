/* tr_hogwild.c - racy in-place kernels on the shared dense arena (see tr_hogwild.h).
 *
 * DESIGN: each function is one plain loop over n floats that the compiler can
 * vectorize, excluded from ThreadSanitizer with TR_HOGWILD_RACY. Nothing else
 * in the trainer may write the shared arena while workers run. Tested under
 * SANITIZE=thread with threads racing through every kernel (test_tr_hogwild):
 * without the attribute TSan reports those races, with it the run is silent. */
#include "tr_hogwild.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "ss_isa.h"
#define TR_HOGWILD_HAVE_AVX512 1
#else
#define TR_HOGWILD_HAVE_AVX512 0
#endif

/* Marks a racy kernel: not instrumented by ThreadSanitizer, and the compiler may
 * not replace its copy loop by a call to memcpy (TSan intercepts memcpy and would
 * check the race there). GCC 12 vectorizes loops of unknown length only from -O3,
 * so the kernels ask for it (each is one loop over the whole arena). */
#if defined(__clang__)
#define TR_HOGWILD_RACY \
    __attribute__((no_sanitize("thread"), no_builtin("memcpy"), no_builtin("memmove")))
#elif defined(__GNUC__)
#define TR_HOGWILD_RACY                                                           \
    __attribute__((no_sanitize("thread"),                                         \
                   optimize("no-tree-loop-distribute-patterns", "tree-vectorize", \
                            "vect-cost-model=dynamic")))
#else
#define TR_HOGWILD_RACY
#endif

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_sgd(float *restrict w, const float *restrict g, size_t n,
                                    float lr, float l2)
{
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * (g[i] + l2 * w[i]);
}

#if TR_HOGWILD_HAVE_AVX512
/* tr_hogwild_adagrad's vector loop 16 lanes wide, over the first n - n % 16
 * floats (returned): the same operations in the same order, so the same
 * bits. Its divisions and roots are most of the kernel's time: on the AMD
 * EPYC (Zen 4) of 2026-12 a dense arena of 25.5k floats took 7.5 us against
 * 12-14.5 us 4 lanes wide. Hogwild: racy by design. */
TR_HOGWILD_RACY __attribute__((target("avx512f"))) static size_t
s_adagrad512(float *restrict w, float *restrict acc, const float *restrict g, size_t n,
             float lr, float eps, float l2)
{
    __m512 vlr = _mm512_set1_ps(lr), veps = _mm512_set1_ps(eps), vl2 = _mm512_set1_ps(l2);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 vw = _mm512_loadu_ps(w + i);
        __m512 vg = _mm512_add_ps(_mm512_loadu_ps(g + i), _mm512_mul_ps(vl2, vw));
        __m512 va = _mm512_add_ps(_mm512_loadu_ps(acc + i), _mm512_mul_ps(vg, vg));
        _mm512_storeu_ps(acc + i, va);
        __m512 step = _mm512_div_ps(_mm512_mul_ps(vlr, vg),
                                    _mm512_add_ps(_mm512_sqrt_ps(va), veps));
        _mm512_storeu_ps(w + i, _mm512_sub_ps(vw, step));
    }
    return i;
}
#endif

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_adagrad(float *restrict w, float *restrict acc,
                                        const float *restrict g, size_t n, float lr, float eps,
                                        float l2)
{
    size_t i = 0;
#if TR_HOGWILD_HAVE_AVX512
    if (ss_isa_get() >= SS_ISA_AVX512)
        i = s_adagrad512(w, acc, g, n, lr, eps, l2);
#endif
#if defined(__SSE2__)
    /* sqrtf stays scalar while errno is on (the default), so 4 lanes by hand;
     * same operations in the same order as the loop below: identical results. */
    __m128 vlr = _mm_set1_ps(lr), veps = _mm_set1_ps(eps), vl2 = _mm_set1_ps(l2);
    for (; i + 4 <= n; i += 4) {
        __m128 vw = _mm_loadu_ps(w + i);
        __m128 vg = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(vl2, vw));
        __m128 va = _mm_add_ps(_mm_loadu_ps(acc + i), _mm_mul_ps(vg, vg));
        _mm_storeu_ps(acc + i, va);
        __m128 step = _mm_div_ps(_mm_mul_ps(vlr, vg), _mm_add_ps(_mm_sqrt_ps(va), veps));
        _mm_storeu_ps(w + i, _mm_sub_ps(vw, step));
    }
#endif
    for (; i < n; i++) {
        float d = g[i] + l2 * w[i];
        float a = acc[i] + d * d;
        acc[i] = a;
        w[i] -= lr * d / (sqrtf(a) + eps);
    }
}

/* Why tr_hogwild_adagrad is not this kernel at floor 0 (which gives its bits):
 * the max and the running sum cost 2-4% a step, more than the noise. Thread
 * CPU time per step, both kernels of build/rel called alternately (floor 0,
 * l2 0), medians of 41-101 runs, interquartile ranges apart, load 4-4.7 on 2
 * cores, 2026-12-03: 25,000 floats (make run's dense arena, about 25.6k)
 * 9,420 vs 9,636 ns, 9,396 vs 9,667, 9,316 vs 9,590 (+2.3 to +2.9%);
 * 262,144 floats 107,843 vs 112,111 ns (+4.0%); 2M floats 992 vs 1,021 us
 * (+2.9%). In the job that is about 0.002 us per example (128-row batches),
 * but the plain kernel runs every step once model.adagrad_floor has faded. */
/* Hogwild: racy by design */
TR_HOGWILD_RACY double tr_hogwild_adagrad_floor(float *restrict w, float *restrict acc,
                                                const float *restrict g, size_t n, float lr,
                                                float eps, float l2, float acc_min)
{
    size_t i = 0;
    float sum = 0.0f;
#if defined(__SSE2__)
    /* as tr_hogwild_adagrad, with the max before the root; max(a, 0) is a.
     * MAXPS gives its second operand when either is NaN, so the floor goes
     * first: a NaN accumulator reaches the root as in tr_hogwild_adagrad, and
     * a NaN floor (a mean over a NaN) floors nothing. */
    __m128 vlr = _mm_set1_ps(lr), veps = _mm_set1_ps(eps), vl2 = _mm_set1_ps(l2);
    __m128 vfloor = _mm_set1_ps(acc_min), vsum = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
        __m128 vw = _mm_loadu_ps(w + i);
        __m128 vg = _mm_add_ps(_mm_loadu_ps(g + i), _mm_mul_ps(vl2, vw));
        __m128 va = _mm_add_ps(_mm_loadu_ps(acc + i), _mm_mul_ps(vg, vg));
        _mm_storeu_ps(acc + i, va);
        vsum = _mm_add_ps(vsum, va);
        __m128 root = _mm_sqrt_ps(_mm_max_ps(vfloor, va));
        __m128 step = _mm_div_ps(_mm_mul_ps(vlr, vg), _mm_add_ps(root, veps));
        _mm_storeu_ps(w + i, _mm_sub_ps(vw, step));
    }
    float lanes[4];
    _mm_storeu_ps(lanes, vsum);
    sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
    for (; i < n; i++) {
        float d = g[i] + l2 * w[i];
        float a = acc[i] + d * d;
        acc[i] = a;
        sum += a;
        w[i] -= lr * d / (sqrtf(acc_min > a ? acc_min : a) + eps);  /* MAXPS's order */
    }
    return (double)sum;
}

void tr_hogwild_adagrad_tensors(float *w, float *acc, const float *g,
                                const struct tr_hogwild_tensor *tensors, size_t n_tensors,
                                float *mean, float lr, float eps, float l2, float gamma)
{
    for (size_t t = 0; t < n_tensors; t++) {
        size_t off = tensors[t].off, n = tensors[t].n;
        if (n == 0)
            continue;
        float acc_min = gamma * mean[t];
        double sum = tr_hogwild_adagrad_floor(w + off, acc + off, g + off, n, lr, eps, l2,
                                              acc_min);
        mean[t] = (float)(sum / (double)n);
    }
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_snapshot(float *restrict dst, const float *restrict w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = w[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_accumulate(float *restrict sum, const float *restrict w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sum[i] += w[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_add(float *restrict w, const float *restrict delta, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] += delta[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_add_diff(float *restrict w, const float *restrict target,
                                         const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] += target[i] - x[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_sub(float *restrict w, const float *restrict d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] -= d[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_overwrite(float *restrict w, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = src[i];
}
