/* tr_worker.c - the Hogwild worker loop: read, look up, forward, backward,
 * update the shared dense replica in place, push row gradients. */
#include "tr_worker.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_fs.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_time.h"
#include "tr_client.h"
#include "tr_hogwild.h"
#include "tr_predict.h"
#include "tr_reader.h"
#include "tr_split.h"

/* Most tensors of the dense arena: W and bias of every layer, the first-order
 * weights. */
#define TR_WORKER_MAX_TENSORS (4 * TR_MODEL_MAX_MLP + 1)

struct tr_worker {
    struct tr_shared *sh;          /* borrowed */
    uint32_t index;                /* worker number */
    int eval;                      /* scoring only */
    int has_group;                 /* holds a ref on sh->clients[eval] */
    tr_client_group_t *own_group;  /* trainer.merge_requests false: this worker's own path */
    pthread_t tid;                 /* the thread */
    int started;                   /* tid is valid */
    tr_reader_t *reader;           /* this worker's part */
    tr_model_ws_t *ws;             /* model scratch */
    tr_eval_t *evaluator;          /* eval mode: predictions */
    uint32_t B;                    /* batch size */
    uint32_t n_fields;             /* categorical fields per example (data layout) */
    struct tr_rows batch[TR_CLIENT_SLOTS]; /* the batch computed, those looked up */
    float *emb;                    /* [B * n_fields * row_dim] pooled rows */
    float *grad_emb;               /* [B * n_fields * row_dim] */
    const float **rows;            /* each position's row [B * n_fields], in the lookup's
                                    * reply or in emb (tr_client_lookup_rows) */
    float *grad_w;                 /* [n_params] */
    float *probs;                  /* [B] */
    uint64_t epochs_done;          /* passes completed, kept across restarts */
    uint64_t iteration;            /* batches trained, kept across restarts */
    struct tr_reader_stats rs_base;/* reader counts before a resume (added to the reader's) */
    ss_ctrs_t *own_ctrs;           /* its own slot when shared->ctrs has none for it */
    _Atomic uint64_t *ctr;         /* its counter slot (TR_C_*), written by its thread */
    struct ss_hist *wait_hist;     /* its PS-wait histogram in shared, or NULL */
    struct tr_eval_prog prog;      /* progressive train loss sums, its thread's */
    int cut;                       /* its thread's: a drain cut its segment short */
    pthread_mutex_t lock;          /* guards finished, finished_cut, finished_ns, back_ns, rc,
                                    * err */
    int finished;                  /* under lock: the thread left its loop */
    int finished_cut;              /* under lock: cut, as it left */
    uint64_t finished_ns;          /* under lock: when */
    uint64_t back_ns;              /* under lock: its first batch trained since the start
                                    * (or finished_ns without one), 0: not yet */
    int rc;                        /* under lock: the error that stopped it */
    char err[512];                 /* under lock: what went wrong */
    FILE *pred_out;                /* tr_worker_set_output: predictions go here, or NULL */
    int pred_keep_bad;             /* "nan" for each bad line */
    uint32_t *pred_gaps[TR_CLIENT_SLOTS]; /* [B] bad lines before each row of a slot */
    uint64_t pred_gaps_done;       /* bad lines accounted for by the rows written */
    float *pad_dense;              /* eval: [TR_WORKER_SCORE_ROWS] rows of a padded chunk */
    float *pad_emb;                /* (s_score) */
    float *pad_labels;
    float *pad_probs;
    float *avg_sum;                /* model.dense_average: sum of the dense models after its
                                    * batches in epochs' tails, or NULL: off */
    uint64_t avg_n;                /* models in avg_sum */
    uint64_t avg_pass;             /* the pass avg_sum is of (its reader's rewinds) */
    /* model.adagrad_floor: the dense arena's tensors (each layer's weights, its
     * bias, the first-order weights) and the mean of each one's accumulators
     * after this worker's last step (its floor's base), or n_tensors 0: off.
     * Kept across segments, not in a job checkpoint: a restarted worker's
     * first step has no floor, its next ones have */
    struct tr_hogwild_tensor tensors[TR_WORKER_MAX_TENSORS];
    float tensor_mean[TR_WORKER_MAX_TENSORS];
    size_t n_tensors;
};

uint32_t tr_worker_score_batch(const struct ss_cfg *cfg)
{
    uint64_t B = (uint64_t)cfg->batch_size, R = TR_WORKER_SCORE_BATCH;
    uint64_t per_row = (uint64_t)(cfg->workers > 0 ? cfg->workers : 1) *
                       (cfg->data.n_fields ? cfg->data.n_fields : 1) * TR_WORKER_SCORE_VALUES;
    uint64_t row_bytes = per_row * ss_cfg_row_dim(cfg) * sizeof(float);
    while (R > B && (R * per_row > (uint64_t)cfg->max_keys_per_request / 2 ||
                     R * row_bytes + 4096 > (uint64_t)cfg->max_message_bytes / 2))
        R /= 2;
    return (uint32_t)(R > B ? R : B);
}

/* The tensors of the dense arena in order: each layer's W, then its bias, then
 * (with first_order) whatever follows the last layer. Returns their count. */
static size_t s_tensors(const tr_model_t *model, struct tr_hogwild_tensor *t)
{
    size_t n = 0, end = 0;
    uint32_t n_layers = tr_model_n_layers(model);
    for (uint32_t k = 0; k < n_layers; k++) {
        struct tr_model_layer_info li;
        if (tr_model_layer(model, k, &li) != 0)
            break;
        t[n++] = (struct tr_hogwild_tensor){li.w_off, li.b_off - li.w_off};
        t[n++] = (struct tr_hogwild_tensor){li.b_off, li.n_out};
        end = li.b_off + li.n_out;
    }
    if (end < tr_model_n_params(model))
        t[n++] = (struct tr_hogwild_tensor){end, tr_model_n_params(model) - end};
    return n;
}

/* Let a validation reader (part index of n) use the trainer's cache of
 * validation lines, made by the first one (main thread). */
static void s_use_valid_cache(tr_worker_t *self, struct tr_shared *sh, const char *what,
                              uint32_t index, uint32_t n)
{
    if (!sh->valid_cache)
        sh->valid_cache = tr_valid_cache_new(n, TR_VALID_CACHE_BYTES, what);
    if (tr_valid_cache_parts(sh->valid_cache) == n)
        tr_reader_use_cache(self->reader, sh->valid_cache, index);
}

tr_worker_t *tr_worker_new(struct tr_shared *sh, uint32_t index, uint32_t n, int eval,
                           char *err, size_t err_len)
{
    const struct ss_cfg *cfg = sh->cfg;
    int by_hash = eval != TR_WORKER_EVAL && cfg->valid_fraction > 0;
    const struct ss_str_list *files = &cfg->train_files;
    int from_valid = eval == TR_WORKER_VALID && !by_hash;  /* data.valid's files */
    const char *pats[SS_CFG_MAX_LIST];
    tr_worker_t *self = ss_calloc(1, sizeof *self);
    size_t dim = ss_cfg_row_dim(cfg);  /* floats per row, first-order weight included */

    if (eval == TR_WORKER_EVAL)
        files = &cfg->eval_files;
    else if (eval == TR_WORKER_VALID && !by_hash)
        files = &cfg->valid_files;

    for (size_t i = 0; i < files->n; i++)
        pats[i] = files->v[i];
    self->sh = sh;
    self->index = index;
    self->eval = eval != TR_WORKER_TRAIN;
    eval = self->eval;
    self->B = eval ? tr_worker_score_batch(cfg) : (uint32_t)cfg->batch_size;
    self->n_fields = cfg->data.n_fields;
    pthread_mutex_init(&self->lock, NULL);
    self->reader = tr_reader_new(&cfg->data, pats, files->n, eval ? 0 : sh->rank,
                                 eval ? 1 : sh->n_ranks, index, n, err, err_len);
    if (!self->reader)
        goto fail;
    if (by_hash) {  /* tr_split.h: training and validation sides of data.train */
        struct tr_split split;
        tr_split_init(&split, cfg->valid_fraction);
        tr_reader_set_split(self->reader, &split, eval ? TR_SPLIT_VALID : TR_SPLIT_TRAIN);
    }
    if ((by_hash && eval) || from_valid)  /* the validation lines, kept for the next scorings */
        s_use_valid_cache(self, sh, by_hash ? "data.train" : "data.valid", index, n);
    /* scoring runs products of TR_WORKER_SCORE_ROWS rows only (s_score) */
    self->ws = tr_model_ws_new(sh->model, eval ? TR_WORKER_SCORE_ROWS : self->B);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        tr_rows_init(&self->batch[i], self->B, cfg->data.n_dense, self->n_fields);
    self->emb = ss_malloc((size_t)self->B * self->n_fields * dim * sizeof(float));
    if (!eval)  /* scoring computes no gradients */
        self->grad_emb = ss_malloc((size_t)self->B * self->n_fields * dim * sizeof(float));
    self->rows = ss_malloc((size_t)self->B * self->n_fields * sizeof *self->rows);
    if (!eval)
        self->grad_w = ss_aligned_alloc(64, tr_model_n_params(sh->model) * sizeof(float));
    self->probs = ss_malloc(self->B * sizeof(float));
    if (eval) {
        size_t C = TR_WORKER_SCORE_ROWS;
        self->evaluator = tr_eval_new(1 << 16);
        size_t nd = cfg->data.n_dense ? cfg->data.n_dense : 1;
        self->pad_dense = ss_calloc(C * nd, sizeof(float));
        self->pad_emb = ss_calloc(C * self->n_fields * dim, sizeof(float));
        self->pad_labels = ss_calloc(C, sizeof(float));
        self->pad_probs = ss_calloc(C, sizeof(float));
    }
    if (!eval && cfg->adagrad_floor > 0 && sh->acc)
        self->n_tensors = s_tensors(sh->model, self->tensors);
    if (!eval && cfg->dense_average > 0)
        self->avg_sum = ss_calloc(tr_model_n_params(sh->model), sizeof(float));
    if (eval || !sh->ctrs || index >= ss_ctrs_n_slots(sh->ctrs))
        self->own_ctrs = ss_ctrs_new(TR_N_COUNTERS, 1);
    self->ctr = ss_ctrs_slot(self->own_ctrs ? self->own_ctrs : sh->ctrs,
                             self->own_ctrs ? 0 : index);
    if (!self->own_ctrs && sh->ps_wait_hist)  /* a training worker with a shared slot */
        self->wait_hist = &sh->ps_wait_hist[index];
    tr_eval_prog_init(&self->prog);
    if (!cfg->merge_requests) {  /* a path of its own to each PS: no rounds to meet at */
        self->own_group = tr_client_group_new(sh->zctx, cfg, sh->cluster, sh->curve,
                                              self->n_fields);
        if (eval)  /* scoring never changes the model */
            tr_client_group_set_read_only(self->own_group, 1);
        return self;
    }
    if (!sh->clients[eval])  /* the workers of a kind share one path to each PS */
        sh->clients[eval] = tr_client_group_new(sh->zctx, cfg, sh->cluster, sh->curve,
                                                self->n_fields);
    if (eval && sh->clients_refs[eval] == 0)  /* scoring never changes the model */
        tr_client_group_set_read_only(sh->clients[eval], 1);
    sh->clients_refs[eval]++;
    self->has_group = 1;
    return self;
fail:
    tr_worker_destroy(&self);
    return NULL;
}

void tr_worker_destroy(tr_worker_t **self_p)
{
    tr_worker_t *self = *self_p;
    if (!self)
        return;
    tr_reader_destroy(&self->reader);
    tr_model_ws_destroy(&self->ws);
    tr_eval_destroy(&self->evaluator);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        if (self->batch[i].offs)
            tr_rows_fini(&self->batch[i]);
    ss_free(self->emb);
    ss_free(self->grad_emb);
    ss_free(self->rows);
    ss_free(self->grad_w);
    ss_free(self->probs);
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        ss_free(self->pred_gaps[i]);
    ss_free(self->pad_dense);
    ss_free(self->pad_emb);
    ss_free(self->pad_labels);
    ss_free(self->pad_probs);
    ss_free(self->avg_sum);
    ss_ctrs_destroy(&self->own_ctrs);
    tr_client_group_destroy(&self->own_group);
    if (self->has_group && --self->sh->clients_refs[self->eval] == 0)
        tr_client_group_destroy(&self->sh->clients[self->eval]);
    pthread_mutex_destroy(&self->lock);
    ss_free(self);
    *self_p = NULL;
}

/* Take up to want from one budget (< 0: unlimited); returns how many. */
static uint32_t s_take(atomic_llong *left, uint32_t want)
{
    long long l = atomic_load(left);
    while (l >= 0) {
        long long take = l < want ? l : want;
        if (atomic_compare_exchange_weak(left, &l, l - take))
            return (uint32_t)take;
    }
    return want;
}

static void s_give(atomic_llong *left, uint32_t n)
{
    if (n && atomic_load(left) >= 0)
        atomic_fetch_add(left, (long long)n);
}

/* Take up to want examples from the segment's and the trainer's budgets;
 * returns how many. */
static uint32_t s_budget(struct tr_shared *sh, uint32_t want)
{
    uint32_t n = s_take(&sh->segment_left, want);
    uint32_t m = s_take(&sh->examples_left, n);
    s_give(&sh->segment_left, n - m);
    return m;
}

/* Give back examples taken from the budgets but not read. */
static void s_budget_return(struct tr_shared *sh, uint32_t n)
{
    s_give(&sh->segment_left, n);
    s_give(&sh->examples_left, n);
}

/* Read the next batch into bt, rewinding for further epochs. A training
 * worker stops at the end of the segment (sh->epoch_end epochs done) with its
 * reader already rewound, so that a restart goes on with the next epoch.
 * Returns the batch size, 0 at the end, or a negative error. */
static int s_read_batch(tr_worker_t *self, struct tr_rows *bt, uint64_t *epochs_done)
{
    tr_rows_clear(bt);
    if (!self->eval && *epochs_done >= self->sh->epoch_end)
        return 0;
    if (!self->eval && atomic_load_explicit(&self->sh->drain, memory_order_relaxed)) {
        /* a job checkpoint: the reader stays at the next unread line; the
         * segment was cut short unless a budget had ended it anyway */
        self->cut = atomic_load(&self->sh->segment_left) != 0 &&
                    atomic_load(&self->sh->examples_left) != 0;
        return 0;
    }
    uint32_t want = self->eval ? self->B : s_budget(self->sh, self->B);
    if (want == 0)
        return 0;
    for (;;) {
        int n = tr_reader_read(self->reader, bt, want);
        if (n > 0 && (uint32_t)n < want && !self->eval)
            s_budget_return(self->sh, want - (uint32_t)n);  /* the end of the part */
        if (n != 0)
            return n;
        ++*epochs_done;
        if (self->eval || *epochs_done >= (uint64_t)self->sh->cfg->epochs) {
            if (!self->eval)
                s_budget_return(self->sh, want);  /* its data ended: the others' */
            return 0;
        }
        if (tr_reader_rewind(self->reader) != 0)
            return SS_E_IO;
        if (*epochs_done >= self->sh->epoch_end) {
            s_budget_return(self->sh, want);
            return 0;
        }
    }
}

/* Read the next batch into bt (bt->n = 0 at the end). Returns 0 or a
 * negative error with err. */
static int s_next_batch(tr_worker_t *self, struct tr_rows *bt, uint64_t *epochs_done,
                        char *err, size_t len)
{
    int n = s_read_batch(self, bt, epochs_done);
    if (n < 0) {
        snprintf(err, len, "reading input: %s", tr_reader_error(self->reader));
        return n;
    }
    if (self->pred_out && n > 0)  /* the batch's bad-line gaps go with its slot */
        memcpy(self->pred_gaps[bt - self->batch], tr_reader_gaps(self->reader),
               (size_t)n * sizeof(uint32_t));
    return 0;
}

/* A failed write of this worker's part of the predictions (errno says why). */
static int s_pred_write_failed(tr_worker_t *self, char *err, size_t len)
{
    int e = errno;
    snprintf(err, len, "cannot write predictions (worker %u's part of the output): %s",
             self->index, strerror(e));
    return ss_fs_errno_rc(e);
}

/* Write the predictions of the batch in slot (after its "nan" lines). */
static int s_write_predictions(tr_worker_t *self, int slot, char *err, size_t len)
{
    const struct tr_rows *bt = &self->batch[slot];
    const uint32_t *gaps = self->pred_gaps[slot];
    for (uint32_t i = 0; i < bt->n; i++)
        self->pred_gaps_done += gaps[i];
    if (tr_pred_write(self->pred_out, self->probs, gaps, bt->n, self->pred_keep_bad) == 0)
        return 0;
    return s_pred_write_failed(self, err, len);
}

/* At the end of the part: a "nan" for each bad line after its last row. */
static int s_write_trailing_bad(tr_worker_t *self, char *err, size_t len)
{
    struct tr_reader_stats rs;
    tr_reader_stats(self->reader, &rs);
    if (!self->pred_keep_bad || rs.bad_lines <= self->pred_gaps_done)
        return 0;
    if (tr_pred_write_nan(self->pred_out, rs.bad_lines - self->pred_gaps_done) == 0)
        return 0;
    return s_pred_write_failed(self, err, len);
}

float tr_worker_dense_lr(double lr, int64_t warmup_examples, uint64_t examples_done,
                         uint32_t n)
{
    if (warmup_examples <= 0)
        return (float)lr;
    double frac = ((double)examples_done + n) / (double)warmup_examples;
    return (float)(frac < 1.0 ? lr * frac : lr);
}

float tr_worker_floor_gamma(double gamma, int64_t fade_examples, uint64_t examples_done)
{
    if (fade_examples <= 0)
        return (float)gamma;
    double left = 1.0 - (double)examples_done / (double)fade_examples;
    return (float)(left > 0.0 ? gamma * left : 0.0);
}

/* Score bt (eval mode) in chunks of TR_WORKER_SCORE_ROWS rows, the last one
 * padded with zero rows (their outputs unused). OpenBLAS picks its sgemm
 * kernels by the row count: one row scored in products of different counts
 * (a worker's last, partial batch; batch_size 37 against 64) may differ in
 * its last bits (measured: 1 to 15 of 3,000 rows), while within products of
 * one count that is a whole number of its row tiles the row's place does not
 * matter (measured: reversed input, 1 to 3 workers, batch sizes 5 to 128 all
 * bit-identical). So each row's prediction depends on the row and the model
 * alone, not on where the workers' ranges and the batches cut the input
 * (batch prediction relies on it; test_predict.sh checks it). */
static void s_score(tr_worker_t *self, const struct tr_rows *bt)
{
    struct tr_shared *sh = self->sh;
    const struct tr_model_pad pad = {self->pad_dense, self->pad_emb, self->pad_labels,
                                     self->pad_probs};
    tr_model_score_rows(sh->model, self->ws, sh->w, TR_WORKER_SCORE_ROWS, bt->n, bt->dense,
                        self->rows, bt->labels, self->probs, &pad);
}

/* Whether the worker is in the last model.dense_average of its epoch (by
 * its reader's place in its part: of the batches read ahead, a little
 * early). */
static int s_in_tail(const tr_worker_t *self)
{
    return tr_reader_progress(self->reader) >= 1.0 - self->sh->cfg->dense_average;
}

/* Forward, backward and the in-place dense update of one batch (with the
 * warmed-up lr and the L2 weight decay of model.*). */
static void s_learn(tr_worker_t *self, const struct tr_rows *bt)
{
    struct tr_shared *sh = self->sh;
    const struct ss_cfg *cfg = sh->cfg;
    size_t n_params = tr_model_n_params(sh->model);
    if (self->eval) {
        s_score(self, bt);
        return;
    }
    tr_model_forward_rows(sh->model, self->ws, sh->w, bt->n, bt->dense, self->rows,
                          bt->labels, self->probs);
    tr_model_backward(sh->model, self->ws, sh->w, self->grad_w, self->grad_emb);
    uint64_t done = atomic_load_explicit(&sh->examples_done, memory_order_relaxed);
    float lr = tr_worker_dense_lr(cfg->dense_lr, cfg->warmup_examples, done, bt->n);
    float l2 = (float)cfg->dense_l2;
    float gamma = self->n_tensors ? tr_worker_floor_gamma(cfg->adagrad_floor,
                                                          cfg->adagrad_floor_examples, done)
                                  : 0.0f;
    if (sh->acc && gamma > 0)  /* model.adagrad_floor */
        tr_hogwild_adagrad_tensors(sh->w, sh->acc, self->grad_w, self->tensors,
                                   self->n_tensors, self->tensor_mean, lr, 1e-8f, l2, gamma);
    else if (sh->acc)
        tr_hogwild_adagrad(sh->w, sh->acc, self->grad_w, n_params, lr, 1e-8f, l2);
    else
        tr_hogwild_sgd(sh->w, self->grad_w, n_params, lr, l2);
    atomic_fetch_add_explicit(&sh->examples_done, bt->n, memory_order_relaxed);
    if (self->avg_sum && s_in_tail(self)) {
        struct tr_reader_stats rs;
        tr_reader_stats(self->reader, &rs);
        if (self->avg_pass != rs.rewinds) {  /* a new pass: only its tail counts */
            memset(self->avg_sum, 0, n_params * sizeof(float));
            self->avg_n = 0;
            self->avg_pass = rs.rewinds;
        }
        tr_hogwild_accumulate(self->avg_sum, sh->w, n_params);
        self->avg_n++;
    }
}

uint64_t tr_worker_take_average(tr_worker_t *self, float *sum)
{
    ss_assert(self && sum && !self->eval);
    uint64_t n = self->avg_n;
    size_t n_params = tr_model_n_params(self->sh->model);
    if (!self->avg_sum || n == 0)
        return 0;
    for (size_t i = 0; i < n_params; i++)
        sum[i] += self->avg_sum[i];
    memset(self->avg_sum, 0, n_params * sizeof(float));
    self->avg_n = 0;
    return n;
}

/* Publish the reader's counts and the loss sums into the slot (plain
 * relaxed stores: this thread is the slot's one writer). */
static void s_publish(tr_worker_t *self, uint64_t epochs_done)
{
    struct tr_reader_stats rs;
    _Atomic uint64_t *c = self->ctr;
    tr_reader_stats(self->reader, &rs);
    ss_ctr_set(c, TR_C_lines, self->rs_base.lines + rs.lines);
    ss_ctr_set(c, TR_C_bad_lines, self->rs_base.bad_lines + rs.bad_lines);
    ss_ctr_set(c, TR_C_headers, self->rs_base.headers + rs.headers);
    ss_ctr_set(c, TR_C_bytes_read, self->rs_base.bytes_read + rs.bytes_read);
    ss_ctr_set(c, TR_C_prog_rows, self->prog.rows);
    ss_ctr_set(c, TR_C_prog_positives, self->prog.positives);
    ss_ctr_set_f64(c, TR_C_prog_loss_sum, self->prog.loss_sum);
    ss_ctr_set_f64(c, TR_C_prog_pred_sum, self->prog.pred_sum);
    ss_ctr_set(c, TR_C_epochs_done, epochs_done);
}

/* Count one batch: a few relaxed adds and stores on this worker's own lines
 * (no lock, no sharing). The wait histogram is added to before the batch
 * counter, so a reader that sums the counters first and the histograms
 * after never sees fewer waits than batches. */
static void s_update_counts(tr_worker_t *self, const struct tr_rows *bt, uint64_t wait_ns,
                            uint64_t comp_ns, uint64_t epochs_done)
{
    _Atomic uint64_t *c = self->ctr;
    if (self->wait_hist)
        ss_hist_add(self->wait_hist, wait_ns);
    ss_ctr_add(c, TR_C_examples, bt->n);
    ss_ctr_add(c, TR_C_batches, 1);
    ss_ctr_add(c, TR_C_ps_wait_ns, wait_ns);
    ss_ctr_add(c, TR_C_compute_ns, comp_ns);
    if (!self->eval)
        tr_eval_prog_add_batch(&self->prog, self->probs, bt->labels, bt->n);
    s_publish(self, epochs_done);
}

/* Start the lookup of bt's values in slot. */
static int s_lookup_send(tr_client_t *client, int slot, const struct tr_rows *bt, char *err,
                         size_t len)
{
    return tr_client_lookup_send(client, slot, bt->keys, bt->offs, bt->weights, bt->n, err, len);
}

/* Read the next batch into slot and start its lookup (no push to send yet). */
static int s_read_lookup(tr_worker_t *self, tr_client_t *client, int slot,
                         uint64_t *epochs_done, char *err, size_t len)
{
    int rc = s_next_batch(self, &self->batch[slot], epochs_done, err, len);
    if (rc == 0 && self->batch[slot].n)
        rc = s_lookup_send(client, slot, &self->batch[slot], err, len);
    return rc;
}

/* The thread's first batch trained since it was started (again): training
 * goes on. What a periodic job checkpoint's pause ends with (tr_train_ckpt.c). */
static void s_back(tr_worker_t *self, uint64_t now)
{
    pthread_mutex_lock(&self->lock);
    self->back_ns = now;
    pthread_mutex_unlock(&self->lock);
    SS_LOG(SS_LOG_DEBUG, "training: first batch since the thread started");
}

/* Batches k..k+A in slots k % S..: while k is computed the lookups of
 * k+1..k+A are in flight (A = tr_client_ahead(), S = tr_client_n_slots());
 * after it, one request per shard pushes k's gradients and starts k+A's
 * lookup (see tr_client.h). */
static int s_loop(tr_worker_t *self, tr_client_t *client, char *err, size_t len)
{
    uint64_t epochs_done = self->epochs_done, iteration = self->iteration;
    int back = 0;  /* s_back() done */
    int A = tr_client_ahead(client), S = tr_client_n_slots(client);
    int cur = 0, rc = s_read_lookup(self, client, 0, &epochs_done, err, len);
    for (int i = 1; i < A && rc == 0; i++) {
        if (self->batch[i - 1].n)
            rc = s_read_lookup(self, client, i, &epochs_done, err, len);
        else
            self->batch[i].n = 0;  /* the data ended: read no further */
    }
    while (rc == 0 && self->batch[cur].n && !atomic_load(&self->sh->stop)) {
        struct tr_rows *bt = &self->batch[cur];
        int ahead = (cur + A) % S;
        uint64_t t0 = ss_now_ns();
        /* the model reads the rows where the reply holds them */
        if ((rc = tr_client_lookup_rows(client, cur, self->rows, self->emb, err, len)) != 0)
            break;
        uint64_t t1 = ss_now_ns();
        s_learn(self, bt);
        tr_client_lookup_release(client, cur);
        uint64_t t2 = ss_now_ns();
        if (!self->eval && !back)
            s_back(self, t2), back = 1;
        if (self->batch[(cur + A - 1) % S].n == 0)
            self->batch[ahead].n = 0;  /* the data ended: read no further */
        else if ((rc = s_next_batch(self, &self->batch[ahead], &epochs_done, err, len)) != 0)
            break;
        const struct tr_rows *nx = &self->batch[ahead];
        uint64_t t3 = ss_now_ns();
        if (self->eval) {
            tr_eval_add_batch(self->evaluator, self->probs, bt->labels, (size_t)bt->n);
            if (self->pred_out && (rc = s_write_predictions(self, cur, err, len)) != 0)
                break;
            if (nx->n)
                rc = s_lookup_send(client, ahead, nx, err, len);
        } else {
            rc = tr_client_push_lookup(client, cur, self->grad_emb, ahead, nx->keys, nx->offs,
                                       nx->weights, nx->n, err, len);
        }
        if (rc)
            break;
        s_update_counts(self, bt, t1 - t0 + (ss_now_ns() - t3), t2 - t1, epochs_done);
        if (!self->eval)
            atomic_fetch_add_explicit(&self->sh->iterations, 1, memory_order_relaxed);
        if (!self->eval && self->sh->on_iteration)
            self->sh->on_iteration(self->sh->on_iteration_arg, self->index, ++iteration);
        cur = (cur + 1) % S;
    }
    if (rc == 0)
        rc = tr_client_flush(client, err, len);
    if (rc == 0 && self->pred_out && !atomic_load(&self->sh->stop))
        rc = s_write_trailing_bad(self, err, len);
    s_publish(self, epochs_done);  /* also when no batch was good */
    self->epochs_done = epochs_done;
    self->iteration = iteration;
    if (!self->eval && self->sh->on_worker_done)
        self->sh->on_worker_done(self->sh->on_iteration_arg, self->index);
    return rc;
}

static void *s_main(void *arg)
{
    tr_worker_t *self = arg;
    char name[16], err[512] = "";
    snprintf(name, sizeof name, "%s-%u", self->eval ? "eval" : "worker", self->index);
    ss_log_thread(name);
    tr_model_blas_single_thread();
    tr_client_t *client = tr_client_new(self->own_group ? self->own_group
                                                        : self->sh->clients[self->eval],
                                        self->B, err,
                                        sizeof err);
    int rc = client ? s_loop(self, client, err, sizeof err) : SS_E_NET;
    struct tr_client_stats cs = {0};
    if (client)
        tr_client_get_stats(client, &cs);
    tr_client_destroy(&client);
    if (rc) {
        SS_LOG(SS_LOG_ERROR, "%s", err);
        atomic_store(&self->sh->stop, 1);  /* one failure stops the trainer */
    }
    ss_ctr_add(self->ctr, TR_C_keys_total, cs.keys_total);
    ss_ctr_add(self->ctr, TR_C_keys_unique, cs.keys_unique);
    ss_ctr_add(self->ctr, TR_C_pushes_full, cs.push_full);
    ss_ctr_add(self->ctr, TR_C_lookup_retries, cs.lookup_retries);
    ss_ctr_add(self->ctr, TR_C_pushes_unconfirmed, cs.pushes_unconfirmed);
    ss_ctr_add(self->ctr, TR_C_cpu_ns, ss_thread_cpu_ns());  /* this thread's whole life */
    pthread_mutex_lock(&self->lock);
    self->finished = 1;
    self->finished_cut = self->cut;
    self->finished_ns = ss_now_ns();
    if (!self->back_ns)
        self->back_ns = self->finished_ns;
    self->rc = rc;
    snprintf(self->err, sizeof self->err, "%s", err);
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

int tr_worker_start(tr_worker_t *self)
{
    ss_assert(!self->started);
    pthread_mutex_lock(&self->lock);
    self->finished = 0;
    self->finished_cut = 0;
    self->back_ns = 0;
    self->rc = 0;
    self->err[0] = 0;
    pthread_mutex_unlock(&self->lock);
    self->cut = 0;  /* the thread is not running: this is its one writer now */
    if (pthread_create(&self->tid, NULL, s_main, self) != 0)
        return SS_E_NOMEM;
    self->started = 1;
    return 0;
}

void tr_worker_join(tr_worker_t *self)
{
    if (self->started)
        pthread_join(self->tid, NULL);
    self->started = 0;
}

void tr_worker_counts_init(struct tr_worker_counts *c)
{
    memset(c, 0, sizeof *c);
    tr_eval_prog_init(&c->prog);
}

void tr_worker_counts_add(struct tr_worker_counts *sum, const struct tr_worker_counts *c)
{
    for (int i = 0; i < TR_N_COUNTERS; i++)
        sum->c[i] += c->c[i];
    tr_eval_prog_merge(&sum->prog, &c->prog);
    if (sum->n == 0 || c->epochs_done < sum->epochs_done)
        sum->epochs_done = c->epochs_done;
    sum->n += c->n;
    sum->finished += c->finished;
    sum->cut += c->cut;
    if (c->finished_ns > sum->finished_ns)
        sum->finished_ns = c->finished_ns;
    sum->back += c->back;
    if (c->back_ns > sum->back_ns)
        sum->back_ns = c->back_ns;
    if (c->rc && !sum->rc) {
        sum->rc = c->rc;
        snprintf(sum->err, sizeof sum->err, "%s", c->err);
    }
}

/* The loss sums of counter columns c (doubles in prog_*_sum: given apart). */
static void s_prog_of(uint64_t *c, double loss_sum, double pred_sum,
                      struct tr_eval_prog *prog)
{
    tr_eval_prog_init(prog);
    c[TR_C_prog_loss_sum] = c[TR_C_prog_pred_sum] = 0;  /* bits of doubles: in prog */
    prog->rows = c[TR_C_prog_rows];
    prog->positives = c[TR_C_prog_positives];
    prog->loss_sum = loss_sum;
    prog->pred_sum = pred_sum;
}

void tr_worker_counts_of(const ss_ctrs_t *ctrs, struct tr_worker_counts *out)
{
    tr_worker_counts_init(out);
    ss_ctrs_sum(ctrs, out->c);
    s_prog_of(out->c, ss_ctrs_sum_f64(ctrs, TR_C_prog_loss_sum),
              ss_ctrs_sum_f64(ctrs, TR_C_prog_pred_sum), &out->prog);
    out->epochs_done = 0;  /* per worker only: see tr_worker_snapshot() */
    out->n = (uint32_t)ss_ctrs_n_slots(ctrs);
}

void tr_worker_snapshot(tr_worker_t *self, struct tr_worker_counts *out)
{
    struct tr_reader_stats rs;
    double loss, pred;
    tr_worker_counts_init(out);
    for (int i = 0; i < TR_N_COUNTERS; i++)
        out->c[i] = ss_ctr_get(self->ctr, i);
    memcpy(&loss, &out->c[TR_C_prog_loss_sum], sizeof loss);
    memcpy(&pred, &out->c[TR_C_prog_pred_sum], sizeof pred);
    s_prog_of(out->c, loss, pred, &out->prog);
    out->epochs_done = out->c[TR_C_epochs_done];
    out->n = 1;
    pthread_mutex_lock(&self->lock);
    out->finished = self->finished;
    out->cut = self->finished_cut;
    out->finished_ns = self->finished_ns;
    out->back = self->back_ns != 0;
    out->back_ns = self->back_ns;
    out->rc = self->rc;
    snprintf(out->err, sizeof out->err, "%s", self->err);
    pthread_mutex_unlock(&self->lock);
    tr_reader_stats(self->reader, &rs);  /* exact now, not as of the last batch */
    out->c[TR_C_lines] = self->rs_base.lines + rs.lines;
    out->c[TR_C_bad_lines] = self->rs_base.bad_lines + rs.bad_lines;
    out->c[TR_C_headers] = self->rs_base.headers + rs.headers;
    out->c[TR_C_bytes_read] = self->rs_base.bytes_read + rs.bytes_read;
}

void tr_worker_get_pos(tr_worker_t *self, struct tr_worker_pos *out)
{
    ss_assert(self && !self->started && !self->eval);
    memset(out, 0, sizeof *out);
    out->reader_pos = tr_reader_tell(self->reader);
    out->epochs_done = self->epochs_done;
    out->iteration = self->iteration;
    tr_worker_snapshot(self, &out->counts);
}

int tr_worker_set_pos(tr_worker_t *self, const struct tr_worker_pos *pos, char *err,
                      size_t err_len)
{
    ss_assert(self && !self->started && !self->eval);
    const struct tr_worker_counts *c = &pos->counts;
    int rc = tr_reader_seek(self->reader, pos->reader_pos);
    if (rc) {
        snprintf(err, err_len, "worker %u cannot go back to byte %llu of its input: %s",
                 self->index, (unsigned long long)pos->reader_pos,
                 rc == SS_E_RANGE ? "outside its part (the data files or trainer.workers "
                                    "changed since the checkpoint)"
                                  : tr_reader_error(self->reader));
        return rc;
    }
    self->epochs_done = pos->epochs_done;
    self->iteration = pos->iteration;
    self->rs_base.lines = c->c[TR_C_lines];
    self->rs_base.bad_lines = c->c[TR_C_bad_lines];
    self->rs_base.headers = c->c[TR_C_headers];
    self->rs_base.bytes_read = c->c[TR_C_bytes_read];
    /* the counters go on from the checkpoint's (the thread is not running:
     * this is the slot's one writer now); the loss sums travel in prog */
    for (int i = 0; i < TR_N_COUNTERS; i++)
        ss_ctr_set(self->ctr, (size_t)i, c->c[i]);
    self->prog = c->prog;
    ss_ctr_set_f64(self->ctr, TR_C_prog_loss_sum, c->prog.loss_sum);
    ss_ctr_set_f64(self->ctr, TR_C_prog_pred_sum, c->prog.pred_sum);
    pthread_mutex_lock(&self->lock);
    self->finished = 0;
    self->finished_ns = 0;
    self->rc = 0;
    self->err[0] = 0;
    pthread_mutex_unlock(&self->lock);
    return 0;
}

int tr_worker_first_bad(const tr_worker_t *self, struct tr_reader_bad *out)
{
    ss_assert(self && !self->started);
    return tr_reader_first_bad(self->reader, out);
}

void tr_worker_set_output(tr_worker_t *self, FILE *out, int keep_bad)
{
    ss_assert(self && self->eval && !self->started && out);
    self->pred_out = out;
    self->pred_keep_bad = keep_bad;
    for (int i = 0; i < TR_CLIENT_SLOTS; i++)
        if (!self->pred_gaps[i])
            self->pred_gaps[i] = ss_calloc(self->B, sizeof(uint32_t));
    tr_reader_keep_gaps(self->reader);
}

tr_eval_t *tr_worker_eval(tr_worker_t *self)
{
    return self->evaluator;
}
