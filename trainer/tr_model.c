/* tr_model.c - DLRM-style dense model: batched CBLAS layers, pairwise interaction, BCE.
 *
 * DESIGN: a dense layer is one row-major matrix product over the whole batch (X W^T,
 * tr_gemm: OpenBLAS or oneDNN, fp32 or bf16, picked per product by size and
 * conf.precision), then one fused pass for bias and ReLU; its backward is two
 * products (dY^T X for the weights, dY W for the input) and a column sum for the
 * bias. ReLU masks are taken from the stored post-activation outputs (y > 0). The
 * interaction runs per example on z = [h, e_1 .. e_n] (n_vec x dim): its forward
 * is the upper triangle of z z^T, its backward dz = S z with S the symmetric
 * matrix of pair gradients.
 * Per-example sgemm calls cost about 1 us each at these sizes (call overhead), so
 * both directions are hand-written: AVX2+FMA kernels (8 pair dots reduced at once
 * with hadd; S z row by row with 4 accumulators) when dim % 8 == 0 and the CPU
 * has them, plain C loops otherwise. Everything the backward needs (inputs,
 * activations, probabilities, labels) is kept in the workspace. The optional
 * first-order terms are one pass over the batch added to the logits after the
 * top MLP; their gradient is d loss / d logit itself (times the dense input for
 * the linear weights), written into the last float of each gradient row. */
#include "tr_model.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"
#include "ss_hash.h"
#include "ss_isa.h"
#include "ss_mem.h"
#include "tr_gemm.h"
#include "tr_model_shape.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TR_MODEL_HAVE_AVX2 1
#else
#define TR_MODEL_HAVE_AVX2 0
#endif

#define TR_MODEL_Z512_MAX_VEC 64u   /* the AVX-512 interaction's widest z (stack buffers) */

struct tr_model {
    struct tr_model_conf conf;      /* the shape, as given */
    uint32_t n_layers;              /* n_bottom + n_top */
    uint32_t n_vec;                 /* vectors in the interaction: 1 + n_sparse */
    uint32_t n_pairs;               /* n_vec * (n_vec - 1) / 2 */
    uint32_t top_in;                /* dim + n_pairs */
    uint32_t row_dim;               /* floats per embedding input row: dim + first_order */
    size_t lin_off;                 /* first linear weight (first_order), else n_params */
    uint32_t max_width;             /* widest layer input or output */
    size_t n_params;                /* floats in the arena */
    size_t bottom_len;              /* floats of the bottom MLP (arena prefix) */
    struct tr_model_layer_info layers[TR_MODEL_MAX_LAYERS]; /* bottom, then top */
    uint32_t *pair_i;               /* first vector of pair p */
    uint32_t *pair_j;               /* second vector of pair p (> pair_i[p]) */
    int64_t *pair_base;             /* pair (i, j > i) is pair_base[i] + j */
    int avx2;                       /* 1: AVX2+FMA elementwise kernels */
    int simd;                       /* 1: AVX2+FMA interaction kernels too */
    int simd512;                    /* 1: AVX-512 interaction kernels instead */
    int dnnl;                       /* 1: oneDNN may run products (conf.gemm, the ISA) */
    int bf16;                       /* 1: the large products run in bf16 */
};

struct tr_model_ws {
    uint32_t max_batch;                 /* capacity in examples */
    uint32_t batch;                     /* examples of the last forward */
    int has_labels;                     /* the last forward had labels */
    float *block;                       /* the one allocation behind every buffer */
    float *in;                          /* dense inputs [B x n_dense] */
    float *act[TR_MODEL_MAX_LAYERS];    /* layer outputs (after ReLU) [B x n_out] */
    float *z;                           /* interaction vectors [B x n_vec x dim] */
    float *x_top;                       /* top MLP input [B x top_in] */
    float *labels;                      /* [B] */
    float *probs;                       /* sigmoid(logit) [B] */
    float *fo;                          /* first-order sums of the embedding inputs [B]
                                         * (s_interact_batch, while the rows are hot) */
    float *d_a;                         /* backward deltas, ping [B x max_width] */
    float *d_b;                         /* backward deltas, pong [B x max_width] */
    float *d_emb;                       /* grad_emb when the caller passes NULL */
    const float **er;                   /* one example's embedding rows [n_sparse]
                                         * (s_interact_batch) */
    tr_gemm_t *gemm;                    /* this thread's product engines */
};

/* Fill the pair tables: row-major upper triangle of the n_vec x n_vec matrix. */
static void s_pairs(tr_model_t *m)
{
    uint32_t p = 0;
    m->pair_i = ss_malloc(sizeof(uint32_t) * (m->n_pairs ? m->n_pairs : 1));
    m->pair_j = ss_malloc(sizeof(uint32_t) * (m->n_pairs ? m->n_pairs : 1));
    m->pair_base = ss_malloc(sizeof(int64_t) * m->n_vec);
    for (uint32_t i = 0; i < m->n_vec; i++) {
        m->pair_base[i] = (int64_t)p - (int64_t)i - 1;
        for (uint32_t j = i + 1; j < m->n_vec; j++) {
            m->pair_i[p] = i;
            m->pair_j[p] = j;
            p++;
        }
    }
    ss_assert(p == m->n_pairs);
}

/* 1 when this CPU runs AVX2 and FMA instructions (and SS_ISA allows them). */
static int s_cpu_has_avx2(void)
{
#if TR_MODEL_HAVE_AVX2
    return ss_isa_has_avx2();
#else
    return 0;
#endif
}

/* 1 when this CPU (and the OS: the ZMM state is saved) runs AVX-512 (and SS_ISA
 * allows it). */
static int s_cpu_has_avx512(void)
{
#if TR_MODEL_HAVE_AVX2
    return ss_isa_get() >= SS_ISA_AVX512;
#else
    return 0;
#endif
}

/* AUTO precision resolves to bf16 where the CPU has it (AMX or AVX512_BF16),
 * fp32 elsewhere: on the quality bench bf16's eval NE is within issue 20's
 * 0.002 of fp32 on both data sets (docs/quality.md, "bf16 against fp32":
 * Criteo +0.0010 +- 0.0006 over 40 pairs, planted within 0.001 of the
 * morning's fp32 runs), measured on AMX hardware. */
#define TR_MODEL_AUTO_IS_BF16 1

/* Decide where the products run: oneDNN when conf.gemm allows it and the ISA
 * level is AVX-512 or better; bf16 when asked for (or AUTO says so) and the CPU
 * has native bf16. Anything else falls back to fp32 on OpenBLAS. */
static void s_choose_engines(tr_model_t *m)
{
    const struct tr_model_conf *c = &m->conf;
    int want_bf16 = c->precision == TR_MODEL_PREC_BF16 ||
                    (c->precision == TR_MODEL_PREC_AUTO && TR_MODEL_AUTO_IS_BF16);
    m->dnnl = !c->portable && c->gemm != TR_MODEL_GEMM_BLAS &&
              tr_gemm_engine_ok(TR_GEMM_DNNL_F32);
    m->bf16 = m->dnnl && want_bf16 && tr_gemm_engine_ok(TR_GEMM_DNNL_BF16);
}

tr_model_t *tr_model_new(const struct tr_model_conf *conf, char *err, size_t err_len)
{
    struct tr_model_shape sh;
    ss_assert(conf);
    if (tr_model_shape_of(conf, &sh, err, err_len) != 0)
        return NULL;
    tr_model_t *m = ss_calloc(1, sizeof(*m));
    m->conf = *conf;
    m->n_layers = sh.n_layers;
    m->n_vec = sh.n_vec;
    m->n_pairs = sh.n_pairs;
    m->top_in = sh.top_in;
    m->row_dim = sh.row_dim;
    m->max_width = sh.max_width;
    m->lin_off = sh.lin_off;
    m->n_params = sh.n_params;
    m->bottom_len = sh.bottom_len;
    memcpy(m->layers, sh.layers, sizeof m->layers);
    s_pairs(m);
    m->avx2 = !conf->portable && s_cpu_has_avx2();
    m->simd = m->avx2 && conf->dim % 8 == 0;
    m->simd512 = m->simd && (conf->dim == 16 || conf->dim == 32) &&
                 m->n_vec <= TR_MODEL_Z512_MAX_VEC && s_cpu_has_avx512();
    s_choose_engines(m);
    return m;
}

void tr_model_destroy(tr_model_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tr_model_t *m = *self_p;
    ss_free(m->pair_i);
    ss_free(m->pair_j);
    ss_free(m->pair_base);
    ss_free(m);
    *self_p = NULL;
}

size_t tr_model_n_params(const tr_model_t *self)
{
    ss_assert(self);
    return self->n_params;
}

const struct tr_model_conf *tr_model_conf(const tr_model_t *self)
{
    ss_assert(self);
    return &self->conf;
}

uint32_t tr_model_row_dim(const tr_model_t *self)
{
    ss_assert(self);
    return self->row_dim;
}

size_t tr_model_linear_off(const tr_model_t *self)
{
    ss_assert(self);
    return self->conf.first_order ? self->lin_off : SIZE_MAX;
}

uint32_t tr_model_top_in(const tr_model_t *self)
{
    ss_assert(self);
    return self->top_in;
}

uint32_t tr_model_n_layers(const tr_model_t *self)
{
    ss_assert(self);
    return self->n_layers;
}

int tr_model_layer(const tr_model_t *self, uint32_t index, struct tr_model_layer_info *info)
{
    ss_assert(self && info);
    if (index >= self->n_layers)
        return SS_E_RANGE;
    *info = self->layers[index];
    return 0;
}

int tr_model_component(const tr_model_t *self, const char *name, size_t *offset, size_t *len)
{
    ss_assert(self && name && offset && len);
    if (strcmp(name, "bottom") == 0) {
        *offset = 0;
        *len = self->bottom_len;
        return 0;
    }
    if (strcmp(name, "top") == 0) {
        *offset = self->bottom_len;
        *len = self->n_params - self->bottom_len;
        return 0;
    }
    return SS_E_NOTFOUND;
}

void tr_model_init_params(const tr_model_t *self, float *w, uint64_t seed)
{
    ss_assert(self && w);
    for (uint32_t k = 0; k < self->n_layers; k++) {
        const struct tr_model_layer_info *l = &self->layers[k];
        double fan = l->relu ? (double)l->n_in : (double)l->n_in + l->n_out;
        double limit = fan > 0 ? sqrt(6.0 / fan) : 0.0;  /* fan 0: no weights */
        uint64_t state = ss_mix64(seed ^ ss_mix64(0x6d6f64656cull + k));
        size_t n_w = (size_t)l->n_out * l->n_in;
        for (size_t i = 0; i < n_w; i++)
            w[l->w_off + i] = (float)((2.0 * ss_rand_unit_d(&state) - 1.0) * limit);
        memset(w + l->b_off, 0, sizeof(float) * l->n_out);
    }
    if (self->conf.first_order)
        memset(w + self->lin_off, 0, sizeof(float) * self->conf.n_dense);
}

/* Round a float count up to a whole number of 64-byte lines. */
static size_t s_lines(size_t n_floats)
{
    size_t per = TR_MODEL_ALIGN / sizeof(float);
    return (n_floats + per - 1) / per * per;
}

/* Hand out the next n floats of the block at *pos (64-byte aligned). */
static float *s_carve(float *block, size_t *pos, size_t n)
{
    float *p = block ? block + *pos : NULL;
    *pos += s_lines(n);
    return p;
}

/* Carve every workspace buffer out of block (or only count when block is NULL).
 * Returns the floats needed. */
static size_t s_ws_carve(const tr_model_t *m, tr_model_ws_t *ws, float *block)
{
    size_t pos = 0;
    size_t mb = ws->max_batch;
    size_t n_emb = (size_t)m->conf.n_sparse * m->row_dim;
    ws->in = s_carve(block, &pos, mb * m->conf.n_dense);
    for (uint32_t k = 0; k < m->n_layers; k++)
        ws->act[k] = s_carve(block, &pos, mb * m->layers[k].n_out);
    ws->z = s_carve(block, &pos, mb * m->n_vec * m->conf.dim);
    ws->x_top = s_carve(block, &pos, mb * m->top_in);
    ws->labels = s_carve(block, &pos, mb);
    ws->probs = s_carve(block, &pos, mb);
    ws->fo = s_carve(block, &pos, mb);
    ws->d_a = s_carve(block, &pos, mb * m->max_width);
    ws->d_b = s_carve(block, &pos, mb * m->max_width);
    ws->d_emb = s_carve(block, &pos, mb * n_emb);
    return pos;
}

tr_model_ws_t *tr_model_ws_new(const tr_model_t *self, uint32_t max_batch)
{
    ss_assert(self && max_batch >= 1);
    tr_model_ws_t *ws = ss_calloc(1, sizeof(*ws));
    ws->max_batch = max_batch;
    size_t n = s_ws_carve(self, ws, NULL);
    ws->block = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    memset(ws->block, 0, sizeof(float) * n);
    s_ws_carve(self, ws, ws->block);
    ws->er = ss_calloc(self->conf.n_sparse ? self->conf.n_sparse : 1, sizeof *ws->er);
    ws->gemm = tr_gemm_new();
    return ws;
}

void tr_model_ws_destroy(tr_model_ws_t **ws_p)
{
    if (!ws_p || !*ws_p)
        return;
    ss_free((*ws_p)->block);
    ss_free((*ws_p)->er);
    tr_gemm_destroy(&(*ws_p)->gemm);
    ss_free(*ws_p);
    *ws_p = NULL;
}

/* ---- elementwise kernels: portable C ------------------------------------------- */

/* y [B x n] += bias per row, then ReLU when relu. */
static void s_bias_act_c(float *y, const float *bias, uint32_t B, uint32_t n, int relu)
{
    for (uint32_t b = 0; b < B; b++) {
        float *row = y + (size_t)b * n;
        for (uint32_t o = 0; o < n; o++) {
            float v = row[o] + bias[o];
            row[o] = !relu || v > 0.0f ? v : 0.0f;
        }
    }
}

/* gb [n] = column sums of dy [B x n]. */
static void s_colsum_c(float *gb, const float *dy, uint32_t B, uint32_t n)
{
    memcpy(gb, dy, sizeof(float) * n);
    for (uint32_t b = 1; b < B; b++) {
        const float *row = dy + (size_t)b * n;
        for (uint32_t o = 0; o < n; o++)
            gb[o] += row[o];
    }
}

/* d [n] = act > 0 ? d : 0 (the ReLU derivative from the stored output). */
static void s_relu_mask_c(float *d, const float *act, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = act[i] > 0.0f ? d[i] : 0.0f;
}

/* ---- elementwise kernels: AVX2 ---------------------------------------------------- */

#if TR_MODEL_HAVE_AVX2
#define TR_AVX2 __attribute__((target("avx2,fma")))

/* s_bias_act_c, 8 lanes at a time (no branches: ReLU is max(v, 0)). */
TR_AVX2 static void s_bias_act_avx2(float *y, const float *bias, uint32_t B, uint32_t n,
                                    int relu)
{
    __m256 zero = _mm256_setzero_ps();
    for (uint32_t b = 0; b < B; b++) {
        float *row = y + (size_t)b * n;
        uint32_t o = 0;
        for (; o + 8 <= n; o += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(row + o), _mm256_loadu_ps(bias + o));
            _mm256_storeu_ps(row + o, relu ? _mm256_max_ps(v, zero) : v);
        }
        for (; o < n; o++) {
            __m128 v = _mm_add_ss(_mm_load_ss(row + o), _mm_load_ss(bias + o));
            _mm_store_ss(row + o, relu ? _mm_max_ss(v, _mm_setzero_ps()) : v);
        }
    }
}

/* s_colsum_c, 8 columns at a time. */
TR_AVX2 static void s_colsum_avx2(float *gb, const float *dy, uint32_t B, uint32_t n)
{
    uint32_t o = 0;
    for (; o + 8 <= n; o += 8) {
        __m256 acc = _mm256_loadu_ps(dy + o);
        for (uint32_t b = 1; b < B; b++)
            acc = _mm256_add_ps(acc, _mm256_loadu_ps(dy + (size_t)b * n + o));
        _mm256_storeu_ps(gb + o, acc);
    }
    for (; o < n; o++) {
        float acc = dy[o];
        for (uint32_t b = 1; b < B; b++)
            acc += dy[(size_t)b * n + o];
        gb[o] = acc;
    }
}

/* s_relu_mask_c, 8 lanes at a time with a compare mask. */
TR_AVX2 static void s_relu_mask_avx2(float *d, const float *act, size_t n)
{
    __m256 zero = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 keep = _mm256_cmp_ps(_mm256_loadu_ps(act + i), zero, _CMP_GT_OQ);
        _mm256_storeu_ps(d + i, _mm256_and_ps(_mm256_loadu_ps(d + i), keep));
    }
    for (; i < n; i++) {
        __m128 keep = _mm_cmpgt_ss(_mm_load_ss(act + i), _mm_setzero_ps());
        _mm_store_ss(d + i, _mm_and_ps(_mm_load_ss(d + i), keep));
    }
}
#endif

/* Dispatchers: AVX2 when the model may use it, portable C otherwise. */

/* Bias and activation (see s_bias_act_c). */
static void s_bias_act(const tr_model_t *m, float *y, const float *bias, uint32_t B,
                       uint32_t n, int relu)
{
#if TR_MODEL_HAVE_AVX2
    if (m->avx2) {
        s_bias_act_avx2(y, bias, B, n, relu);
        return;
    }
#endif
    s_bias_act_c(y, bias, B, n, relu);
}

/* Column sums (see s_colsum_c). */
static void s_colsum(const tr_model_t *m, float *gb, const float *dy, uint32_t B, uint32_t n)
{
#if TR_MODEL_HAVE_AVX2
    if (m->avx2) {
        s_colsum_avx2(gb, dy, B, n);
        return;
    }
#endif
    s_colsum_c(gb, dy, B, n);
}

/* ReLU mask (see s_relu_mask_c). */
static void s_relu_mask(const tr_model_t *m, float *d, const float *act, size_t n)
{
#if TR_MODEL_HAVE_AVX2
    if (m->avx2) {
        s_relu_mask_avx2(d, act, n);
        return;
    }
#endif
    s_relu_mask_c(d, act, n);
}

/* ---- dense layers ---------------------------------------------------------------- */

/* The engine of one product (conf.gemm; under AUTO by its multiply-adds). */
static enum tr_gemm_engine s_engine(const tr_model_t *m, const struct tr_gemm_op *op)
{
    uint64_t macs = (uint64_t)op->m * op->n * op->k;
    if (!m->dnnl)
        return TR_GEMM_BLAS;
    if (m->conf.gemm == TR_MODEL_GEMM_DNNL)
        return m->bf16 ? TR_GEMM_DNNL_BF16 : TR_GEMM_DNNL_F32;
    if (m->bf16 && macs >= TR_MODEL_BF16_MIN_MACS)
        return TR_GEMM_DNNL_BF16;
    return macs >= TR_MODEL_DNNL_MIN_MACS ? TR_GEMM_DNNL_F32 : TR_GEMM_BLAS;
}

/* c = op(a) op(b) on the engine the model picks for the shape; keep flags
 * the operands that stay as they are until the next forward (a layer's
 * input: its bf16 copy is made once a step, tr_gemm_run_kept). */
static void s_gemm(const tr_model_t *m, tr_model_ws_t *ws, uint32_t rows, uint32_t cols,
                   uint32_t inner, int trans_a, int trans_b, const float *a, const float *b,
                   float *c, unsigned keep)
{
    struct tr_gemm_op op = {.m = rows, .n = cols, .k = inner, .trans_a = trans_a,
                            .trans_b = trans_b};
    tr_gemm_run_kept(ws->gemm, s_engine(m, &op), &op, a, b, c, keep);
}

/* y [B x n_out] = act(x [B x n_in] W^T + b); act(b) when n_in is 0 (a
 * model without dense features). keep: the operands kept (tr_gemm_run_kept):
 * x for a training step (its weight gradient takes it again), W when
 * scoring (the next chunk of rows takes it again). */
static void s_layer_fwd(const tr_model_t *m, tr_model_ws_t *ws,
                        const struct tr_model_layer_info *l, const float *w, uint32_t B,
                        const float *x, float *y, unsigned keep)
{
    if (l->n_in == 0)
        memset(y, 0, sizeof(float) * B * l->n_out);
    else
        s_gemm(m, ws, B, l->n_out, l->n_in, 0, 1, x, w + l->w_off, y, keep);
    s_bias_act(m, y, w + l->b_off, B, l->n_out, l->relu);
}

/* Given dy [B x n_out] (the gradient at the layer's output, ReLU mask applied),
 * write the layer's weight and bias gradients into g and, when dx is not NULL,
 * dx [B x n_in] = dy W (before the previous layer's mask). */
static void s_layer_bwd(const tr_model_t *m, tr_model_ws_t *ws,
                        const struct tr_model_layer_info *l, const float *w, float *g,
                        uint32_t B, const float *x, const float *dy, float *dx)
{
    uint32_t n = l->n_out;
    if (l->n_in > 0)
        s_gemm(m, ws, n, l->n_in, B, 1, 0, dy, x, g + l->w_off, TR_GEMM_KEEP_B);
    s_colsum(m, g + l->b_off, dy, B, n);
    if (dx && l->n_in > 0)
        s_gemm(m, ws, B, l->n_in, n, 0, 0, dy, w + l->w_off, dx, 0);
}

/* ---- interaction: portable C --------------------------------------------------- */

/* out[p] = z_i . z_j for every pair p = (i, j) of one example. */
static void s_interact_fwd_c(const tr_model_t *m, const float *z, float *out)
{
    uint32_t dim = m->conf.dim;
    for (uint32_t p = 0; p < m->n_pairs; p++) {
        const float *a = z + (size_t)m->pair_i[p] * dim;
        const float *b = z + (size_t)m->pair_j[p] * dim;
        float s = 0.0f;
        for (uint32_t d = 0; d < dim; d++)
            s += a[d] * b[d];
        out[p] = s;
    }
}

/* Row i of the interaction gradient: d0 for the bottom output, else an embedding
 * row of drest (rows stride floats apart: row_dim). */
static float *s_drow(float *d0, float *drest, uint32_t i, uint32_t stride)
{
    return i == 0 ? d0 : drest + (size_t)(i - 1) * stride;
}

/* dz_i = sum_j g_(i,j) z_j for one example; row 0 into d0, rows 1.. into the
 * first dim floats of drest's rows (the rest of each row is left alone). */
static void s_interact_bwd_c(const tr_model_t *m, const float *z, const float *g, float *d0,
                             float *drest)
{
    uint32_t dim = m->conf.dim, rd = m->row_dim;
    memset(d0, 0, sizeof(float) * dim);
    for (uint32_t f = 0; f < m->conf.n_sparse; f++)
        memset(drest + (size_t)f * rd, 0, sizeof(float) * dim);
    for (uint32_t p = 0; p < m->n_pairs; p++) {
        uint32_t i = m->pair_i[p], j = m->pair_j[p];
        const float *zi = z + (size_t)i * dim, *zj = z + (size_t)j * dim;
        float *di = s_drow(d0, drest, i, rd), *dj = s_drow(d0, drest, j, rd);
        for (uint32_t d = 0; d < dim; d++) {
            di[d] += g[p] * zj[d];
            dj[d] += g[p] * zi[d];
        }
    }
}

/* ---- interaction: AVX2 + FMA (dim % 8 == 0) ------------------------------------ */

#if TR_MODEL_HAVE_AVX2
#define TR_INLINE inline __attribute__((always_inline))

/* 8 lanes whose sum is a . b (dim a multiple of 8). */
TR_AVX2 static TR_INLINE __m256 s_dot8(const float *a, const float *b, uint32_t dim)
{
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    for (uint32_t d = 8; d < dim; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
    return acc;
}

/* Horizontal sums of t[0..7], lane k holding the sum of t[k]. */
TR_AVX2 static TR_INLINE __m256 s_hsum8(const __m256 *t)
{
    __m256 k0 = _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
    __m256 k1 = _mm256_hadd_ps(_mm256_hadd_ps(t[4], t[5]), _mm256_hadd_ps(t[6], t[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(k0, k1, 0x20),
                         _mm256_permute2f128_ps(k0, k1, 0x31));
}

/* Horizontal sum of one vector. */
TR_AVX2 static TR_INLINE float s_hsum1(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* s_interact_fwd_c for n vectors of dim floats (a constant where inlined, so the
 * dot loop unrolls): 8 lane-vectors per step, reduced together. */
TR_AVX2 static TR_INLINE void s_fwd_avx2_dim(const float *z, uint32_t n, uint32_t dim,
                                             float *out)
{
    __m256 t[8];
    uint32_t k = 0;
    for (uint32_t i = 0; i + 1 < n; i++) {
        const float *zi = z + (size_t)i * dim;
        for (uint32_t j = i + 1; j < n; j++) {
            t[k++] = s_dot8(zi, z + (size_t)j * dim, dim);
            if (k == 8) {
                _mm256_storeu_ps(out, s_hsum8(t));
                out += 8;
                k = 0;
            }
        }
    }
    for (uint32_t r = 0; r < k; r++)
        out[r] = s_hsum1(t[r]);
}

/* s_interact_fwd_c, specialized for the common dims. */
TR_AVX2 static void s_interact_fwd_avx2(const tr_model_t *m, const float *z, float *out)
{
    switch (m->conf.dim) {
    case 8:
        s_fwd_avx2_dim(z, m->n_vec, 8, out);
        break;
    case 16:
        s_fwd_avx2_dim(z, m->n_vec, 16, out);
        break;
    case 32:
        s_fwd_avx2_dim(z, m->n_vec, 32, out);
        break;
    default:
        s_fwd_avx2_dim(z, m->n_vec, m->conf.dim, out);
        break;
    }
}

/* dst [8] (+)= sum_j s[j] zc_j over n vectors zc_j = zc + j * dim (4 accumulators);
 * add: 1 adds to dst, 0 overwrites it. */
TR_AVX2 static TR_INLINE void s_combine8(const float *s, const float *zc, uint32_t n,
                                         uint32_t dim, float *dst, int add)
{
    __m256 a0 = add ? _mm256_loadu_ps(dst) : _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1;
    uint32_t j = 0;
    for (; j + 4 <= n; j += 4, zc += 4 * (size_t)dim) {
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), _mm256_loadu_ps(zc), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(s[j + 1]), _mm256_loadu_ps(zc + dim), a1);
        a2 = _mm256_fmadd_ps(_mm256_set1_ps(s[j + 2]), _mm256_loadu_ps(zc + 2 * dim), a2);
        a3 = _mm256_fmadd_ps(_mm256_set1_ps(s[j + 3]), _mm256_loadu_ps(zc + 3 * dim), a3);
    }
    for (; j < n; j++, zc += dim)
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), _mm256_loadu_ps(zc), a0);
    _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* s_combine8, two vectors wide (8 accumulators). */
TR_AVX2 static TR_INLINE void s_combine16(const float *s, const float *zc, uint32_t n,
                                          uint32_t dim, float *dst, int add)
{
    __m256 a0 = add ? _mm256_loadu_ps(dst) : _mm256_setzero_ps();
    __m256 b0 = add ? _mm256_loadu_ps(dst + 8) : _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1, b1 = a1, b2 = a1, b3 = a1;
    uint32_t j = 0;
    for (; j + 4 <= n; j += 4, zc += 4 * (size_t)dim) {
        __m256 s0 = _mm256_set1_ps(s[j]), s1 = _mm256_set1_ps(s[j + 1]);
        __m256 s2 = _mm256_set1_ps(s[j + 2]), s3 = _mm256_set1_ps(s[j + 3]);
        a0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(zc), a0);
        b0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(zc + 8), b0);
        a1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(zc + dim), a1);
        b1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(zc + dim + 8), b1);
        a2 = _mm256_fmadd_ps(s2, _mm256_loadu_ps(zc + 2 * dim), a2);
        b2 = _mm256_fmadd_ps(s2, _mm256_loadu_ps(zc + 2 * dim + 8), b2);
        a3 = _mm256_fmadd_ps(s3, _mm256_loadu_ps(zc + 3 * dim), a3);
        b3 = _mm256_fmadd_ps(s3, _mm256_loadu_ps(zc + 3 * dim + 8), b3);
    }
    for (; j < n; j++, zc += dim) {
        __m256 s0 = _mm256_set1_ps(s[j]);
        a0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(zc), a0);
        b0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(zc + 8), b0);
    }
    _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    _mm256_storeu_ps(dst + 8, _mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
}

/* dst [dim] (+)= sum_j s[j] z_j over n vectors (dim a multiple of 8, a constant
 * where inlined), 16 floats per pass. */
TR_AVX2 static TR_INLINE void s_combine_avx2(const float *s, const float *z, uint32_t n,
                                             uint32_t dim, float *dst, int add)
{
    uint32_t c = 0;
    for (; c + 16 <= dim; c += 16)
        s_combine16(s, z + c, n, dim, dst + c, add);
    if (c < dim)
        s_combine8(s, z + c, n, dim, dst + c, add);
}

/* s_interact_bwd_c as dz = S z, one row of S at a time (dim as in s_combine_avx2):
 * row i takes g_(j,i) for j < i (gathered) and g_(i,j) for j > i (contiguous). */
TR_AVX2 static TR_INLINE void s_bwd_avx2_dim(const tr_model_t *m, const float *z,
                                             const float *g, float *d0, float *drest,
                                             uint32_t dim)
{
    float srow[TR_MODEL_MAX_SPARSE + 1];
    uint32_t n = m->n_vec;
    for (uint32_t i = 0; i < n; i++) {
        float *dst = s_drow(d0, drest, i, m->row_dim);
        for (uint32_t j = 0; j < i; j++)
            srow[j] = g[m->pair_base[j] + i];
        s_combine_avx2(srow, z, i, dim, dst, 0);
        s_combine_avx2(g + m->pair_base[i] + i + 1, z + (size_t)(i + 1) * dim, n - i - 1, dim,
                       dst, 1);
    }
}

/* s_interact_bwd_c, specialized for the common dims. */
TR_AVX2 static void s_interact_bwd_avx2(const tr_model_t *m, const float *z, const float *g,
                                        float *d0, float *drest)
{
    switch (m->conf.dim) {
    case 8:
        s_bwd_avx2_dim(m, z, g, d0, drest, 8);
        break;
    case 16:
        s_bwd_avx2_dim(m, z, g, d0, drest, 16);
        break;
    case 32:
        s_bwd_avx2_dim(m, z, g, d0, drest, 32);
        break;
    default:
        s_bwd_avx2_dim(m, z, g, d0, drest, m->conf.dim);
        break;
    }
}

/* ---- interaction: AVX-512 (dim 16 or 32, n_vec <= 64) ----------------------------
 *
 * Forward as a small GEMM with no horizontal sums: z^T (dim x n, padded to
 * whole 16-column blocks) is made by in-register 16 x 16 transposes; then
 * row i of z z^T, 16 columns at a time, is sum_d z_(i,d) * z^T_(d, cols):
 * broadcast-FMAs over 8 rows at once, stored masked to the pairs j > i of
 * the row; the transpose loads each row once and also writes z (the copy
 * the backward needs). Backward as dz_j = sum_(i != j) g_(min, max) z_i, 4
 * rows j at a time (4 FMA chains sharing each z load), every g a broadcast
 * load from where it lies in the pair list; only dz is stored. */

#define TR_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* Transpose the 16 x 16 block r (rows in registers) in place. */
TR_AVX512 static TR_INLINE void s_transpose16(__m512 *r)
{
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int k = 0; k < 16; k += 2) {
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 16; k += 4) {
        __m512d a = _mm512_castps_pd(t[k]), b = _mm512_castps_pd(t[k + 2]);
        __m512d c = _mm512_castps_pd(t[k + 1]), d = _mm512_castps_pd(t[k + 3]);
        u[k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));      /* column 4q + 0 of rows k.. */
        u[k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));  /* 4q + 1 */
        u[k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));  /* 4q + 2 */
        u[k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));  /* 4q + 3 */
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {  /* u[4g + c], lane q: rows 4g.., column 4q + c */
        __m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        __m512 b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        __m512 d = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 e = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_f32x4(a, d, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(a, d, 0xdd);
        r[4 + c] = _mm512_shuffle_f32x4(b, e, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(b, e, 0xdd);
    }
}

/* zt [dim x ncol] = z^T for the n vectors of dim floats z_0 = h and z_k =
 * e + (k - 1) * rd (ncol = n rounded up to 16; the padding columns are
 * zeros), and z [n x dim] = those vectors: the copy the backward needs,
 * made while the rows are in registers for the transpose. */
TR_AVX512 static TR_INLINE void s_zt512(const float *h, const float *const *er, uint32_t n,
                                       uint32_t dim, float *z, float *zt, uint32_t ncol)
{
    for (uint32_t c0 = 0; c0 < ncol; c0 += 16)
        for (uint32_t d0 = 0; d0 < dim; d0 += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (uint32_t k = 0; k < 16; k++) {
                uint32_t v = c0 + k;
                r[k] = _mm512_setzero_ps();
                if (v < n) {
                    r[k] = _mm512_loadu_ps((v ? er[v - 1] : h) + d0);
                    _mm512_storeu_ps(z + (size_t)v * dim + d0, r[k]);
                }
            }
            s_transpose16(r);
#pragma GCC unroll 16
            for (uint32_t k = 0; k < 16; k++)
                _mm512_store_ps(zt + (size_t)(d0 + k) * ncol + c0, r[k]);
        }
}

/* Lanes of column block cb that hold pairs of row i: i < 16 cb + k < n. */
static inline __mmask16 s_pair_mask(uint32_t i, uint32_t cb, uint32_t n)
{
    int lo = (int)i + 1 - 16 * (int)cb, hi = (int)n - 16 * (int)cb;
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    return hi > lo ? (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u)) : 0;
}

/* Rows i0 .. i0 + R - 1 of s_fwd512_dim (R 8, 4 or 2, a constant where
 * inlined): their pairs with the columns of zt, 16 at a time. */
TR_AVX512 static TR_INLINE void s_fwd512_rows(const tr_model_t *m, const float *z,
                                             const float *zt, float *out, uint32_t dim,
                                             uint32_t ncol, uint32_t i0, uint32_t R)
{
    const uint32_t n = m->n_vec;
    const float *zr[8];
#pragma GCC unroll 8
    for (uint32_t r = 0; r < R; r++)  /* rows past the last are read, not stored */
        zr[r] = z + (size_t)(i0 + r < n ? i0 + r : n - 1) * dim;
    for (uint32_t cb = (i0 + 1) / 16; cb * 16 < n; cb++) {
        __m512 acc[8];
#pragma GCC unroll 8
        for (uint32_t r = 0; r < R; r++)
            acc[r] = _mm512_setzero_ps();
        for (uint32_t d = 0; d < dim; d++) {
            __m512 col = _mm512_load_ps(zt + (size_t)d * ncol + cb * 16);
#pragma GCC unroll 8
            for (uint32_t r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(zr[r][d]), col, acc[r]);
        }
#pragma GCC unroll 8
        for (uint32_t r = 0; r < R; r++)
            if (i0 + r + 1 < n)
                _mm512_mask_storeu_ps(out + m->pair_base[i0 + r] + cb * 16,
                                      s_pair_mask(i0 + r, cb, n), acc[r]);
    }
}

/* s_interact_fwd_c for n <= 64 vectors of dim (16 or 32, a constant where
 * inlined) floats, taken from h and the embedding rows e (rd floats apart)
 * and copied into z on the way (s_zt512). out[pair_base[i] + j] is pair (i,
 * j): out - 1 is the last float of the top input's h part, so every address
 * formed lies in the caller's row. Rows go 8 at a time; the last group, when
 * 4 or 2 of its rows have pairs (26 fields: rows 24 and 25), takes that many,
 * not 8 (each row's sums are the same multiply-adds in the same order). */
TR_AVX512 static TR_INLINE void s_fwd512_dim(const tr_model_t *m, const float *h,
                                            const float *const *er, float *z, float *out,
                                            uint32_t dim)
{
    const uint32_t n = m->n_vec, ncol = (n + 15) & ~15u;
    float zt[32 * TR_MODEL_Z512_MAX_VEC] __attribute__((aligned(64)));
    s_zt512(h, er, n, dim, z, zt, ncol);
    for (uint32_t i0 = 0; i0 + 1 < n; i0 += 8) {
        uint32_t rows = n - 1 - i0;   /* rows of the group with pairs */
        if (rows <= 2)
            s_fwd512_rows(m, z, zt, out, dim, ncol, i0, 2);
        else if (rows <= 4)
            s_fwd512_rows(m, z, zt, out, dim, ncol, i0, 4);
        else
            s_fwd512_rows(m, z, zt, out, dim, ncol, i0, 8);
    }
}

/* z = [h, the dim floats of each row of e] and out = its pair dots. */
TR_AVX512 static void s_interact_fwd512(const tr_model_t *m, const float *h,
                                        const float *const *er, float *z, float *out)
{
    if (m->conf.dim == 16)
        s_fwd512_dim(m, h, er, z, out, 16);
    else
        s_fwd512_dim(m, h, er, z, out, 32);
}

/* One output row j of s_bwd512_cols (the rows past the last group of 4):
 * 4 accumulators over the pairs (i < j, j), then over (j, k > j). */
TR_AVX512 static TR_INLINE void s_bwd512_row(const tr_model_t *m, const float *z,
                                            const float *g, float *d0, float *drest,
                                            uint32_t dim, uint32_t c, int64_t j)
{
    const int64_t n = m->n_vec;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *zi = z + c;
    int64_t off = j - 1, step = n - 2;  /* g(0, j); pair_base[1] - pair_base[0] */
    int64_t i = 0;
    for (; i + 4 <= j; i += 4, zi += 4 * dim) {
        float g0 = g[off], g1 = g[off + step], g2 = g[off + 2 * step - 1];
        float g3 = g[off + 3 * step - 3];
        off += 4 * step - 6;
        step -= 4;
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(g0), _mm512_loadu_ps(zi), a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(g1), _mm512_loadu_ps(zi + dim), a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(g2), _mm512_loadu_ps(zi + 2 * dim), a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(g3), _mm512_loadu_ps(zi + 3 * dim), a3);
    }
    for (; i < j; i++, zi += dim) {
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(g[off]), _mm512_loadu_ps(zi), a0);
        off += step--;
    }
    const float *gj = g + m->pair_base[j];  /* gj[k]: pair (j, k), k > j */
    const float *zk = z + (size_t)(j + 1) * dim + c;
    for (int64_t k = j + 1; k < n; k++, zk += dim)
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(gj[k]), _mm512_loadu_ps(zk), a1);
    _mm512_storeu_ps(s_drow(d0, drest, (uint32_t)j, m->row_dim) + c,
                     _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* s_interact_bwd_c for 16 columns c of dim (16 or 32): dz_j = sum over i < j
 * of g(i, j) z_i plus sum over k > j of g(j, k) z_k, for 4 rows j0..j0+3 at
 * once (one accumulator each, so 4 independent chains share every load of a
 * z row). g(i, j) for i < j sits at pair_base[i] + j: for i < j0 the 4 rows'
 * factors are 4 floats in a row there. Every g is a broadcast load and only
 * the output rows are stored (an earlier version added g z_i into a buffer
 * row per pair: a load and a store per multiply-add, and one chain per row). */
TR_AVX512 static TR_INLINE void s_bwd512_cols(const tr_model_t *m, const float *z,
                                             const float *g, float *d0, float *drest,
                                             uint32_t dim, uint32_t c)
{
    const int64_t n = m->n_vec;
    int64_t j0 = 0;
    for (; j0 + 4 <= n; j0 += 4) {
        __m512 a[4];
        const float *gr[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            a[r] = _mm512_setzero_ps();
            gr[r] = g + m->pair_base[j0 + r];   /* gr[r][k]: pair (j0 + r, k > j0 + r) */
        }
        const float *zi = z + c;
        for (int64_t i = 0; i < j0; i++, zi += dim) {
            const float *gi = g + m->pair_base[i] + j0;  /* pairs (i, j0 .. j0 + 3) */
            __m512 v = _mm512_loadu_ps(zi);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(gi[r]), v, a[r]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {   /* the 4 x 4 block on the diagonal */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                if (q == r)
                    continue;
                float gq = q > r ? gr[r][j0 + q] : gr[q][j0 + r];
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(gq),
                                       _mm512_loadu_ps(z + (size_t)(j0 + q) * dim + c), a[r]);
            }
        }
        const float *zk = z + (size_t)(j0 + 4) * dim + c;
        for (int64_t k = j0 + 4; k < n; k++, zk += dim) {
            __m512 v = _mm512_loadu_ps(zk);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(gr[r][k]), v, a[r]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            _mm512_storeu_ps(s_drow(d0, drest, (uint32_t)(j0 + r), m->row_dim) + c, a[r]);
    }
    for (; j0 < n; j0++)
        s_bwd512_row(m, z, g, d0, drest, dim, c, j0);
}

TR_AVX512 static void s_interact_bwd512(const tr_model_t *m, const float *z, const float *g,
                                        float *d0, float *drest)
{
    if (m->conf.dim == 16) {
        s_bwd512_cols(m, z, g, d0, drest, 16, 0);
    } else {
        s_bwd512_cols(m, z, g, d0, drest, 32, 0);
        s_bwd512_cols(m, z, g, d0, drest, 32, 16);
    }
}
#endif

/* Interaction forward of one example: out [n_pairs] (AVX2 or portable; the
 * AVX-512 kernel is called from s_interact_batch, as it makes z too). */
static void s_interact_fwd(const tr_model_t *m, const float *z, float *out)
{
#if TR_MODEL_HAVE_AVX2
    if (m->simd) {
        s_interact_fwd_avx2(m, z, out);
        return;
    }
#endif
    s_interact_fwd_c(m, z, out);
}

/* Interaction backward of one example (see s_interact_bwd_c). */
static void s_interact_bwd(const tr_model_t *m, const float *z, const float *g, float *d0,
                           float *drest)
{
#if TR_MODEL_HAVE_AVX2
    if (m->simd512) {
        s_interact_bwd512(m, z, g, d0, drest);
        return;
    }
    if (m->simd) {
        s_interact_bwd_avx2(m, z, g, d0, drest);
        return;
    }
#endif
    s_interact_bwd_c(m, z, g, d0, drest);
}

/* ---- forward / backward ---------------------------------------------------------- */

/* Mean BCE of logits against labels (in double; 0 when labels is NULL);
 * writes sigmoid(logit) into probs. */
static float s_loss(const float *logit, const float *labels, uint32_t B, float *probs)
{
    double sum = 0.0;
    for (uint32_t b = 0; b < B; b++) {
        double z = logit[b];
        double e = exp(-fabs(z));
        probs[b] = (float)(z >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e));
        if (labels)
            sum += (z > 0.0 ? z : 0.0) - z * labels[b] + log1p(e);
    }
    return (float)(sum / B);
}

/* The sum over fields of example e's first-order weights (the last float of
 * each of its rows), added in field order. */
static inline float s_first_order_sum(const float *const *er, uint32_t ns, uint32_t dim)
{
    float s = 0.0f;
    for (uint32_t f = 0; f < ns; f++)
        s += er[f][dim];
    return s;
}

/* Build z = [h, emb vectors] and the top input [h, pair dots] for every example
 * (emb rows are row_dim floats: the vector, then any first-order weight), and
 * with first-order terms each example's sum of first-order weights into ws->fo
 * (its rows are in the cache now; a pass of its own over emb later cost a
 * cache miss per row). The rows of example b: emb's [b * n_sparse * row_dim
 * ...] one after another, or, where rows is not NULL, rows[b * n_sparse + f]
 * wherever they are (the client's reply: tr_model_forward_rows). */
static void s_interact_batch(const tr_model_t *m, tr_model_ws_t *ws, uint32_t B,
                             const float *emb, const float *const *rows)
{
    uint32_t dim = m->conf.dim, rd = m->row_dim, ns = m->conf.n_sparse;
    size_t n_emb = (size_t)ns * rd, n_z = (size_t)m->n_vec * dim;
    const float *h = ws->act[m->conf.n_bottom - 1];
    int fo = m->conf.first_order;
    for (uint32_t b = 0; b < B; b++) {
        float *z = ws->z + b * n_z, *t = ws->x_top + (size_t)b * m->top_in;
        const float *const *er = ws->er;
        if (rows)
            er = rows + (size_t)b * ns;
        else
            for (uint32_t f = 0; f < ns; f++)
                ws->er[f] = emb + b * n_emb + (size_t)f * rd;
#if TR_MODEL_HAVE_AVX2
        if (m->simd512) {  /* copies into z as it goes */
            ss_copy_floats(t, h + (size_t)b * dim, dim);
            s_interact_fwd512(m, h + (size_t)b * dim, er, z, t + dim);
        } else
#endif
        {
            ss_copy_floats(z, h + (size_t)b * dim, dim);
            for (uint32_t f = 0; f < ns; f++)
                ss_copy_floats(z + (size_t)(f + 1) * dim, er[f], dim);
            ss_copy_floats(t, z, dim);
            s_interact_fwd(m, z, t + dim);
        }
        if (fo)  /* after the interaction: its loads brought the rows in */
            ws->fo[b] = s_first_order_sum(er, ns, dim);
    }
}

/* First-order terms: logit[b] += sum_f u_(b,f) + v . dense_b (ws->in); the
 * sums over f are ws->fo (s_interact_batch), added first as before. */
static void s_first_order_fwd(const tr_model_t *m, const tr_model_ws_t *ws, const float *w,
                              uint32_t B, float *logit)
{
    uint32_t nd = m->conf.n_dense;
    const float *v = w + m->lin_off;
    for (uint32_t b = 0; b < B; b++) {
        const float *x = ws->in + (size_t)b * nd;
        float s = m->conf.n_sparse ? ws->fo[b] : 0.0f;
        for (uint32_t i = 0; i < nd; i++)
            s += v[i] * x[i];
        logit[b] += s;
    }
}

/* Gradients of the linear weights of the first-order terms from dl [B] = d mean
 * loss / d logit into grad_w. (Each first-order weight's gradient, dl itself, goes
 * into the last float of its grad_emb row in s_backward_interact.) */
static void s_first_order_bwd(const tr_model_t *m, const tr_model_ws_t *ws, const float *dl,
                              float *grad_w)
{
    uint32_t nd = m->conf.n_dense;
    float *gv = grad_w + m->lin_off;
    memset(gv, 0, sizeof(float) * nd);
    for (uint32_t b = 0; b < ws->batch; b++) {
        const float *x = ws->in + (size_t)b * nd;
        for (uint32_t i = 0; i < nd; i++)
            gv[i] += dl[b] * x[i];
    }
}

/* s_forward's flags */
#define S_FWD_LOSS 1u   /* compute the loss (else 0 is returned) */
#define S_FWD_SCORE 2u  /* a chunk of tr_model_score_chunks: w stays as it is from
                         * the caller's tr_gemm_forget on, and is kept; no backward */

/* tr_model_forward, as flags say. */
static float s_forward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t B,
                       const float *dense, const float *emb, const float *const *rows,
                       const float *labels, float *probs_out, unsigned flags)
{
    int want_loss = (flags & S_FWD_LOSS) != 0;
    unsigned keep = flags & S_FWD_SCORE ? TR_GEMM_KEEP_B : TR_GEMM_KEEP_A;
    ss_assert(self && ws && w && dense && B >= 1 && B <= ws->max_batch);
    ss_assert(emb || rows || self->conf.n_sparse == 0);
    uint32_t nb = self->conf.n_bottom, nl = self->n_layers;
    ws->batch = B;
    ws->has_labels = labels != NULL;
    if (!(flags & S_FWD_SCORE))
        tr_gemm_forget(ws->gemm);   /* the layers' inputs change now */
    memcpy(ws->in, dense, sizeof(float) * B * self->conf.n_dense);
    if (labels)
        memcpy(ws->labels, labels, sizeof(float) * B);
    for (uint32_t k = 0; k < nb; k++)
        s_layer_fwd(self, ws, &self->layers[k], w, B, k ? ws->act[k - 1] : ws->in,
                    ws->act[k], keep);
    s_interact_batch(self, ws, B, emb, rows);
    for (uint32_t k = nb; k < nl; k++)
        s_layer_fwd(self, ws, &self->layers[k], w, B, k == nb ? ws->x_top : ws->act[k - 1],
                    ws->act[k], keep);
    if (self->conf.first_order)
        s_first_order_fwd(self, ws, w, B, ws->act[nl - 1]);
    float loss = s_loss(ws->act[nl - 1], want_loss ? labels : NULL, B, ws->probs);
    if (probs_out)
        memcpy(probs_out, ws->probs, sizeof(float) * B);
    return labels && want_loss ? loss : 0.0f;
}

float tr_model_forward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t B,
                       const float *dense, const float *emb, const float *labels,
                       float *probs_out)
{
    return s_forward(self, ws, w, B, dense, emb, NULL, labels, probs_out, S_FWD_LOSS);
}

void tr_model_forward_probs(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                            uint32_t B, const float *dense, const float *emb,
                            const float *labels, float *probs_out)
{
    s_forward(self, ws, w, B, dense, emb, NULL, labels, probs_out, 0);
}

void tr_model_forward_rows(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                           uint32_t B, const float *dense, const float *const *rows,
                           const float *labels, float *probs_out)
{
    ss_assert(rows || self->conf.n_sparse == 0);
    s_forward(self, ws, w, B, dense, NULL, rows, labels, probs_out, 0);
}

/* Backward through the top MLP from the loss; returns the buffer holding the
 * gradient w.r.t. the top input [B x top_in]; *spare is the other buffer. The
 * first-order gradients (grad_emb rows' last floats) are taken on the way. */
static float *s_backward_top(const tr_model_t *m, tr_model_ws_t *ws, const float *w,
                             float *grad_w, float *grad_emb, float **spare)
{
    uint32_t B = ws->batch, nb = m->conf.n_bottom;
    float *dy = ws->d_a, *dx = ws->d_b;
    for (uint32_t b = 0; b < B; b++)
        dy[b] = (ws->probs[b] - ws->labels[b]) / (float)B;
    if (m->conf.first_order)
        s_first_order_bwd(m, ws, dy, grad_w);
    for (uint32_t k = m->n_layers - 1; k >= nb; k--) {
        const float *x = k == nb ? ws->x_top : ws->act[k - 1];
        s_layer_bwd(m, ws, &m->layers[k], w, grad_w, B, x, dy, dx);
        if (k > nb)
            s_relu_mask(m, dx, ws->act[k - 1], (size_t)B * m->layers[k].n_in);
        float *t = dy;
        dy = dx;
        dx = t;
    }
    *spare = dx;
    return dy;
}

/* Backward through the interaction: dh [B x dim] (masked by the bottom ReLU) from
 * the top input's gradient dt; embedding gradients into grad_emb, with first-order
 * terms each row's last float too: d mean loss / d logit, as in s_backward_top
 * (written here, where the rows are in the cache). */
static void s_backward_interact(const tr_model_t *m, tr_model_ws_t *ws, const float *dt,
                                float *dh, float *grad_emb)
{
    uint32_t dim = m->conf.dim, rd = m->row_dim, ns = m->conf.n_sparse, B = ws->batch;
    size_t n_emb = (size_t)ns * rd, n_z = (size_t)m->n_vec * dim;
    const float *h = ws->act[m->conf.n_bottom - 1];
    for (uint32_t b = 0; b < B; b++) {
        const float *t = dt + (size_t)b * m->top_in;
        float *d0 = dh + (size_t)b * dim, *ge = grad_emb + b * n_emb;
        s_interact_bwd(m, ws->z + b * n_z, t + dim, d0, ge);
        for (uint32_t d = 0; d < dim; d++)
            d0[d] += t[d];
        if (m->conf.first_order) {
            float dl = (ws->probs[b] - ws->labels[b]) / (float)B;
            for (uint32_t f = 0; f < ns; f++)
                ge[(size_t)f * rd + dim] = dl;
        }
    }
    s_relu_mask(m, dh, h, (size_t)ws->batch * dim);
}

void tr_model_backward(const tr_model_t *self, tr_model_ws_t *ws, const float *w, float *grad_w,
                       float *grad_emb)
{
    ss_assert(self && ws && w && grad_w);
    ss_assert(ws->batch >= 1 && ws->has_labels);
    uint32_t B = ws->batch;
    float *dx, *gemb = grad_emb ? grad_emb : ws->d_emb;
    float *dt = s_backward_top(self, ws, w, grad_w, gemb, &dx);
    float *dy = dx;
    s_backward_interact(self, ws, dt, dy, gemb);
    dx = dt;
    for (uint32_t k = self->conf.n_bottom; k-- > 0;) {
        s_layer_bwd(self, ws, &self->layers[k], w, grad_w, B, k ? ws->act[k - 1] : ws->in,
                    dy, k ? dx : NULL);
        if (k == 0)
            break;
        s_relu_mask(self, dx, ws->act[k - 1], (size_t)B * self->layers[k].n_in);
        float *t = dy;
        dy = dx;
        dx = t;
    }
}

double tr_model_flops_per_example(const tr_model_t *self)
{
    ss_assert(self);
    double macs = 0.0;
    for (uint32_t k = 0; k < self->n_layers; k++)
        macs += (double)self->layers[k].n_in * self->layers[k].n_out;
    double first = (double)self->layers[0].n_in * self->layers[0].n_out;
    double inter = (double)self->n_pairs * self->conf.dim;
    /* first order: a multiply-add per dense feature and an add per field forward,
     * a multiply-add per dense feature backward */
    double wide = self->conf.first_order
                      ? 4.0 * self->conf.n_dense + (double)self->conf.n_sparse : 0.0;
    /* forward: layers + dots; backward: weight grads, input grads but the first
     * layer's, and two multiply-adds per pair element. */
    return 2.0 * (macs + inter) + 2.0 * (2.0 * macs - first) + 2.0 * (2.0 * inter) + wide;
}

int tr_model_uses_simd(const tr_model_t *self)
{
    ss_assert(self);
    return self->avx2;
}

int tr_model_bf16(const tr_model_t *self)
{
    ss_assert(self);
    return self->bf16;
}

void tr_model_describe(const tr_model_t *self, char *buf, size_t len)
{
    ss_assert(self && buf);
    const char *inter = self->simd512 ? "avx512" : self->simd ? "avx2" : "portable";
    const char *prec = self->bf16 ? "bf16" : "fp32";
    if (!self->dnnl)
        snprintf(buf, len, "isa %s, interaction %s, products fp32: blas", ss_isa_name(ss_isa_get()),
                 inter);
    else if (self->conf.gemm == TR_MODEL_GEMM_DNNL)
        snprintf(buf, len, "isa %s, interaction %s, products %s: dnnl", ss_isa_name(ss_isa_get()),
                 inter, prec);
    else
        snprintf(buf, len, "isa %s, interaction %s, products %s: %s from %u multiply-adds, "
                 "blas below", ss_isa_name(ss_isa_get()), inter, prec,
                 self->bf16 ? "dnnl-bf16" : "dnnl-f32",
                 self->bf16 ? TR_MODEL_BF16_MIN_MACS : TR_MODEL_DNNL_MIN_MACS);
}

enum tr_gemm_engine tr_model_engine(const tr_model_t *self, const struct tr_gemm_op *op)
{
    ss_assert(self && op);
    return s_engine(self, op);
}

uint64_t tr_model_ws_fallbacks(const tr_model_ws_t *ws)
{
    ss_assert(ws);
    return tr_gemm_fallbacks(ws->gemm);
}

void tr_model_blas_single_thread(void)
{
    /* Debian's OpenBLAS (0.3.21) starts its pool again in every
     * openblas_set_num_threads() call once tr_model_blas_no_pool() has ended
     * it (its re-start after a fork): each worker's and eval thread's call
     * started one that spun in sched_yield(); ask only when the count is
     * not 1 already */
    if (openblas_get_num_threads() != 1)
        openblas_set_num_threads(1);
    omp_set_num_threads(1);
}

/* OpenBLAS's pthread build (Debian's default) ends its pool with this; the
 * OpenMP and serial builds have no such symbol (weak: NULL then). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void tr_model_blas_no_pool(void)
{
    tr_model_blas_single_thread();
    if (blas_thread_shutdown_)
        (void)blas_thread_shutdown_();
}

/* tr_model_score_chunks on emb, or where rows is not NULL on the rows it
 * points to (tr_model_score_rows). */
static void s_score_chunks(const tr_model_t *self, tr_model_ws_t *ws, const float *w,
                           uint32_t C, uint32_t n, const float *dense, const float *emb,
                           const float *const *rows, const float *labels, float *probs_out,
                           const struct tr_model_pad *pad)
{
    ss_assert(self && ws && w && C > 0 && pad && (n == 0 || ((emb || rows) && probs_out)));
    uint32_t ns = self->conf.n_sparse;
    /* every chunk's products take the same weights: rounded to bf16 once
     * (kept), not once a chunk; the loss is not needed (the caller scores
     * the probabilities) */
    tr_gemm_forget(ws->gemm);
    size_t nd = self->conf.n_dense, ne = (size_t)self->conf.n_sparse * self->row_dim;
    uint32_t i = 0;
    for (; i + C <= n; i += C) {
        /* no dense inputs: any pointer serves, the forward reads none */
        const float *d = nd ? dense + i * nd : dense ? dense : pad->dense;
        const float *e = rows ? NULL : emb + i * ne;
        const float *const *r = rows ? rows + (size_t)i * ns : NULL;
        s_forward(self, ws, w, C, d, e, r, labels ? labels + i : NULL, probs_out + i,
                  S_FWD_SCORE);
    }
    uint32_t left = n - i;
    if (left == 0)
        return;
    /* the rows left, then zero rows up to C (only the padding is zeroed) */
    if (nd) {
        memcpy(pad->dense, dense + i * nd, left * nd * sizeof(float));
        memset(pad->dense + left * nd, 0, (C - left) * nd * sizeof(float));
    }
    if (rows)
        for (size_t k = 0; k < (size_t)left * ns; k++)
            memcpy(pad->emb + k * self->row_dim, rows[(size_t)i * ns + k],
                   self->row_dim * sizeof(float));
    else
        memcpy(pad->emb, emb + i * ne, left * ne * sizeof(float));
    memset(pad->emb + left * ne, 0, (C - left) * ne * sizeof(float));
    if (labels) {
        ss_assert(pad->labels);
        memcpy(pad->labels, labels + i, left * sizeof(float));
        memset(pad->labels + left, 0, (C - left) * sizeof(float));
    }
    s_forward(self, ws, w, C, pad->dense, pad->emb, NULL, labels ? pad->labels : NULL,
              pad->probs, S_FWD_SCORE);
    memcpy(probs_out + i, pad->probs, left * sizeof(float));
}

void tr_model_score_chunks(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t C,
                           uint32_t n, const float *dense, const float *emb, const float *labels,
                           float *probs_out, const struct tr_model_pad *pad)
{
    s_score_chunks(self, ws, w, C, n, dense, emb, NULL, labels, probs_out, pad);
}

void tr_model_score_rows(const tr_model_t *self, tr_model_ws_t *ws, const float *w, uint32_t C,
                         uint32_t n, const float *dense, const float *const *rows,
                         const float *labels, float *probs_out, const struct tr_model_pad *pad)
{
    ss_assert(rows || n == 0 || self->conf.n_sparse == 0);
    s_score_chunks(self, ws, w, C, n, dense, NULL, rows, labels, probs_out, pad);
}
