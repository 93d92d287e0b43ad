/* tr_sync_copy0.c - a toy sync rule: every trainer's replica becomes rank 0's.
 *
 * Round: x = snapshot(w) on rank 0, zeros elsewhere, plus this trainer's done
 * flag; x = allreduce_sum(x) (rank 0's replica, then the count of trainers
 * done); w = x. It keeps one number, the rounds it ran, as its checkpoint
 * state. Written as a rule in trainer/ is (docs/howto-sync-rule.md), so that
 * test_tr_sync_toy.c can prove that a rule is this one file plus one row of
 * the sync table (the test holds the row). Not a rule anyone should train
 * with: rank 0 alone decides, and the ring must keep it (lose_trainer 0). */
#include <string.h>

#include "ss_mem.h"
#include "tr_allreduce.h"
#include "tr_hogwild.h"
#include "tr_sync.h"

/* The rule's state between rounds. */
struct copy0_state {
    float *x;          /* rank 0's replica, then the done count: len + 1 floats */
    uint64_t rounds;   /* rounds run (plus what a job checkpoint restored) */
};

static int s_init(struct tr_sync_group *g, struct tr_sync_env *env, char *err, size_t len)
{
    struct copy0_state *s = ss_calloc(1, sizeof *s);
    s->x = ss_malloc((g->len + 1) * sizeof(float));
    g->state = s;
    return 0;
}

static int s_round(struct tr_sync_group *g, struct tr_sync_env *env, float done, int final,
                   struct tr_sync_round *out, char *err, size_t len)
{
    struct copy0_state *s = g->state;
    float *w = env->w + g->offset;
    if (env->rank == 0)
        tr_hogwild_snapshot(s->x, w, g->len);
    else
        memset(s->x, 0, g->len * sizeof(float));
    s->x[g->len] = done;
    int rc = env->ring ? tr_allreduce_sum(env->ring, s->x, g->len + 1, err, len) : 0;
    if (rc)
        return rc;
    /* ring rules report the done count and the ring's size: the shadow
     * thread's final round is the one in which every trainer is done */
    out->done_sum = s->x[g->len];
    out->ring_size = env->ring ? tr_allreduce_size(env->ring) : env->n;
    tr_hogwild_overwrite(w, s->x, g->len);
    s->rounds++;
    return 0;
}

static void s_destroy(struct tr_sync_group *g)
{
    struct copy0_state *s = g->state;
    ss_free(s->x);
    ss_free(s);
    g->state = NULL;
}

static size_t s_state_len(const struct tr_sync_group *g)
{
    return 1;
}

static void s_state_get(const struct tr_sync_group *g, float *out)
{
    const struct copy0_state *s = g->state;
    out[0] = (float)s->rounds;
}

static void s_state_set(struct tr_sync_group *g, const float *in)
{
    struct copy0_state *s = g->state;
    s->rounds = (uint64_t)in[0];
}

const struct tr_sync_algo tr_sync_copy0 = {.init = s_init, .round = s_round,
                                           .destroy = s_destroy, .state_len = s_state_len,
                                           .state_get = s_state_get, .state_set = s_state_set};
