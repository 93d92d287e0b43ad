/* tr_sync_bmuf.c - block-wise model-update filtering (S-BMUF, FR-BMUF).
 *
 * State, identical on every trainer: the global model g (starts at the
 * common initial model), the block momentum D (starts at 0) and the last
 * target t (starts at g). Round: m = allreduce_mean(snapshot(w));
 * D = eta*D + zeta*(m - t); g += D; t = g + eta*D (Nesterov) or g;
 * w += t - x (delta) or w = t. With eta = 0 and zeta = 1 this is exactly
 * model averaging. The round in which every trainer reports done writes the
 * average m; before that, a trainer that is done keeps restarting from the
 * target t like an idle replica, so it adds no progress of its own.
 *
 * The block's progress is measured from the point the replicas started it,
 * the previous target t, as in Chen and Huo's BMUF. DESIGN.md writes m - g,
 * which is the same without Nesterov; with Nesterov, m - g counts the
 * lookahead eta*D again every round and D grows by 2*eta per round (the
 * training diverged within a few hundred back-to-back rounds).
 *
 * Keeping the state identical: a ring round can complete on some trainers
 * and time out on others (a deadline passing just before the last piece),
 * and only the former apply its update. So the state is changed only from
 * values every trainer that completes the round has bit for bit (the
 * allreduce result), and each trainer adds a flag to the allreduce: 1 when
 * its state is the common one (its previous round completed here; every
 * trainer starts in sync, from the same initial model). When the flags of a
 * completed round sum to N, every trainer completed the same previous round
 * from the same state, so the states are still equal and the rule applies.
 * Otherwise some trainer missed an update, and every trainer that completes
 * the round restarts from its average: g = t = m, D = 0 (the block momentum
 * is lost once; the round is an MA round). A trainer whose round fails keeps
 * its state and replica and reports 0 next time. Cost: one float a round.
 * (Carrying g and D in the allreduce would keep the momentum, at three times
 * the traffic.)
 *
 * A trainer that dies: the ring re-forms without it (tr_allreduce.c) and
 * the rounds go on among the survivors, N being their count. The round the
 * death interrupted failed on every survivor, or completed on some of them
 * (the dead one had sent its last pieces): either way the flags of the next
 * completed round do not sum to the survivors' count unless every survivor
 * applied the same last update, so g, D and t stay identical on the
 * survivors, or restart together from their average. */
#include <string.h>

#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "tr_hogwild.h"
#include "tr_sync.h"
#include "tr_sync_util.h"

struct bmuf_state {
    struct tr_sync_avg *avg;   /* snapshot and mean buffers */
    float *g;                  /* global model */
    float *delta;              /* block momentum */
    float *t;                  /* target of the last round: where blocks start */
    int in_sync;               /* g, delta, t equal every trainer's (last round completed) */
    int restarting;            /* the last completed round was a restart (logs once) */
};

static int s_init(struct tr_sync_group *g, struct tr_sync_env *env, char *err, size_t len)
{
    struct bmuf_state *s = ss_calloc(1, sizeof *s);
    s->avg = tr_sync_avg_new(g->len);
    s->g = ss_malloc(g->len * sizeof(float) + 1);
    s->delta = ss_calloc(g->len + 1, sizeof(float));
    s->t = ss_malloc(g->len * sizeof(float) + 1);
    tr_hogwild_snapshot(s->g, env->w + g->offset, g->len);  /* the common initial model */
    memcpy(s->t, s->g, g->len * sizeof(float));
    s->in_sync = 1;
    g->state = s;
    return 0;
}

/* The BMUF rule from m, on state that is equal on every trainer. */
static void s_update(struct bmuf_state *s, const struct tr_sync_group *g, const float *m)
{
    float eta = (float)g->eta, zeta = (float)g->zeta;
    for (size_t i = 0; i < g->len; i++) {
        s->delta[i] = eta * s->delta[i] + zeta * (m[i] - s->t[i]);
        s->g[i] += s->delta[i];
        s->t[i] = g->nesterov ? s->g[i] + eta * s->delta[i] : s->g[i];
    }
}

/* Some trainer missed an update: start again from the average m. */
static void s_restart(struct bmuf_state *s, const struct tr_sync_group *g, const float *m,
                      float in_sync_sum, uint32_t n)
{
    memcpy(s->g, m, g->len * sizeof(float));
    memcpy(s->t, m, g->len * sizeof(float));
    memset(s->delta, 0, g->len * sizeof(float));
    if (!s->restarting)
        SS_LOG(SS_LOG_WARN, "bmuf %s: %.0f of %u trainers completed the previous round; "
               "restarting from the average (block momentum reset)", g->component,
               (double)in_sync_sum, n);
}

static int s_round(struct tr_sync_group *g, struct tr_sync_env *env, float done, int final,
                   struct tr_sync_round *out, char *err, size_t len)
{
    struct bmuf_state *s = g->state;
    float *w = env->w + g->offset;
    float flags[2] = {done, s->in_sync ? 1.0f : 0.0f}, sums[2];
    int rc = tr_sync_avg_mean(s->avg, env, w, flags, 2, sums, err, len);
    if (rc) {
        s->in_sync = 0;       /* the others may have applied this round */
        return rc;
    }
    const float *m = s->avg->m, *x = s->avg->x;
    uint32_t n = s->avg->n_summed;
    int all_in_sync = sums[1] > (float)n - 0.5f;
    out->done_sum = sums[0];
    out->ring_size = n;
    out->drift = tr_sync_rel_dist(x, m, g->len);
    if (all_in_sync)
        s_update(s, g, m);
    else
        s_restart(s, g, m, sums[1], n);
    s->restarting = !all_in_sync;
    s->in_sync = 1;
    if (out->done_sum > (float)n - 0.5f)
        tr_hogwild_overwrite(w, m, g->len);   /* every trainer is done: the average */
    else if (g->writeback == SS_WRITEBACK_OVERWRITE)
        tr_hogwild_overwrite(w, s->t, g->len);
    else
        tr_hogwild_add_diff(w, s->t, x, g->len);
    return 0;
}

static void s_destroy(struct tr_sync_group *g)
{
    struct bmuf_state *s = g->state;
    tr_sync_avg_destroy(&s->avg);
    ss_free(s->g);
    ss_free(s->delta);
    ss_free(s->t);
    ss_free(s);
    g->state = NULL;
}

/* Job checkpoint: g, D and t, taken after the final round of a segment (every
 * trainer completed it, so the state is the common one). */
static size_t s_state_len(const struct tr_sync_group *g)
{
    return 3 * g->len;
}

static void s_state_get(const struct tr_sync_group *g, float *out)
{
    const struct bmuf_state *s = g->state;
    memcpy(out, s->g, g->len * sizeof(float));
    memcpy(out + g->len, s->delta, g->len * sizeof(float));
    memcpy(out + 2 * g->len, s->t, g->len * sizeof(float));
}

static void s_state_set(struct tr_sync_group *g, const float *in)
{
    struct bmuf_state *s = g->state;
    memcpy(s->g, in, g->len * sizeof(float));
    memcpy(s->delta, in + g->len, g->len * sizeof(float));
    memcpy(s->t, in + 2 * g->len, g->len * sizeof(float));
    s->in_sync = 1;  /* every trainer restores the state of the same round */
    s->restarting = 0;
}

const struct tr_sync_algo tr_sync_bmuf = {.init = s_init, .round = s_round,
                                          .destroy = s_destroy, .state_len = s_state_len,
                                          .state_get = s_state_get, .state_set = s_state_set};
