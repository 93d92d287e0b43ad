/* tr_hogwild.c - racy in-place kernels on the shared dense arena (see tr_hogwild.h).
 *
 * DESIGN: each function is one plain loop over n floats that the compiler can
 * vectorize. They are excluded from ThreadSanitizer with TR_HOGWILD_RACY, which
 * also keeps the compiler from turning a copy loop into a memcpy call (TSan
 * intercepts memcpy and would check the race there). Nothing else in the
 * trainer may write the shared arena while workers run. */
#include "tr_hogwild.h"

#include <math.h>

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_sgd(float *restrict w, const float *restrict g, size_t n,
                                    float lr)
{
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * g[i];
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_adagrad(float *restrict w, float *restrict acc,
                                        const float *restrict g, size_t n, float lr, float eps)
{
    for (size_t i = 0; i < n; i++) {
        float a = acc[i] + g[i] * g[i];
        acc[i] = a;
        w[i] -= lr * g[i] / (sqrtf(a) + eps);
    }
}

/* Hogwild: racy by design */
TR_HOGWILD_RACY void tr_hogwild_snapshot(float *restrict dst, const float *restrict w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = w[i];
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
