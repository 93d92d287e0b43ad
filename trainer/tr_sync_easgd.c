/* tr_sync_easgd.c - elastic averaging against the sync PSs (S-EASGD, FR-EASGD).
 *
 * The center c of the whole dense arena is split into contiguous ranges, one
 * per sync PS. Round: x = snapshot(w); for every sync PS holding part of the
 * group's component, ELASTIC(x piece, alpha) -- all in flight at once; the PS
 * does d = alpha (x - c), c += d and replies d; then w -= d in place. A sync
 * PS that answers "empty" (it restarted without a checkpoint) is re-seeded
 * with INIT from this replica and joins again next round. The final round
 * pulls the center and writes it into w; a shard found empty there is
 * offered this replica and pulled again until it is seeded (it waits for the
 * other trainers' offers, at most twice sync.timeout_ms), so its range of the
 * model is the center it now holds, never the zeros of a failed reply. A
 * sync PS that restarted first answers "HELLO required" (the connection then
 * says HELLO again, ss_net.h): that shard sits the round out, or in the final
 * round is pulled again.
 *
 * Every INIT names this trainer's rank (Header.sender): an empty sync PS
 * seeds itself with the mean of the replicas the trainers offer
 * (server/ps_sync.h), not with the first one; its reply says what it did
 * ("applied": seeded now, "collected": waits for the others, "waiting":
 * this rank's offer is in already, "kept": it was seeded).
 *
 * Between segments (tr_sync_easgd_restore, for a save that found a sync PS
 * empty: it died after the final round's PULL) the center is known: every
 * trainer pulled it into its replica. It is put back at once, with an INIT
 * without a sender, not offered: the other trainers wait at a barrier and
 * would offer nothing, and a mean with an offer made from a replica before
 * the final round would not be the center the saved model holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ss_auth.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_hogwild.h"
#include "tr_sync.h"
#include "tr_sync_util.h"

struct easgd_state {
    float *x;        /* snapshot of the component */
    float *d;        /* elastic difference returned by the PSs */
    float *seed;     /* scratch for INIT of a whole shard range */
    uint64_t reseeds;/* offers of this replica a restarted sync PS took */
};

/* What a sync PS did with an INIT (its reply text, see the top). */
enum { S_SEED_KEPT, S_SEED_APPLIED, S_SEED_COLLECTED, S_SEED_WAITING };

/* Poll interval of the final round while a shard waits for offers. */
#define S_SEED_POLL_MS 20

/* The part of shard k's range inside the group: [*lo, *hi) in arena floats. */
static int s_overlap(const struct tr_sync_group *g, const struct tr_sync_env *env, size_t k,
                     size_t *lo, size_t *hi)
{
    size_t a = env->shard_off[k], b = a + env->shard_len[k];
    *lo = a > g->offset ? a : g->offset;
    *hi = b < g->offset + g->len ? b : g->offset + g->len;
    return *lo < *hi;
}

/* The S_SEED_* of an INIT reply's text. */
static int s_seed_result(const char *text)
{
    if (!text)
        return S_SEED_KEPT;
    if (!strcmp(text, "applied"))
        return S_SEED_APPLIED;
    if (!strcmp(text, "collected"))
        return S_SEED_COLLECTED;
    return strcmp(text, "waiting") ? S_SEED_KEPT : S_SEED_WAITING;
}

/* INIT shard k with this replica's values of its whole range, as an offer of
 * this rank; *result gets what the PS did (S_SEED_*). */
static int s_seed(struct easgd_state *s, struct tr_sync_env *env, size_t k, int *result,
                  char *err, size_t len)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    size_t n = env->shard_len[k];
    tr_hogwild_snapshot(s->seed, env->w + env->shard_off[k], n);
    char token[SS_ADMIN_TOKEN_MAX];
    int rc = ss_admin_token_read(env->cfg->security.admin_token_file, token, err, len);
    if (rc)
        return rc;
    h.admin_token = token[0] ? token : NULL;
    h.type = MSG_TYPE__MSG_INIT;
    h.has_offset = h.has_length = h.has_sender = 1;
    h.offset = env->shard_off[k];
    h.length = n;
    h.sender = env->rank;
    struct ss_frame f = {s->seed, n * sizeof(float)};
    rc = ss_conn_call(env->sync_conns[k], &h, &f, 1, -1, &reply, err, len);
    if (rc == 0)
        *result = s_seed_result(reply.hdr->text);
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

/* Copy the n floats of a PULL or ELASTIC reply from shard k into dst.
 * Returns 0, or SS_E_PROTO with err when the reply holds another count
 * (ss_conn_wait checked the frame against the reply's own length only). */
static int s_copy_reply(const struct ss_msg *reply, struct tr_sync_env *env, size_t k, size_t n,
                        float *dst, char *err, size_t len)
{
    if (reply->hdr->length != n) {
        snprintf(err, len, "sync PS %s replied %llu floats, asked for %zu",
                 ss_conn_endpoint(env->sync_conns[k]), (unsigned long long)reply->hdr->length, n);
        return SS_E_PROTO;
    }
    memcpy(dst, zmq_msg_data((zmq_msg_t *)&reply->frames[0]), n * sizeof(float));
    return 0;
}

/* PULL the center of [lo, hi) (arena floats) from shard k into dst.
 * Returns 0, SS_E_EMPTY when the shard holds nothing yet, or an error. */
static int s_pull(struct tr_sync_env *env, size_t k, size_t lo, size_t hi, float *dst, char *err,
                  size_t len)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    h.type = MSG_TYPE__MSG_PULL;
    h.has_offset = h.has_length = 1;
    h.offset = lo;
    h.length = hi - lo;
    int rc = ss_conn_call(env->sync_conns[k], &h, NULL, 0, -1, &reply, err, len);
    if (rc == 0 || rc == SS_E_PEER) {
        if (rc == 0)
            rc = s_copy_reply(&reply, env, k, hi - lo, dst, err, len);
        else if (reply.hdr->status == SS_E_EMPTY)
            rc = SS_E_EMPTY;
        ss_msg_close(&reply);
    }
    return rc;
}

/* Sleep ms milliseconds. */
static void s_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Final round, shard k empty: offer this replica and PULL [lo, hi) into dst
 * until the shard is seeded (it waits for the other trainers' offers, at
 * most twice sync.timeout_ms; three times and a second bound the loop). */
static int s_pull_seeded(struct easgd_state *s, struct tr_sync_env *env, size_t k, size_t lo,
                         size_t hi, float *dst, char *err, size_t len)
{
    uint64_t end = ss_now_ms() + 3 * (uint64_t)env->cfg->sync_timeout_ms + 1000;
    int rc, result;
    while ((rc = s_pull(env, k, lo, hi, dst, err, len)) == SS_E_EMPTY && ss_now_ms() < end) {
        s_sleep_ms(S_SEED_POLL_MS);
        /* again: a PS restarted once more has lost the offer */
        if ((rc = s_seed(s, env, k, &result, err, len)) != 0)
            return rc;
    }
    if (rc == SS_E_EMPTY)
        snprintf(err, len, "sync PS %s still empty %lld ms after this trainer offered its "
                 "replica to re-seed it", ss_conn_endpoint(env->sync_conns[k]),
                 (long long)(3 * env->cfg->sync_timeout_ms + 1000));
    return rc;
}

/* Shard k answered "empty": offer it this replica (counted in out when it
 * took the offer). In the final round also PULL [lo, hi) again into dst
 * once it is seeded, so that the model gets the center the shard holds. */
static int s_reseed(struct easgd_state *s, struct tr_sync_env *env, size_t k, int final,
                    size_t lo, size_t hi, float *dst, struct tr_sync_round *out, char *err,
                    size_t len)
{
    int result = S_SEED_KEPT;
    int rc = s_seed(s, env, k, &result, err, len);
    uint64_t took = result == S_SEED_APPLIED || result == S_SEED_COLLECTED;
    s->reseeds += took;
    out->reseeds += took;
    /* one line per re-seed: the rounds while the PS waits for the others
     * answer "waiting" */
    if (rc == 0 && result != S_SEED_WAITING)
        SS_LOG(SS_LOG_WARN, "sync PS %s was empty (restarted?): %s%s",
               ss_conn_endpoint(env->sync_conns[k]),
               result == S_SEED_APPLIED ? "offered this replica, the last one it waited "
                                          "for: its center is the mean of the replicas"
               : result == S_SEED_COLLECTED ? "offered this replica; its center will be the "
                                              "mean of the trainers' replicas"
                                            : "the other trainers re-seeded it",
               final ? "; the output model takes that center for its range" : "");
    if (rc == 0 && final)
        rc = s_pull_seeded(s, env, k, lo, hi, dst, err, len);
    return rc;
}

int tr_sync_easgd_restore(struct tr_sync_env *env, size_t k, const float *model, int *applied,
                          char *err, size_t len)
{
    Header h = HEADER__INIT;
    struct ss_msg reply;
    char token[SS_ADMIN_TOKEN_MAX];
    *applied = 0;
    if (k >= env->n_sync) {
        snprintf(err, len, "sync PS %zu: the job has %zu", k, env->n_sync);
        return SS_E_INVAL;
    }
    int rc = ss_admin_token_read(env->cfg->security.admin_token_file, token, err, len);
    if (rc)
        return rc;
    h.admin_token = token[0] ? token : NULL;
    h.type = MSG_TYPE__MSG_INIT;
    h.has_offset = h.has_length = 1;  /* no sender: the PS takes these values at once */
    h.offset = env->shard_off[k];
    h.length = env->shard_len[k];
    struct ss_frame f = {model + env->shard_off[k], env->shard_len[k] * sizeof(float)};
    rc = ss_conn_call(env->sync_conns[k], &h, &f, 1, -1, &reply, err, len);
    if (rc == 0)
        *applied = s_seed_result(reply.hdr->text) == S_SEED_APPLIED;
    if (rc == 0 || rc == SS_E_PEER)
        ss_msg_close(&reply);
    return rc;
}

static int s_init(struct tr_sync_group *g, struct tr_sync_env *env, char *err, size_t len)
{
    struct easgd_state *s = ss_calloc(1, sizeof *s);
    size_t max_shard = 0;
    g->state = s;
    s->x = ss_malloc(g->len * sizeof(float) + 1);
    s->d = ss_malloc(g->len * sizeof(float) + 1);
    for (size_t k = 0; k < env->n_sync; k++)
        if (env->shard_len[k] > max_shard)
            max_shard = env->shard_len[k];
    s->seed = ss_malloc(max_shard * sizeof(float) + 1);
    for (size_t k = 0; k < env->n_sync; k++) {
        int result = S_SEED_KEPT, rc = s_seed(s, env, k, &result, err, len);
        if (rc)
            return rc;
        SS_LOG(SS_LOG_INFO, "sync PS %zu: center range [%llu, +%zu) %s", k,
               (unsigned long long)env->shard_off[k], env->shard_len[k],
               result == S_SEED_APPLIED ? "initialized (this replica's offer completed it)"
               : result == S_SEED_KEPT  ? "already set"
                                        : "offered this replica; the PS waits for the other "
                                          "trainers' to seed it with their mean");
    }
    return 0;
}

/* Send ELASTIC (or PULL when final) to every overlapping shard, then collect. */
static int s_exchange(struct tr_sync_group *g, struct tr_sync_env *env, int final,
                      struct tr_sync_round *out, char *err, size_t len)
{
    struct easgd_state *s = g->state;
    uint64_t ids[SS_CFG_MAX_LIST];
    int rc = 0;
    for (size_t k = 0; k < env->n_sync; k++) {
        size_t lo, hi;
        ids[k] = 0;
        if (!s_overlap(g, env, k, &lo, &hi))
            continue;
        Header h = HEADER__INIT;
        h.type = final ? MSG_TYPE__MSG_PULL : MSG_TYPE__MSG_ELASTIC;
        h.has_offset = h.has_length = 1;
        h.offset = lo;
        h.length = hi - lo;
        h.has_alpha = !final;
        h.alpha = (float)g->alpha;
        struct ss_frame f = {s->x + (lo - g->offset), (hi - lo) * sizeof(float)};
        if ((rc = ss_conn_send(env->sync_conns[k], &h, &f, final ? 0 : 1, &ids[k])) != 0) {
            snprintf(err, len, "cannot send to sync PS %s", ss_conn_endpoint(env->sync_conns[k]));
            return rc;
        }
    }
    for (size_t k = 0; k < env->n_sync; k++) {
        size_t lo, hi;
        struct ss_msg reply;
        if (!s_overlap(g, env, k, &lo, &hi))
            continue;
        int wrc = ss_conn_wait(env->sync_conns[k], ids[k], -1, &reply, err, len);
        float *dst = (final ? s->x : s->d) + (lo - g->offset);
        int reply_open = wrc == 0 || wrc == SS_E_PEER;
        int empty = wrc == SS_E_PEER && reply.hdr->status == SS_E_EMPTY;
        int restarted = wrc == SS_E_PEER && reply.hdr->status == SS_E_NOHELLO;
        if (wrc == 0)
            wrc = s_copy_reply(&reply, env, k, hi - lo, dst, err, len);
        if (wrc && !final)
            memset(dst, 0, (hi - lo) * sizeof(float));  /* this shard sits the round out */
        if (reply_open)
            ss_msg_close(&reply);
        if (restarted && !final)
            wrc = 0;  /* HELLO was said again: the next round finds it (empty or not) */
        if (restarted && final)
            empty = (wrc = s_pull(env, k, lo, hi, dst, err, len)) == SS_E_EMPTY;
        if (empty)
            wrc = s_reseed(s, env, k, final, lo, hi, dst, out, err, len);
        if (wrc && !rc)
            rc = wrc;
    }
    return rc;
}

static int s_round(struct tr_sync_group *g, struct tr_sync_env *env, float done, int final,
                   struct tr_sync_round *out, char *err, size_t len)
{
    struct easgd_state *s = g->state;
    float *w = env->w + g->offset;
    float inv_alpha = (float)(1.0 / g->alpha);
    tr_hogwild_snapshot(s->x, w, g->len);
    out->done_sum = done;
    int rc = s_exchange(g, env, final, out, err, len);
    if (final) {
        if (rc == 0)
            tr_hogwild_overwrite(w, s->x, g->len);  /* the center */
        return rc;
    }
    /* drift |x - c| / |c| with c = x - d / alpha (the center before this round) */
    double d2 = 0, c2 = 0;
    for (size_t i = 0; i < g->len; i++) {
        double dd = (double)s->d[i] * inv_alpha, c = (double)s->x[i] - dd;
        d2 += dd * dd;
        c2 += c * c;
    }
    out->drift = c2 > 0 ? sqrt(d2 / c2) : 0;
    tr_hogwild_sub(w, s->d, g->len);
    return rc;
}

static void s_destroy(struct tr_sync_group *g)
{
    struct easgd_state *s = g->state;
    ss_free(s->x);
    ss_free(s->d);
    ss_free(s->seed);
    ss_free(s);
    g->state = NULL;
}

const struct tr_sync_algo tr_sync_easgd = {.init = s_init, .round = s_round,
                                           .destroy = s_destroy};
