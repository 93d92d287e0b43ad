/* ss_model.c - libshadowscore: a model file scored with no PS.
 *
 * DESIGN: no second forward pass. A line goes through what --predict runs
 * in the trainer: tr_parse_line (the layout of the file's data.* keys), a
 * row per value (the file's, or its initial row: ss_rowinit.h, what the PS
 * answers for a key it never stored), the same pooling (tr_bag, with the
 * effective weights tr_client uses when a field is not sum-pooled), and
 * tr_model_forward in products of TR_WORKER_SCORE_ROWS rows, the last padded
 * with zero rows: the eval worker's s_score, which makes a row's
 * probability depend on the row and the model alone (tr_worker.h). The
 * model (file, shape, dense copy) is shared and read-only; each call takes
 * a scratch set (model workspace, parse buffers, pooled rows) from a pool,
 * so calls on many threads run at once and a thread reuses warm memory. */
#include "ss_model.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_mem.h"
#include "ss_model_int.h"
#include "ss_rowinit.h"
#include "tr_bag.h"
#include "tr_mfile.h"
#include "tr_model.h"
#include "tr_worker.h"

#define S_CHUNK TR_WORKER_SCORE_ROWS   /* rows per forward */

/* One call's memory; on the pool's free list between calls. */
struct s_scratch {
    struct s_scratch *next;   /* free list */
    tr_model_ws_t *ws;        /* forward workspace, S_CHUNK rows */
    struct tr_rows rows;      /* lines parsed by score_line/score_batch, S_CHUNK at most */
    float *emb;               /* [emb_rows * F * dim] pooled rows */
    size_t emb_rows;          /* rows emb holds */
    const float **vrow;       /* [cap_vals] each value's row */
    float *init;              /* [cap_vals * dim] initial rows of values the file lacks */
    float *eff;               /* [cap_vals] effective pooling weights */
    size_t cap_vals;          /* values the three above hold */
    float *pad_dense;         /* [S_CHUNK * max(nd, 1)] a padded chunk's inputs */
    float *pad_emb;           /* [S_CHUNK * F * dim] */
    float pad_probs[S_CHUNK]; /* its outputs */
    size_t idx[S_CHUNK];      /* score_batch: the line of each parsed row */
};

struct ss_model {
    tr_mfile_t *file;               /* the checked, mapped file */
    const struct ss_cfg *cfg;       /* its config (in file) */
    tr_model_t *model;              /* the shape */
    float *w;                       /* dense parameters, 64-byte aligned copy */
    uint32_t F, dim, nd;            /* fields, floats per row, dense features */
    int scaled;                     /* a field is not sum-pooled: pool with eff weights */
    uint64_t seed;                  /* job.seed: initial rows */
    float init_scale;               /* tables.init_scale */
    pthread_mutex_t lock;           /* guards free */
    struct s_scratch *free;         /* scratch sets not in use */
};

const char *ss_model_strerror(int rc)
{
    return rc == SS_MODEL_BAD_LINE ? "bad line" : ss_strerror(rc);
}

ss_model_t *ss_model_load(const char *path, char *err, size_t err_len)
{
    return ss_model_load_opts(path, NULL, 0, err, err_len);
}

ss_model_t *ss_model_load_opts(const char *path, const char *const *sets, size_t n_sets,
                               char *err, size_t err_len)
{
    char why[1024];
    struct tr_model_conf mc;
    if (!err || err_len == 0)
        err = why, err_len = sizeof why;
    if (!path) {
        snprintf(err, err_len, "no model file named");
        return NULL;
    }
    tr_mfile_t *file = tr_mfile_load(path, sets, n_sets, err, err_len);
    if (!file)
        return NULL;
    ss_model_t *m = ss_calloc(1, sizeof *m);
    ss_assert(pthread_mutex_init(&m->lock, NULL) == 0);
    m->file = file;
    m->cfg = tr_mfile_cfg(file);
    if (tr_mfile_model_conf(m->cfg, &mc) != 0 || !(m->model = tr_model_new(&mc, why, sizeof why))) {
        snprintf(err, err_len, "%s: its model shape: %s", path, why);
        ss_model_free(m);
        return NULL;
    }
    size_t n_params = tr_model_n_params(m->model);
    if (n_params != tr_mfile_info(file)->n_params) {
        snprintf(err, err_len, "%s: %llu dense floats, its shape has %zu", path,
                 (unsigned long long)tr_mfile_info(file)->n_params, n_params);
        ss_model_free(m);
        return NULL;
    }
    m->w = ss_aligned_alloc(TR_MODEL_ALIGN, (n_params * sizeof(float) + TR_MODEL_ALIGN - 1) /
                                                TR_MODEL_ALIGN * TR_MODEL_ALIGN);
    memcpy(m->w, tr_mfile_dense(file), n_params * sizeof(float));
    m->F = m->cfg->data.n_fields;
    m->dim = ss_cfg_row_dim(m->cfg);
    m->nd = m->cfg->data.n_dense;
    for (uint32_t f = 0; f < m->F; f++)
        m->scaled |= m->cfg->pooling_of[f] != SS_POOL_SUM;
    m->seed = (uint64_t)m->cfg->job_seed;
    m->init_scale = (float)m->cfg->table_init_scale;
    tr_model_blas_single_thread();
    return m;
}

static void s_scratch_free(struct s_scratch *s)
{
    tr_model_ws_destroy(&s->ws);
    tr_rows_fini(&s->rows);
    ss_free(s->emb);
    ss_free(s->vrow);
    ss_free(s->init);
    ss_free(s->eff);
    ss_free(s->pad_dense);
    ss_free(s->pad_emb);
    ss_free(s);
}

void ss_model_free(ss_model_t *m)
{
    if (!m)
        return;
    while (m->free) {
        struct s_scratch *s = m->free;
        m->free = s->next;
        s_scratch_free(s);
    }
    ss_assert(pthread_mutex_destroy(&m->lock) == 0);
    tr_model_destroy(&m->model);
    ss_free(m->w);
    tr_mfile_destroy(&m->file);
    ss_free(m);
}

/* Take a scratch set from the pool (a new one when it is empty). */
static struct s_scratch *s_take(ss_model_t *m)
{
    ss_assert(pthread_mutex_lock(&m->lock) == 0);
    struct s_scratch *s = m->free;
    if (s)
        m->free = s->next;
    ss_assert(pthread_mutex_unlock(&m->lock) == 0);
    if (s)
        return s;
    s = ss_calloc(1, sizeof *s);
    s->ws = tr_model_ws_new(m->model, S_CHUNK);
    tr_rows_init(&s->rows, S_CHUNK, m->nd, m->F);
    s->pad_dense = ss_calloc((size_t)S_CHUNK * (m->nd ? m->nd : 1), sizeof(float));
    s->pad_emb = ss_calloc((size_t)S_CHUNK * m->F * m->dim, sizeof(float));
    return s;
}

static void s_give(ss_model_t *m, struct s_scratch *s)
{
    ss_assert(pthread_mutex_lock(&m->lock) == 0);
    s->next = m->free;
    m->free = s;
    ss_assert(pthread_mutex_unlock(&m->lock) == 0);
}

/* Make s hold n_rows pooled rows and n_vals values. */
static void s_grow(const ss_model_t *m, struct s_scratch *s, size_t n_rows, size_t n_vals)
{
    if (n_rows > s->emb_rows) {
        s->emb_rows = n_rows;
        s->emb = ss_realloc(s->emb, n_rows * m->F * m->dim * sizeof(float));
    }
    if (n_vals > s->cap_vals) {
        s->cap_vals = n_vals;
        s->vrow = ss_realloc(s->vrow, n_vals * sizeof *s->vrow);
        s->init = ss_realloc(s->init, n_vals * m->dim * sizeof(float));
        s->eff = ss_realloc(s->eff, n_vals * sizeof(float));
    }
}

/* Pool the rows of rows' values into s->emb (what the embedding client
 * hands the worker: tr_client_lookup_recv). */
static void s_pool(const ss_model_t *m, struct s_scratch *s, const struct tr_rows *rows)
{
    size_t n_pos = (size_t)rows->n * m->F;
    s_grow(m, s, rows->n, tr_rows_values(rows));
    for (size_t p = 0; p < n_pos; p++) {
        uint32_t f = (uint32_t)(p % m->F);
        for (uint32_t i = rows->offs[p]; i < rows->offs[p + 1]; i++) {
            const float *r = tr_mfile_row(m->file, f, rows->keys[i]);
            if (!r) {
                float *ir = s->init + (size_t)i * m->dim;
                ss_rowinit_row(m->seed, m->init_scale, m->dim, m->cfg->first_order ? 1u : 0u,
                               f, rows->keys[i], ir);
                r = ir;
            }
            s->vrow[i] = r;
        }
    }
    const float *weights = rows->weights;
    if (m->scaled) {
        tr_bag_scale(rows->offs, rows->weights, n_pos, m->cfg->pooling_of, m->F, s->eff);
        weights = s->eff;
    }
    tr_bag_pool(rows->offs, weights, n_pos, s->vrow, m->dim, s->emb);
}

/* Forward rows' S_CHUNK-row products (the last padded with zero rows). */
static void s_forward(const ss_model_t *m, struct s_scratch *s, const struct tr_rows *rows,
                      float *probs)
{
    const struct tr_model_pad pad = {s->pad_dense, s->pad_emb, NULL, s->pad_probs};
    tr_model_score_chunks(m->model, s->ws, m->w, S_CHUNK, rows->n, rows->dense, s->emb, NULL,
                          probs, &pad);
}

void ss_model_score_rows(const ss_model_t *model, const struct tr_rows *rows, float *probs)
{
    ss_model_t *m = (ss_model_t *)model;  /* only the pool changes */
    ss_assert(m && rows && probs && rows->n_fields == m->F && rows->n_dense == m->nd);
    if (rows->n == 0)
        return;
    struct s_scratch *s = s_take(m);
    s_pool(m, s, rows);
    s_forward(m, s, rows, probs);
    s_give(m, s);
}

size_t ss_model_score_batch(const ss_model_t *model, const char *const *lines,
                            const size_t *lens, size_t n, float *probs)
{
    ss_model_t *m = (ss_model_t *)model;
    ss_assert(m && (n == 0 || (lines && lens && probs)));
    struct s_scratch *s = s_take(m);
    float out[S_CHUNK];
    size_t good = 0;
    for (size_t i = 0; i < n;) {
        tr_rows_clear(&s->rows);
        for (; i < n && s->rows.n < S_CHUNK; i++) {
            probs[i] = NAN;
            if (lines[i] && tr_parse_line(&m->cfg->data, lines[i], lens[i], &s->rows) == 0)
                s->idx[s->rows.n - 1] = i;
        }
        if (s->rows.n == 0)
            continue;
        s_pool(m, s, &s->rows);
        s_forward(m, s, &s->rows, out);
        for (uint32_t k = 0; k < s->rows.n; k++)
            probs[s->idx[k]] = out[k];
        good += s->rows.n;
    }
    s_give(m, s);
    return good;
}

int ss_model_score_line(const ss_model_t *model, const char *line, size_t len, float *prob)
{
    ss_assert(model && prob);
    const char *lines[1] = {line};
    return ss_model_score_batch(model, lines, &len, 1, prob) == 1 ? 0 : SS_MODEL_BAD_LINE;
}

const struct ss_cfg *ss_model_cfg(const ss_model_t *model)
{
    ss_assert(model);
    return model->cfg;
}

size_t ss_model_rows(const ss_model_t *model)
{
    return (size_t)tr_mfile_info(model->file)->n_rows;
}

size_t ss_model_dense_params(const ss_model_t *model)
{
    return tr_model_n_params(model->model);
}

unsigned ss_model_fields(const ss_model_t *model)
{
    return model->F;
}

unsigned ss_model_dense_features(const ss_model_t *model)
{
    return model->nd;
}
