/* tr_train.c - a trainer: dense replica, workers, progress, eval, save. */
#include "tr_train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_hash.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_net.h"
#include "ss_time.h"
#include "tr_model.h"
#include "tr_reader.h"
#include "tr_shadow.h"
#include "tr_worker.h"

#define TR_DENSE_MAGIC "SSDENSE1"

struct tr_train {
    const struct ss_cfg *cfg;      /* borrowed */
    uint32_t rank;                 /* this trainer */
    tr_model_t *model;             /* shape */
    size_t n_params;               /* floats in w */
    struct tr_shared shared;       /* what workers share */
    int64_t input_bytes;           /* this trainer's share of the input, all epochs */
    double wall_s;                 /* training time */
    struct tr_worker_counts total; /* summed at the end of training */
    struct tr_eval_result train;   /* progressive train metrics at the end */
    tr_shadow_t *shadow;           /* dense sync, NULL for sync none */
    struct tr_shadow_stats sync;   /* sync figures at the end */
};

static int s_model_conf(const struct ss_cfg *cfg, struct tr_model_conf *mc)
{
    memset(mc, 0, sizeof *mc);
    mc->n_dense = TR_N_DENSE;
    mc->n_sparse = TR_N_SPARSE;
    mc->dim = (uint32_t)cfg->embedding_dim;
    mc->first_order = cfg->first_order ? 1u : 0u;
    if (cfg->bottom_mlp.n > TR_MODEL_MAX_MLP || cfg->top_mlp.n > TR_MODEL_MAX_MLP)
        return SS_E_CONFIG;
    mc->n_bottom = (uint32_t)cfg->bottom_mlp.n;
    for (size_t i = 0; i < cfg->bottom_mlp.n; i++)
        mc->bottom[i] = (uint32_t)cfg->bottom_mlp.v[i];
    mc->n_top = (uint32_t)cfg->top_mlp.n;
    for (size_t i = 0; i < cfg->top_mlp.n; i++)
        mc->top[i] = (uint32_t)cfg->top_mlp.v[i];
    return 0;
}

tr_train_t *tr_train_new(const struct ss_cfg *cfg, uint32_t rank, char *err, size_t err_len)
{
    struct tr_model_conf mc;
    tr_train_t *self = ss_calloc(1, sizeof *self);
    self->cfg = cfg;
    self->rank = rank;
    if (s_model_conf(cfg, &mc) != 0 || !(self->model = tr_model_new(&mc, err, err_len))) {
        if (!self->model && !err[0])
            snprintf(err, err_len, "model: too many layers");
        ss_free(self);
        return NULL;
    }
    self->n_params = tr_model_n_params(self->model);
    self->shared.cfg = cfg;
    self->shared.model = self->model;
    self->shared.w = ss_aligned_alloc(64, self->n_params * sizeof(float));
    tr_model_init_params(self->model, self->shared.w, (uint64_t)cfg->job_seed);
    if (cfg->dense_optimizer == SS_OPT_ADAGRAD)
        self->shared.acc = ss_aligned_alloc(64, self->n_params * sizeof(float));
    if (self->shared.acc)
        memset(self->shared.acc, 0, self->n_params * sizeof(float));
    self->shared.zctx = zmq_ctx_new();
    self->shared.rank = rank;
    self->shared.n_ranks = (uint32_t)cfg->trainer_eps.n;
    atomic_init(&self->shared.stop, 0);
    atomic_init(&self->shared.examples_done, 0);
    atomic_init(&self->shared.examples_left,
                cfg->max_examples > 0 ? (long long)cfg->max_examples : -1LL);
    SS_LOG(SS_LOG_INFO, "model: %zu dense parameters, %.0f FLOP per example", self->n_params,
           tr_model_flops_per_example(self->model));
    return self;
}

void tr_train_destroy(tr_train_t **self_p)
{
    tr_train_t *self = *self_p;
    if (!self)
        return;
    tr_shadow_destroy(&self->shadow);
    zmq_ctx_term(self->shared.zctx);
    ss_free(self->shared.w);
    ss_free(self->shared.acc);
    tr_model_destroy(&self->model);
    ss_free(self);
    *self_p = NULL;
}

/* ------------------------------------------------------------ progress */

/* Sum the counters of n workers; returns how many have finished. */
static int s_sum(tr_worker_t **workers, uint32_t n, struct tr_worker_counts *sum)
{
    int finished = 0;
    memset(sum, 0, sizeof *sum);
    tr_eval_prog_init(&sum->prog);
    for (uint32_t i = 0; i < n; i++) {
        struct tr_worker_counts c;
        if (!workers[i])
            continue;  /* never created: its error is already in err */
        tr_worker_snapshot(workers[i], &c);
        sum->examples += c.examples;
        sum->batches += c.batches;
        sum->lines += c.lines;
        sum->bad_lines += c.bad_lines;
        sum->bytes_read += c.bytes_read;
        sum->ps_wait_ns += c.ps_wait_ns;
        sum->compute_ns += c.compute_ns;
        sum->keys_total += c.keys_total;
        sum->keys_unique += c.keys_unique;
        sum->pushes_full += c.pushes_full;
        tr_eval_prog_merge(&sum->prog, &c.prog);
        finished += c.finished;
        if (c.rc && !sum->rc) {
            sum->rc = c.rc;
            snprintf(sum->err, sizeof sum->err, "%s", c.err);
        }
    }
    return finished;
}

/* Print one progress line (redrawn in place on a terminal) and one JSONL row. */
static void s_progress(tr_train_t *self, const struct tr_worker_counts *now,
                       const struct tr_worker_counts *prev, double t, double dt, FILE *jsonl,
                       int final)
{
    struct tr_eval_result r;
    double eps = dt > 0 ? (double)(now->examples - prev->examples) / dt : 0;
    double frac = self->input_bytes > 0 ? (double)now->bytes_read / (double)self->input_bytes : 0;
    char eta[32] = "";
    tr_eval_prog_result(&now->prog, &r);
    if (frac > 0.001 && frac < 1 && !final)
        snprintf(eta, sizeof eta, "  ETA %.0fs", t * (1 - frac) / frac);
    int tty = isatty(STDERR_FILENO);
    struct tr_shadow_stats ss = {0};
    char sync[160] = "";
    if (self->shadow) {
        tr_shadow_get_stats(self->shadow, &ss);
        snprintf(sync, sizeof sync, " | sync %.0f/min gap %.1f drift %.2g", ss.rounds_per_min,
                 ss.gap_mean, ss.drift);
    }
    fprintf(stderr, "%strainer %u | %llu ex | %.0f ex/s | train NE %.4f%s | %.1fs%s%s",
            tty ? "\r\033[K" : "", self->rank, (unsigned long long)now->examples, eps, r.ne,
            sync, t, eta, tty && !final ? "" : "\n");
    fflush(stderr);
    if (jsonl) {
        fprintf(jsonl,
                "{\"rank\":%u,\"t\":%.3f,\"examples\":%llu,\"eps\":%.1f,\"train_ne\":%.6f,"
                "\"train_logloss\":%.6f,\"bad_lines\":%llu,\"ps_wait_s\":%.3f,"
                "\"compute_s\":%.3f,\"sync_rounds\":%llu,\"sync_rounds_per_min\":%.2f,"
                "\"sync_gap\":%.2f,\"sync_latency_p50_ms\":%.3f,\"sync_latency_p99_ms\":%.3f,"
                "\"sync_drift\":%.6g}\n",
                self->rank, t, (unsigned long long)now->examples, eps, r.ne, r.logloss,
                (unsigned long long)now->bad_lines, (double)now->ps_wait_ns / 1e9,
                (double)now->compute_ns / 1e9, (unsigned long long)ss.rounds, ss.rounds_per_min,
                ss.gap_mean, ss.latency_p50_ms, ss.latency_p99_ms, ss.drift);
        fflush(jsonl);
    }
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

static void s_stop_workers(tr_train_t *self, tr_worker_t **workers, uint32_t n)
{
    atomic_store(&self->shared.stop, 1);
    for (uint32_t i = 0; i < n; i++)
        if (workers[i]) {
            tr_worker_join(workers[i]);
        }
}

int tr_train_run(tr_train_t *self, volatile sig_atomic_t *stop, char *err, size_t err_len)
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
    self->input_bytes = total > 0 ? total * cfg->epochs / (int64_t)self->shared.n_ranks : 0;
    FILE *jsonl = s_open_jsonl(self);
    atomic_store(&self->shared.stop, 0);
    err[0] = 0;
    self->shadow = tr_shadow_new(&self->shared, self->model, err, err_len);
    rc = (!self->shadow && err[0]) ? SS_E_CONFIG : 0;
    if (rc == 0 && self->shadow)
        rc = tr_shadow_start(self->shadow, err, err_len);
    /* the clock starts with the workers: connecting the ring and seeding the
     * sync PSs are set-up, not training */
    uint64_t t0 = ss_now_ns(), last = t0;
    if (rc == 0)
        rc = s_start_workers(self, workers, n, 0, err, err_len);
    memset(&prev, 0, sizeof prev);
    SS_LOG(SS_LOG_INFO, "training: %u workers, batch %lld, %lld epoch(s)", n,
           (long long)cfg->batch_size, (long long)cfg->epochs);
    while (rc == 0) {
        usleep(50000);
        uint64_t t = ss_now_ns();
        int done = s_sum(workers, n, &now);
        if (*stop) {
            snprintf(err, err_len, "interrupted");
            rc = SS_E_STOPPED;
            break;
        }
        if (done == (int)n || now.rc)
            break;
        if ((double)(t - last) / 1e9 >= cfg->metrics_interval_s) {
            s_progress(self, &now, &prev, (double)(t - t0) / 1e9, (double)(t - last) / 1e9,
                       jsonl, 0);
            prev = now;
            last = t;
        }
    }
    s_stop_workers(self, workers, n);
    s_sum(workers, n, &now);
    if (self->shadow && rc == 0 && now.rc == 0) {
        char serr[512] = "";
        if (tr_shadow_finish(self->shadow, serr, sizeof serr) != 0)
            SS_LOG(SS_LOG_WARN, "final sync did not complete (%s): this trainer keeps its own "
                   "replica", serr);
        tr_shadow_get_stats(self->shadow, &self->sync);
    }
    self->wall_s = (double)(ss_now_ns() - t0) / 1e9;
    if (rc == 0 && now.rc) {
        rc = now.rc;
        snprintf(err, err_len, "%s", now.err);
    }
    struct tr_worker_counts zero = {0};
    tr_eval_prog_init(&zero.prog);
    s_progress(self, &now, &zero, self->wall_s, self->wall_s, jsonl, 1);
    self->total = now;
    tr_eval_prog_result(&now.prog, &self->train);
    for (uint32_t i = 0; i < n; i++)
        tr_worker_destroy(&workers[i]);
    ss_free(workers);
    if (jsonl)
        fclose(jsonl);
    return rc;
}

int tr_train_evaluate(tr_train_t *self, struct tr_eval_result *out, char *err, size_t err_len)
{
    uint32_t n = (uint32_t)self->cfg->workers;
    tr_worker_t **workers = ss_calloc(n, sizeof *workers);
    tr_eval_t *all = tr_eval_new(1 << 16);
    struct tr_worker_counts sum;
    int rc;
    if (self->cfg->eval_files.n == 0) {
        snprintf(err, err_len, "no eval data: set data.eval in the job file");
        rc = SS_E_CONFIG;
        goto out;
    }
    atomic_store(&self->shared.stop, 0);
    rc = s_start_workers(self, workers, n, 1, err, err_len);
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
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        tr_eval_merge(all, tr_worker_eval(workers[i]));
    if (rc == 0)
        tr_eval_result(all, out);
    if (rc == 0 && sum.bad_lines)
        SS_LOG(SS_LOG_WARN, "eval: %llu bad lines skipped", (unsigned long long)sum.bad_lines);
out:
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
 * dense.bin files still load. */
static uint64_t s_shape_hash(const tr_train_t *self)
{
    const struct tr_model_conf *mc = tr_model_conf(self->model);
    struct tr_model_conf copy = *mc;
    copy.portable = 0;
    size_t n = copy.first_order ? sizeof copy : offsetof(struct tr_model_conf, first_order);
    return ss_hash_bytes(&copy, n, 7);
}

static int s_save_dense(tr_train_t *self, const char *dir, char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 2], tmp[SS_CFG_MAX_STR * 2 + 8];
    size_t bytes = self->n_params * sizeof(float);
    float *copy = ss_malloc(bytes);
    memcpy(copy, self->shared.w, bytes);  /* workers are stopped: a plain copy */
    struct tr_dense_hdr h = {TR_DENSE_MAGIC, self->n_params, s_shape_hash(self),
                             ss_hash_bytes(copy, bytes, 0)};
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = ss_mkdirs(dir) == 0 ? fopen(tmp, "wb") : NULL;
    int ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(copy, 1, bytes, f) == bytes &&
             fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f) != 0)
        ok = 0;
    ok = ok && rename(tmp, path) == 0;
    ss_free(copy);
    if (!ok) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return SS_E_IO;
    }
    SS_LOG(SS_LOG_INFO, "dense model saved to %s", path);
    return 0;
}

/* Ask every PS of the job to checkpoint. */
static int s_checkpoint_ps(tr_train_t *self, char *err, size_t len)
{
    const struct ss_cfg *cfg = self->cfg;
    struct ss_conn_opts o = {cfg->max_message_bytes, cfg->request_timeout_ms * 6};
    for (size_t i = 0; i < cfg->embedding_eps.n + cfg->sync_eps.n; i++) {
        const char *ep = i < cfg->embedding_eps.n ? cfg->embedding_eps.v[i]
                                                  : cfg->sync_eps.v[i - cfg->embedding_eps.n];
        if (i >= cfg->embedding_eps.n && cfg->sync_algorithm != SS_SYNC_S_EASGD &&
            cfg->sync_algorithm != SS_SYNC_FR_EASGD)
            continue;  /* sync PSs hold nothing without EASGD */
        ss_conn_t *c = ss_conn_new(self->shared.zctx, ep, &o);
        Header h = HEADER__INIT;
        struct ss_msg reply;
        h.type = MSG_TYPE__MSG_CHECKPOINT;
        int rc = c ? ss_conn_call(c, &h, NULL, 0, -1, &reply, err, len) : SS_E_NET;
        if (rc == 0) {
            SS_LOG(SS_LOG_INFO, "PS %s checkpointed to %s", ep, reply.hdr->text);
        }
        if (rc == 0 || rc == SS_E_PEER)
            ss_msg_close(&reply);
        ss_conn_destroy(&c);
        if (rc)
            return rc;
    }
    return 0;
}

int tr_train_save(tr_train_t *self, const char *dir, char *err, size_t len)
{
    int rc = s_save_dense(self, dir, err, len);
    return rc ? rc : s_checkpoint_ps(self, err, len);
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

static void s_json_num(FILE *f, const char *key, double v, int comma)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.6g%s", key, v, comma ? "," : "");
    else
        fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
}

int tr_train_write_result(tr_train_t *self, const struct tr_eval_result *ev, int have_eval,
                          char *err, size_t len)
{
    char path[SS_CFG_MAX_STR * 2];
    const struct tr_worker_counts *t = &self->total;
    double eps = self->wall_s > 0 ? (double)t->examples / self->wall_s : 0;
    snprintf(path, sizeof path, "%s/result-trainer-%u.json", self->cfg->run_dir, self->rank);
    FILE *f = ss_mkdirs(self->cfg->run_dir) == 0 ? fopen(path, "w") : NULL;
    if (!f) {
        snprintf(err, len, "cannot write %s: %s", path, strerror(errno));
        return SS_E_IO;
    }
    fprintf(f, "{\"rank\":%u,\"examples\":%llu,\"bad_lines\":%llu,", self->rank,
            (unsigned long long)t->examples, (unsigned long long)t->bad_lines);
    s_json_num(f, "eps", eps, 1);
    s_json_num(f, "wall_s", self->wall_s, 1);
    s_json_num(f, "train_ne", self->train.ne, 1);
    s_json_num(f, "ps_wait_s", (double)t->ps_wait_ns / 1e9, 1);
    s_json_num(f, "compute_s", (double)t->compute_ns / 1e9, 1);
    s_json_num(f, "keys_unique_ratio",
               t->keys_total ? (double)t->keys_unique / (double)t->keys_total : 0, 1);
    fprintf(f, "\"pushes_over_capacity\":%llu,", (unsigned long long)t->pushes_full);
    fprintf(f, "\"sync_algorithm\":\"%s\",",
            self->shadow ? tr_shadow_name(self->shadow) : "none");
    if (self->shadow) {
        const struct tr_shadow_stats *y = &self->sync;
        fprintf(f, "\"sync_rounds\":%llu,\"sync_failed_rounds\":%llu,\"sync_reseeds\":%llu,"
                "\"sync_final_ok\":%s,", (unsigned long long)y->rounds,
                (unsigned long long)y->failed_rounds, (unsigned long long)y->reseeds,
                y->final_ok ? "true" : "false");
        s_json_num(f, "sync_rounds_per_min", y->rounds_per_min, 1);
        s_json_num(f, "sync_gap", y->gap_mean, 1);
        s_json_num(f, "sync_latency_p50_ms", y->latency_p50_ms, 1);
        s_json_num(f, "sync_latency_p99_ms", y->latency_p99_ms, 1);
        s_json_num(f, "sync_drift", y->drift, 1);
        s_json_num(f, "sync_cpu_s", y->cpu_s, 1);
    }
    if (have_eval) {
        fprintf(f, "\"eval_rows\":%llu,", (unsigned long long)ev->rows);
        s_json_num(f, "eval_logloss", ev->logloss, 1);
        s_json_num(f, "eval_ne", ev->ne, 1);
        s_json_num(f, "eval_auc", ev->auc, 1);
        s_json_num(f, "eval_calibration", ev->calibration, 1);
    }
    s_json_num(f, "dense_params", (double)self->n_params, 0);
    fprintf(f, "}\n");
    fclose(f);
    printf("trainer %u: %llu examples in %.1f s (%.0f ex/s), %llu bad lines, train NE %.4f\n",
           self->rank, (unsigned long long)t->examples, self->wall_s, eps,
           (unsigned long long)t->bad_lines, self->train.ne);
    if (have_eval)
        printf("trainer %u eval: rows %llu  logloss %.5f  NE %.4f  AUC %.4f  calibration %.3f\n",
               self->rank, (unsigned long long)ev->rows, ev->logloss, ev->ne, ev->auc,
               ev->calibration);
    return 0;
}
