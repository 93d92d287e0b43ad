/* tr_sync_ma.c - model averaging through the ring AllReduce (S-MA, FR-MA).
 *
 * Round: x = snapshot(w); m = allreduce_mean(x); w += m - x (delta
 * write-back: what the workers added during the round survives) or w = m
 * (overwrite). The last element of the allreduce carries each trainer's
 * "done" flag so every trainer sees the same final round. The mean and
 * "every trainer" are over the ring's members: after a trainer died and the
 * ring re-formed without it, over the survivors. */
#include <math.h>
#include <string.h>

#include "ss_err.h"
#include "ss_mem.h"
#include "tr_hogwild.h"
#include "tr_sync.h"
#include "tr_sync_util.h"

static int s_init(struct tr_sync_group *g, struct tr_sync_env *env, char *err, size_t len)
{
    g->state = tr_sync_avg_new(g->len);
    return 0;
}

static int s_round(struct tr_sync_group *g, struct tr_sync_env *env, float done, int final,
                   struct tr_sync_round *out, char *err, size_t len)
{
    struct tr_sync_avg *a = g->state;
    float *w = env->w + g->offset;
    int rc = tr_sync_avg_mean(a, env, w, &done, 1, &out->done_sum, err, len);
    if (rc)
        return rc;
    out->drift = tr_sync_rel_dist(a->x, a->m, g->len);
    out->ring_size = a->n_summed;
    if (out->done_sum > (float)a->n_summed - 0.5f || g->writeback == SS_WRITEBACK_OVERWRITE)
        tr_hogwild_overwrite(w, a->m, g->len);
    else
        tr_hogwild_add_diff(w, a->m, a->x, g->len);
    return 0;
}

static void s_destroy(struct tr_sync_group *g)
{
    tr_sync_avg_destroy((struct tr_sync_avg **)&g->state);
}

const struct tr_sync_algo tr_sync_ma = {.init = s_init, .round = s_round,
                                        .destroy = s_destroy};
