/* tr_sync_util.c - shared pieces of the ring rules. */
#include "tr_sync_util.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ss_assert.h"
#include "ss_mem.h"
#include "tr_hogwild.h"

struct tr_sync_avg *tr_sync_avg_new(size_t len)
{
    struct tr_sync_avg *a = ss_calloc(1, sizeof *a);
    a->len = len;
    a->x = ss_malloc((len + 1) * sizeof(float));
    a->m = ss_malloc((len + TR_SYNC_MAX_FLAGS) * sizeof(float));
    return a;
}

void tr_sync_avg_destroy(struct tr_sync_avg **a_p)
{
    struct tr_sync_avg *a = *a_p;
    if (!a)
        return;
    ss_free(a->x);
    ss_free(a->m);
    ss_free(a);
    *a_p = NULL;
}

/* m[i] /= n for i < len, 4 floats a division where SSE2 is there (the
 * compiler left it one scalar division after another): each element is the
 * same correctly rounded quotient either way. */
static void s_div(float *m, size_t len, float n)
{
    size_t i = 0;
#if defined(__SSE2__)
    __m128 vn = _mm_set1_ps(n);
    for (; i + 4 <= len; i += 4)
        _mm_storeu_ps(m + i, _mm_div_ps(_mm_loadu_ps(m + i), vn));
#endif
    for (; i < len; i++)
        m[i] /= n;
}

int tr_sync_avg_mean(struct tr_sync_avg *a, struct tr_sync_env *env, const float *w,
                     const float *flags, size_t n_flags, float *sums, char *err, size_t len)
{
    ss_assert(n_flags <= TR_SYNC_MAX_FLAGS && flags && sums);
    tr_hogwild_snapshot(a->x, w, a->len);
    memcpy(a->m, a->x, a->len * sizeof(float));
    memcpy(a->m + a->len, flags, n_flags * sizeof(float));
    int rc = env->ring ? tr_allreduce_sum(env->ring, a->m, a->len + n_flags, err, len) : 0;
    if (rc)
        return rc;
    memcpy(sums, a->m + a->len, n_flags * sizeof(float));
    a->n_summed = env->ring ? tr_allreduce_size(env->ring) : env->n;
    s_div(a->m, a->len, (float)a->n_summed);
    return 0;
}

/* The relative distance |a - b| / |b| in double, in 4 partial sums of d^2
 * and of b^2 (element i to sum i % 4, added up at the end): one chain of
 * dependent adds per sum kept the shadow thread on it for about 30 us a
 * round of 25k floats. A statistic (sync_drift), not the model: the order
 * of its additions moves its last bits only. */
double tr_sync_rel_dist(const float *a, const float *b, size_t n)
{
    double d2[4] = {0, 0, 0, 0}, b2[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) {
            double d = (double)a[i + k] - (double)b[i + k];
            d2[k] += d * d;
            b2[k] += (double)b[i + k] * b[i + k];
        }
    for (; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        d2[0] += d * d;
        b2[0] += (double)b[i] * b[i];
    }
    double sd = (d2[0] + d2[1]) + (d2[2] + d2[3]), sb = (b2[0] + b2[1]) + (b2[2] + b2[3]);
    return sb > 0 ? sqrt(sd / sb) : 0;
}
