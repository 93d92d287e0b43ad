/* tr_sync.c - the sync table's rules (ss_sync.h), group resolution, shared
 * resources. Static names here differ from those of common/ss_sync.c: the
 * toy-rule unit test compiles both files into itself. */
#include "tr_sync.h"

#include <stdio.h>
#include <string.h>

#include "ss_err.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"

/* Which rule runs each algorithm, by enum value: the sync table's rule
 * column (ss_sync.h); s-x and fr-x share the rule. */
#define TR_SYNC_RULE_OF(id, name, rule, fg, ring, sync_ps, lose) \
    [SS_SYNC_##id] = &tr_sync_##rule,
static const struct tr_sync_algo *const s_rules[SS_SYNC_N] = {SS_SYNC_TABLE(TR_SYNC_RULE_OF)};
#undef TR_SYNC_RULE_OF

const struct tr_sync_algo *tr_sync_algo_of(int algorithm)
{
    return algorithm > SS_SYNC_NONE && algorithm < SS_SYNC_N ? s_rules[algorithm] : NULL;
}

int tr_sync_is_foreground(int algorithm)
{
    const struct ss_sync_traits *t = ss_sync_traits_of(algorithm);
    return t ? t->foreground : 0;
}

/* Fill one group from an algorithm and (possibly negative = default) params. */
static void s_fill(struct tr_sync_group *g, const struct ss_cfg *cfg, uint32_t n, int algorithm,
                   double alpha, double eta, double zeta)
{
    g->algorithm = algorithm;
    g->algo = tr_sync_algo_of(algorithm);
    g->traits = ss_sync_traits_of(algorithm);
    g->alpha = alpha > 0 ? alpha : 0.9 / n;
    g->eta = eta >= 0 ? eta : 1.0 - 1.0 / n;
    g->zeta = zeta > 0 ? zeta : 1.0;
    g->nesterov = cfg->sync_nesterov;
    g->writeback = cfg->sync_writeback;
}

int tr_sync_groups(const struct ss_cfg *cfg, uint32_t n_trainers, size_t n_params,
                   int (*component_of)(const void *model, const char *name, size_t *off,
                                       size_t *len),
                   const void *model, struct tr_sync_group *groups, size_t max_groups,
                   char *err, size_t len)
{
    size_t n = 0;
    if (cfg->n_sync_groups == 0) {
        if (cfg->sync_algorithm == SS_SYNC_NONE)
            return 0;
        memset(&groups[0], 0, sizeof groups[0]);
        snprintf(groups[0].component, sizeof groups[0].component, "all");
        groups[0].offset = 0;
        groups[0].len = n_params;
        s_fill(&groups[0], cfg, n_trainers, cfg->sync_algorithm, cfg->sync_alpha,
               cfg->sync_block_momentum, cfg->sync_block_lr);
        return 1;
    }
    for (size_t i = 0; i < cfg->n_sync_groups && n < max_groups; i++) {
        const struct ss_sync_group *sg = &cfg->sync_groups[i];
        struct tr_sync_group *g = &groups[n];
        if (sg->algorithm == SS_SYNC_NONE)
            continue;
        memset(g, 0, sizeof *g);
        snprintf(g->component, sizeof g->component, "%s", sg->component);
        if (component_of(model, sg->component, &g->offset, &g->len) != 0) {
            snprintf(err, len, "sync.groups: unknown component '%s' (bottom or top)",
                     sg->component);
            return SS_E_CONFIG;
        }
        s_fill(g, cfg, n_trainers, sg->algorithm, sg->alpha, sg->block_momentum, sg->block_lr);
        n++;
    }
    /* foreground and background rules cannot be mixed: the pause is per trainer */
    for (size_t i = 1; i < n; i++)
        if (tr_sync_is_foreground(groups[i].algorithm) !=
            tr_sync_is_foreground(groups[0].algorithm)) {
            snprintf(err, len, "sync.groups: mix of fr-* and s-* algorithms is not supported");
            return SS_E_CONFIG;
        }
    return (int)n;
}

/* Contiguous split of [0, total) over n shards; shard k gets [off, off+len). */
static void s_split(size_t total, size_t n, size_t k, uint64_t *off, size_t *len)
{
    uint64_t l;
    ss_range_split(total, n, k, off, &l);   /* the split sync checkpoints record */
    *len = (size_t)l;
}

static int s_open_sync_ps(struct tr_sync_env *env, char *err, size_t len)
{
    const struct ss_cfg *cfg = env->cfg;
    struct ss_conn_opts o = {.max_message_bytes = cfg->max_message_bytes,
                             .timeout_ms = cfg->sync_timeout_ms,
                             .curve = env->curve,
                             .max_in_flight = cfg->security.max_in_flight};
    env->n_sync = ss_cluster_count(env->cluster, SS_CLUSTER_SYNC);
    env->sync_conns = ss_calloc(env->n_sync, sizeof *env->sync_conns);
    env->shard_off = ss_calloc(env->n_sync, sizeof *env->shard_off);
    env->shard_len = ss_calloc(env->n_sync, sizeof *env->shard_len);
    for (size_t k = 0; k < env->n_sync; k++) {
        char herr[512] = "";
        s_split(env->n_params, env->n_sync, k, &env->shard_off[k], &env->shard_len[k]);
        const char *ep = ss_cluster_endpoint(env->cluster, SS_CLUSTER_SYNC, k);
        uint64_t hash = ss_cluster_hello_hash(env->cluster, SS_CLUSTER_SYNC, k);
        if (ss_cluster_check_peer(env->cluster, SS_CLUSTER_SYNC, k, err, len) != 0)
            return SS_E_CONFIG;
        env->sync_conns[k] = ss_conn_new(env->zctx, ep, &o);
        if (!env->sync_conns[k] || ss_conn_hello(env->sync_conns[k], hash, herr, sizeof herr)) {
            snprintf(err, len, "sync PS %zu (%s): %s", k, ep,
                     herr[0] ? herr : "cannot connect");
            return SS_E_NET;
        }
    }
    return 0;
}

int tr_sync_env_open(struct tr_sync_env *env, const struct tr_sync_group *groups, size_t n,
                     char *err, size_t len)
{
    int ring = 0, ps = 0;
    const char *ps_user = NULL;    /* an algorithm that needs the sync PSs */
    for (size_t i = 0; i < n; i++) {
        ring |= groups[i].traits->ring;
        ps |= groups[i].traits->sync_ps;
        if (groups[i].traits->sync_ps && !ps_user)
            ps_user = groups[i].traits->name;
    }
    if (ps && ss_cluster_count(env->cluster, SS_CLUSTER_SYNC) == 0) {
        snprintf(err, len, "%s needs sync PSs: list them in cluster.sync", ps_user);
        return SS_E_CONFIG;
    }
    if (ps) {
        int rc = s_open_sync_ps(env, err, len);
        if (rc)
            return rc;
    }
    if (ring && !env->ring_borrowed) {
        const char *eps[SS_CFG_MAX_LIST];
        for (uint32_t i = 0; i < env->n; i++)
            eps[i] = ss_cluster_endpoint(env->cluster, SS_CLUSTER_TRAINER, i);
        struct tr_allreduce_conf ac = {env->rank, env->n, eps, env->cfg->sync_timeout_ms, 0,
                                       env->cfg->max_message_bytes, env->curve, env->cluster, 0};
        ac.allow_loss = ss_cfg_trainer_loss_allowed(env->cfg);
        env->ring = tr_allreduce_new(env->zctx, &ac, err, len);
        if (!env->ring)
            return SS_E_NET;
    }
    return 0;
}

void tr_sync_env_close(struct tr_sync_env *env)
{
    for (size_t k = 0; k < env->n_sync; k++)
        ss_conn_destroy(&env->sync_conns[k]);
    ss_free(env->sync_conns);
    ss_free(env->shard_off);
    ss_free(env->shard_len);
    env->sync_conns = NULL;
    env->shard_off = NULL;
    env->shard_len = NULL;
    env->n_sync = 0;
    if (env->ring_borrowed)
        env->ring = NULL;
    else
        tr_allreduce_destroy(&env->ring);
}

int tr_sync_init_groups(struct tr_sync_group *groups, size_t n, struct tr_sync_env *env,
                        char *err, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        int rc = groups[i].algo->init(&groups[i], env, err, len);
        if (rc)
            return rc;
    }
    return 0;
}

void tr_sync_destroy_groups(struct tr_sync_group *groups, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (groups[i].algo && groups[i].state)
            groups[i].algo->destroy(&groups[i]);
}
