/* t_shadow.h - small trainers for the unit tests of the shadow thread: a job
 * of n trainers on fresh loopback ports, a tiny model, and each trainer's
 * replica and tr_shadow (a real ring among threads of this process).
 * Include after cmocka.h: the helpers assert. */
#ifndef T_SHADOW_H
#define T_SHADOW_H

#include <stdio.h>
#include <string.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_mem.h"
#include "t.h"
#include "tr_model.h"
#include "tr_shadow.h"

/* Load into cfg a job for n trainers on fresh loopback ports with
 * sync.algorithm algo and one more --set (or NULL). Returns ss_cfg_load's
 * result, its message in err. */
static inline int t_shadow_cfg_load(struct ss_cfg *cfg, int n, const char *algo,
                                    const char *extra, char *err, size_t len)
{
    char tr[512], al[64];
    size_t off = (size_t)snprintf(tr, sizeof tr, "cluster.trainers=");
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(tr + off, sizeof tr - off, "%stcp://127.0.0.1:%d", i ? "," : "",
                                t_port());
    snprintf(al, sizeof al, "sync.algorithm=%s", algo);
    const char *sets[] = {tr, al, "model.embedding_dim=4", "model.bottom_mlp=8,4",
                          "model.top_mlp=8,1", "sync.timeout_ms=3000", extra};
    return ss_cfg_load(cfg, NULL, sets, extra ? 7 : 6, err, len);
}

/* The same, asserted loaded. Caller frees with ss_free(). */
static inline struct ss_cfg *t_shadow_cfg(int n, const char *algo, const char *extra)
{
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[512] = "";
    if (t_shadow_cfg_load(cfg, n, algo, extra, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    return cfg;
}

/* The model those jobs describe. Caller frees with tr_model_destroy(). */
static inline tr_model_t *t_shadow_model(void)
{
    struct tr_model_conf mc = {.n_dense = 13, .n_sparse = 26, .dim = 4, .n_bottom = 2,
                               .bottom = {8, 4}, .n_top = 2, .top = {8, 1}, .portable = 1};
    char err[256];
    tr_model_t *m = tr_model_new(&mc, err, sizeof err);
    assert_non_null(m);
    return m;
}

/* Set up trainer r of n: *cl (its membership), sh (its replica, w[i] =
 * init_value(i, r)) and *shadow (asserted made). Free with
 * t_shadow_trainer_fini(). */
static inline void t_shadow_trainer_init(struct tr_shared *sh, ss_cluster_t **cl,
                                         tr_shadow_t **shadow, const struct ss_cfg *cfg,
                                         const tr_model_t *model, void *zctx, int r, int n,
                                         float (*init_value)(size_t i, int r))
{
    struct ss_cluster_id me = {SS_CLUSTER_TRAINER, (uint32_t)r};
    size_t np = tr_model_n_params(model);
    char err[512] = "";
    sh->cfg = cfg;
    sh->cluster = *cl = ss_cluster_new(cfg, &me, NULL, err, sizeof err);
    if (!*cl)
        fail_msg("cluster: %s", err);
    sh->model = model;
    sh->w = ss_aligned_alloc(64, np * sizeof(float));
    for (size_t i = 0; i < np; i++)
        sh->w[i] = init_value(i, r);
    sh->zctx = zctx;
    sh->rank = (uint32_t)r;
    sh->n_ranks = (uint32_t)n;
    *shadow = tr_shadow_new(sh, model, err, sizeof err);
    if (!*shadow)
        fail_msg("tr_shadow_new: %s", err);
}

static inline void t_shadow_trainer_fini(struct tr_shared *sh, ss_cluster_t **cl,
                                         tr_shadow_t **shadow)
{
    tr_shadow_destroy(shadow);
    ss_cluster_destroy(cl);
    ss_free(sh->w);
    sh->w = NULL;
}

#endif
