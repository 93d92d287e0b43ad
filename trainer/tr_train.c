/* tr_train.c - a trainer: dense replica, workers, progress, eval, save. */
#include "tr_train.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_auth.h"
#include "ss_cpu.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_net.h"
#include "ss_stats.h"
#include "ss_time.h"
#include "tr_jobckpt.h"
#include "tr_model.h"
#include "tr_mfile.h"
#include "tr_predict.h"
#include "tr_reader.h"
#include "tr_shadow.h"
#include "tr_worker.h"

#define TR_DENSE_MAGIC "SSDENSE1"

/* Where a trainer figure appears (the row's `where` bits; docs/metrics.md). */
enum {
    TR_IN_PROGRESS = 1u << 0,  /* a progress row of metrics-trainer-R.jsonl */
    TR_IN_EVAL = 1u << 1,      /* an evaluation row of metrics-trainer-R.jsonl */
    TR_IN_RESULT = 1u << 2,    /* result-trainer-R.json */
    TR_IN_STATS = 1u << 3,     /* the admin endpoint's STATS reply (shadow-ctl stats) */
};
#define P TR_IN_PROGRESS
#define E TR_IN_EVAL
#define R TR_IN_RESULT
#define S TR_IN_STATS

/* Every figure of a trainer, once: JSON key, Prometheus name (NULL: JSON
 * only), Prometheus scale (0: 1), kind, where, help. The order is the order
 * of the JSON fields: scripts/shadow-plot reads t, eps, train_ne in that
 * order and sync_rounds_per_min right before sync_gap in progress rows;
 * test_train_output.sh "examples" right before "eval_ne" in eval rows. */
#define TR_STATS(X)                                                                        \
    X(rank, NULL, 0, INFO, P | E | R | S, "trainer rank")                                \
    X(t, NULL, 0, INFO, P | E, "seconds since training started")                         \
    X(epoch, NULL, 0, INFO, E, "epochs trained by the model scored")                      \
    X(examples, "shadowsync_trainer_examples_total", 0, COUNTER, P | E | R | S,           \
      "examples trained")                                                                 \
    X(batches, "shadowsync_trainer_batches_total", 0, COUNTER, S, "batches trained")     \
    X(eps, "shadowsync_trainer_examples_per_second", 0, GAUGE, P | R | S,                 \
      "examples/s: over the last progress interval (result: over the training time)")    \
    X(wall_s, NULL, 0, INFO, R, "training time: the workers' segments")                  \
    X(train_ne, "shadowsync_trainer_train_ne", 0, GAUGE, P | R | S,                       \
      "progressive normalized entropy of training")                                      \
    X(train_logloss, NULL, 0, GAUGE, P | S, "progressive logloss of training")           \
    X(bad_lines, "shadowsync_trainer_bad_lines_total", 0, COUNTER, P | R | S,             \
      "input lines skipped as bad")                                                       \
    X(lines, NULL, 0, INFO, S, "input lines read (good, bad and headers)")               \
    X(input_bytes, "shadowsync_trainer_input_bytes_total", 0, COUNTER, S,                 \
      "input bytes read")                                                                 \
    X(ps_wait_s, "shadowsync_trainer_ps_wait_seconds_total", 0, COUNTER, P | R | S,       \
      "workers' time waiting for embedding PS replies")                                  \
    X(compute_s, "shadowsync_trainer_compute_seconds_total", 0, COUNTER, P | R | S,       \
      "workers' time in forward, backward and update")                                   \
    X(keys_unique_ratio, NULL, 0, INFO, R | S,                                            \
      "keys looked up after de-duplication per batch / before")                          \
    X(pushes_over_capacity, "shadowsync_trainer_capacity_refusals_total", 0, COUNTER,     \
      R | S, "pushes a full PS refused in part (tables.capacity_rows)")                  \
    X(lookup_retries, "shadowsync_trainer_lookup_retries_total", 0, COUNTER, R | S,       \
      "lookups sent again to a PS that did not answer")                                  \
    X(pushes_unconfirmed, "shadowsync_trainer_pushes_unconfirmed_total", 0, COUNTER,      \
      R | S, "pushes a PS never acknowledged")                                           \
    X(epochs_done, NULL, 0, INFO, R | S, "epochs trained")                               \
    X(evals, "shadowsync_trainer_evaluations_total", 0, COUNTER, R | S,                   \
      "evaluations of the output model")                                                 \
    X(stopped_early, NULL, 0, INFO, R, "trainer.patience ended the run")                 \
    X(sync_algorithm, NULL, 0, INFO, R | S, "sync.algorithm (or the groups')")           \
    X(output_model, NULL, 0, INFO, R, "center, average or replica")                      \
    X(model_saved, NULL, 0, INFO, R, "the output model was saved")                       \
    X(ring_size, NULL, 0, INFO, R, "trainers in the ring at the end")                    \
    X(ring_changes, NULL, 0, INFO, R, "times the ring re-formed")                        \
    X(ring_reform_ms, NULL, 0, INFO, R, "time the ring spent re-forming")                \
    X(ring_handshakes_failed, NULL, 0, INFO, R, "CURVE: failed handshakes at our ring")  \
    X(sync_rounds, "shadowsync_trainer_sync_rounds_total", 0, COUNTER, P | R | S,         \
      "shadow sync rounds done")                                                          \
    X(sync_failed_rounds, "shadowsync_trainer_sync_failed_rounds_total", 0, COUNTER,      \
      R | S, "sync rounds that failed")                                                   \
    X(sync_reseeds, NULL, 0, INFO, R, "sync PS shards re-seeded")                        \
    X(sync_final_ok, NULL, 0, INFO, R, "the final sync completed")                       \
    X(sync_rounds_per_min, "shadowsync_trainer_sync_rounds_per_minute", 0, GAUGE,         \
      P | R | S, "sync rounds per minute of training")                                   \
    X(sync_gap, "shadowsync_trainer_sync_gap", 0, GAUGE, P | R | S,                       \
      "mean worker iterations between rounds")                                           \
    X(sync_latency_p50_ms, "shadowsync_trainer_sync_latency_p50_seconds", 1e-3, GAUGE,    \
      P | R | S, "median sync round time")                                               \
    X(sync_latency_p99_ms, "shadowsync_trainer_sync_latency_p99_seconds", 1e-3, GAUGE,    \
      P | R | S, "99th percentile sync round time")                                      \
    X(sync_drift, "shadowsync_trainer_sync_drift", 0, GAUGE, P | R | S,                   \
      "relative distance of the replica from the synced model")                          \
    X(sync_cpu_s, "shadowsync_trainer_sync_cpu_seconds_total", 0, COUNTER, R | S,         \
      "CPU time of the shadow thread's rounds")                                          \
    X(sync_ring_bytes_sent, NULL, 0, INFO, R, "payload bytes sent on the ring")          \
    X(sync_ring_bytes_received, NULL, 0, INFO, R, "payload bytes accepted from the ring") \
    X(best_epoch, NULL, 0, INFO, R, "epochs trained by the output model")                \
    X(eval_rows, NULL, 0, INFO, R | S, "rows of the last evaluation")                    \
    X(eval_ne, "shadowsync_trainer_eval_ne", 0, GAUGE, E | R | S,                         \
      "normalized entropy of the evaluation")                                            \
    X(eval_auc, "shadowsync_trainer_eval_auc", 0, GAUGE, E | R | S, "AUC of the evaluation") \
    X(eval_logloss, NULL, 0, GAUGE, E | R | S, "logloss of the evaluation")              \
    X(eval_calibration, NULL, 0, INFO, R | S, "mean prediction / mean label")            \
    X(valid_rows, NULL, 0, INFO, R | S, "rows of the last validation")                    \
    X(valid_ne, "shadowsync_trainer_valid_ne", 0, GAUGE, E | R | S,                       \
      "normalized entropy of the validation split (result: of the kept model)")          \
    X(valid_auc, NULL, 0, GAUGE, E | R | S, "AUC of the validation split")               \
    X(valid_logloss, NULL, 0, GAUGE, E | R | S, "logloss of the validation split")       \
    X(valid_calibration, NULL, 0, INFO, R | S, "validation: mean prediction / mean label") \
    X(selected_on, NULL, 0, INFO, R,                                                      \
      "what keep-best and patience read: data.valid, data.valid_fraction or data.eval")  \
    X(eval_scorings, NULL, 0, INFO, R, "times data.eval was scored")                     \
    X(best, NULL, 0, INFO, E, "the best model so far (kept)")                             \
    X(cpu_s, "shadowsync_trainer_cpu_seconds", 0, GAUGE, R | S,                           \
      "CPU time of the trainer process")                                                 \
    X(cpu_workers_s, NULL, 0, INFO, R, "CPU time of the training workers")               \
    X(cpu_shadow_s, NULL, 0, INFO, R, "CPU time of the shadow thread's rounds")          \
    X(cpu_zmq_io_s, NULL, 0, INFO, R, "CPU time of the ZeroMQ I/O thread")               \
    X(cpu_other_s, NULL, 0, INFO, R, "CPU time of the rest (main, evaluation)")          \
    X(dense_params, NULL, 0, INFO, R | S, "dense parameters of the model")                \
    X(job_checkpoints, "shadowsync_trainer_job_checkpoints_total", 0, COUNTER, R | S,     \
      "periodic job checkpoints taken (job.checkpoint_interval_s)")                      \
    X(job_checkpoint_failures, "shadowsync_trainer_job_checkpoint_failures_total", 0,     \
      COUNTER, R | S, "periodic job checkpoints that failed (the previous one is kept)")  \
    X(job_checkpoint_pause_s, "shadowsync_trainer_job_checkpoint_last_pause_seconds", 0,  \
      GAUGE, R | S, "training time the last periodic job checkpoint took from the workers") \
    X(job_checkpoint_pause_total_s, "shadowsync_trainer_job_checkpoint_pause_seconds_total", \
      0, COUNTER, R | S, "training time every periodic job checkpoint stopped the workers")

enum {
#define TR_ID(key, prom, scale, kind, where, help) TR_S_##key,
    TR_STATS(TR_ID)
#undef TR_ID
    TR_N_STATS
};

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

struct tr_train {
    const struct ss_cfg *cfg;      /* borrowed */
    const ss_cluster_t *cluster;   /* borrowed: endpoints, identity, shard map */
    uint32_t rank;                 /* this trainer */
    tr_model_t *model;             /* shape */
    size_t n_params;               /* floats in w */
    struct tr_shared shared;       /* what workers share */
    struct ss_curve curve;         /* CURVE keys: server (allreduce) and client */
    ss_auth_t *auth;               /* ZAP handler of the allreduce ROUTER, CURVE only */
    int64_t input_bytes;           /* this trainer's share of the input, all epochs */
    double wall_s;                 /* training time: workers' segments, no barrier or eval */
    struct tr_worker_counts total; /* summed at the end of training */
    struct tr_eval_result train;   /* progressive train metrics at the end */
    tr_shadow_t *shadow;           /* dense sync, NULL for sync none */
    struct tr_shadow_stats sync;   /* sync figures at the end */
    tr_allreduce_t *ring;          /* all trainers: barriers (and the ring rules) */
    FILE *jsonl;                   /* metrics-trainer-R.jsonl, or NULL */
    uint64_t t0_ns;                /* training clock start */
    uint64_t train_ns;             /* time the workers ran, summed over segments */
    /* the output model and its evaluation */
    const char *model_dir;         /* borrowed: where the output model goes */
    int scores;                    /* this trainer scores the output model */
    int have_eval;                 /* best holds an evaluation */
    struct tr_eval_result best;    /* what chose the model in model_dir: its validation
                                    * (has_valid), else its eval */
    int has_valid;                 /* a validation split is set (data.valid or
                                    * data.valid_fraction): selection reads it */
    int selects;                   /* the run scores between segments and keeps the best */
    int have_test;                 /* test holds an evaluation (has_valid) */
    struct tr_eval_result test;    /* data.eval of the model in model_dir (has_valid) */
    uint32_t n_test_scorings;      /* times data.eval was scored during the run */
    float *w_live;                 /* model.dense_average: the model training goes on
                                    * from while w holds the average being scored */
    int averaged;                  /* w holds the average, w_live the model */
    uint64_t best_epoch;           /* epochs trained by the best model */
    uint64_t epochs_done;          /* epochs trained */
    uint32_t n_evals;              /* evaluations during the run */
    uint32_t evals_since_best;     /* evaluations that did not improve */
    int stopped_early;             /* trainer.patience ended the run */
    int saved;                     /* model_dir holds the output model */
    /* job checkpoint and resume (tr_jobckpt.h) */
    volatile sig_atomic_t *ckpt_req; /* borrowed: set (SIGTERM) to stop with a job checkpoint */
    const char *jobckpt_dir;       /* borrowed: where the job checkpoint goes */
    int draining;                  /* the workers were told to stop at a batch boundary */
    int checkpointed;              /* the run ended with a job checkpoint */
    int stopped_kept;              /* it ended on SIGTERM without one: trainers lost */
    uint64_t drain_ns;             /* when draining was set */
    uint64_t ckpt_interval_ns;     /* job.checkpoint_interval_s, 0: none */
    uint64_t ckpt_next_ns;         /* when the next periodic job checkpoint is due, 0: none */
    uint64_t ckpt_last_id;         /* save id of the last job checkpoint committed, 0: none */
    uint32_t n_ckpts;              /* periodic job checkpoints committed */
    uint32_t n_ckpt_failures;      /* periodic job checkpoints that failed */
    double ckpt_pause_s;           /* the last one's pause of the workers */
    int pause_open;                /* a committed periodic one whose pause has not ended:
                                    * its workers are not all training again */
    uint64_t pause_stop_ns;        /* its workers' stop (the drain), */
    uint64_t pause_save_ns;        /* the start of its save, */
    uint64_t pause_commit_ns;      /* its commit */
    uint64_t pause_examples;       /* its examples (all trainers) */
    double ckpt_pause_total_s;     /* every one's */
    int resumed;                   /* resume holds the state to go on from */
    struct tr_jobckpt resume;      /* the state read by tr_train_resume() */
    uint64_t resumed_examples;     /* examples this trainer had trained before */
    int64_t train_bytes;           /* size of data.train (a resume checks it is the same) */
    ss_ctrs_t *ctrs;               /* the training workers' counter slots (tr_worker.h) */
    /* what the metrics and admin threads read besides ctrs: refreshed with
     * each progress line and evaluation (tr_train_metrics, tr_train_stats_json) */
    pthread_mutex_t pub_lock;      /* guards pub_* */
    double pub_eps;                /* examples/s over the last interval */
    uint64_t pub_epochs;           /* epochs trained */
    const char *pub_sync_name;     /* sync rules' name (the shadow's, lives as long) */
    int pub_have_sync;             /* pub_sync is set (shadow algorithms) */
    struct tr_shadow_stats pub_sync; /* sync figures */
    struct tr_eval_result pub_eval;  /* the last evaluation of data.eval */
    int pub_have_eval;             /* pub_eval is set */
    struct tr_eval_result pub_valid; /* the last validation */
    int pub_have_valid;            /* pub_valid is set */
    uint32_t pub_evals;            /* evaluations so far */
    uint32_t pub_ckpts;            /* n_ckpts */
    uint32_t pub_ckpt_failures;    /* n_ckpt_failures */
    double pub_ckpt_pause_s;       /* ckpt_pause_s */
    double pub_ckpt_pause_total_s; /* ckpt_pause_total_s */
    uint64_t last_print_ns;        /* last progress line on stderr */
};

static uint64_t s_shape_hash(const tr_train_t *self);
static uint64_t s_new_save_id(void);
static void s_snap_eval(struct ss_snap *sn, const struct tr_eval_result *ev);
static void s_snap_valid(struct ss_snap *sn, const struct tr_eval_result *ev);

/* The name of the input what scores (TR_WORKER_EVAL or TR_WORKER_VALID), for
 * messages and the result's selected_on. */
static const char *s_input_name(const struct ss_cfg *cfg, int what)
{
    if (what == TR_WORKER_EVAL)
        return "data.eval";
    return cfg->valid_fraction > 0 ? "data.valid_fraction" : "data.valid";
}

/* The model's shape from the job: one home, shared with the model file
 * (export and scorer must build the same shape). */
static int s_model_conf(const struct ss_cfg *cfg, struct tr_model_conf *mc)
{
    return tr_mfile_model_conf(cfg, mc);
}

/* This trainer's own key must be let in: listed in security.authorized or
 * security.admin_keys (the PSs and the other trainers check), and an admin
 * key when admin_keys is set (trainers send INIT and CHECKPOINT). */
static int s_check_own_key(const tr_train_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    const char *key = self->curve.client_public;
    int admin = sec->admin_keys[0] ? ss_auth_list_has(sec->admin_keys, "security.admin_keys",
                                                      key, err, len) : 1;
    int listed = admin > 0 && sec->admin_keys[0] ? 1
                 : ss_auth_list_has(sec->authorized, "security.authorized", key, err, len);
    if (admin < 0 || listed < 0)
        return SS_E_CONFIG;
    if (!listed || !admin) {
        snprintf(err, len, "this trainer's key %s (security.client_key %s) is not in %s: add "
                 "the line of its .pub file there%s", key, sec->client_key,
                 !admin ? "security.admin_keys" : "security.authorized",
                 !admin ? " (trainers send INIT and CHECKPOINT)" : "");
        return SS_E_CONFIG;
    }
    return 0;
}

/* CURVE keys (the trainer is a client of the PSs and of its ring neighbour,
 * and the server of its allreduce endpoint) and the ZAP handler. */
static int s_secure(tr_train_t *self, char *err, size_t len)
{
    const struct ss_security_cfg *sec = &self->cfg->security;
    int rc = ss_curve_load(&self->curve, sec, SS_CURVE_SERVER | SS_CURVE_CLIENT, err, len);
    if (rc || !self->curve.on)
        return rc;
    self->shared.curve = &self->curve;
    if ((rc = s_check_own_key(self, err, len)) != 0)
        return rc;
    self->auth = ss_auth_new(self->shared.zctx, sec, err, len);
    return self->auth ? 0 : SS_E_CONFIG;
}

/* ZeroMQ I/O threads of the trainer's context: trainer.io_threads, or with
 * 0 (auto) one per 4 workers, at least 1 (one I/O thread carries the
 * sockets of about 4 workers: docs/scaling.md). */
static int s_io_threads(const struct ss_cfg *cfg)
{
    if (cfg->io_threads > 0)
        return (int)cfg->io_threads;
    return (int)((cfg->workers + 3) / 4);
}

/* Every embedding PS and trainer the trainer may connect to: its host name
 * resolves (the sync PSs are checked where EASGD connects to them). */
static int s_check_peers(const ss_cluster_t *cluster, char *err, size_t len)
{
    static const int roles[] = {SS_CLUSTER_EMBEDDING, SS_CLUSTER_TRAINER};
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < ss_cluster_count(cluster, roles[r]); i++) {
            int rc = ss_cluster_check_peer(cluster, roles[r], i, err, len);
            if (rc)
                return rc;
        }
    return 0;
}

tr_train_t *tr_train_new(const struct ss_cfg *cfg, const ss_cluster_t *cluster, char *err,
                         size_t err_len)
{
    struct tr_model_conf mc;
    const struct ss_cluster_id *me = ss_cluster_me(cluster);
    ss_assert(me && me->role == SS_CLUSTER_TRAINER);
    if (s_check_peers(cluster, err, err_len) != 0)
        return NULL;
    tr_train_t *self = ss_calloc(1, sizeof *self);
    uint32_t rank = me->index;
    self->cfg = cfg;
    self->cluster = cluster;
    self->rank = rank;
    if (s_model_conf(cfg, &mc) != 0 || !(self->model = tr_model_new(&mc, err, err_len))) {
        if (!self->model && !err[0])
            snprintf(err, err_len, "model: too many layers");
        ss_free(self);
        return NULL;
    }
    self->n_params = tr_model_n_params(self->model);
    pthread_mutex_init(&self->pub_lock, NULL);
    self->pub_sync_name = "none";
    self->ctrs = ss_ctrs_new(TR_N_COUNTERS, (size_t)cfg->workers);
    self->shared.ctrs = self->ctrs;
    self->shared.ps_wait_hist = ss_hists_new((size_t)cfg->workers);
    self->shared.cfg = cfg;
    self->shared.cluster = cluster;
    self->shared.model = self->model;
    self->shared.w = ss_aligned_alloc(64, self->n_params * sizeof(float));
    tr_model_init_params(self->model, self->shared.w, (uint64_t)cfg->job_seed);
    if (cfg->dense_optimizer == SS_OPT_ADAGRAD)
        self->shared.acc = ss_aligned_alloc(64, self->n_params * sizeof(float));
    if (self->shared.acc)
        memset(self->shared.acc, 0, self->n_params * sizeof(float));
    self->shared.zctx = zmq_ctx_new();
    ss_assert(self->shared.zctx);
    self->shared.rank = rank;
    self->shared.n_ranks = (uint32_t)ss_cluster_count(cluster, SS_CLUSTER_TRAINER);
    atomic_init(&self->shared.stop, 0);
    atomic_init(&self->shared.drain, 0);
    atomic_init(&self->shared.examples_done, 0);
    atomic_init(&self->shared.segment_left, -1LL);
    atomic_init(&self->shared.examples_left,
                cfg->max_examples > 0 ? (long long)cfg->max_examples : -1LL);
    /* before any socket: I/O threads, and room for every worker's and
     * evaluator's sockets, and the shadow thread's and the main thread's, to
     * every PS plus the ring (ZeroMQ's default limit is 1023) */
    int io_threads = s_io_threads(cfg);
    if (zmq_ctx_set(self->shared.zctx, ZMQ_IO_THREADS, io_threads) != 0) {
        snprintf(err, err_len, "cannot set %d ZeroMQ I/O threads (trainer.io_threads): %s",
                 io_threads, zmq_strerror(zmq_errno()));
        tr_train_destroy(&self);
        return NULL;
    }
    SS_LOG(SS_LOG_INFO, "ZeroMQ I/O threads: %d%s", io_threads,
           cfg->io_threads > 0 ? "" : " (trainer.io_threads auto: one per 4 workers)");
    if (ss_cluster_zmq_setup(cluster, self->shared.zctx, 2 * cfg->workers + 2, err,
                             err_len) != 0 || s_secure(self, err, err_len) != 0) {
        tr_train_destroy(&self);
        return NULL;
    }
    char how[160];
    tr_model_describe(self->model, how, sizeof how);
    SS_LOG(SS_LOG_INFO, "model: %zu dense parameters, %.0f FLOP per example; %s",
           self->n_params, tr_model_flops_per_example(self->model), how);
    return self;
}

void tr_train_destroy(tr_train_t **self_p)
{
    tr_train_t *self = *self_p;
    if (!self)
        return;
    tr_shadow_destroy(&self->shadow);
    tr_allreduce_destroy(&self->ring);
    ss_auth_destroy(&self->auth);
    zmq_ctx_term(self->shared.zctx);
    ss_curve_wipe(&self->curve);
    ss_free(self->shared.w);
    ss_free(self->shared.acc);
    ss_free(self->w_live);
    tr_model_destroy(&self->model);
    tr_jobckpt_free(&self->resume);
    ss_ctrs_destroy(&self->ctrs);
    ss_free(self->shared.ps_wait_hist);
    pthread_mutex_destroy(&self->pub_lock);
    ss_free(self);
    *self_p = NULL;
}

/* ------------------------------------------------------------ progress */

/* Sum the counters of n workers; returns how many have finished. */
static int s_sum(tr_worker_t **workers, uint32_t n, struct tr_worker_counts *sum)
{
    tr_worker_counts_init(sum);
    for (uint32_t i = 0; i < n; i++) {
        struct tr_worker_counts c;
        if (!workers[i])
            continue;  /* never created: its error is already in err */
        tr_worker_snapshot(workers[i], &c);
        tr_worker_counts_add(sum, &c);
    }
    return sum->finished;
}

/* The figures every output shares into sn (storage v, TR_N_STATS): the
 * counters of now (a sum over workers), train NE and logloss from its loss
 * sums, and what the last progress line and evaluation published. Any
 * thread. */
static void s_snap(tr_train_t *self, const struct tr_worker_counts *now, struct ss_snap *sn,
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
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    ss_snap_num(sn, TR_S_eps, self->pub_eps);
    ss_snap_u64(sn, TR_S_epochs_done, self->pub_epochs);
    ss_snap_u64(sn, TR_S_evals, self->pub_evals);
    ss_snap_str(sn, TR_S_sync_algorithm, self->pub_sync_name);
    ss_snap_u64(sn, TR_S_job_checkpoints, self->pub_ckpts);
    ss_snap_u64(sn, TR_S_job_checkpoint_failures, self->pub_ckpt_failures);
    ss_snap_num(sn, TR_S_job_checkpoint_pause_s, self->pub_ckpt_pause_s);
    ss_snap_num(sn, TR_S_job_checkpoint_pause_total_s, self->pub_ckpt_pause_total_s);
    if (self->pub_have_sync) {
        const struct tr_shadow_stats *y = &self->pub_sync;
        ss_snap_u64(sn, TR_S_sync_rounds, y->rounds);
        ss_snap_u64(sn, TR_S_sync_failed_rounds, y->failed_rounds);
        ss_snap_num(sn, TR_S_sync_rounds_per_min, y->rounds_per_min);
        ss_snap_num(sn, TR_S_sync_gap, y->gap_mean);
        ss_snap_num(sn, TR_S_sync_latency_p50_ms, y->latency_p50_ms);
        ss_snap_num(sn, TR_S_sync_latency_p99_ms, y->latency_p99_ms);
        ss_snap_num(sn, TR_S_sync_drift, y->drift);
        ss_snap_num(sn, TR_S_sync_cpu_s, y->cpu_s);
    }
    s_snap_eval(sn, self->pub_have_eval ? &self->pub_eval : NULL);
    s_snap_valid(sn, self->pub_have_valid ? &self->pub_valid : NULL);
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
}

/* The row of sn for the outputs in mask, as one line of f. */
static void s_write_row(FILE *f, const struct ss_snap *sn, unsigned mask)
{
    struct ss_jw w;
    ss_jw_begin(&w, 64u << 10);
    ss_jw_snap_where(&w, sn, mask);
    ss_jw_end(&w);
    fprintf(f, "%s\n", w.buf);
    fflush(f);
    ss_jw_fini(&w);
}

/* Print one progress line of sn (redrawn in place on a terminal). */
static void s_print_progress(const tr_train_t *self, const struct ss_snap *sn, double t,
                             double frac, int final)
{
    char eta[32] = "", sync[160] = "";
    int tty = isatty(STDERR_FILENO);
    if (frac > 0.001 && frac < 1 && !final)
        snprintf(eta, sizeof eta, "  ETA %.0fs", t * (1 - frac) / frac);
    if (ss_snap_has(sn, TR_S_sync_rounds))
        snprintf(sync, sizeof sync, " | sync %.0f/min gap %.1f drift %.2g",
                 ss_snap_get(sn, TR_S_sync_rounds_per_min), ss_snap_get(sn, TR_S_sync_gap),
                 ss_snap_get(sn, TR_S_sync_drift));
    double ne = ss_snap_get(sn, TR_S_train_ne);
    char ne_s[32] = "-";  /* no example trained yet: no NE, not "nan" */
    if (isfinite(ne))
        snprintf(ne_s, sizeof ne_s, "%.4f", ne);
    fprintf(stderr, "%strainer %u | %.0f ex | %.0f ex/s | train NE %s%s | %.1fs%s%s",
            tty ? "\r\033[K" : "", self->rank, ss_snap_get(sn, TR_S_examples),
            ss_snap_get(sn, TR_S_eps), ne_s, sync, t, eta, tty && !final ? "" : "\n");
    fflush(stderr);
}

/* Publish the figures of a progress step for the metrics and admin threads,
 * then print one progress line and one JSONL row; final: 1 for the last
 * line, -1 for a JSONL row only. */
static void s_progress(tr_train_t *self, const struct tr_worker_counts *now,
                       const struct tr_worker_counts *prev, double t, double dt, FILE *jsonl,
                       int final)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    struct tr_shadow_stats ss = {0};
    double eps =
        dt > 0 ? (double)(now->c[TR_C_examples] - prev->c[TR_C_examples]) / dt : 0;
    double frac = self->input_bytes > 0
                      ? (double)now->c[TR_C_bytes_read] / (double)self->input_bytes
                      : 0;
    if (self->shadow)
        tr_shadow_get_stats(self->shadow, &ss);
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    self->pub_eps = eps;
    self->pub_epochs = now->epochs_done;
    self->pub_have_sync = self->shadow != NULL;
    self->pub_sync = ss;
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
    s_snap(self, now, &sn, v);
    ss_snap_num(&sn, TR_S_t, t);
    if (final >= 0)
        s_print_progress(self, &sn, t, frac, final);
    if (jsonl)
        s_write_row(jsonl, &sn, TR_IN_PROGRESS);
}

static FILE *s_open_jsonl(const tr_train_t *self)
{
    char path[SS_CFG_MAX_STR * 2];
    if (ss_mkdirs(self->cfg->run_dir) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/metrics-trainer-%u.jsonl", self->cfg->run_dir, self->rank);
    FILE *f = fopen(path, "w");
    if (!f)
        SS_LOG(SS_LOG_WARN, "cannot write %s: %s (progress only on stderr)", path,
               strerror(errno));
    return f;
}

/* Create and start n workers (train or eval); returns 0 or an error. */
static int s_start_workers(tr_train_t *self, tr_worker_t **workers, uint32_t n, int eval,
                           char *err, size_t len)
{
    for (uint32_t i = 0; i < n; i++) {
        workers[i] = tr_worker_new(&self->shared, i, n, eval, err, len);
        if (!workers[i] || tr_worker_start(workers[i]) != 0) {
            if (workers[i] && !err[0])
                snprintf(err, len, "cannot start worker thread %u", i);
            return SS_E_CONFIG;
        }
    }
    return 0;
}

static void s_join_workers(tr_worker_t **workers, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (workers[i])
            tr_worker_join(workers[i]);
}

/* 1 when this trainer's timer says a periodic job checkpoint is due at now. */
static int s_ckpt_due(const tr_train_t *self, uint64_t now)
{
    return self->ckpt_next_ns && now >= self->ckpt_next_ns;
}

static void s_pause_end(tr_train_t *self, const struct tr_worker_counts *now, uint32_t n);

/* Run one segment: start the workers (and the shadow's rounds), report
 * progress until they are all done, join them; *end_ns: when the last worker
 * left its loop. Returns 0, SS_E_STOPPED on
 * *stop, or the first worker error (err). */
static int s_segment(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                     volatile sig_atomic_t *stop, struct tr_worker_counts *prev, uint64_t *last,
                     uint64_t *end_ns, char *err, size_t len)
{
    struct tr_worker_counts now;
    int rc = self->shadow ? tr_shadow_start(self->shadow, err, len) : 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (tr_worker_start(workers[i]) != 0) {
            snprintf(err, len, "cannot start worker thread %u", i);
            atomic_store(&self->shared.stop, 1);
            rc = SS_E_NOMEM;
        }
    while (rc == 0) {
        usleep(50000);
        uint64_t t = ss_now_ns();
        int done = s_sum(workers, n, &now);
        s_pause_end(self, &now, n);
        if (*stop) {
            snprintf(err, len, "interrupted");
            rc = SS_E_STOPPED;
            break;
        }
        int term = self->ckpt_req && *self->ckpt_req;
        if ((term || s_ckpt_due(self, t)) && !self->draining) {
            /* the workers train what they have read and leave; the segment
             * then ends as usual (pushes acknowledged, final sync) */
            if (term)
                SS_LOG(SS_LOG_INFO, "job checkpoint requested (SIGTERM): stopping at a batch "
                       "boundary");
            else
                SS_LOG(SS_LOG_DEBUG, "periodic job checkpoint due: stopping at a batch "
                       "boundary");
            self->draining = 1;
            self->drain_ns = t;
            atomic_store(&self->shared.drain, 1);
        }
        if (done == (int)n || now.rc)
            break;
        /* JSONL rows every metrics.interval_s, but more often while the run
         * is young (a fortieth of its age, at least 0.1 s), so that a short
         * job still draws a curve; the progress line keeps the interval */
        double age = (double)(t - self->t0_ns) / 1e9;
        double iv = fmin(self->cfg->metrics_interval_s, fmax(0.1, age / 40.0));
        if ((double)(t - *last) / 1e9 >= iv) {
            int print = (double)(t - self->last_print_ns) / 1e9 >= self->cfg->metrics_interval_s;
            s_progress(self, &now, prev, age, (double)(t - *last) / 1e9, self->jsonl,
                       print ? 0 : -1);
            *prev = now;
            *last = t;
            if (print)
                self->last_print_ns = t;
        }
    }
    if (rc)
        atomic_store(&self->shared.stop, 1);
    s_join_workers(workers, n);
    s_sum(workers, n, &now);
    s_pause_end(self, &now, n);
    if (rc == 0 && now.rc) {
        rc = now.rc;
        snprintf(err, len, "%s", now.err);
    }
    self->epochs_done = UINT64_MAX;
    *end_ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct tr_worker_counts c;
        tr_worker_snapshot(workers[i], &c);
        if (c.epochs_done < self->epochs_done)
            self->epochs_done = c.epochs_done;
        if (c.finished_ns > *end_ns)
            *end_ns = c.finished_ns;  /* the last worker out, not the next poll */
    }
    return rc;
}

/* Wait until every trainer has called this with the same n, and sum v over
 * them (in place). The ring's deadline is trainer.barrier_timeout_s here:
 * trainers of different speed reach the end of a segment far apart. */
static int s_barrier(tr_train_t *self, float *v, size_t n, char *err, size_t len)
{
    if (self->shared.n_ranks == 1)
        return 0;
    tr_allreduce_set_timeout(self->ring, self->cfg->barrier_timeout_s * 1000);
    int rc = tr_allreduce_sum(self->ring, v, n, err, len);
    tr_allreduce_set_timeout(self->ring, self->cfg->sync_timeout_ms);
    if (rc)
        snprintf(err + strlen(err), len - strlen(err),
                 " (waiting for the other trainers at the end of training)");
    return rc;
}

/* s_barrier for counters: sums n (at most 8) 64-bit counts over every
 * trainer exactly, as 16-bit limbs (a float holds the sum of 64 of them). */
static int s_barrier_u64(tr_train_t *self, uint64_t *v, size_t n, char *err, size_t len)
{
    float limbs[8 * 4];
    ss_assert(n <= 8);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            limbs[i * 4 + k] = (float)((v[i] >> (16 * k)) & 0xFFFF);
    int rc = s_barrier(self, limbs, n * 4, err, len);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        v[i] = 0;
        for (int k = 0; k < 4; k++)
            v[i] += (uint64_t)limbs[i * 4 + k] << (16 * k);
    }
    return rc;
}

/* End of a segment: every trainer's workers are done and their pushes
 * acknowledged, the final sync is done (after a barrier where EASGD needs
 * one). Then no trainer changes the embeddings or the center until the
 * decision barrier in tr_train_run() lets the next segment start. */
static int s_meet(tr_train_t *self, char *err, size_t len)
{
    float one = 1;
    int rc = 0;
    SS_LOG(SS_LOG_INFO, "segment done: %llu epoch(s), pushes acknowledged; meeting the other "
           "trainers", (unsigned long long)self->epochs_done);
    if (self->shadow)
        tr_shadow_stop(self->shadow);
    if (!self->shadow || tr_shadow_needs_barrier(self->shadow))
        rc = s_barrier(self, &one, 1, err, len);
    if (rc == 0 && self->shadow) {
        char serr[512] = "";
        if (tr_shadow_final(self->shadow, serr, sizeof serr) != 0) {
            snprintf(err, len, "final sync did not complete: %s", serr);
            rc = SS_E_TIMEOUT;
        }
        tr_shadow_get_stats(self->shadow, &self->sync);
    }
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "all trainers done with the segment%s",
               self->shadow ? ", final sync complete" : "");
    return rc;
}

/* 1 for the trainer that scores and saves the shared model: rank 0, or
 * after rank 0 died and the ring re-formed without it, the lowest rank
 * left (the same on every trainer once a barrier has completed). */
static int s_leader(const tr_train_t *self)
{
    uint64_t m = self->ring ? tr_allreduce_members(self->ring) : 1;
    return m && self->rank == (uint32_t)__builtin_ctzll(m);
}

/* One evaluation row of the JSONL file (the evaluation is published): of
 * the validation split (what, TR_WORKER_VALID: valid_* and best) or of
 * data.eval (eval_*; best too when no validation split chooses). */
static void s_jsonl_eval(tr_train_t *self, int what, int best)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    if (!self->jsonl)
        return;
    s_snap(self, &self->total, &sn, v);
    ss_snap_num(&sn, TR_S_t, (double)(ss_now_ns() - self->t0_ns) / 1e9);
    ss_snap_u64(&sn, TR_S_epoch, self->epochs_done);
    if (what == TR_WORKER_VALID)
        s_snap_eval(&sn, NULL);
    else
        s_snap_valid(&sn, NULL);
    if (what == TR_WORKER_VALID || !self->has_valid)
        ss_snap_bool(&sn, TR_S_best, best);
    s_write_row(self->jsonl, &sn, TR_IN_EVAL);
}

static int s_score(tr_train_t *self, int what, struct tr_eval_result *out, char *err,
                   size_t err_len);

/* Publish r, an evaluation of what (TR_WORKER_EVAL or TR_WORKER_VALID), for
 * the metrics and admin threads. */
static void s_publish_eval(tr_train_t *self, int what, const struct tr_eval_result *r)
{
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    if (what == TR_WORKER_VALID) {
        self->pub_valid = *r;
        self->pub_have_valid = 1;
    } else {
        self->pub_eval = *r;
        self->pub_have_eval = 1;
    }
    self->pub_evals = self->n_evals;
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
}

/* With a validation split: score data.eval on the model that has just become
 * the kept one (the PSs cannot take their rows back to an earlier model, so
 * this is the one moment it can be scored); nothing chooses on the figure,
 * it is the test figure reported when this model stays kept. */
static int s_score_test(tr_train_t *self, char *err, size_t len)
{
    struct tr_eval_result r;
    if (self->cfg->eval_files.n == 0)
        return 0;
    int rc = s_score(self, TR_WORKER_EVAL, &r, err, len);
    if (rc)
        return rc;
    self->test = r;
    self->have_test = 1;
    self->n_test_scorings++;
    s_publish_eval(self, TR_WORKER_EVAL, &r);
    s_jsonl_eval(self, TR_WORKER_EVAL, 0);
    SS_LOG(SS_LOG_INFO, "test (data.eval) of the model kept, after %llu epoch(s): NE %.5f "
           "AUC %.4f (not used to choose)", (unsigned long long)self->epochs_done, r.ne, r.auc);
    return 0;
}

/* Score the model every trainer now holds (for sync none: this trainer's own
 * replica); keep it in model_dir when it is the best so far. *stop_vote: 1
 * when trainer.patience evaluations brought no gain. */
static int s_evaluate_segment(tr_train_t *self, int last, float *stop_vote, char *err,
                              size_t len)
{
    struct tr_eval_result r;
    int what = self->has_valid ? TR_WORKER_VALID : TR_WORKER_EVAL;
    const char *name = self->has_valid ? "validation" : "eval";
    int rc = s_score(self, what, &r, err, len);
    if (rc)
        return rc;
    self->n_evals++;
    if (what == TR_WORKER_EVAL)
        self->n_test_scorings++;
    s_publish_eval(self, what, &r);
    int better = tr_eval_better(&r, self->have_eval ? &self->best : NULL);
    if (!better && !isfinite(r.ne) && !isfinite(r.logloss))
        SS_LOG(SS_LOG_WARN, "%s after %llu epoch(s) is not finite (logloss %g): the model "
               "diverged; it is not kept", s_input_name(self->cfg, what),
               (unsigned long long)self->epochs_done, r.logloss);
    if (better) {
        self->best = r;
        self->have_eval = 1;
        self->best_epoch = self->epochs_done;
        self->evals_since_best = 0;
    } else {
        self->evals_since_best++;
    }
    s_jsonl_eval(self, what, better);
    SS_LOG(SS_LOG_INFO, "%s after %llu epoch(s): NE %.5f AUC %.4f%s", name,
           (unsigned long long)self->epochs_done, r.ne, r.auc,
           better ? " (best so far)" : "");
    if (!better && last)
        SS_LOG(SS_LOG_INFO, "the output model is the best one, from epoch %llu (%s NE %.5f)",
               (unsigned long long)self->best_epoch, name, self->best.ne);
    if (better && s_leader(self) && (rc = tr_train_save(self, self->model_dir, err, len)) == 0)
        self->saved = 1;
    if (rc == 0 && better && self->has_valid)
        rc = s_score_test(self, err, len);
    if (self->cfg->patience > 0 && self->evals_since_best >= (uint32_t)self->cfg->patience) {
        *stop_vote = 1;
        if (!last)
            SS_LOG(SS_LOG_INFO, "stopping early: %u evaluation(s) without a better NE",
                   self->evals_since_best);
    }
    return rc;
}

/* After a segment (every trainer met): score the model (keeping it when it
 * is the best), or save it at the end when nothing is scored; then agree with
 * every trainer whether to go on. The vote is [stop, trainers with data
 * left]: trainer 0's evaluation decides, and all go on while any one has data
 * left (with trainer.eval_every_examples a trainer's part may end at a
 * segment's end while another's has a few rows left: the one done meets the
 * others at once in the next segments, so that those rows are trained too).
 * trained: the segment trained examples (one that found no data left has
 * nothing new to score). *more: run another segment. */
static int s_decide(tr_train_t *self, int eval, int trained, int *more, char *err, size_t len)
{
    int data_left = self->epochs_done < (uint64_t)self->cfg->epochs &&
                    atomic_load(&self->shared.examples_left) != 0;
    float vote[2] = {0, data_left ? 1.0f : 0.0f}, mine = 0;
    int rc = 0, leader = s_leader(self), due = trained || self->n_evals == 0;
    *more = 0;
    self->scores = eval && (leader || self->cfg->sync_algorithm == SS_SYNC_NONE);
    int scored = self->scores && due;
    if (scored)
        rc = s_evaluate_segment(self, !data_left, leader ? &vote[0] : &mine, err, len);
    if (rc == 0)
        rc = s_barrier(self, vote, 2, err, len);
    int last = rc == 0 && vote[1] < 0.5f;
    if (rc == 0 && !leader && s_leader(self)) {
        /* the leader died during this decision and the ring re-formed in the
         * barrier: this trainer leads now and does what it did not (the
         * vote stands without its stop vote) */
        SS_LOG(SS_LOG_INFO, "the trainer that scores was lost; this one (rank %u) takes over",
               self->rank);
        if (eval && due && !scored)
            rc = s_evaluate_segment(self, last, &mine, err, len);
    }
    /* without evaluation the leader saves the model at the end */
    if (rc == 0 && !eval && last && s_leader(self) &&
        (rc = tr_train_save(self, self->model_dir, err, len)) == 0)
        self->saved = 1;
    if (rc || last)
        return rc;
    if (vote[0] > 0.5f)
        self->stopped_early = 1;
    else
        *more = 1;
    return 0;
}

/* ------------------------------------------------------------ averaging */

/* model.dense_average, at a segment's end (every trainer met, workers
 * joined): put the average of the dense models the workers summed into w
 * (over every trainer's sums when sync keeps one model; each trainer's own
 * for none), keeping the model in w_live, so that the average is what is
 * scored and saved. Returns 0 or the barrier's error; with no model summed
 * anywhere, w is left as it is. */
static int s_average_in(tr_train_t *self, tr_worker_t **workers, uint32_t n, char *err,
                        size_t len)
{
    size_t np = self->n_params;
    if (self->cfg->dense_average <= 0)
        return 0;
    float *sum = ss_calloc(np + 1, sizeof(float));
    uint64_t count = 0;
    for (uint32_t i = 0; i < n; i++)
        count += tr_worker_take_average(workers[i], sum);
    sum[np] = (float)count;
    int rc = self->shadow ? s_barrier(self, sum, np + 1, err, len) : 0;
    if (rc == 0 && sum[np] > 0.5f) {
        if (!self->w_live)
            self->w_live = ss_aligned_alloc(64, np * sizeof(float));
        memcpy(self->w_live, self->shared.w, np * sizeof(float));
        for (size_t i = 0; i < np; i++)
            self->shared.w[i] = sum[i] / sum[np];
        self->averaged = 1;
        SS_LOG(SS_LOG_INFO, "model.dense_average: scoring the average of %.0f dense models",
               (double)sum[np]);
    }
    ss_free(sum);
    return rc;
}

/* Undo s_average_in() before training goes on: w is the model again. */
static void s_average_out(tr_train_t *self)
{
    if (!self->averaged)
        return;
    memcpy(self->shared.w, self->w_live, self->n_params * sizeof(float));
    self->averaged = 0;
}

/* ------------------------------------------------------------ input checks */

/* "PATH:LINE: why" of the first bad line the workers met (the earliest in
 * the input) into out. Returns 1, or 0 when they met none. */
static int s_first_bad(tr_worker_t **workers, uint32_t n, char *out, size_t len)
{
    struct tr_reader_bad best, b;
    uint64_t line;
    int have = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!workers[i] || !tr_worker_first_bad(workers[i], &b))
            continue;
        if (!have || b.global < best.global)
            best = b;
        have = 1;
    }
    if (!have)
        return 0;
    if (tr_reader_line_number(best.path, best.offset, &line) == 0)
        snprintf(out, len, "%s:%llu: %s", best.path, (unsigned long long)line, best.why);
    else
        snprintf(out, len, "%s (byte %llu): %s", best.path, (unsigned long long)best.offset,
                 best.why);
    return 1;
}

/* Fail when the input what ("data.train", "data.eval") gave no example, or
 * more bad lines than data.max_bad_fraction of its lines (headers apart).
 * tot: examples, lines, bad lines, headers (over every trainer for
 * data.train). The message starts with the first bad line of these
 * workers; result names what was not done. */
static int s_judge_input(const struct ss_cfg *cfg, const char *what, const uint64_t tot[4],
                         tr_worker_t **workers, uint32_t n, const char *result, char *err,
                         size_t len)
{
    double ex = (double)tot[0], lines = (double)tot[1], bad = (double)tot[2];
    double data_lines = (double)(tot[1] - tot[3]);
    double limit = cfg->data.max_bad_fraction;
    int too_many = data_lines > 0 && bad > limit * data_lines;
    char where[1536] = "";
    if (ex > 0 && !too_many)
        return 0;
    if (ex == 0 && bad == 0) {
        snprintf(err, len, "%s: no example: %.0f line(s) in the input%s; %s", what, lines,
                 lines > 0 ? ", all headers" : " (empty files?)", result);
        return SS_E_CONFIG;
    }
    if (!s_first_bad(workers, n, where, sizeof where))
        snprintf(where, sizeof where, "(the other trainers' logs name the first bad line)");
    if (ex == 0)
        snprintf(err, len, "%s -- %s: no example, %.0f of %.0f lines bad; %s", where, what, bad,
                 data_lines, result);
    else
        snprintf(err, len, "%s -- %s: %.0f of %.0f lines bad (%.2g%%), more than "
                 "data.max_bad_fraction %g; %s", where, what, bad, data_lines,
                 100.0 * bad / data_lines, limit, result);
    return SS_E_CONFIG;
}

/* After a segment: sum the training input's counts over every trainer and
 * stop the run (before anything is scored or saved) when it has no example
 * or too many bad lines. Every trainer reaches the same verdict. */
static int s_check_train_input(tr_train_t *self, tr_worker_t **workers, uint32_t n, char *err,
                               size_t len)
{
    struct tr_worker_counts c;
    s_sum(workers, n, &c);
    uint64_t tot[4] = {c.c[TR_C_examples], c.c[TR_C_lines], c.c[TR_C_bad_lines],
                       c.c[TR_C_headers]};
    int rc = s_barrier_u64(self, tot, 4, err, len);
    if (rc == 0 && c.c[TR_C_bad_lines])
        SS_LOG(SS_LOG_INFO, "data.train: %llu of %llu lines bad so far (this trainer)",
               (unsigned long long)c.c[TR_C_bad_lines],
               (unsigned long long)(c.c[TR_C_lines] - c.c[TR_C_headers]));
    return rc ? rc : s_judge_input(self->cfg, "data.train", tot, workers, n,
                                   "nothing was scored or saved", err, len);
}

/* ------------------------------------------------------------ job checkpoint */

/* What the trainers voted after a segment (every trainer gets the same). */
struct s_ckpt_vote {
    int term;                      /* some trainer was asked (SIGTERM) to stop with one */
    int periodic;                  /* some trainer's timer said a periodic one is due */
    int cut;                       /* some trainer's drain cut the segment short */
};

/* 1 when the ring has left out a trainer (job.allow_trainer_loss): a job
 * checkpoint would lack its state. Every trainer gets the same answer after
 * a barrier (the barrier agrees on the ring). */
static int s_ring_short(const tr_train_t *self)
{
    return self->shared.n_ranks > 1 && tr_allreduce_size(self->ring) < self->shared.n_ranks;
}

/* After a segment: whether any trainer was asked (SIGTERM) to stop with a
 * job checkpoint, whether any trainer's job.checkpoint_interval_s timer is
 * due (it drained its workers, or it is due now), and whether any trainer's
 * workers left the segment before its end. Any trainer's yes is everyone's:
 * a trainer whose signal or timer came late, or whose data had just ended,
 * joins the others at the same point. Returns 0 or the barrier's error. */
static int s_vote_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             struct s_ckpt_vote *out, char *err, size_t len)
{
    struct tr_worker_counts c;
    s_sum(workers, n, &c);
    uint64_t v[3] = {self->ckpt_req && *self->ckpt_req ? 1 : 0,
                     self->draining || s_ckpt_due(self, ss_now_ns()) ? 1 : 0, c.cut ? 1 : 0};
    int rc = s_barrier_u64(self, v, 3, err, len);
    out->term = rc == 0 && v[0] > 0;
    out->periodic = rc == 0 && v[1] > 0;
    out->cut = rc == 0 && v[2] > 0;
    return rc;
}

/* Where a job checkpoint leaves the trainer: the segment a resume goes on in
 * and that segment's trainer.eval_every_examples budget left. */
struct s_ckpt_at {
    int64_t seg_end;               /* tr_train_run's end */
    int64_t segment_left;          /* < 0: none */
};

/* This trainer's state for its trainer-R.state (w and acc borrowed; free
 * st->workers and st->sync). Workers joined. */
static void s_state(tr_train_t *self, tr_worker_t **workers, uint32_t n, uint64_t save_id,
                    const struct s_ckpt_at *at, struct tr_jobckpt *st)
{
    struct tr_jobckpt_fixed *f = &st->f;
    memset(st, 0, sizeof *st);
    *f = (struct tr_jobckpt_fixed){
        .rank = self->rank, .n_ranks = self->shared.n_ranks, .n_workers = n,
        .has_acc = self->shared.acc != NULL, .n_params = self->n_params,
        .shape_hash = s_shape_hash(self), .input_bytes = self->train_bytes, .save_id = save_id,
        .examples_done = atomic_load(&self->shared.examples_done),
        .iterations = atomic_load(&self->shared.iterations),
        .examples_left = atomic_load(&self->shared.examples_left),
        .seg_end = at->seg_end, .segment_left = at->segment_left, .n_ckpts = self->n_ckpts,
        .train_ns = self->train_ns, .epochs_done = self->epochs_done, .n_evals = self->n_evals,
        .evals_since_best = self->evals_since_best, .best_epoch = self->best_epoch,
        .have_eval = (uint32_t)self->have_eval, .saved = (uint32_t)self->saved,
        .best = self->best, .have_test = (uint32_t)self->have_test, .test = self->test,
        .n_test_scorings = self->n_test_scorings};
    st->workers = ss_calloc(n, sizeof *st->workers);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_get_pos(workers[i], &st->workers[i]);
    st->w = self->shared.w;  /* workers are joined: plain reads */
    st->acc = self->shared.acc;
    f->n_sync = self->shadow ? tr_shadow_state(self->shadow, NULL) : 0;
    st->sync = f->n_sync ? ss_malloc(f->n_sync * sizeof(float)) : NULL;
    if (st->sync)
        tr_shadow_state(self->shadow, st->sync);
    /* the latency histograms: each worker's PS wait, then the sync rounds' */
    st->n_hists = n + 1;
    st->hists = ss_malloc((size_t)st->n_hists * SS_HIST_VALUES * sizeof *st->hists);
    for (uint32_t i = 0; i < n; i++)
        ss_hist_get(&self->shared.ps_wait_hist[i], st->hists + (size_t)i * SS_HIST_VALUES);
    ss_hist_get(&self->shared.sync_round_hist, st->hists + (size_t)n * SS_HIST_VALUES);
}

/* A digest of the dense replica and its optimizer state, logged when a job
 * checkpoint is written and when it is resumed (the two must match: the
 * resume drill compares them). Workers stopped. */
static uint64_t s_dense_digest(const tr_train_t *self)
{
    size_t bytes = self->n_params * sizeof(float);
    uint64_t h = ss_hash_bytes(self->shared.w, bytes, 0);
    return self->shared.acc ? ss_hash_bytes(self->shared.acc, bytes, h) : h;
}

/* DIR/MANIFEST of a job checkpoint. */
static int s_write_job_manifest(tr_train_t *self, const char *dir, uint64_t save_id,
                                uint64_t examples, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], text[320];
    int with_sync = self->shadow && tr_shadow_uses_sync_ps(self->shadow);
    int k = snprintf(text, sizeof text,
                     "shadowsync-jobckpt 1\nsave_id %016llx\ntrainers %u\nworkers %lld\n"
                     "embedding_shards %zu\nsync_shards %zu\nexamples %llu\n",
                     (unsigned long long)save_id, self->shared.n_ranks,
                     (long long)self->cfg->workers,
                     ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING),
                     with_sync ? ss_cluster_count(self->cluster, SS_CLUSTER_SYNC) : (size_t)0,
                     (unsigned long long)examples);
    struct ss_fs_piece piece = {text, (size_t)k};
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    return ss_fs_write_atomic(path, &piece, 1, err, len);
}

/* After save id's job checkpoint was committed: the folder of the one before
 * (JOBCKPT.new-ID) where it is still there. That is only on hosts that share
 * no file system with the leading trainer's, where each trainer's part (and
 * its host's PSs' parts) stayed in that folder (the launcher's gather puts
 * the set together: docs/checkpoints.md); without this each periodic
 * checkpoint would add one there. */
static void s_prune_previous(tr_train_t *self, uint64_t save_id)
{
    char dir[SS_CFG_MAX_STR * 2 + 32];
    if (self->ckpt_last_id && self->ckpt_last_id != save_id) {
        snprintf(dir, sizeof dir, "%s.new-%016llx", self->jobckpt_dir,
                 (unsigned long long)self->ckpt_last_id);
        (void)ss_fs_remove_tree(dir);
    }
    self->ckpt_last_id = save_id;
}

static void s_ps_drop_earlier(tr_train_t *self, uint64_t save_id, const char *dir);

/* DESIGN: a job checkpoint is taken at a consistent point of every trainer:
 * the workers drained (every example read is trained, every push
 * acknowledged), the segment's final sync done, and the vote barrier passed,
 * so no trainer changes the embeddings or the center any more. Then, as for
 * the output model, everything goes into a new folder that replaces
 * jobckpt_dir in one step only when every part is written: the leader picks
 * the save id (a barrier carries it to all), each trainer writes its
 * trainer-R.state, the leader has every PS checkpoint into the folder, a
 * barrier counts failures, the leader writes MANIFEST and commits, and a last
 * barrier tells every trainer whether it did. A failure anywhere leaves the
 * previous job checkpoint as it was.
 * Returns 0 with *saved 1 (committed; *examples: all trainers' examples) or
 * 0 (a part failed: err says which); an error only when a barrier failed. */
static int s_job_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                            const struct s_ckpt_at *at, int *saved, uint64_t *examples_all,
                            char *err, size_t len)
{
    char dir[SS_CFG_MAX_STR * 2 + 32], path[SS_CFG_MAX_STR * 3], why[1024] = "";
    int leader = s_leader(self), rc;
    uint64_t id = leader ? s_new_save_id() : 0;
    *saved = 0;
    if ((rc = s_barrier_u64(self, &id, 1, err, len)) != 0)
        return rc;
    snprintf(dir, sizeof dir, "%s.new-%016llx", self->jobckpt_dir, (unsigned long long)id);
    if (ss_mkdirs(dir) != 0) {
        snprintf(why, sizeof why, "cannot create %s: %s", dir, strerror(errno));
        rc = ss_fs_errno_rc(errno);
    }
    struct tr_jobckpt st;
    s_state(self, workers, n, id, at, &st);
    uint64_t examples = 0;
    for (uint32_t i = 0; i < n; i++)
        examples += st.workers[i].counts.c[TR_C_examples];
    snprintf(path, sizeof path, "%s/trainer-%u.state", dir, self->rank);
    if (rc == 0)
        rc = tr_jobckpt_write(path, &st, why, sizeof why);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "job checkpoint: state written (%llu examples, %llu floats of sync "
               "state, digest %016llx; dense state digest %016llx)",
               (unsigned long long)examples, (unsigned long long)st.f.n_sync,
               (unsigned long long)ss_hash_bytes(st.sync, st.f.n_sync * sizeof(float), 0),
               (unsigned long long)s_dense_digest(self));
    ss_free(st.workers);
    ss_free(st.sync);
    ss_free(st.hists);
    if (rc == 0 && leader)
        rc = tr_train_checkpoint_ps(self, id, dir, why, sizeof why);
    uint64_t tally[2] = {rc ? 1 : 0, examples};
    if ((rc = s_barrier_u64(self, tally, 2, err, len)) != 0)
        return rc;
    int failed = (int)tally[0], mine = failed && why[0];
    if (!failed && s_ring_short(self)) {
        /* a trainer lost during it: its state may be missing, and a set
         * without it cannot be resumed; the previous one must stay */
        failed = 1;
        mine = leader;
        snprintf(why, sizeof why, "%u of %u trainers are left (a trainer was lost during it)",
                 tr_allreduce_size(self->ring), self->shared.n_ranks);
    }
    if (!failed && leader) {
        rc = s_write_job_manifest(self, dir, id, tally[1], why, sizeof why);
        if (rc == 0)
            rc = ss_fs_replace_dir(dir, self->jobckpt_dir, why, sizeof why);
        mine = rc != 0;
    }
    uint64_t commit = mine ? 1 : 0;  /* the leader's commit, or a part's failure */
    if ((rc = s_barrier_u64(self, &commit, 1, err, len)) != 0)
        return rc;
    if (!failed && commit == 0) {
        if (leader)
            SS_LOG(SS_LOG_INFO, "job checkpoint saved in %s: %llu examples trained by all "
                   "trainers", self->jobckpt_dir, (unsigned long long)tally[1]);
        s_prune_previous(self, id);
        if (leader)
            s_ps_drop_earlier(self, id, dir);
        *saved = 1;
        *examples_all = tally[1];
        return 0;
    }
    (void)ss_fs_remove_tree(dir);  /* every trainer: its host's part, where hosts differ */
    if (mine)
        snprintf(err, len, "job checkpoint failed: %s; the previous one in %s (if any) is kept",
                 why, self->jobckpt_dir);
    else
        snprintf(err, len, "job checkpoint failed on another trainer (its log says why); the "
                 "previous one in %s (if any) is kept", self->jobckpt_dir);
    return 0;
}

/* SIGTERM after the ring lost a trainer: no job checkpoint (it would hold
 * the survivors' states only, and --resume wants every trainer's), nothing
 * written over the last complete one; the run ends (exit 76, and the
 * launcher says which checkpoint stays). */
static void s_stop_kept(tr_train_t *self)
{
    char kept[SS_CFG_MAX_STR * 2 + 64];
    if (self->ckpt_last_id)
        snprintf(kept, sizeof kept, "the last complete one in %s (save %016llx) stays as it was",
                 self->jobckpt_dir, (unsigned long long)self->ckpt_last_id);
    else
        snprintf(kept, sizeof kept, "this run has none to keep");
    SS_LOG(SS_LOG_WARN, "SIGTERM: no job checkpoint written: %u of %u trainers are left, and a "
           "resume needs every one's state; %s; stopping", tr_allreduce_size(self->ring),
           self->shared.n_ranks, kept);
    self->stopped_kept = 1;
}

/* The job checkpoint SIGTERM asked for: taken, the run ends (exit 75). When
 * trainers were lost (before, or during it) none is written (s_stop_kept).
 * Returns 0, or an error when it failed. */
static int s_stop_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             const struct s_ckpt_at *at, char *err, size_t len)
{
    uint64_t examples = 0;
    if (s_ring_short(self)) {
        s_stop_kept(self);
        return 0;
    }
    int saved, rc = s_job_checkpoint(self, workers, n, at, &saved, &examples, err, len);
    if (rc == 0 && !saved && s_ring_short(self)) {
        s_stop_kept(self);
        return 0;
    }
    if (rc == 0 && !saved)
        rc = SS_E_IO;
    self->checkpointed = rc == 0;
    return rc;
}

/* A periodic job checkpoint (job.checkpoint_interval_s): taken, and training
 * goes on; t_stop: when this trainer's workers were stopped for it. One that
 * failed (a full disk, a PS that did not answer) is logged and counted, the
 * previous one kept, and training goes on too. The next one is due one
 * interval after this one ended, on every trainer alike (they leave its last
 * barrier together). Returns 0, or a barrier's error. */
static int s_periodic_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                                 const struct s_ckpt_at *at, uint64_t t_stop, char *err,
                                 size_t len)
{
    uint64_t examples = 0, t_save = ss_now_ns();
    char why[1024] = "";
    if (s_ring_short(self)) {
        /* a trainer was left out (job.allow_trainer_loss): its state would be
         * missing, and a resume needs every trainer's; the same answer on
         * every trainer (the vote's barrier agreed on the ring) */
        SS_LOG(SS_LOG_WARN, "no more periodic job checkpoints: %u of %u trainers are left, and "
               "a resume needs every one's state; the last complete one in %s stays",
               tr_allreduce_size(self->ring), self->shared.n_ranks, self->jobckpt_dir);
        self->ckpt_interval_ns = 0;
        self->ckpt_next_ns = 0;
        return 0;
    }
    /* counted before the save, so that the state it writes counts itself (a
     * job resumed from it goes on from this count) */
    self->n_ckpts++;
    int saved, rc = s_job_checkpoint(self, workers, n, at, &saved, &examples, why, sizeof why);
    if (rc || !saved)
        self->n_ckpts--;
    if (rc) {
        snprintf(err, len, "%s", why);
        return rc;
    }
    uint64_t t_end = ss_now_ns();
    self->ckpt_next_ns = t_end + self->ckpt_interval_ns;
    if (saved) {
        /* the pause ends when the workers train again: s_pause_end() */
        self->pause_open = 1;
        self->pause_stop_ns = t_stop;
        self->pause_save_ns = t_save;
        self->pause_commit_ns = t_end;
        self->pause_examples = examples;
    } else {
        self->n_ckpt_failures++;
        SS_LOG(SS_LOG_WARN, "periodic %s; training goes on (the next try is in %.0f s)", why,
               self->cfg->job_ckpt_interval_s);
    }
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    self->pub_ckpts = self->n_ckpts;
    self->pub_ckpt_failures = self->n_ckpt_failures;
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
    return 0;
}

/* The pause of the last periodic job checkpoint ends when every worker,
 * started again after it, has trained its first batch (or left without
 * one): now is the workers' sum. Then it is logged and published: the
 * workers' stop, the final sync, the save and the restart (threads, PS
 * connections, the first lookups) are all time the workers did not train.
 * Main thread. */
static void s_pause_end(tr_train_t *self, const struct tr_worker_counts *now, uint32_t n)
{
    if (!self->pause_open || (uint32_t)now->back < n)
        return;
    self->pause_open = 0;
    uint64_t back = now->back_ns > self->pause_commit_ns ? now->back_ns : self->pause_commit_ns;
    double pause_s = (double)(back - self->pause_stop_ns) / 1e9;
    self->ckpt_pause_s = pause_s;
    self->ckpt_pause_total_s += pause_s;
    SS_LOG(SS_LOG_INFO, "periodic job checkpoint %u: %llu examples (all trainers); training "
           "paused %.0f ms (stopping and final sync %.0f ms, saving %.0f ms, restarting the "
           "workers %.0f ms)", self->n_ckpts, (unsigned long long)self->pause_examples,
           pause_s * 1e3, (double)(self->pause_save_ns - self->pause_stop_ns) / 1e6,
           (double)(self->pause_commit_ns - self->pause_save_ns) / 1e6,
           (double)(back - self->pause_commit_ns) / 1e6);
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    self->pub_ckpt_pause_s = self->ckpt_pause_s;
    self->pub_ckpt_pause_total_s = self->ckpt_pause_total_s;
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
}

/* The latency histograms of the resumed state go on from its counts, as the
 * counters do (Prometheus then sees them grow across the restart). A state
 * of an older build holds none: they start empty, and the log says so. */
static void s_resume_hists(tr_train_t *self, const char *path)
{
    const struct tr_jobckpt *st = &self->resume;
    uint32_t n = st->f.n_workers;
    if (st->n_hists != n + 1) {
        SS_LOG(SS_LOG_INFO, "%s holds %s latency histograms (%u, this trainer keeps %u): "
               "they start empty, the counters go on", path, st->n_hists ? "other" : "no",
               st->n_hists, n + 1);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        ss_hist_set(&self->shared.ps_wait_hist[i], st->hists + (size_t)i * SS_HIST_VALUES);
    ss_hist_set(&self->shared.sync_round_hist, st->hists + (size_t)n * SS_HIST_VALUES);
}

int tr_train_resume(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3], terr[256];
    const char *pats[SS_CFG_MAX_LIST];
    snprintf(path, sizeof path, "%s/trainer-%u.state", dir, self->rank);
    int rc = tr_jobckpt_read(path, &self->resume, err, len);
    if (rc)
        return rc;
    const struct tr_jobckpt_fixed *f = &self->resume.f;
    for (size_t i = 0; i < self->cfg->train_files.n; i++)
        pats[i] = self->cfg->train_files.v[i];
    int64_t total = tr_reader_total_bytes(pats, self->cfg->train_files.n, terr, sizeof terr);
    rc = SS_E_CONFIG;
    if (f->rank != self->rank || f->n_ranks != self->shared.n_ranks)
        snprintf(err, len, "%s was written by trainer %u of %u; this is trainer %u of %u (a "
                 "resumed job needs the same trainers)", path, f->rank, f->n_ranks, self->rank,
                 self->shared.n_ranks);
    else if (f->n_workers != (uint32_t)self->cfg->workers)
        snprintf(err, len, "%s was written with trainer.workers %u, the job has %lld (the "
                 "input split depends on it)", path, f->n_workers,
                 (long long)self->cfg->workers);
    else if (f->n_params != self->n_params || f->shape_hash != s_shape_hash(self) ||
             f->has_acc != (self->shared.acc != NULL))
        snprintf(err, len, "%s holds another model or dense optimizer than the job's", path);
    else if (total != f->input_bytes)
        snprintf(err, len, "data.train is %lld bytes, %lld when %s was written: the input "
                 "changed, the readers' places would be wrong", (long long)total,
                 (long long)f->input_bytes, path);
    else
        rc = 0;
    if (rc) {
        tr_jobckpt_free(&self->resume);
        return rc;
    }
    memcpy(self->shared.w, self->resume.w, self->n_params * sizeof(float));
    if (self->shared.acc)
        memcpy(self->shared.acc, self->resume.acc, self->n_params * sizeof(float));
    atomic_store(&self->shared.examples_done, f->examples_done);
    atomic_store(&self->shared.iterations, f->iterations);
    atomic_store(&self->shared.examples_left, f->examples_left);
    self->train_ns = f->train_ns;
    self->epochs_done = f->epochs_done;
    self->n_evals = f->n_evals;
    self->evals_since_best = f->evals_since_best;
    self->best_epoch = f->best_epoch;
    self->have_eval = (int)f->have_eval;
    self->saved = (int)f->saved;
    self->best = f->best;
    self->have_test = (int)f->have_test;
    self->test = f->test;
    self->n_test_scorings = f->n_test_scorings;
    self->n_ckpts = f->n_ckpts;
    self->ckpt_last_id = f->save_id;
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    self->pub_ckpts = f->n_ckpts;
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
    for (uint32_t i = 0; i < f->n_workers; i++)
        self->resumed_examples += self->resume.workers[i].counts.c[TR_C_examples];
    s_resume_hists(self, path);
    self->resumed = 1;
    SS_LOG(SS_LOG_INFO, "resuming from %s: %llu examples trained, %llu epoch(s) done, dense "
           "state digest %016llx", path, (unsigned long long)self->resumed_examples,
           (unsigned long long)f->epochs_done, (unsigned long long)s_dense_digest(self));
    return 0;
}

int tr_train_checkpointed(const tr_train_t *self)
{
    return self->checkpointed;
}

int tr_train_stopped_kept(const tr_train_t *self)
{
    return self->stopped_kept;
}

/* Open the ring among all trainers: barriers, and the ring sync rules. */
static int s_open_ring(tr_train_t *self, char *err, size_t len)
{
    const struct ss_cfg *cfg = self->cfg;
    const char *eps[SS_CFG_MAX_LIST];
    for (uint32_t i = 0; i < self->shared.n_ranks; i++)
        eps[i] = ss_cluster_endpoint(self->cluster, SS_CLUSTER_TRAINER, i);
    struct tr_allreduce_conf ac = {self->rank, self->shared.n_ranks, eps, cfg->sync_timeout_ms,
                                   0, cfg->max_message_bytes, &self->curve, self->cluster, 0};
    ac.allow_loss = ss_cfg_trainer_loss_allowed(cfg);
    self->ring = tr_allreduce_new(self->shared.zctx, &ac, err, len);
    self->shared.ring = self->ring;
    return self->ring ? 0 : SS_E_NET;
}

/* Where only barriers use the ring (s-easgd, none), form it at the start
 * with one tiny round, so that a trainer that dies before the first barrier
 * can be left out there (the ring leaves out only ranks it has seen: see
 * tr_allreduce.c). One try: a trainer that starts late is waited for at the
 * first barrier as before. The ring rules' shadow thread does this itself. */
static void s_ring_form(tr_train_t *self)
{
    char err[512] = "";
    float one = 1.0f;
    if (self->shared.n_ranks < 2 || !ss_cfg_trainer_loss_allowed(self->cfg))
        return;
    if (tr_allreduce_sum(self->ring, &one, 1, err, sizeof err) != 0)
        SS_LOG(SS_LOG_INFO, "ring not complete at start (%s); it forms at the first barrier, "
               "and a trainer lost before then ends the job", err);
}

int tr_train_run(tr_train_t *self, const struct tr_run_opts *opts, volatile sig_atomic_t *stop,
                 char *err, size_t err_len)
{
    const struct ss_cfg *cfg = self->cfg;
    uint32_t n = (uint32_t)cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    struct tr_worker_counts now, prev;
    const char *pats[SS_CFG_MAX_LIST];
    char terr[256];
    int rc;

    for (size_t i = 0; i < cfg->train_files.n; i++)
        pats[i] = cfg->train_files.v[i];
    int64_t total = tr_reader_total_bytes(pats, cfg->train_files.n, terr, sizeof terr);
    if (total < 0) {
        snprintf(err, err_len, "data.train: %s", terr);
        ss_free(workers);
        return (int)total;
    }
    self->model_dir = opts->model_dir;
    self->ckpt_req = opts->checkpoint;
    self->jobckpt_dir = opts->jobckpt_dir;
    self->train_bytes = total;
    self->has_valid = cfg->valid_files.n > 0 || cfg->valid_fraction > 0;
    int eval = !opts->no_eval && (cfg->eval_files.n > 0 || self->has_valid);
    self->scores = eval && (self->rank == 0 || cfg->sync_algorithm == SS_SYNC_NONE);
    self->input_bytes = total > 0 ? total * cfg->epochs / (int64_t)self->shared.n_ranks : 0;
    self->jsonl = s_open_jsonl(self);
    atomic_store(&self->shared.stop, 0);
    err[0] = 0;
    rc = s_open_ring(self, err, err_len);
    if (rc == 0) {
        self->shadow = tr_shadow_new(&self->shared, self->model, err, err_len);
        rc = (!self->shadow && err[0]) ? SS_E_CONFIG : 0;
        ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
        self->pub_sync_name = self->shadow ? tr_shadow_name(self->shadow) : "none";
        ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
    }
    if (rc == 0 && self->resumed && self->resume.f.n_sync) {
        if (self->shadow)  /* restored when the shadow sets its groups up */
            tr_shadow_set_state(self->shadow, self->resume.sync, self->resume.f.n_sync);
        else
            snprintf(err, err_len, "the job checkpoint holds sync state, the job has sync "
                     "none"), rc = SS_E_CONFIG;
    }
    if (rc == 0 && !(self->shadow && tr_shadow_uses_ring(self->shadow)))
        s_ring_form(self);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (!(workers[i] = tr_worker_new(&self->shared, i, n, 0, err, err_len)))
            rc = SS_E_CONFIG;
        else if (self->resumed)
            rc = tr_worker_set_pos(workers[i], &self->resume.workers[i], err, err_len);
    /* segments: eval_every_examples examples per trainer, or eval_every
     * epochs, or everything at once */
    int by_examples = eval && cfg->eval_every_examples > 0;
    int64_t seg = eval && cfg->eval_every > 0 && !by_examples ? cfg->eval_every : cfg->epochs;
    long long seg_budget = by_examples ? (long long)cfg->eval_every_examples : -1LL;
    self->selects = seg < cfg->epochs || by_examples;
    SS_LOG(SS_LOG_INFO, "training: %u workers, batch %lld, %lld epoch(s)%s", n,
           (long long)cfg->batch_size, (long long)cfg->epochs,
           self->selects ? ", eval and keep the best model between segments" : "");
    if (self->selects && self->has_valid)
        SS_LOG(SS_LOG_INFO, "keep-best and patience read the validation split (%s); data.eval "
               "is scored only on the model kept", s_input_name(cfg, TR_WORKER_VALID));
    else if (self->selects && self->scores)
        SS_LOG(SS_LOG_WARN, "no validation split: keep-best%s choose the epoch on data.eval, so "
               "its eval NE is biased low (set data.valid or data.valid_fraction)",
               cfg->patience > 0 ? " and patience" : "");
    /* A resumed job goes on in the segment its checkpoint names, with that
     * segment's eval_every_examples budget left, the same segment on every
     * trainer (they took the checkpoint in the same one); a barrier checks
     * it. That barrier, or one at the start, is also where the trainers'
     * periodic checkpoint timers start together. */
    int64_t first = seg;
    if (rc == 0 && self->resumed) {
        first = self->resume.f.seg_end;
        uint64_t v[2] = {(uint64_t)first, 1};
        rc = s_barrier_u64(self, v, 2, err, err_len);
        if (rc == 0 && v[0] != v[1] * (uint64_t)first)
            snprintf(err, err_len, "the trainers' job checkpoint states name different "
                     "segments (this one: epoch %lld): they are not of one checkpoint",
                     (long long)first), rc = SS_E_CORRUPT;
        atomic_store(&self->shared.segment_left, (long long)self->resume.f.segment_left);
        if (!by_examples)
            atomic_store(&self->shared.segment_left, -1LL);
    } else if (rc == 0 && cfg->job_ckpt_interval_s > 0) {
        float one = 1;
        rc = s_barrier(self, &one, 1, err, err_len);
    }
    self->ckpt_interval_ns = (uint64_t)(cfg->job_ckpt_interval_s * 1e9);
    if (rc == 0 && self->ckpt_interval_ns)
        self->ckpt_next_ns = ss_now_ns() + self->ckpt_interval_ns;
    /* the clock starts with the workers: connecting the ring and seeding the
     * sync PSs are set-up, not training */
    self->t0_ns = ss_now_ns();
    uint64_t last = self->t0_ns;
    tr_worker_counts_init(&prev);
    int more = 1, fresh = !self->resumed;
    /* One segment per turn, ending at the barriers of s_meet and the vote. A
     * periodic job checkpoint that cut the segment short is taken there and
     * the same segment goes on (a trainer whose workers had finished it
     * meets the others again at once); one that found every trainer at the
     * segment's end waits for the evaluation and is taken before the next
     * segment starts. */
    for (int64_t end = first; rc == 0;) {
        self->shared.epoch_end = (uint64_t)(end < cfg->epochs ? end : cfg->epochs);
        if (fresh)
            atomic_store(&self->shared.segment_left, seg_budget);
        fresh = 1;
        uint64_t seg_t0 = ss_now_ns(), seg_end = 0;
        rc = s_segment(self, workers, n, stop, &prev, &last, &seg_end, err, err_len);
        /* training time: up to the last worker's end; the barrier wait for
         * slower trainers and the final sync are not this trainer's work */
        self->train_ns += (seg_end > seg_t0 ? seg_end : ss_now_ns()) - seg_t0;
        if (rc == 0)
            rc = s_meet(self, err, err_len);
        if (rc == 0)
            rc = s_check_train_input(self, workers, n, err, err_len);
        struct s_ckpt_vote vote = {0};
        if (rc == 0)
            rc = s_vote_checkpoint(self, workers, n, &vote, err, err_len);
        if (rc)
            break;
        struct s_ckpt_at at = {end, (long long)atomic_load(&self->shared.segment_left)};
        if (vote.term) {
            rc = s_stop_checkpoint(self, workers, n, &at, err, err_len);
            break;
        }
        uint64_t t_stop = self->draining ? self->drain_ns : ss_now_ns();
        self->draining = 0;
        atomic_store(&self->shared.drain, 0);
        if (vote.cut) {  /* periodic, in the middle of the segment: go on in it */
            rc = s_periodic_checkpoint(self, workers, n, &at, t_stop, err, err_len);
            fresh = 0;
            continue;
        }
        uint64_t before = self->total.c[TR_C_examples];
        s_sum(workers, n, &self->total);
        rc = s_average_in(self, workers, n, err, err_len);
        if (rc == 0)
            rc = s_decide(self, eval, self->total.c[TR_C_examples] > before, &more, err,
                          err_len);
        if (rc || !more)
            break;
        s_average_out(self);
        end += seg;
        if (vote.periodic) {  /* at the segment's end: before the next one */
            at = (struct s_ckpt_at){end, seg_budget};
            rc = s_periodic_checkpoint(self, workers, n, &at, ss_now_ns(), err, err_len);
        }
    }
    if (rc && self->shadow)
        tr_shadow_abort(self->shadow);
    self->wall_s = (double)self->train_ns / 1e9;
    s_sum(workers, n, &now);
    struct tr_worker_counts zero;
    tr_worker_counts_init(&zero);
    s_progress(self, &now, &zero, (double)(ss_now_ns() - self->t0_ns) / 1e9, self->wall_s,
               self->jsonl, 1);
    self->total = now;
    tr_eval_prog_result(&now.prog, &self->train);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    if (self->jsonl)
        fclose(self->jsonl);
    self->jsonl = NULL;
    return rc;
}

int tr_train_evaluate(tr_train_t *self, struct tr_eval_result *out, char *err, size_t err_len)
{
    return s_score(self, TR_WORKER_EVAL, out, err, err_len);
}

/* Score what (TR_WORKER_EVAL: data.eval; TR_WORKER_VALID: the validation
 * split) with the current dense model. Returns 0 or an error (err). */
static int s_score(tr_train_t *self, int what, struct tr_eval_result *out, char *err,
                   size_t err_len)
{
    uint32_t n = (uint32_t)self->cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    tr_eval_t *all = tr_eval_new(1 << 16);
    struct tr_worker_counts sum;
    const char *name = s_input_name(self->cfg, what);
    int rc;
    if (what == TR_WORKER_EVAL ? self->cfg->eval_files.n == 0 : !self->has_valid) {
        snprintf(err, err_len, "no %s data: set %s in the job file",
                 what == TR_WORKER_EVAL ? "eval" : "validation", name);
        rc = SS_E_CONFIG;
        goto out;
    }
    atomic_store(&self->shared.stop, 0);
    rc = s_start_workers(self, workers, n, what, err, err_len);
    for (uint32_t i = 0; i < n; i++)
        if (workers[i])
            tr_worker_join(workers[i]);
    if (rc == 0) {
        s_sum(workers, n, &sum);
        if (sum.rc) {
            rc = sum.rc;
            snprintf(err, err_len, "%s", sum.err);
        }
    }
    if (rc == 0) {
        uint64_t tot[4] = {sum.c[TR_C_examples], sum.c[TR_C_lines], sum.c[TR_C_bad_lines],
                           sum.c[TR_C_headers]};
        rc = s_judge_input(self->cfg, name, tot, workers, n,
                           "the model was not scored", err, err_len);
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        tr_eval_merge(all, tr_worker_eval(workers[i]));
    if (rc == 0)
        tr_eval_result(all, out);
    if (rc == 0 && sum.c[TR_C_bad_lines])
        SS_LOG(SS_LOG_WARN, "%s: %llu bad lines skipped", name,
               (unsigned long long)sum.c[TR_C_bad_lines]);
out:
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    tr_eval_destroy(&all);
    return rc;
}

/* Whether every one of the n scoring workers has left its loop. */
static int s_predict_done(tr_worker_t **workers, uint32_t n)
{
    struct tr_worker_counts c;
    for (uint32_t i = 0; i < n; i++) {
        tr_worker_snapshot(workers[i], &c);
        if (!c.finished)
            return 0;
    }
    return 1;
}

/* What a failed run leaves, for its message: "no predictions were written
 * to FILE", or for a stream what its reader already has. */
static void s_predict_lost(const struct tr_predict_opts *o, const tr_pred_out_t *po, char *buf,
                           size_t len)
{
    if (o->out_fd < 0)
        snprintf(buf, len, "no predictions were written to %s (its temporary files are "
                 "removed)", o->out);
    else
        snprintf(buf, len, "standard output got only the first %llu line(s): the output is "
                 "incomplete (the temporary parts are removed)",
                 (unsigned long long)(po ? tr_pred_out_lines(po) : 0));
}

/* Stream mode, while the workers score: close the part of each worker that
 * finished well, and copy what is there to the output. *copied: bytes
 * copied. Returns 0 or an error with err. */
static int s_predict_pump(tr_pred_out_t *po, tr_worker_t **workers, uint32_t n, size_t *copied,
                          char *err, size_t len)
{
    struct tr_worker_counts c;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        tr_worker_snapshot(workers[i], &c);
        if (c.finished && c.rc == 0)
            rc = tr_pred_out_part_done(po, i, err, len);
    }
    return rc ? rc : tr_pred_out_pump(po, copied, err, len);
}

/* Create the output: the file's parts, or a stream's. */
static tr_pred_out_t *s_predict_out(const struct tr_predict_opts *o, uint32_t n, char *err,
                                    size_t len)
{
    if (o->out_fd < 0)
        return tr_pred_out_new(o->out, n, err, len);
    if (ss_mkdirs(o->tmp_dir) != 0) {
        snprintf(err, len, "cannot create %s (job.run_dir: the temporary parts of the "
                 "predictions streamed to standard output go there): %s", o->tmp_dir,
                 strerror(errno));
        return NULL;
    }
    return tr_pred_out_new_stream(o->out_fd, o->tmp_dir, n, o->stop, err, len);
}

int tr_train_predict(tr_train_t *self, const struct tr_predict_opts *o,
                     struct tr_predict_result *out, char *err, size_t err_len)
{
    uint32_t n = (uint32_t)self->cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    tr_eval_t *all = tr_eval_new(1 << 16);
    tr_pred_out_t *po = NULL;
    struct tr_worker_counts sum;
    uint64_t t0 = ss_now_ns();
    char lost[512];
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (self->cfg->eval_files.n == 0) {
        snprintf(err, err_len, "nothing to score: set data.eval to the input file(s)");
        rc = SS_E_CONFIG;
        goto out;
    }
    if (!(po = s_predict_out(o, n, err, err_len))) {
        rc = SS_E_IO;
        goto out;
    }
    atomic_store(&self->shared.stop, 0);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        workers[i] = tr_worker_new(&self->shared, i, n, 1, err, err_len);
        if (!workers[i]) {
            rc = SS_E_CONFIG;
            break;
        }
        tr_worker_set_output(workers[i], tr_pred_out_part(po, i), o->keep_bad);
        if (tr_worker_start(workers[i]) != 0) {
            snprintf(err, err_len, "cannot start worker thread %u", i);
            rc = SS_E_NOMEM;
        }
    }
    if (rc)
        atomic_store(&self->shared.stop, 1);
    while (rc == 0 && o->stop && !s_predict_done(workers, n)) {
        size_t copied = 0;
        if (!*o->stop && o->out_fd >= 0 &&
            (rc = s_predict_pump(po, workers, n, &copied, err, err_len)) != 0) {
            atomic_store(&self->shared.stop, 1);  /* the output failed: stop scoring now */
            out->reader_closed = tr_pred_out_reader_gone(po);
            if (rc != SS_E_STOPPED) {
                s_predict_lost(o, po, lost, sizeof lost);
                snprintf(err + strlen(err), err_len - strlen(err), "; stopped: %s", lost);
                break;
            }
        }
        if (*o->stop) {  /* the workers stop at their next batch; the files go now */
            atomic_store(&self->shared.stop, 1);
            tr_pred_out_discard(po);
            s_predict_lost(o, po, lost, sizeof lost);
            snprintf(err, err_len, "stopped by a signal: %s", lost);
            SS_LOG(SS_LOG_WARN, "%s", err);  /* before any wait */
            rc = SS_E_STOPPED;
            break;
        }
        if (copied == 0)
            usleep(o->out_fd >= 0 ? 5000 : 20000);
    }
    s_join_workers(workers, n);
    if (rc == 0) {
        s_sum(workers, n, &sum);
        if (sum.rc) {
            rc = sum.rc;
            s_predict_lost(o, po, lost, sizeof lost);
            snprintf(err, err_len, "%s; %s", sum.err, lost);
        }
    }
    if (rc == 0) {
        uint64_t tot[4] = {sum.c[TR_C_examples], sum.c[TR_C_lines], sum.c[TR_C_bad_lines],
                           sum.c[TR_C_headers]};
        s_predict_lost(o, po, lost, sizeof lost);
        rc = s_judge_input(self->cfg, "data.eval", tot, workers, n,
                           o->out_fd < 0 ? "no predictions were written" : lost, err, err_len);
    }
    if (rc == 0 && (rc = tr_pred_out_commit(po, err, err_len)) != 0 && o->out_fd >= 0) {
        out->reader_closed = tr_pred_out_reader_gone(po);
        s_predict_lost(o, po, lost, sizeof lost);
        snprintf(err + strlen(err), err_len - strlen(err), "; %s", lost);
    }
    if (rc == 0) {
        for (uint32_t i = 0; i < n; i++)
            tr_eval_merge(all, tr_worker_eval(workers[i]));
        tr_eval_result(all, &out->eval);
        out->rows = sum.c[TR_C_examples];
        out->bad_lines = sum.c[TR_C_bad_lines];
        out->headers = sum.c[TR_C_headers];
        out->lines_written = out->rows + (o->keep_bad ? out->bad_lines : 0);
        out->wall_s = (double)(ss_now_ns() - t0) / 1e9;
        if (out->bad_lines)
            s_first_bad(workers, n, out->first_bad, sizeof out->first_bad);
    }
out:
    tr_pred_out_destroy(&po);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    tr_eval_destroy(&all);
    return rc;
}

/* ------------------------------------------------------------ save/load */

struct tr_dense_hdr {
    char magic[8];             /* TR_DENSE_MAGIC */
    uint64_t n_params;         /* floats that follow */
    uint64_t shape_hash;       /* hash of the model shape */
    uint64_t checksum;         /* ss_hash_bytes of the floats */
};

/* Hash of the model shape. Without first-order terms it covers the fields up to
 * first_order only: the hash of the shape before that field existed, so older
 * dense.bin files still load; the fields after first_order (how the products
 * run) are never part of it. */
static uint64_t s_shape_hash(const tr_train_t *self)
{
    return tr_mfile_shape_hash(tr_model_conf(self->model));
}

/* Write the dense model to DIR/dense.bin (atomic: a temporary file renamed
 * over it). A full disk is named: "cannot write PATH: No space left on
 * device". */
static int s_save_dense(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 3];
    size_t bytes = self->n_params * sizeof(float);
    float *copy = ss_malloc(bytes);
    memcpy(copy, self->shared.w, bytes);  /* workers are stopped: a plain copy */
    uint64_t bad = ss_floats_first_nonfinite(copy, self->n_params);
    if (bad < self->n_params) {  /* a diverged model scores NaN: never save one */
        snprintf(err, len, "the dense model holds a non-finite value (parameter %llu of %zu "
                 "is %g): the training diverged (try a lower model.lr); it is not saved",
                 (unsigned long long)bad, self->n_params, (double)copy[bad]);
        ss_free(copy);
        return SS_E_INVAL;
    }
    struct tr_dense_hdr h = {TR_DENSE_MAGIC, self->n_params, s_shape_hash(self),
                             ss_hash_bytes(copy, bytes, 0)};
    struct ss_fs_piece pieces[2] = {{&h, sizeof h}, {copy, bytes}};
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    int rc = ss_fs_write_atomic(path, pieces, 2, err, len);
    ss_free(copy);
    if (rc == 0)
        SS_LOG(SS_LOG_INFO, "dense model saved to %s", path);
    return rc;
}

/* A save id: one per save, the same in every file of the save. */
static uint64_t s_new_save_id(void)
{
    return ss_mix64(ss_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
}

/* The folder name a PS is sent for dir: relative to job.run_dir when dir
 * lies inside it (each PS resolves it in its own run directory, which
 * differs per host with --remote-run-dir), else dir itself. */
static const char *s_ps_folder(const tr_train_t *self, const char *dir)
{
    size_t n = strlen(self->cfg->run_dir);
    if (n && strncmp(dir, self->cfg->run_dir, n) == 0 && dir[n] == '/' && dir[n + 1])
        return dir + n + 1;
    return dir;
}

/* Send every PS of the job (the sync PSs only where EASGD uses them) one
 * request of type (CHECKPOINT or CHECKPOINT_DONE) naming folder dir (see
 * s_ps_folder) and save_id, one PS after the other. Returns 0 or the first
 * failure, with err naming the PS and carrying its reply. Main thread. */
static int s_each_ps(tr_train_t *self, int type, uint64_t save_id, const char *dir, char *err,
                     size_t len)
{
    const struct ss_cfg *cfg = self->cfg;
    struct ss_conn_opts o = {.max_message_bytes = cfg->max_message_bytes,
                             .timeout_ms = cfg->request_timeout_ms * 6,
                             .curve = &self->curve,
                             .max_in_flight = cfg->security.max_in_flight};
    size_t n_emb = ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING);
    size_t n_sync = ss_cluster_count(self->cluster, SS_CLUSTER_SYNC);
    char token[SS_ADMIN_TOKEN_MAX];  /* admin requests carry the job's token, if any */
    int trc = ss_admin_token_read(cfg->security.admin_token_file, token, err, len);
    if (trc)
        return trc;
    for (size_t i = 0; i < n_emb + n_sync; i++) {
        int role = i < n_emb ? SS_CLUSTER_EMBEDDING : SS_CLUSTER_SYNC;
        size_t k = i < n_emb ? i : i - n_emb;
        const char *ep = ss_cluster_endpoint(self->cluster, role, k);
        if (role == SS_CLUSTER_SYNC && !(self->shadow && tr_shadow_uses_sync_ps(self->shadow)))
            continue;  /* sync PSs hold nothing without EASGD (alone or in a group) */
        ss_conn_t *c = ss_conn_new(self->shared.zctx, ep, &o);
        Header h = HEADER__INIT;
        struct ss_msg reply = {0};
        char why[768] = "";
        h.type = type;
        h.has_save_id = 1;
        h.save_id = save_id;
        h.text = dir ? (char *)s_ps_folder(self, dir) : NULL;
        h.admin_token = token[0] ? token : NULL;
        int rc = c ? ss_conn_hello(c, ss_cluster_hello_hash(self->cluster, role, k), why,
                                   sizeof why)
                   : SS_E_NET;
        if (rc == 0)
            rc = ss_conn_call(c, &h, NULL, 0, -1, &reply, why, sizeof why);
        if (rc == 0 && type == MSG_TYPE__MSG_CHECKPOINT)
            SS_LOG(SS_LOG_INFO, "PS %s checkpointed to %s", ep, reply.hdr->text);
        if (rc == 0 || rc == SS_E_PEER)
            ss_msg_close(&reply);
        ss_conn_destroy(&c);
        if (rc) {
            snprintf(err, len, "%s PS %zu did not %s: %s",
                     role == SS_CLUSTER_SYNC ? "sync" : "embedding", k,
                     type == MSG_TYPE__MSG_CHECKPOINT ? "checkpoint"
                                                      : "take note of the committed save",
                     why[0] ? why : ss_strerror(rc));
            return rc;
        }
    }
    return 0;
}

int tr_train_checkpoint_ps(tr_train_t *self, uint64_t save_id, const char *dir, char *err,
                           size_t len)
{
    return s_each_ps(self, MSG_TYPE__MSG_CHECKPOINT, save_id, dir, err, len);
}

/* After the save in folder dir (DIR.new-ID) was committed: every PS drops
 * its files of earlier saves beside it (CHECKPOINT_DONE). They are left
 * only on hosts that share no file system with this trainer's, where
 * nothing else removes them before the launcher's gather. A failure costs
 * disk space, not the save: logged, not returned. Main thread. */
static void s_ps_drop_earlier(tr_train_t *self, uint64_t save_id, const char *dir)
{
    char err[1024];
    if (s_each_ps(self, MSG_TYPE__MSG_CHECKPOINT_DONE, save_id, dir, err, sizeof err) != 0)
        SS_LOG(SS_LOG_WARN, "%s; the PS keeps its files of earlier saves beside %s until the "
               "launcher gathers the run directory", err, dir);
}

/* DIR/MANIFEST: what the model folder holds and the save it comes from
 * (the PS files record the same save id). */
static int s_write_manifest(tr_train_t *self, const char *dir, uint64_t save_id, char *err,
                            size_t len)
{
    char path[SS_CFG_MAX_STR * 3], text[256];
    int with_sync = self->shadow && tr_shadow_uses_sync_ps(self->shadow);
    int n = snprintf(text, sizeof text,
                     "shadowsync-model 1\nsave_id %016llx\ndense dense.bin\n"
                     "embedding_shards %zu\nsync_shards %zu\n", (unsigned long long)save_id,
                     ss_cluster_count(self->cluster, SS_CLUSTER_EMBEDDING),
                     with_sync ? ss_cluster_count(self->cluster, SS_CLUSTER_SYNC) : (size_t)0);
    struct ss_fs_piece piece = {text, (size_t)n};
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    return ss_fs_write_atomic(path, &piece, 1, err, len);
}

/* DESIGN: the output model is one set, the dense model and every PS's
 * embeddings (and EASGD center) of one save. It is written into a new folder
 * next to dir, DIR.new-ID: dense.bin, each PS's ROLE-K.ckpt, then MANIFEST
 * naming the save. Only when every part succeeded does the new folder take
 * dir's place in one step (ss_fs_replace_dir: an atomic exchange); on any
 * failure (a PS that cannot checkpoint, a full disk here) the new folder is
 * removed and dir stays as it was, whole. */
int tr_train_save(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char tmp[SS_CFG_MAX_STR * 2 + 32], why[1024] = "";
    uint64_t save_id = s_new_save_id();
    snprintf(tmp, sizeof tmp, "%s.new-%016llx", dir, (unsigned long long)save_id);
    int rc = ss_mkdirs(tmp);
    if (rc)
        snprintf(why, sizeof why, "cannot create %s: %s", tmp, strerror(errno)),
            rc = ss_fs_errno_rc(errno);
    if (rc == 0)
        rc = s_save_dense(self, tmp, why, sizeof why);
    if (rc == 0)
        rc = tr_train_checkpoint_ps(self, save_id, tmp, why, sizeof why);
    if (rc == 0)
        rc = s_write_manifest(self, tmp, save_id, why, sizeof why);
    if (rc == 0)
        rc = ss_fs_replace_dir(tmp, dir, why, sizeof why);
    if (rc) {
        (void)ss_fs_remove_tree(tmp);
        char prev[SS_CFG_MAX_STR * 2 + 16];
        snprintf(prev, sizeof prev, "%s/dense.bin", dir);
        if (access(prev, F_OK) == 0)
            snprintf(err, len, "saving the model failed: %s; the previous model in %s is kept "
                     "as it was", why, dir);
        else
            snprintf(err, len, "saving the model failed: %s; no model is saved in %s", why,
                     dir);
        return rc;
    }
    SS_LOG(SS_LOG_INFO, "model saved to %s (dense model and embeddings of save %016llx)", dir,
           (unsigned long long)save_id);
    s_ps_drop_earlier(self, save_id, tmp);
    return 0;
}

int tr_train_load(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 2];
    struct tr_dense_hdr h;
    size_t bytes = self->n_params * sizeof(float);
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "cannot open %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    float *buf = ss_malloc(bytes);
    int rc = 0;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, TR_DENSE_MAGIC, 8) != 0)
        snprintf(err, len, "%s is not a ShadowSync dense model", path), rc = SS_E_CORRUPT;
    else if (h.n_params != self->n_params || h.shape_hash != s_shape_hash(self))
        snprintf(err, len, "%s has another model shape (%llu parameters, job has %zu)", path,
                 (unsigned long long)h.n_params, self->n_params), rc = SS_E_CORRUPT;
    else if (fread(buf, 1, bytes, f) != bytes || ss_hash_bytes(buf, bytes, 0) != h.checksum)
        snprintf(err, len, "%s is truncated or corrupted (checksum)", path), rc = SS_E_CORRUPT;
    else
        memcpy(self->shared.w, buf, bytes);
    fclose(f);
    ss_free(buf);
    return rc;
}

/* ------------------------------------------------------------ results */

/* What the output model is, for the result file and the summary. */
static const char *s_output_kind(const tr_train_t *self)
{
    if (!self->shadow)
        return "replica";  /* sync none: each trainer's own */
    return tr_shadow_uses_sync_ps(self->shadow) && !tr_shadow_uses_ring(self->shadow)
               ? "center"
               : "average";
}

/* The evaluation ev (NULL: none) into sn, replacing the last published. */
static void s_snap_eval(struct ss_snap *sn, const struct tr_eval_result *ev)
{
    static const int ids[] = {TR_S_eval_rows, TR_S_eval_logloss, TR_S_eval_ne, TR_S_eval_auc,
                              TR_S_eval_calibration};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        sn->v[ids[i]].type = SS_VAL_NONE;
    if (!ev)
        return;
    ss_snap_u64(sn, TR_S_eval_rows, ev->rows);
    ss_snap_num(sn, TR_S_eval_logloss, ev->logloss);
    ss_snap_num(sn, TR_S_eval_ne, ev->ne);
    ss_snap_num(sn, TR_S_eval_auc, ev->auc);
    ss_snap_num(sn, TR_S_eval_calibration, ev->calibration);
}

/* The validation ev (NULL: none) into sn, replacing the last published. */
static void s_snap_valid(struct ss_snap *sn, const struct tr_eval_result *ev)
{
    static const int ids[] = {TR_S_valid_rows, TR_S_valid_logloss, TR_S_valid_ne,
                              TR_S_valid_auc, TR_S_valid_calibration};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        sn->v[ids[i]].type = SS_VAL_NONE;
    if (!ev)
        return;
    ss_snap_u64(sn, TR_S_valid_rows, ev->rows);
    ss_snap_num(sn, TR_S_valid_logloss, ev->logloss);
    ss_snap_num(sn, TR_S_valid_ne, ev->ne);
    ss_snap_num(sn, TR_S_valid_auc, ev->auc);
    ss_snap_num(sn, TR_S_valid_calibration, ev->calibration);
}

/* Where the process's CPU time went: training workers, shadow thread (its
 * rounds), ZeroMQ I/O thread, and the rest (main thread, evaluation, exited
 * threads). */
static void s_snap_cpu(struct ss_snap *sn, const struct tr_worker_counts *t, tr_shadow_t *shadow)
{
    static const char *const io[] = {"ZMQbg/IO"};
    double total = ss_cpu_process_s(), io_s, workers = (double)t->c[TR_C_cpu_ns] / 1e9, sh = 0;
    struct tr_shadow_stats st;
    if (shadow) {
        tr_shadow_get_stats(shadow, &st);
        sh = st.cpu_s;
    }
    ss_cpu_split(io, 1, &io_s);
    ss_snap_num(sn, TR_S_cpu_s, total);
    ss_snap_num(sn, TR_S_cpu_workers_s, workers);
    ss_snap_num(sn, TR_S_cpu_shadow_s, sh);
    ss_snap_num(sn, TR_S_cpu_zmq_io_s, io_s);
    ss_snap_num(sn, TR_S_cpu_other_s, total - workers - sh - io_s);
}

/* The sync figures at the end (shadow algorithms) and the ring's. */
static void s_snap_sync(const tr_train_t *self, struct ss_snap *sn)
{
    if (self->ring && self->shared.n_ranks > 1) {  /* the ring at the end: survivors */
        struct tr_allreduce_stats a;
        tr_allreduce_get_stats(self->ring, &a);
        ss_snap_u64(sn, TR_S_ring_size, tr_allreduce_size(self->ring));
        ss_snap_u64(sn, TR_S_ring_changes, a.changes);
        ss_snap_u64(sn, TR_S_ring_reform_ms, a.reform_ms);
        ss_snap_u64(sn, TR_S_ring_handshakes_failed, a.handshakes_failed);
    }
    if (!self->shadow)
        return;
    const struct tr_shadow_stats *y = &self->sync;
    ss_snap_u64(sn, TR_S_sync_rounds, y->rounds);
    ss_snap_u64(sn, TR_S_sync_failed_rounds, y->failed_rounds);
    ss_snap_u64(sn, TR_S_sync_reseeds, y->reseeds);
    ss_snap_bool(sn, TR_S_sync_final_ok, y->final_ok);
    ss_snap_num(sn, TR_S_sync_rounds_per_min, y->rounds_per_min);
    ss_snap_num(sn, TR_S_sync_gap, y->gap_mean);
    ss_snap_num(sn, TR_S_sync_latency_p50_ms, y->latency_p50_ms);
    ss_snap_num(sn, TR_S_sync_latency_p99_ms, y->latency_p99_ms);
    ss_snap_num(sn, TR_S_sync_drift, y->drift);
    ss_snap_num(sn, TR_S_sync_cpu_s, y->cpu_s);
    ss_snap_u64(sn, TR_S_sync_ring_bytes_sent, y->ring_bytes_sent);
    ss_snap_u64(sn, TR_S_sync_ring_bytes_received, y->ring_bytes_received);
}

int tr_train_write_result(tr_train_t *self, const struct tr_eval_result *loaded, char *err,
                          size_t len)
{
    char path[SS_CFG_MAX_STR * 2];
    const struct tr_worker_counts *t = &self->total;
    const struct tr_eval_result *ev = loaded              ? loaded
                                      : self->has_valid   ? (self->have_test ? &self->test : NULL)
                                      : self->have_eval   ? &self->best
                                                          : NULL;
    const struct tr_eval_result *va = !loaded && self->has_valid && self->have_eval
                                          ? &self->best : NULL;
    double examples = (double)t->c[TR_C_examples];
    double eps = self->wall_s > 0 ? examples / self->wall_s : 0;
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    s_snap(self, t, &sn, v);
    ss_snap_num(&sn, TR_S_eps, eps);
    ss_snap_num(&sn, TR_S_wall_s, self->wall_s);
    ss_snap_num(&sn, TR_S_train_ne, self->train.ne);
    ss_snap_u64(&sn, TR_S_epochs_done, self->epochs_done);
    ss_snap_u64(&sn, TR_S_evals, self->n_evals);
    ss_snap_bool(&sn, TR_S_stopped_early, self->stopped_early);
    ss_snap_str(&sn, TR_S_sync_algorithm, self->shadow ? tr_shadow_name(self->shadow) : "none");
    ss_snap_str(&sn, TR_S_output_model, s_output_kind(self));
    ss_snap_bool(&sn, TR_S_model_saved, self->saved);
    s_snap_sync(self, &sn);
    if (ev || va)
        ss_snap_u64(&sn, TR_S_best_epoch, self->best_epoch);
    s_snap_eval(&sn, ev);
    s_snap_valid(&sn, va);
    if (!loaded && self->selects)
        ss_snap_str(&sn, TR_S_selected_on,
                    s_input_name(self->cfg, self->has_valid ? TR_WORKER_VALID : TR_WORKER_EVAL));
    if (!loaded)
        ss_snap_u64(&sn, TR_S_eval_scorings, self->n_test_scorings);
    s_snap_cpu(&sn, t, self->shadow);
    snprintf(path, sizeof path, "%s/result-trainer-%u.json", self->cfg->run_dir, self->rank);
    FILE *f = ss_mkdirs(self->cfg->run_dir) == 0 ? fopen(path, "w") : NULL;
    if (!f) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    s_write_row(f, &sn, TR_IN_RESULT);
    if (fclose(f) != 0) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    printf("trainer %u: %.0f examples in %.1f s (%.0f ex/s), %.0f bad lines, train NE %.4f\n",
           self->rank, examples, self->wall_s, eps, ss_snap_get(&sn, TR_S_bad_lines),
           self->train.ne);
    if (va)
        printf("trainer %u valid: rows %llu  logloss %.5f  NE %.4f  AUC %.4f  (%s: chose the "
               "model kept)\n", self->rank, (unsigned long long)va->rows, va->logloss, va->ne,
               va->auc, s_input_name(self->cfg, TR_WORKER_VALID));
    if (ev)
        printf("trainer %u eval: rows %llu  logloss %.5f  NE %.4f  AUC %.4f  calibration %.3f\n",
               self->rank, (unsigned long long)ev->rows, ev->logloss, ev->ne, ev->auc,
               ev->calibration);
    if (ev && !loaded && self->selects && !self->has_valid)
        printf("trainer %u: the epoch kept was chosen on data.eval (no validation split): its "
               "eval NE is biased low; set data.valid or data.valid_fraction\n", self->rank);
    return 0;
}

/* The figures now, for the metrics and admin threads: the workers' counter
 * slots summed this moment, the rest as of the last progress line. */
static void s_snap_live(tr_train_t *self, struct ss_snap *sn, struct ss_val *v)
{
    struct tr_worker_counts now;
    tr_worker_counts_of(self->ctrs, &now);
    s_snap(self, &now, sn, v);
}

/* The latency histograms, after the table's samples (so the wait
 * histogram is read after the batch counter: see tr_worker.c). The round
 * histogram is there once the sync rules are known, labelled with their
 * name (tr_shadow_name: "s-easgd", "bottom:s-ma,top:s-bmuf"). */
static void s_prom_hists(tr_train_t *self, ss_mw_t *w)
{
    struct ss_hist h;
    char labels[160] = "";
    ss_hists_sum(self->shared.ps_wait_hist, (size_t)self->cfg->workers, &h);
    ss_mw_hist(w, "shadowsync_trainer_batch_ps_wait_seconds",
               "time a training worker waited for its embedding PS replies, per batch", NULL,
               &h);
    ss_assert(pthread_mutex_lock(&self->pub_lock) == 0);
    if (strcmp(self->pub_sync_name, "none") != 0)
        snprintf(labels, sizeof labels, "algorithm=\"%s\"", self->pub_sync_name);
    ss_assert(pthread_mutex_unlock(&self->pub_lock) == 0);
    if (labels[0])
        ss_mw_hist(w, "shadowsync_trainer_sync_round_seconds",
                   "duration of each completed shadow sync round", labels,
                   &self->shared.sync_round_hist);
}

void tr_train_metrics(void *arg, ss_mw_t *w)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    s_snap_live(arg, &sn, v);
    ss_snap_prom(&sn, w);
    s_prom_hists(arg, w);
}

char *tr_train_stats_json(tr_train_t *self, size_t max)
{
    struct ss_val v[TR_N_STATS];
    struct ss_snap sn;
    s_snap_live(self, &sn, v);
    return ss_snap_json(&sn, TR_IN_STATS, max, NULL);
}

char *tr_train_stats_fn(void *arg, size_t max)
{
    return tr_train_stats_json(arg, max);
}

void *tr_train_zctx(tr_train_t *self)
{
    return self->shared.zctx;
}

const struct ss_curve *tr_train_curve(const tr_train_t *self)
{
    return &self->curve;
}
