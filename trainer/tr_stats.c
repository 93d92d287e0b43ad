/* tr_stats.c - the trainer's figure table and the figures published for the
 * metrics and admin threads. */
#include "tr_stats.h"

#include <pthread.h>

#include "ss_assert.h"
#include "ss_cpu.h"
#include "ss_mem.h"

#define P TR_IN_PROGRESS
#define E TR_IN_EVAL
#define R TR_IN_RESULT
#define S TR_IN_STATS
static const struct ss_stat_def s_stat_defs[TR_N_STATS] = {
#define TR_DEF(key, prom, scale, kind, where, help) \
    {#key, prom, NULL, scale, SS_STAT_##kind, help, where},
    TR_STATS(TR_DEF)
#undef TR_DEF
};
#undef P
#undef E
#undef R
#undef S

struct tr_stats {
    uint32_t rank;                 /* the trainer's rank */
    size_t n_params;               /* its dense parameters */
    pthread_mutex_t lock;          /* guards the rest */
    double eps;                    /* examples/s over the last interval */
    uint64_t epochs;               /* epochs trained */
    const char *sync_name;         /* sync rules' name (borrowed, lives as long) */
    int have_sync;                 /* sync is set (shadow algorithms) */
    struct tr_shadow_stats sync;   /* sync figures */
    struct tr_eval_result eval;    /* the last evaluation of data.eval */
    int have_eval;                 /* eval is set */
    struct tr_eval_result valid;   /* the last validation */
    int have_valid;                /* valid is set */
    uint32_t evals;                /* evaluations so far */
    uint32_t ckpts;                /* periodic job checkpoints committed */
    uint32_t ckpt_failures;        /* periodic job checkpoints that failed */
    double ckpt_pause_s;           /* the last one's pause of the workers */
    double ckpt_pause_total_s;     /* every one's */
};

tr_stats_t *tr_stats_new(uint32_t rank, size_t n_params)
{
    tr_stats_t *self = ss_calloc(1, sizeof *self);
    self->rank = rank;
    self->n_params = n_params;
    self->sync_name = "none";
    ss_assert(pthread_mutex_init(&self->lock, NULL) == 0);
    return self;
}

void tr_stats_destroy(tr_stats_t **self_p)
{
    tr_stats_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_destroy(&self->lock);
    ss_free(self);
    *self_p = NULL;
}

static void s_lock(tr_stats_t *self)
{
    ss_assert(pthread_mutex_lock(&self->lock) == 0);
}

static void s_unlock(tr_stats_t *self)
{
    ss_assert(pthread_mutex_unlock(&self->lock) == 0);
}

void tr_stats_set_progress(tr_stats_t *self, double eps, uint64_t epochs,
                           const struct tr_shadow_stats *sync)
{
    s_lock(self);
    self->eps = eps;
    self->epochs = epochs;
    self->have_sync = sync != NULL;
    if (sync)
        self->sync = *sync;
    else
        self->sync = (struct tr_shadow_stats){0};
    s_unlock(self);
}

void tr_stats_set_sync_name(tr_stats_t *self, const char *name)
{
    ss_assert(name);
    s_lock(self);
    self->sync_name = name;
    s_unlock(self);
}

const char *tr_stats_sync_name(tr_stats_t *self)
{
    s_lock(self);
    const char *name = self->sync_name;
    s_unlock(self);
    return name;
}

void tr_stats_set_eval(tr_stats_t *self, int what, const struct tr_eval_result *r,
                       uint32_t n_evals)
{
    s_lock(self);
    if (what == TR_WORKER_VALID) {
        self->valid = *r;
        self->have_valid = 1;
    } else {
        self->eval = *r;
        self->have_eval = 1;
    }
    self->evals = n_evals;
    s_unlock(self);
}

void tr_stats_set_ckpts(tr_stats_t *self, uint32_t n_ckpts, uint32_t n_failures)
{
    s_lock(self);
    self->ckpts = n_ckpts;
    self->ckpt_failures = n_failures;
    s_unlock(self);
}

void tr_stats_set_ckpt_pause(tr_stats_t *self, double last_s, double total_s)
{
    s_lock(self);
    self->ckpt_pause_s = last_s;
    self->ckpt_pause_total_s = total_s;
    s_unlock(self);
}

void tr_stats_snap(tr_stats_t *self, const struct tr_worker_counts *now, struct ss_snap *sn,
                   struct ss_val *v)
{
    const uint64_t *c = now->c;
    struct tr_eval_result r;
    tr_eval_prog_result(&now->prog, &r);
    ss_snap_init(sn, s_stat_defs, TR_N_STATS, v);
    ss_snap_u64(sn, TR_S_rank, self->rank);
    ss_snap_u64(sn, TR_S_examples, c[TR_C_examples]);
    ss_snap_u64(sn, TR_S_batches, c[TR_C_batches]);
    ss_snap_num(sn, TR_S_train_ne, r.ne);
    ss_snap_num(sn, TR_S_train_logloss, r.logloss);
    ss_snap_u64(sn, TR_S_bad_lines, c[TR_C_bad_lines]);
    ss_snap_u64(sn, TR_S_lines, c[TR_C_lines]);
    ss_snap_u64(sn, TR_S_input_bytes, c[TR_C_bytes_read]);
    ss_snap_num(sn, TR_S_ps_wait_s, (double)c[TR_C_ps_wait_ns] / 1e9);
    ss_snap_num(sn, TR_S_compute_s, (double)c[TR_C_compute_ns] / 1e9);
    ss_snap_num(sn, TR_S_keys_unique_ratio,
                c[TR_C_keys_total] ? (double)c[TR_C_keys_unique] / (double)c[TR_C_keys_total]
                                   : 0);
    ss_snap_u64(sn, TR_S_pushes_over_capacity, c[TR_C_pushes_full]);
    ss_snap_u64(sn, TR_S_lookup_retries, c[TR_C_lookup_retries]);
    ss_snap_u64(sn, TR_S_pushes_unconfirmed, c[TR_C_pushes_unconfirmed]);
    ss_snap_u64(sn, TR_S_dense_params, self->n_params);
    ss_snap_num(sn, TR_S_cpu_s, ss_cpu_process_s());
    s_lock(self);
    ss_snap_num(sn, TR_S_eps, self->eps);
    ss_snap_u64(sn, TR_S_epochs_done, self->epochs);
    ss_snap_u64(sn, TR_S_evals, self->evals);
    ss_snap_str(sn, TR_S_sync_algorithm, self->sync_name);
    ss_snap_u64(sn, TR_S_job_checkpoints, self->ckpts);
    ss_snap_u64(sn, TR_S_job_checkpoint_failures, self->ckpt_failures);
    ss_snap_num(sn, TR_S_job_checkpoint_pause_s, self->ckpt_pause_s);
    ss_snap_num(sn, TR_S_job_checkpoint_pause_total_s, self->ckpt_pause_total_s);
    if (self->have_sync)
        tr_stats_snap_sync(sn, &self->sync);
    tr_stats_snap_eval(sn, self->have_eval ? &self->eval : NULL);
    tr_stats_snap_valid(sn, self->have_valid ? &self->valid : NULL);
    s_unlock(self);
}

void tr_stats_snap_sync(struct ss_snap *sn, const struct tr_shadow_stats *y)
{
    ss_snap_u64(sn, TR_S_sync_rounds, y->rounds);
    ss_snap_u64(sn, TR_S_sync_failed_rounds, y->failed_rounds);
    ss_snap_num(sn, TR_S_sync_rounds_per_min, y->rounds_per_min);
    ss_snap_num(sn, TR_S_sync_gap, y->gap_mean);
    ss_snap_num(sn, TR_S_sync_latency_p50_ms, y->latency_p50_ms);
    ss_snap_num(sn, TR_S_sync_latency_p99_ms, y->latency_p99_ms);
    ss_snap_num(sn, TR_S_sync_drift, y->drift);
    ss_snap_num(sn, TR_S_sync_cpu_s, y->cpu_s);
}

/* An evaluation ev (NULL: none) into the five figures ids (rows, logloss,
 * NE, AUC, calibration), replacing what sn held there. */
static void s_snap_scored(struct ss_snap *sn, const int ids[5], const struct tr_eval_result *ev)
{
    for (size_t i = 0; i < 5; i++)
        sn->v[ids[i]].type = SS_VAL_NONE;
    if (!ev)
        return;
    ss_snap_u64(sn, ids[0], ev->rows);
    ss_snap_num(sn, ids[1], ev->logloss);
    ss_snap_num(sn, ids[2], ev->ne);
    ss_snap_num(sn, ids[3], ev->auc);
    ss_snap_num(sn, ids[4], ev->calibration);
}

void tr_stats_snap_eval(struct ss_snap *sn, const struct tr_eval_result *ev)
{
    static const int ids[5] = {TR_S_eval_rows, TR_S_eval_logloss, TR_S_eval_ne, TR_S_eval_auc,
                               TR_S_eval_calibration};
    s_snap_scored(sn, ids, ev);
}

void tr_stats_snap_valid(struct ss_snap *sn, const struct tr_eval_result *ev)
{
    static const int ids[5] = {TR_S_valid_rows, TR_S_valid_logloss, TR_S_valid_ne,
                               TR_S_valid_auc, TR_S_valid_calibration};
    s_snap_scored(sn, ids, ev);
}

void tr_stats_write_row(FILE *f, const struct ss_snap *sn, unsigned mask)
{
    struct ss_jw w;
    ss_jw_begin(&w, 64u << 10);
    ss_jw_snap_where(&w, sn, mask);
    ss_jw_end(&w);
    fprintf(f, "%s\n", w.buf);
    fflush(f);
    ss_jw_fini(&w);
}

void tr_stats_list_metrics(FILE *out)
{
    static const char *const where[] = {"progress", "eval", "result", "stats"};
    char row[1024];
    for (size_t i = 0; i < TR_N_STATS; i++)
        fprintf(out, "%s\n", ss_stat_doc_row(&s_stat_defs[i], NULL, where, 4, row, sizeof row));
}
