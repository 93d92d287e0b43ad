/* tr_sync_util.c - shared pieces of the ring rules. */
#include "tr_sync_util.h"

#include <math.h>
#include <string.h>

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
    float n = (float)a->n_summed;
    for (size_t i = 0; i < a->len; i++)
        a->m[i] /= n;
    return 0;
}

double tr_sync_rel_dist(const float *a, const float *b, size_t n)
{
    double d2 = 0, b2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        d2 += d * d;
        b2 += (double)b[i] * b[i];
    }
    return b2 > 0 ? sqrt(d2 / b2) : 0;
}
