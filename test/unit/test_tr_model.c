/* test_tr_model.c - unit tests of the dense model (tr_model).
 *
 * The model is checked against an independent double-precision reference
 * written here from the definition (plain loops, no BLAS): the loss and the
 * probabilities, and every gradient (w.r.t. every parameter and every input
 * embedding) against central finite differences of the reference in double.
 * The model's own float loss is checked the same way with eps 1e-3. Each
 * gradient check is shown to fail on a perturbed gradient (one element off by
 * 1%, a transposed weight block, a flipped bias sign). The first-order terms
 * (first_order = 1: a weight in the last float of each embedding row, a linear
 * term on the dense features) get the same checks on every shape, plus a case by
 * hand. Plus: a loss computed by hand, extreme logits, the arena layout and
 * components, init determinism (golden bits), shape validation, batching, SIMD vs
 * portable kernels; the gradient checks again on every way the products run
 * (OpenBLAS, oneDNN fp32, oneDNN bf16 at looser tolerances, the default), each
 * against the portable model at batch 128, and the fallbacks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ss_err.h"
#include "ss_hash.h"
#include "ss_mem.h"
#include "tr_gemm.h"
#include "tr_model.h"
#include "tr_model_shape.h"

#define REF_MAX 4096    /* widest vector the reference handles */
#define TOL_R 1e-4      /* gradient check: relative tolerance ... */
#define TOL_A 1e-5      /* ... plus this fraction of the largest |gradient| */

/* A model with inputs, labels and output buffers for B examples. */
struct fix {
    tr_model_t *m;          /* the model */
    tr_model_ws_t *ws;      /* its scratch */
    uint32_t B;             /* examples */
    size_t n;               /* parameters */
    size_t n_emb;           /* floats of emb per example: n_sparse * row_dim */
    float *w;               /* parameters */
    float *grad;            /* gradient of the parameters */
    float *dense;           /* [B x n_dense] */
    float *emb;             /* [B x n_emb] */
    float *labels;          /* [B] */
    float *gemb;            /* gradient of emb [B x n_emb] */
};

/* Uniform floats in [lo, hi). */
static void s_fill(float *x, size_t n, float lo, float hi, uint64_t *st)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ss_rand_unit(st);
}

/* Build the model of conf with B random examples; weights from init (seed),
 * biases and linear weights random too so that their gradients and the ReLU
 * kinks are generic. */
static void s_fix_new(struct fix *f, const struct tr_model_conf *conf, uint32_t B,
                      uint64_t seed)
{
    char err[128] = "";
    uint64_t st = seed;
    f->m = tr_model_new(conf, err, sizeof(err));
    if (!f->m)
        print_message("tr_model_new: %s\n", err);
    assert_non_null(f->m);
    f->B = B;
    f->n = tr_model_n_params(f->m);
    f->n_emb = (size_t)conf->n_sparse * tr_model_row_dim(f->m);
    f->ws = tr_model_ws_new(f->m, B);
    f->w = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * f->n);
    f->grad = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * f->n);
    f->dense = ss_malloc(sizeof(float) * (B * conf->n_dense + 1));
    f->emb = ss_malloc(sizeof(float) * (B * f->n_emb + 1));
    f->labels = ss_malloc(sizeof(float) * B);
    f->gemb = ss_malloc(sizeof(float) * (B * f->n_emb + 1));
    tr_model_init_params(f->m, f->w, seed);
    for (uint32_t k = 0; k < tr_model_n_layers(f->m); k++) {
        struct tr_model_layer_info l;
        assert_int_equal(tr_model_layer(f->m, k, &l), 0);
        /* without dense inputs layer 0 gives relu(b): keep it positive so that
         * the next layer sees a generic input */
        if (l.n_in == 0)
            s_fill(f->w + l.b_off, l.n_out, 0.1f, 0.5f, &st);
        else
            s_fill(f->w + l.b_off, l.n_out, -0.2f, 0.2f, &st);
    }
    if (conf->first_order)
        s_fill(f->w + tr_model_linear_off(f->m), conf->n_dense, -0.3f, 0.3f, &st);
    s_fill(f->dense, (size_t)B * conf->n_dense, 0.0f, 2.0f, &st);
    s_fill(f->emb, B * f->n_emb, -0.6f, 0.6f, &st);
    for (uint32_t b = 0; b < B; b++)
        f->labels[b] = (float)(b % 2);
}

/* Free a fixture; checks that destroy clears the pointers. */
static void s_fix_free(struct fix *f)
{
    ss_free(f->w);
    ss_free(f->grad);
    ss_free(f->dense);
    ss_free(f->emb);
    ss_free(f->labels);
    ss_free(f->gemb);
    tr_model_ws_destroy(&f->ws);
    assert_null(f->ws);
    tr_model_destroy(&f->m);
    assert_null(f->m);
}

/* Forward + backward of the fixture's batch; returns the loss. */
static float s_fwd_bwd(struct fix *f)
{
    float loss = tr_model_forward(f->m, f->ws, f->w, f->B, f->dense, f->emb, f->labels, NULL);
    tr_model_backward(f->m, f->ws, f->w, f->grad, f->gemb);
    return loss;
}

/* ---- double-precision reference ---------------------------------------------- */

/* Loss of one example in double, straight from the definition; *p gets the
 * probability. ReLU after every layer but the very last. e holds n_sparse rows
 * of rd = dim + first_order: the vector, then the first-order weight. */
static double s_ref_example(const tr_model_t *m, const double *w, const double *x0,
                            const double *e, double y, double *p)
{
    const struct tr_model_conf *c = tr_model_conf(m);
    double a[REF_MAX], o[REF_MAX];
    uint32_t n = c->n_dense, nl = tr_model_n_layers(m), dim = c->dim;
    uint32_t rd = dim + c->first_order;
    memcpy(a, x0, sizeof(double) * n);
    for (uint32_t k = 0; k < nl; k++) {
        struct tr_model_layer_info l;
        assert_int_equal(tr_model_layer(m, k, &l), 0);
        if (k == c->n_bottom) {     /* interaction: [h, v_i . v_j for i < j] */
            uint32_t t = dim;
            for (uint32_t i = 0; i <= c->n_sparse; i++) {
                for (uint32_t j = i + 1; j <= c->n_sparse; j++) {
                    const double *vi = i ? e + (size_t)(i - 1) * rd : a;
                    const double *vj = e + (size_t)(j - 1) * rd;
                    double s = 0.0;
                    for (uint32_t d = 0; d < dim; d++)
                        s += vi[d] * vj[d];
                    o[t++] = s;
                }
            }
            memcpy(a + dim, o + dim, sizeof(double) * (t - dim));
            n = t;
        }
        assert_int_equal(l.n_in, n);
        for (uint32_t r = 0; r < l.n_out; r++) {
            double s = w[l.b_off + r];
            for (uint32_t i = 0; i < n; i++)
                s += w[l.w_off + (size_t)r * n + i] * a[i];
            o[r] = (k + 1 < nl && s < 0.0) ? 0.0 : s;
        }
        n = l.n_out;
        memcpy(a, o, sizeof(double) * n);
    }
    for (uint32_t f = 0; c->first_order && f < c->n_sparse; f++)
        a[0] += e[(size_t)f * rd + dim];                  /* u_f */
    for (uint32_t i = 0; c->first_order && i < c->n_dense; i++)
        a[0] += w[tr_model_linear_off(m) + i] * x0[i];    /* v . dense */
    *p = 1.0 / (1.0 + exp(-a[0]));
    return (a[0] > 0 ? a[0] : 0.0) - a[0] * y + log1p(exp(-fabs(a[0])));
}

/* Mean reference loss over the batch (probs [B] when not NULL). */
static double s_ref_loss(const struct fix *f, const double *w, const double *dense,
                         const double *emb, double *probs)
{
    const struct tr_model_conf *c = tr_model_conf(f->m);
    double sum = 0.0, p;
    for (uint32_t b = 0; b < f->B; b++) {
        sum += s_ref_example(f->m, w, dense + (size_t)b * c->n_dense, emb + b * f->n_emb,
                             f->labels[b], &p);
        if (probs)
            probs[b] = p;
    }
    return sum / f->B;
}

/* Copy floats to doubles. */
static double *s_to_double(const float *x, size_t n)
{
    double *d = ss_malloc(sizeof(double) * (n + 1));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* Central differences of the reference loss w.r.t. x [n] (one of w, emb), h 1e-6. */
static void s_ref_fd(const struct fix *f, double *w, double *dense, double *emb, double *x,
                     size_t n, double *fd)
{
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = s_ref_loss(f, w, dense, emb, NULL);
        x[i] = keep - h;
        double lm = s_ref_loss(f, w, dense, emb, NULL);
        x[i] = keep;
        fd[i] = (lp - lm) / (2.0 * h);
    }
}

/* Number of i with |g[i] - ref[i]| > rtol |ref[i]| + atol max|ref|; prints the
 * first few when verbose. */
static size_t s_mismatches(const char *what, const float *g, const double *ref, size_t n,
                           double rtol, double atol, int verbose)
{
    double gmax = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        double err = fabs(g[i] - ref[i]);
        if (err > rtol * fabs(ref[i]) + atol * gmax) {
            if (verbose && bad < 5)
                print_message("%s[%zu]: model %.9g, finite difference %.9g\n", what, i, g[i],
                              ref[i]);
            bad++;
        }
    }
    return bad;
}

/* Index of the largest |x[i]|. */
static size_t s_argmax_abs(const double *x, size_t n)
{
    size_t k = 0;
    for (size_t i = 1; i < n; i++)
        if (fabs(x[i]) > fabs(x[k]))
            k = i;
    return k;
}

/* Show that the check catches wrong gradients: one element 1% off, the weight
 * block of a non-square layer transposed, the largest bias gradient negated. */
static void s_check_the_check(const struct fix *f, const double *fd)
{
    float *bad = ss_malloc(sizeof(float) * f->n);
    size_t k = s_argmax_abs(fd, f->n);
    memcpy(bad, f->grad, sizeof(float) * f->n);
    bad[k] *= 1.01f;
    assert_true(s_mismatches("perturbed", bad, fd, f->n, TOL_R, TOL_A, 0) >= 1);
    for (uint32_t l = 0; l < tr_model_n_layers(f->m); l++) {
        struct tr_model_layer_info li;
        assert_int_equal(tr_model_layer(f->m, l, &li), 0);
        if (li.n_in == li.n_out || li.n_out == 1 || li.n_in == 0)
            continue;
        memcpy(bad, f->grad, sizeof(float) * f->n);
        for (uint32_t r = 0; r < li.n_out; r++)     /* read G^T's storage as G */
            for (uint32_t i = 0; i < li.n_in; i++)
                bad[li.w_off + (size_t)r * li.n_in + i] =
                    f->grad[li.w_off + (size_t)i * li.n_out + r];
        assert_true(s_mismatches("transposed", bad, fd, f->n, TOL_R, TOL_A, 0) > li.n_in);
        size_t kb = li.b_off + s_argmax_abs(fd + li.b_off, li.n_out);
        memcpy(bad, f->grad, sizeof(float) * f->n);
        bad[kb] = -bad[kb];
        if (fabs(fd[kb]) > 1e-3 * fabs(fd[k]))
            assert_true(s_mismatches("bias sign", bad, fd, f->n, TOL_R, TOL_A, 0) >= 1);
    }
    if (tr_model_conf(f->m)->first_order && tr_model_conf(f->m)->n_dense) {
        /* the linear weights' largest, negated */
        size_t lo = tr_model_linear_off(f->m), nd = tr_model_conf(f->m)->n_dense;
        size_t kv = lo + s_argmax_abs(fd + lo, nd);
        memcpy(bad, f->grad, sizeof(float) * f->n);
        bad[kv] = -bad[kv];
        assert_true(s_mismatches("linear sign", bad, fd, f->n, TOL_R, TOL_A, 0) >= 1);
    }
    ss_free(bad);
}

/* Tolerances of one gradient check (bf16 products need looser ones). */
struct tols {
    double loss;    /* relative error of the loss */
    double prob;    /* absolute error of each probability */
    double r, a;    /* each gradient element: relative, plus this fraction of the
                     * largest; 0: checked by norm instead */
    double norm;    /* whole gradients: |g - fd| / |fd| (L2) at most this */
    int check;      /* 1: show the check fails on perturbed gradients */
};

static const struct tols s_tol_f32 = {1e-5, 1e-5, TOL_R, TOL_A, 1e-4, 1};
static const struct tols s_tol_f32_nocheck = {1e-5, 1e-5, TOL_R, TOL_A, 1e-4, 0};

/* bf16 products round each input to 8 significant bits (relative error up to
 * 2^-9 = 0.2% each); a batch-mean weight gradient sums terms of both signs, so
 * single elements can be far off while the whole is close: measured 2-4% in L2
 * norm per layer at the default shape, batch 128. Elements are not checked one
 * by one. */
static const struct tols s_tol_bf16 = {2e-2, 1e-2, 0, 0, 8e-2, 0};

/* |g - ref| / |ref| in L2 norm over n elements. */
static double s_rel_norm(const float *g, const double *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += (g[i] - ref[i]) * (g[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* The gradient g [n] against fd under tol; what names it. */
static void s_check_vec(const char *what, const float *g, const double *fd, size_t n,
                        const struct tols *tol)
{
    double rn = s_rel_norm(g, fd, n);
    if (rn > tol->norm)
        print_message("%s: relative L2 error %.3g > %.3g\n", what, rn, tol->norm);
    assert_true(rn <= tol->norm);
    if (tol->r > 0)
        assert_int_equal(s_mismatches(what, g, fd, n, tol->r, tol->a, 1), 0);
}

static void s_check_grads_tol(const struct tr_model_conf *conf, uint32_t B, uint64_t seed,
                              const struct tols *tol);

/* The full check of one shape: loss, probabilities, parameter and embedding
 * gradients against the double reference; then the check of the check. */
static void s_check_grads(const struct tr_model_conf *conf, uint32_t B, uint64_t seed)
{
    s_check_grads_tol(conf, B, seed, &s_tol_f32);
}

/* s_check_grads with tolerances tol; the check of the check only at fp32's. */
static void s_check_grads_tol(const struct tr_model_conf *conf, uint32_t B, uint64_t seed,
                              const struct tols *tol)
{
    struct fix f;
    s_fix_new(&f, conf, B, seed);
    float probs[64];
    float loss = tr_model_forward(f.m, f.ws, f.w, B, f.dense, f.emb, f.labels, probs);
    tr_model_backward(f.m, f.ws, f.w, f.grad, f.gemb);
    double *w = s_to_double(f.w, f.n), *emb = s_to_double(f.emb, B * f.n_emb);
    double *dense = s_to_double(f.dense, (size_t)B * conf->n_dense);
    double rprobs[64];
    double rloss = s_ref_loss(&f, w, dense, emb, rprobs);
    assert_true(fabs(loss - rloss) <= tol->loss * fabs(rloss));
    for (uint32_t b = 0; b < B; b++)
        assert_true(fabs(probs[b] - rprobs[b]) <= tol->prob);
    double *fd = ss_malloc(sizeof(double) * (f.n > B * f.n_emb ? f.n : B * f.n_emb));
    s_ref_fd(&f, w, dense, emb, w, f.n, fd);
    s_check_vec("grad_w", f.grad, fd, f.n, tol);
    assert_int_equal(tr_model_ws_fallbacks(f.ws), 0);
    if (tol->check)
        s_check_the_check(&f, fd);
    if (f.n_emb) {
        s_ref_fd(&f, w, dense, emb, emb, B * f.n_emb, fd);
        s_check_vec("grad_emb", f.gemb, fd, B * f.n_emb, tol);
        size_t k = s_argmax_abs(fd, B * f.n_emb);
        f.gemb[k] *= 1.01f;
        assert_true(!tol->check ||
                    s_mismatches("grad_emb", f.gemb, fd, B * f.n_emb, TOL_R, TOL_A, 0) >= 1);
        f.gemb[k] /= 1.01f;
    }
    if (f.n_emb && conf->first_order && tol->check) {   /* one example's first-order slot, 1% off */
        size_t k = (size_t)(B - 1) * f.n_emb + f.n_emb - 1;
        f.gemb[k] *= 1.01f;
        assert_true(s_mismatches("grad_u", f.gemb, fd, B * f.n_emb, TOL_R, TOL_A, 0) >= 1);
    }
    ss_free(fd);
    ss_free(w);
    ss_free(emb);
    ss_free(dense);
    s_fix_free(&f);
}

/* ---- shapes used below ----------------------------------------------------------- */

/* Default production shape (13 dense, 26 sparse, dim 16, 13-64-16, 367-64-1). */
static const struct tr_model_conf s_default = {
    .n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2, .bottom = {64, 16},
    .n_top = 2, .top = {64, 1}};

/* Loss + one linear top layer + interaction + one bottom ReLU layer. */
static const struct tr_model_conf s_linear = {
    .n_dense = 3, .n_sparse = 2, .dim = 4, .n_bottom = 1, .bottom = {4},
    .n_top = 1, .top = {1}};

/* Deep: two bottom and three top layers; dim 8 (SIMD interaction on AVX2). */
static const struct tr_model_conf s_deep = {
    .n_dense = 5, .n_sparse = 3, .dim = 8, .n_bottom = 2, .bottom = {6, 8},
    .n_top = 3, .top = {7, 5, 1}};

/* dim 3: always the portable interaction. */
static const struct tr_model_conf s_odd = {
    .n_dense = 2, .n_sparse = 4, .dim = 3, .n_bottom = 1, .bottom = {3},
    .n_top = 2, .top = {4, 1}};

/* Real input sizes (351 pairs), narrow layers. */
static const struct tr_model_conf s_real = {
    .n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2, .bottom = {4, 16},
    .n_top = 2, .top = {4, 1}};

/* dim 24 (generic SIMD dim: 16 + 8 lanes), 36 pairs. */
static const struct tr_model_conf s_dim24 = {
    .n_dense = 4, .n_sparse = 8, .dim = 24, .n_bottom = 1, .bottom = {24},
    .n_top = 2, .top = {3, 1}};

/* The shapes above with the first-order terms. */
static struct tr_model_conf s_fo(const struct tr_model_conf *c)
{
    struct tr_model_conf f = *c;
    f.first_order = 1;
    return f;
}

/* ---- tests ------------------------------------------------------------------------- */

/* Offsets of the default shape computed by hand: W [n_out x n_in] then bias,
 * layer after layer, no padding; components cover the arena exactly. */
static void test_layout_default(void **state)
{
    (void)state;
    tr_model_t *m = tr_model_new(&s_default, NULL, 0);
    assert_non_null(m);
    static const uint32_t n_in[4] = {13, 64, 367, 64}, n_out[4] = {64, 16, 64, 1};
    static const size_t w_off[4] = {0, 896, 1936, 25488};
    size_t off, len;
    assert_int_equal(tr_model_n_layers(m), 4);
    assert_int_equal(tr_model_top_in(m), 16 + 351);
    for (uint32_t k = 0; k < 4; k++) {
        struct tr_model_layer_info l;
        assert_int_equal(tr_model_layer(m, k, &l), 0);
        assert_int_equal(l.n_in, n_in[k]);
        assert_int_equal(l.n_out, n_out[k]);
        assert_int_equal(l.w_off, w_off[k]);
        assert_int_equal(l.b_off, w_off[k] + (size_t)n_in[k] * n_out[k]);
        assert_int_equal(l.relu, k < 3);
    }
    struct tr_model_layer_info l;
    assert_int_equal(tr_model_layer(m, 4, &l), SS_E_RANGE);
    assert_int_equal(tr_model_n_params(m), 25553);
    assert_int_equal(tr_model_component(m, "bottom", &off, &len), 0);
    assert_int_equal(off, 0);
    assert_int_equal(len, 1936);
    assert_int_equal(tr_model_component(m, "top", &off, &len), 0);
    assert_int_equal(off, 1936);
    assert_int_equal(len, 25553 - 1936);
    assert_int_equal(tr_model_component(m, "embedding", &off, &len), SS_E_NOTFOUND);
    /* 2 * (25408 + 5616) forward, 2 * (2 * 25408 - 832) + 4 * 5616 backward */
    assert_true(tr_model_flops_per_example(m) == 184480.0);
    tr_model_destroy(&m);
    assert_null(m);
    tr_model_destroy(&m);
    tr_model_destroy(NULL);
}

/* First-order layout of the default shape: the 13 linear weights follow the last
 * top layer and belong to "top"; rows are 17 floats; the layers do not move. */
static void test_layout_first_order(void **state)
{
    (void)state;
    struct tr_model_conf c = s_fo(&s_default);
    tr_model_t *m = tr_model_new(&c, NULL, 0), *plain = tr_model_new(&s_default, NULL, 0);
    size_t off, len;
    assert_int_equal(tr_model_n_params(m), 25553 + 13);
    assert_int_equal(tr_model_linear_off(m), 25553);
    assert_int_equal(tr_model_linear_off(plain), SIZE_MAX);
    assert_int_equal(tr_model_row_dim(m), 17);
    assert_int_equal(tr_model_row_dim(plain), 16);
    for (uint32_t k = 0; k < 4; k++) {
        struct tr_model_layer_info a, b;
        assert_int_equal(tr_model_layer(m, k, &a), 0);
        assert_int_equal(tr_model_layer(plain, k, &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
    }
    assert_int_equal(tr_model_component(m, "top", &off, &len), 0);
    assert_int_equal(off + len, 25553 + 13);
    /* 4 * 13 + 26 more: v . x and the u sum forward, v's gradient backward */
    assert_true(tr_model_flops_per_example(m) == 184480.0 + 78.0);
    float *w = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * (25553 + 13));
    float *w0 = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * 25553);
    memset(w, 0x7f, sizeof(float) * (25553 + 13));
    tr_model_init_params(m, w, 1);
    tr_model_init_params(plain, w0, 1);
    assert_memory_equal(w, w0, sizeof(float) * 25553);   /* same layers, same bits */
    for (int i = 0; i < 13; i++)
        assert_true(w[25553 + i] == 0.0f);
    c.first_order = 2;
    char err[128] = "";
    assert_null(tr_model_new(&c, err, sizeof err));
    assert_non_null(strstr(err, "first_order"));
    ss_free(w);
    ss_free(w0);
    tr_model_destroy(&m);
    tr_model_destroy(&plain);
}

/* For several shapes: layers are contiguous, "bottom" ends where the first top
 * layer starts, and bottom + top == the whole arena. */
static void test_components_cover_arena(void **state)
{
    (void)state;
    const struct tr_model_conf *confs[] = {&s_default, &s_linear, &s_deep, &s_odd, &s_real,
                                           &s_dim24};
    for (size_t c = 0; c < 2 * sizeof(confs) / sizeof(confs[0]); c++) {
        struct tr_model_conf conf = *confs[c / 2];
        conf.first_order = c % 2;
        tr_model_t *m = tr_model_new(&conf, NULL, 0);
        assert_non_null(m);
        size_t end = 0, b_off, b_len, t_off, t_len;
        for (uint32_t k = 0; k < tr_model_n_layers(m); k++) {
            struct tr_model_layer_info l;
            assert_int_equal(tr_model_layer(m, k, &l), 0);
            assert_int_equal(l.w_off, end);
            end = l.b_off + l.n_out;
            if (k + 1 == conf.n_bottom) {
                assert_int_equal(tr_model_component(m, "bottom", &b_off, &b_len), 0);
                assert_int_equal(b_off + b_len, end);
            }
        }
        assert_int_equal(tr_model_component(m, "top", &t_off, &t_len), 0);
        assert_int_equal(b_off, 0);
        assert_int_equal(t_off, b_len);
        if (conf.first_order) {
            assert_int_equal(tr_model_linear_off(m), end);
            end += conf.n_dense;
        }
        assert_int_equal(t_off + t_len, end);
        assert_int_equal(end, tr_model_n_params(m));
        /* the shape alone gives the model's layout */
        struct tr_model_shape sh;
        assert_int_equal(tr_model_shape_of(&conf, &sh, NULL, 0), 0);
        assert_int_equal(sh.n_params, tr_model_n_params(m));
        assert_int_equal(sh.row_dim, tr_model_row_dim(m));
        assert_int_equal(sh.top_in, tr_model_top_in(m));
        assert_int_equal(sh.bottom_len, b_len);
        assert_int_equal(sh.n_layers, tr_model_n_layers(m));
        for (uint32_t k = 0; k < sh.n_layers; k++) {
            struct tr_model_layer_info l;
            assert_int_equal(tr_model_layer(m, k, &l), 0);
            assert_memory_equal(&sh.layers[k], &l, sizeof l);
        }
        tr_model_destroy(&m);
    }
}

/* Invalid shapes are refused with a message naming the problem. */
static void test_invalid_shapes(void **state)
{
    (void)state;
    struct {
        struct tr_model_conf conf;
        const char *needle;
    } cases[] = {
        {{.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2, .bottom = {64, 32},
          .n_top = 2, .top = {64, 1}}, "must equal dim"},
        {{.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2, .bottom = {64, 16},
          .n_top = 2, .top = {64, 2}}, "must be 1"},
        {{.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 0, .bottom = {16},
          .n_top = 1, .top = {1}}, "n_bottom"},
        {{.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 1, .bottom = {16},
          .n_top = 17, .top = {1}}, "n_top"},
        {{.n_dense = 13, .n_sparse = 26, .dim = 0, .n_bottom = 1, .bottom = {0},
          .n_top = 1, .top = {1}}, "dim"},
        {{.n_dense = TR_MODEL_MAX_DENSE + 1, .n_sparse = 26, .dim = 16, .n_bottom = 1,
          .bottom = {16}, .n_top = 1, .top = {1}}, "n_dense"},
        {{.n_dense = 13, .n_sparse = 26, .dim = 16, .n_bottom = 2, .bottom = {0, 16},
          .n_top = 1, .top = {1}}, "bottom[0]"},
        {{.n_dense = 13, .n_sparse = 5000, .dim = 16, .n_bottom = 1, .bottom = {16},
          .n_top = 1, .top = {1}}, "n_sparse"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[128] = "";
        assert_null(tr_model_new(&cases[i].conf, err, sizeof(err)));
        if (!strstr(err, cases[i].needle))
            print_message("case %zu: '%s' lacks '%s'\n", i, err, cases[i].needle);
        assert_non_null(strstr(err, cases[i].needle));
        assert_null(tr_model_new(&cases[i].conf, NULL, 0));
        /* the shape alone (shadow-ctl's export) refuses it with the same words */
        struct tr_model_shape sh;
        char err2[128] = "";
        assert_int_equal(tr_model_shape_of(&cases[i].conf, &sh, err2, sizeof err2),
                         SS_E_CONFIG);
        assert_string_equal(err2, err);
        assert_int_equal(tr_model_shape_of(&cases[i].conf, &sh, NULL, 0), SS_E_CONFIG);
    }
}

/* Same seed, same bits (pinned golden values); another seed, other values;
 * biases 0; weights within the He / Xavier bounds with the uniform variance. */
static void test_init_deterministic(void **state)
{
    (void)state;
    tr_model_t *m = tr_model_new(&s_default, NULL, 0);
    size_t n = tr_model_n_params(m), diff = 0;
    float *a = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    float *b = ss_aligned_alloc(TR_MODEL_ALIGN, sizeof(float) * n);
    tr_model_init_params(m, a, 1);
    tr_model_init_params(m, b, 1);
    assert_memory_equal(a, b, sizeof(float) * n);
    /* golden: splitmix64 stream mix(seed ^ mix(0x6d6f64656c + layer)), computed
     * independently (Python) */
    static const uint32_t gold0[3] = {0x3defe8aa, 0xbc475d54, 0xbe913c99};
    static const uint32_t gold3[3] = {0x3d6655d4, 0x3d8b1eef, 0xbe231b8f};
    for (int i = 0; i < 3; i++) {
        uint32_t u0, u3;
        memcpy(&u0, a + i, 4);
        memcpy(&u3, a + 25488 + i, 4);
        assert_int_equal(u0, gold0[i]);
        assert_int_equal(u3, gold3[i]);
    }
    tr_model_init_params(m, b, 2);
    for (size_t i = 0; i < n; i++)
        diff += a[i] != b[i];
    assert_true(diff > n - 200);    /* all weights differ (~ 145 biases are 0 in both) */
    for (uint32_t k = 0; k < tr_model_n_layers(m); k++) {
        struct tr_model_layer_info l;
        tr_model_layer(m, k, &l);
        double lim = sqrt(6.0 / (l.relu ? l.n_in : l.n_in + l.n_out)), var = 0.0;
        size_t nw = (size_t)l.n_in * l.n_out;
        for (size_t i = 0; i < nw; i++) {
            assert_true(fabs(a[l.w_off + i]) <= lim);
            var += (double)a[l.w_off + i] * a[l.w_off + i];
        }
        for (uint32_t o = 0; o < l.n_out; o++)
            assert_true(a[l.b_off + o] == 0.0f);
        if (nw > 10000)     /* uniform(-lim, lim) has variance lim^2 / 3 */
            assert_true(fabs(var / nw / (lim * lim / 3.0) - 1.0) < 0.05);
    }
    ss_free(a);
    ss_free(b);
    tr_model_destroy(&m);
}

/* A 1-1-1 model evaluated by hand: W0 = 2, b0 = -1, top W = (0.5, -0.25), b = 0.1.
 * Example (x, e, y): h = relu(2x - 1), t = (h, h e), z = 0.5 h - 0.25 h e + 0.1.
 * (1, 3, 1): z = -0.15; (0, 2, 0): h = 0, z = 0.1; (2, -1, 0): z = 2.35. */
static void test_loss_by_hand(void **state)
{
    (void)state;
    struct tr_model_conf c = {.n_dense = 1, .n_sparse = 1, .dim = 1, .n_bottom = 1,
                              .bottom = {1}, .n_top = 1, .top = {1}};
    tr_model_t *m = tr_model_new(&c, NULL, 0);
    assert_int_equal(tr_model_n_params(m), 5);
    tr_model_ws_t *ws = tr_model_ws_new(m, 4);
    float w[5] = {2.0f, -1.0f, 0.5f, -0.25f, 0.1f}, g[5], ge[3], probs[3];
    float x[3] = {1, 0, 2}, e[3] = {3, 2, -1}, y[3] = {1, 0, 0};
    float loss = tr_model_forward(m, ws, w, 3, x, e, y, probs);
    /* (log1p(exp(0.15)) + log1p(exp(0.1)) + log1p(exp(2.35))) / 3 */
    assert_float_equal(loss, 1.3188150495859816, 1e-6);
    assert_float_equal(probs[0], 0.46257015465625045, 1e-6);
    assert_float_equal(probs[1], 0.52497918747894, 1e-6);
    assert_float_equal(probs[2], 0.9129342275597286, 1e-6);
    tr_model_backward(m, ws, w, g, ge);
    double dl[3], h[3] = {1, 0, 3}, want[5] = {0}, want_e[3];
    for (int b = 0; b < 3; b++) {
        dl[b] = (1.0 / (1.0 + exp(-(0.5 * h[b] - 0.25 * h[b] * e[b] + 0.1))) - y[b]) / 3.0;
        double dh = h[b] > 0 ? dl[b] * (0.5 - 0.25 * e[b]) : 0.0;
        want[0] += dh * x[b];
        want[1] += dh;
        want[2] += dl[b] * h[b];
        want[3] += dl[b] * h[b] * e[b];
        want[4] += dl[b];
        want_e[b] = dl[b] * -0.25 * h[b];
    }
    for (int i = 0; i < 5; i++)
        assert_float_equal(g[i], want[i], 1e-6);
    for (int b = 0; b < 3; b++)
        assert_float_equal(ge[b], want_e[b], 1e-6);
    /* without labels: loss 0, same probabilities */
    float p2[3];
    assert_true(tr_model_forward(m, ws, w, 3, x, e, NULL, p2) == 0.0f);
    assert_memory_equal(p2, probs, sizeof(p2));
    tr_model_ws_destroy(&ws);
    assert_null(ws);
    tr_model_ws_destroy(&ws);
    tr_model_destroy(&m);
}

/* Logits of +-100: the loss stays finite (100 or ~0), probabilities saturate,
 * gradients are (p - y) / B. */
static void test_loss_extreme(void **state)
{
    (void)state;
    struct tr_model_conf c = {.n_dense = 1, .n_sparse = 1, .dim = 1, .n_bottom = 1,
                              .bottom = {1}, .n_top = 1, .top = {1}};
    tr_model_t *m = tr_model_new(&c, NULL, 0);
    tr_model_ws_t *ws = tr_model_ws_new(m, 2);
    float w[5] = {1.0f, 0.0f, 100.0f, 0.0f, 0.0f}, g[5], ge[2], probs[2];
    float x[2] = {1, 1}, e[2] = {0, 0}, y[2] = {0, 1};
    float loss = tr_model_forward(m, ws, w, 2, x, e, y, probs);
    assert_float_equal(loss, 50.0, 1e-4);   /* (100 + ~3.7e-44) / 2 */
    assert_true(probs[0] == 1.0f && probs[1] == 1.0f);
    tr_model_backward(m, ws, w, g, ge);
    assert_float_equal(g[4], 0.5, 1e-6);    /* ((1 - 0) + (1 - 1)) / 2 */
    w[2] = -100.0f;
    loss = tr_model_forward(m, ws, w, 2, x, e, y, probs);
    assert_float_equal(loss, 50.0, 1e-4);
    assert_true(probs[0] < 1e-40f && probs[1] < 1e-40f);
    tr_model_backward(m, ws, w, g, ge);
    assert_float_equal(g[4], -0.5, 1e-6);
    for (int i = 0; i < 5; i++)
        assert_true(isfinite(g[i]));
    tr_model_ws_destroy(&ws);
    tr_model_destroy(&m);
}

/* Every layer type against the double reference: loss + linear logit layer. */
static void test_grad_linear(void **state)
{
    (void)state;
    s_check_grads(&s_linear, 4, 11);
}

/* Deep bottom and top ReLU stacks, dim 8; once with the portable kernels. */
static void test_grad_deep(void **state)
{
    (void)state;
    struct tr_model_conf c = s_deep;
    s_check_grads(&c, 5, 12);
    c.portable = 1;
    s_check_grads(&c, 5, 12);
}

/* dim 3 (portable interaction), a single bottom layer. */
static void test_grad_odd_dim(void **state)
{
    (void)state;
    s_check_grads(&s_odd, 3, 13);
}

/* The real input sizes: 13 dense, 26 embeddings of 16, 351 pairs. */
static void test_grad_real_inputs(void **state)
{
    (void)state;
    s_check_grads(&s_real, 3, 14);
}

/* dim 24: the generic SIMD dim (16 + 8 lanes), pairs 36 = 4 * 8 + 4. */
static void test_grad_dim24(void **state)
{
    (void)state;
    struct tr_model_conf c = s_dim24;
    s_check_grads(&c, 2, 15);
    c.portable = 1;
    s_check_grads(&c, 2, 15);
}

/* No dense features (a layout of categorical fields only, e.g. Avazu): the
 * first bottom layer has no weights and gives relu(b); the gradients, with
 * and without first-order terms, against the double reference. */
static void test_grad_no_dense(void **state)
{
    (void)state;
    struct tr_model_conf c = {.n_dense = 0, .n_sparse = 3, .dim = 4, .n_bottom = 2,
                              .bottom = {5, 4}, .n_top = 2, .top = {6, 1}};
    tr_model_t *m = tr_model_new(&c, NULL, 0);
    struct tr_model_layer_info l;
    assert_non_null(m);
    assert_int_equal(tr_model_layer(m, 0, &l), 0);
    assert_int_equal(l.n_in, 0);
    assert_int_equal(l.b_off, l.w_off);   /* no weights, only the bias */
    assert_int_equal(tr_model_n_params(m), 5 + (4 * 5 + 4) + (6 * (4 + 6) + 6) + (6 + 1));
    tr_model_destroy(&m);
    s_check_grads(&c, 4, 31);
    c.first_order = 1;
    s_check_grads(&c, 4, 32);
    c.portable = 1;
    s_check_grads(&c, 4, 33);
}

/* The first-order 1-1-1 model by hand: test_loss_by_hand's weights, v = 0.5 on
 * the dense input, rows (e, u). z = 0.5 h - 0.25 h e + 0.1 + u + 0.5 x; the
 * gradients: d v = sum_b dl_b x_b, d u_b = dl_b, the rest as without. */
static void test_first_order_by_hand(void **state)
{
    (void)state;
    struct tr_model_conf c = {.n_dense = 1, .n_sparse = 1, .dim = 1, .n_bottom = 1,
                              .bottom = {1}, .n_top = 1, .top = {1}, .first_order = 1};
    tr_model_t *m = tr_model_new(&c, NULL, 0);
    assert_int_equal(tr_model_n_params(m), 6);
    assert_int_equal(tr_model_linear_off(m), 5);
    tr_model_ws_t *ws = tr_model_ws_new(m, 4);
    float w[6] = {2.0f, -1.0f, 0.5f, -0.25f, 0.1f, 0.5f}, g[6], ge[6], probs[3];
    float x[3] = {1, 0, 2}, e[6] = {3, -0.5f, 2, 0.25f, -1, 1}, y[3] = {1, 0, 0};
    double h[3] = {1, 0, 3}, z[3], dl[3], want[6] = {0}, loss = 0.0;
    for (int b = 0; b < 3; b++) {
        double eb = e[2 * b], ub = e[2 * b + 1];
        z[b] = 0.5 * h[b] - 0.25 * h[b] * eb + 0.1 + ub + 0.5 * x[b];
        loss += (log1p(exp(-fabs(z[b]))) + (z[b] > 0 ? z[b] : 0) - z[b] * y[b]) / 3.0;
        dl[b] = (1.0 / (1.0 + exp(-z[b])) - y[b]) / 3.0;
        double dh = h[b] > 0 ? dl[b] * (0.5 - 0.25 * eb) : 0.0;
        want[0] += dh * x[b];
        want[1] += dh;
        want[2] += dl[b] * h[b];
        want[3] += dl[b] * h[b] * eb;
        want[4] += dl[b];
        want[5] += dl[b] * x[b];
    }
    assert_float_equal(tr_model_forward(m, ws, w, 3, x, e, y, probs), loss, 1e-6);
    for (int b = 0; b < 3; b++)
        assert_float_equal(probs[b], 1.0 / (1.0 + exp(-z[b])), 1e-6);
    tr_model_backward(m, ws, w, g, ge);
    for (int i = 0; i < 6; i++)
        assert_float_equal(g[i], want[i], 1e-6);
    for (int b = 0; b < 3; b++) {
        assert_float_equal(ge[2 * b], dl[b] * -0.25 * h[b], 1e-6);
        assert_float_equal(ge[2 * b + 1], dl[b], 1e-7);
    }
    tr_model_ws_destroy(&ws);
    tr_model_destroy(&m);
}

/* The first-order terms on every shape against the double reference: the
 * linear weights' and the first-order weights' gradients included, SIMD and
 * portable interaction kernels (row stride dim + 1). */
static void test_grad_first_order(void **state)
{
    (void)state;
    const struct tr_model_conf *confs[] = {&s_linear, &s_deep, &s_odd, &s_real, &s_dim24};
    for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
        struct tr_model_conf c = s_fo(confs[i]);
        s_check_grads(&c, 3, 100 + i);
        c.portable = 1;
        s_check_grads(&c, 3, 100 + i);
    }
}

/* The model's own float loss with central differences, eps 1e-3 (the step
 * actually taken after rounding), against its gradient; the check catches a 5%
 * error in the largest element. */
static void test_grad_float_fd(void **state)
{
    (void)state;
    struct fix f;
    s_fix_new(&f, &s_deep, 5, 21);
    s_fwd_bwd(&f);
    double *fd = ss_malloc(sizeof(double) * f.n);
    for (size_t i = 0; i < f.n; i++) {
        float keep = f.w[i];
        f.w[i] = keep + 1e-3f;
        float up = f.w[i];
        double lp = tr_model_forward(f.m, f.ws, f.w, f.B, f.dense, f.emb, f.labels, NULL);
        f.w[i] = keep - 1e-3f;
        float down = f.w[i];
        double lm = tr_model_forward(f.m, f.ws, f.w, f.B, f.dense, f.emb, f.labels, NULL);
        f.w[i] = keep;
        fd[i] = (lp - lm) / ((double)up - down);
    }
    assert_int_equal(s_mismatches("float fd", f.grad, fd, f.n, 2e-2, 2e-3, 1), 0);
    size_t k = s_argmax_abs(fd, f.n);
    f.grad[k] *= 1.05f;
    assert_true(s_mismatches("float fd", f.grad, fd, f.n, 2e-2, 2e-3, 0) >= 1);
    ss_free(fd);
    s_fix_free(&f);
}

/* The batch is the mean of its examples: loss, grad_w and grad_emb of a batch
 * of 7 against 7 single-example passes (with and without first-order terms). */
static void s_batch_is_mean(const struct tr_model_conf *conf)
{
    struct fix f;
    s_fix_new(&f, conf, 7, 31);
    float loss = s_fwd_bwd(&f);
    float *g1 = ss_malloc(sizeof(float) * f.n), *ge1 = ss_malloc(sizeof(float) * f.n_emb);
    double *sum = ss_calloc(f.n, sizeof(double)), lsum = 0.0;
    uint32_t nd = tr_model_conf(f.m)->n_dense;
    for (uint32_t b = 0; b < 7; b++) {
        lsum += tr_model_forward(f.m, f.ws, f.w, 1, f.dense + b * nd, f.emb + b * f.n_emb,
                                 f.labels + b, NULL);
        tr_model_backward(f.m, f.ws, f.w, g1, ge1);
        for (size_t i = 0; i < f.n; i++)
            sum[i] += g1[i] / 7.0;
        for (size_t i = 0; i < f.n_emb; i++)
            assert_float_equal(f.gemb[b * f.n_emb + i], ge1[i] / 7.0, 1e-6);
    }
    assert_float_equal(loss, lsum / 7.0, 1e-6);
    assert_int_equal(s_mismatches("batch", f.grad, sum, f.n, 1e-4, 1e-5, 1), 0);
    ss_free(g1);
    ss_free(ge1);
    ss_free(sum);
    s_fix_free(&f);
}

static void test_batch_is_mean(void **state)
{
    (void)state;
    struct tr_model_conf c = s_fo(&s_real);
    s_batch_is_mean(&s_real);
    s_batch_is_mean(&c);
}

/* The forward copies what the backward needs: clobbering the inputs in between
 * changes nothing; grad_emb NULL gives the same grad_w. */
static void test_forward_copies_inputs(void **state)
{
    (void)state;
    struct fix f;
    s_fix_new(&f, &s_deep, 4, 41);
    s_fwd_bwd(&f);
    float *g = ss_malloc(sizeof(float) * f.n), *ge = ss_malloc(sizeof(float) * 4 * f.n_emb);
    memcpy(g, f.grad, sizeof(float) * f.n);
    memcpy(ge, f.gemb, sizeof(float) * 4 * f.n_emb);
    tr_model_forward(f.m, f.ws, f.w, f.B, f.dense, f.emb, f.labels, NULL);
    memset(f.dense, 0x7f, sizeof(float) * 4 * 5);
    memset(f.emb, 0x7f, sizeof(float) * 4 * f.n_emb);
    memset(f.labels, 0, sizeof(float) * 4);
    memset(f.grad, 0xff, sizeof(float) * f.n);
    tr_model_backward(f.m, f.ws, f.w, f.grad, f.gemb);
    assert_memory_equal(g, f.grad, sizeof(float) * f.n);
    assert_memory_equal(ge, f.gemb, sizeof(float) * 4 * f.n_emb);
    memset(f.grad, 0xff, sizeof(float) * f.n);
    tr_model_backward(f.m, f.ws, f.w, f.grad, NULL);
    assert_memory_equal(g, f.grad, sizeof(float) * f.n);
    ss_free(g);
    ss_free(ge);
    s_fix_free(&f);
}

/* SIMD and portable kernels agree (default shape, 351 pairs; dims 8, 24, 32).
 * Where the CPU has no AVX2 both models are portable and agree trivially. */
/* Forward and backward of conf with the SIMD kernels against the portable
 * ones on the same inputs (33 examples). */
static void s_simd_vs_portable(struct tr_model_conf c)
{
    struct fix a, b;
    c.portable = 0;
    s_fix_new(&a, &c, 33, 51);
    c.portable = 1;
    s_fix_new(&b, &c, 33, 51);
    assert_false(tr_model_uses_simd(b.m));
    float pa[33], pb[33];
    float la = tr_model_forward(a.m, a.ws, a.w, 33, a.dense, a.emb, a.labels, pa);
    float lb = tr_model_forward(b.m, b.ws, b.w, 33, b.dense, b.emb, b.labels, pb);
    assert_float_equal(la, lb, 1e-5 * lb);
    for (int i = 0; i < 33; i++)
        assert_float_equal(pa[i], pb[i], 1e-5);
    tr_model_backward(a.m, a.ws, a.w, a.grad, a.gemb);
    tr_model_backward(b.m, b.ws, b.w, b.grad, b.gemb);
    double *gb = s_to_double(b.grad, b.n), *eb = s_to_double(b.gemb, 33 * b.n_emb);
    assert_int_equal(s_mismatches("simd grad_w", a.grad, gb, a.n, 1e-4, 1e-5, 1), 0);
    assert_int_equal(s_mismatches("simd grad_emb", a.gemb, eb, 33 * a.n_emb, 1e-4, 1e-5,
                                  1), 0);
    ss_free(gb);
    ss_free(eb);
    s_fix_free(&a);
    s_fix_free(&b);
}

static void test_simd_matches_portable(void **state)
{
    (void)state;
    static const uint32_t dims[] = {16, 8, 24, 32, 16, 8};
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        struct tr_model_conf c = s_default;
        c.dim = dims[d];
        c.bottom[1] = dims[d];
        c.first_order = d >= 4;     /* the SIMD backward with row stride dim + 1 */
        if (d == 0) {
            tr_model_t *m = tr_model_new(&c, NULL, 0);
            if (!tr_model_uses_simd(m))
                print_message("note: no AVX2 on this CPU, the SIMD kernels are not tested\n");
            tr_model_destroy(&m);
        }
        s_simd_vs_portable(c);
    }
}

/* The AVX-512 interaction (dim 16 and 32, up to 64 vectors; AVX2 beyond)
 * at the edges of its 16-column blocks and 8-row groups, and of 8-column
 * halves: 2, 8, 9, 16, 17, 24, 25, 27, 29, 32, 41, 64 and 65 vectors;
 * with first-order rows (stride dim + 1) on odd cases. A gradient check
 * against the double reference on a 2-block shape. */
static void test_simd_interaction_shapes(void **state)
{
    (void)state;
    static const uint32_t n_sparse[] = {1, 15, 16, 26, 28, 31, 40, 63, 64, 7, 8, 23, 24};
    for (uint32_t dim = 16; dim <= 32; dim += 16)
        for (size_t k = 0; k < sizeof(n_sparse) / sizeof(n_sparse[0]); k++) {
            struct tr_model_conf c = s_default;
            c.dim = dim;
            c.bottom[1] = dim;
            c.n_sparse = n_sparse[k];
            c.first_order = k % 2;
            s_simd_vs_portable(c);
        }
    struct tr_model_conf g = {.n_dense = 3, .n_sparse = 20, .dim = 32, .n_bottom = 1,
                              .bottom = {32}, .n_top = 2, .top = {3, 1}, .first_order = 1};
    s_check_grads(&g, 2, 16);
}

/* The ways the products can run: OpenBLAS only, oneDNN fp32 for every product,
 * oneDNN bf16 for every product, and the default (by size; all BLAS at these
 * small shapes). Where this CPU (or SS_ISA) lacks one, the model falls back to
 * what it has and the same checks hold. */
static const struct {
    uint32_t precision, gemm;
    int bf16;               /* 1: checked at bf16 tolerances when bf16 runs here */
} s_paths[] = {
    {TR_MODEL_PREC_FP32, TR_MODEL_GEMM_BLAS, 0},
    {TR_MODEL_PREC_FP32, TR_MODEL_GEMM_DNNL, 0},
    {TR_MODEL_PREC_BF16, TR_MODEL_GEMM_DNNL, 1},
    {TR_MODEL_PREC_AUTO, TR_MODEL_GEMM_AUTO, 1},  /* auto: bf16 where it runs */
};

/* conf c on path p of s_paths */
static struct tr_model_conf s_on_path(struct tr_model_conf c, size_t p)
{
    c.precision = s_paths[p].precision;
    c.gemm = s_paths[p].gemm;
    return c;
}

/* Finite-difference checks of the parameter and embedding gradients on every
 * path: deep stacks, the real input sizes with first-order terms, no dense
 * features; fp32 at the usual tolerances, bf16 at s_tol_bf16. */
static void test_grad_every_path(void **state)
{
    (void)state;
    struct tr_model_conf nodense = {.n_dense = 0, .n_sparse = 3, .dim = 4, .n_bottom = 2,
                                    .bottom = {5, 4}, .n_top = 2, .top = {6, 1},
                                    .first_order = 1};
    const struct tr_model_conf confs[] = {s_deep, s_fo(&s_real), nodense, s_fo(&s_dim24)};
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++)
        for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
            struct tr_model_conf c = s_on_path(confs[i], p);
            char how[160];
            tr_model_t *m = tr_model_new(&c, NULL, 0);
            assert_non_null(m);
            int bf16 = tr_model_bf16(m);
            assert_int_equal(bf16, s_paths[p].bf16 && tr_gemm_engine_ok(TR_GEMM_DNNL_BF16));
            if (i == 0) {
                tr_model_describe(m, how, sizeof how);
                print_message("path %zu: %s\n", p, how);
                assert_non_null(strstr(how, bf16 ? "products bf16" : "products fp32"));
            }
            tr_model_destroy(&m);
            s_check_grads_tol(&c, 4, 200 + 10 * p + i, bf16 ? &s_tol_bf16 : &s_tol_f32_nocheck);
        }
}

/* A step's gradients depend on its batch only, not on the steps before it
 * in the same scratch: the default shape at batch 128 on every path (bf16
 * keeps the layers' inputs rounded from the forward to the weight
 * gradient's product, tr_gemm_run_kept; a copy left from the step before
 * would be used if the forward did not drop it), after a step on other
 * inputs, bit for bit as a fresh scratch's. */
static void test_step_needs_no_history(void **state)
{
    (void)state;
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++) {
        struct fix a, b;
        struct tr_model_conf c = s_on_path(s_fo(&s_default), p);
        s_fix_new(&a, &c, 128, 67);
        s_fix_new(&b, &c, 128, 67);
        for (size_t i = 0; i < (size_t)128 * c.n_dense; i++)
            a.dense[i] = b.dense[i] * 0.5f + 0.25f;
        for (size_t i = 0; i < 128 * a.n_emb; i++)
            a.emb[i] = -b.emb[i];
        s_fwd_bwd(&a);
        memcpy(a.dense, b.dense, sizeof(float) * 128 * c.n_dense);
        memcpy(a.emb, b.emb, sizeof(float) * 128 * a.n_emb);
        float la = s_fwd_bwd(&a), lb = s_fwd_bwd(&b);
        assert_memory_equal(&la, &lb, sizeof la);
        assert_memory_equal(a.grad, b.grad, sizeof(float) * a.n);
        assert_memory_equal(a.gemb, b.gemb, sizeof(float) * 128 * a.n_emb);
        s_fix_free(&a);
        s_fix_free(&b);
    }
}

/* tr_model_forward_probs (the workers' forward, no loss) gives tr_model_forward's
 * probabilities and, after it, the same backward, bit for bit, on every path;
 * with first-order terms, batch 128 and an odd batch. */
static void test_forward_probs_same_bits(void **state)
{
    (void)state;
    static const uint32_t batches[] = {128, 37};
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++)
        for (size_t k = 0; k < 2; k++) {
            struct fix a, b;
            struct tr_model_conf c = s_on_path(s_fo(&s_default), p);
            uint32_t B = batches[k];
            float pa[128], pb[128];
            s_fix_new(&a, &c, B, 71);
            s_fix_new(&b, &c, B, 71);
            float la = tr_model_forward(a.m, a.ws, a.w, B, a.dense, a.emb, a.labels, pa);
            tr_model_backward(a.m, a.ws, a.w, a.grad, a.gemb);
            tr_model_forward_probs(b.m, b.ws, b.w, B, b.dense, b.emb, b.labels, pb);
            tr_model_backward(b.m, b.ws, b.w, b.grad, b.gemb);
            assert_true(la > 0.0f);
            assert_memory_equal(pa, pb, sizeof(float) * B);
            assert_memory_equal(a.grad, b.grad, sizeof(float) * a.n);
            assert_memory_equal(a.gemb, b.gemb, sizeof(float) * B * a.n_emb);
            s_fix_free(&a);
            s_fix_free(&b);
        }
}

/* tr_model_forward_rows (rows wherever they lie: here each example's rows
 * in reverse field order in a buffer of their own, with a gap between rows)
 * gives tr_model_forward_probs's probabilities and the same backward, bit for
 * bit, on every path; batch 128 and an odd batch. */
static void test_forward_rows_same_bits(void **state)
{
    (void)state;
    static const uint32_t batches[] = {128, 37};
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++)
        for (size_t k = 0; k < 2; k++) {
            struct fix a, b;
            struct tr_model_conf c = s_on_path(s_fo(&s_default), p);
            uint32_t B = batches[k], ns = c.n_sparse;
            float pa[128], pb[128];
            s_fix_new(&a, &c, B, 73);
            s_fix_new(&b, &c, B, 73);
            size_t rd = b.n_emb / ns, gap = rd + 3;
            float *elsewhere = ss_calloc((size_t)B * ns * gap, sizeof(float));
            const float **rows = ss_calloc((size_t)B * ns, sizeof *rows);
            assert_non_null(elsewhere);
            assert_non_null(rows);
            for (uint32_t e = 0; e < B; e++)
                for (uint32_t f = 0; f < ns; f++) {
                    float *r = elsewhere + ((size_t)e * ns + (ns - 1 - f)) * gap;
                    memcpy(r, b.emb + e * b.n_emb + f * rd, rd * sizeof(float));
                    rows[(size_t)e * ns + f] = r;
                }
            memset(b.emb, 0xff, sizeof(float) * B * b.n_emb);  /* NaNs: never read */
            tr_model_forward_probs(a.m, a.ws, a.w, B, a.dense, a.emb, a.labels, pa);
            tr_model_backward(a.m, a.ws, a.w, a.grad, a.gemb);
            tr_model_forward_rows(b.m, b.ws, b.w, B, b.dense, rows, b.labels, pb);
            tr_model_backward(b.m, b.ws, b.w, b.grad, b.gemb);
            assert_memory_equal(pa, pb, sizeof(float) * B);
            assert_memory_equal(a.grad, b.grad, sizeof(float) * a.n);
            assert_memory_equal(a.gemb, b.gemb, sizeof(float) * B * a.n_emb);
            ss_free(elsewhere);
            ss_free(rows);
            s_fix_free(&a);
            s_fix_free(&b);
        }
}

/* tr_model_score_rows (rows wherever they lie) scores as
 * tr_model_score_chunks does, bit for bit, on every path: 37 rows in chunks
 * of 16, the last one padded. */
static void test_score_rows_same_bits(void **state)
{
    (void)state;
    enum { N = 37, C = 16 };
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++) {
        struct fix a;
        struct tr_model_conf c = s_on_path(s_fo(&s_default), p);
        s_fix_new(&a, &c, N, 79);
        uint32_t ns = c.n_sparse, nd = c.n_dense ? c.n_dense : 1;
        size_t rd = a.n_emb / ns;
        float *elsewhere = ss_calloc((size_t)N * ns * (rd + 5), sizeof(float));
        const float **rows = ss_calloc((size_t)N * ns, sizeof *rows);
        for (size_t k = 0; k < (size_t)N * ns; k++) {
            float *r = elsewhere + ((size_t)N * ns - 1 - k) * (rd + 5);
            memcpy(r, a.emb + k * rd, rd * sizeof(float));
            rows[k] = r;
        }
        float pa[N], pb[N];
        struct tr_model_pad pad = {ss_calloc((size_t)C * nd, sizeof(float)),
                                   ss_calloc((size_t)C * a.n_emb, sizeof(float)),
                                   ss_calloc(C, sizeof(float)), ss_calloc(C, sizeof(float))};
        tr_model_score_chunks(a.m, a.ws, a.w, C, N, a.dense, a.emb, a.labels, pa, &pad);
        memset(pad.emb, 0xff, sizeof(float) * C * a.n_emb);  /* overwritten, never read */
        tr_model_score_rows(a.m, a.ws, a.w, C, N, a.dense, rows, a.labels, pb, &pad);
        assert_memory_equal(pa, pb, sizeof pa);
        ss_free(pad.dense);
        ss_free(pad.emb);
        ss_free(pad.labels);
        ss_free(pad.probs);
        ss_free(elsewhere);
        ss_free(rows);
        s_fix_free(&a);
    }
}

/* A scoring batch of 1024 rows plus an odd 37 (tr_worker.c's scoring batch
 * with a short last one), scored in one call with a scratch of 16 rows only,
 * gives each row the bits that calls of 128 rows (batch_size) give it, on
 * every path: a row's prediction does not depend on the batch it is in. */
static void test_score_batch_split(void **state)
{
    (void)state;
    enum { N = 1024 + 37, B = 128, C = 16 };
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++) {
        struct fix a;
        struct tr_model_conf c = s_on_path(s_fo(&s_default), p);
        s_fix_new(&a, &c, N, 83);
        uint32_t ns = c.n_sparse, nd = c.n_dense ? c.n_dense : 1;
        size_t rd = a.n_emb / ns;
        const float **rows = ss_calloc((size_t)N * ns, sizeof *rows);
        for (size_t k = 0; k < (size_t)N * ns; k++)
            rows[k] = a.emb + k * rd;
        float *pa = ss_calloc(N, sizeof(float)), *pb = ss_calloc(N, sizeof(float));
        struct tr_model_pad pad = {ss_calloc((size_t)C * nd, sizeof(float)),
                                   ss_calloc((size_t)C * a.n_emb, sizeof(float)),
                                   ss_calloc(C, sizeof(float)), ss_calloc(C, sizeof(float))};
        tr_model_ws_t *small = tr_model_ws_new(a.m, C);
        tr_model_score_rows(a.m, small, a.w, C, N, a.dense, rows, a.labels, pa, &pad);
        for (uint32_t i = 0; i < N; i += B) {
            uint32_t n = N - i < B ? N - i : B;
            const float *d = c.n_dense ? a.dense + (size_t)i * c.n_dense : a.dense;
            tr_model_score_rows(a.m, a.ws, a.w, C, n, d, rows + (size_t)i * ns, a.labels + i,
                                pb + i, &pad);
        }
        assert_memory_equal(pa, pb, N * sizeof(float));
        tr_model_ws_destroy(&small);
        ss_free(pad.dense);
        ss_free(pad.emb);
        ss_free(pad.labels);
        ss_free(pad.probs);
        ss_free(pa);
        ss_free(pb);
        ss_free(rows);
        s_fix_free(&a);
    }
}

/* Forward and backward of the default shape at batch 128 (the top layer's
 * products are past TR_MODEL_DNNL_MIN_MACS) on conf against the portable model:
 * within 1e-4 for fp32, within bf16's tolerance for bf16, where bf16 must also
 * differ visibly (the rounding really happened). */
static void s_path_vs_portable(uint32_t precision, uint32_t gemm)
{
    struct fix a, b;
    struct tr_model_conf c = s_fo(&s_default);
    c.precision = precision;
    c.gemm = gemm;
    s_fix_new(&a, &c, 128, 61);
    c.portable = 1;
    s_fix_new(&b, &c, 128, 61);
    int bf16 = tr_model_bf16(a.m);
    assert_false(tr_model_bf16(b.m));
    float pa[128], pb[128];
    float la = tr_model_forward(a.m, a.ws, a.w, 128, a.dense, a.emb, a.labels, pa);
    float lb = tr_model_forward(b.m, b.ws, b.w, 128, b.dense, b.emb, b.labels, pb);
    double worst = 0.0;
    for (int i = 0; i < 128; i++)
        worst = fmax(worst, fabs(pa[i] - pb[i]));
    print_message("precision %u gemm %u (bf16 %d): loss %.7f vs %.7f, worst prob %.3g\n",
                  precision, gemm, bf16, la, lb, worst);
    assert_true(worst <= (bf16 ? 1e-2 : 1e-5));
    assert_true(fabs(la - lb) <= (bf16 ? 1e-2 : 1e-5) * lb);
    if (bf16)
        assert_true(worst > 1e-6);
    tr_model_backward(a.m, a.ws, a.w, a.grad, a.gemb);
    tr_model_backward(b.m, b.ws, b.w, b.grad, b.gemb);
    double *gb = s_to_double(b.grad, b.n), *eb = s_to_double(b.gemb, 128 * b.n_emb);
    const struct tols fp32 = {0, 0, 1e-4, 1e-5, 1e-4, 0};
    for (uint32_t k = 0; k < tr_model_n_layers(a.m); k++) {   /* each layer's block */
        struct tr_model_layer_info l;
        assert_int_equal(tr_model_layer(a.m, k, &l), 0);
        size_t len = l.b_off + l.n_out - l.w_off;
        s_check_vec("path grad_w", a.grad + l.w_off, gb + l.w_off, len,
                    bf16 ? &s_tol_bf16 : &fp32);
    }
    s_check_vec("path grad_emb", a.gemb, eb, 128 * a.n_emb, bf16 ? &s_tol_bf16 : &fp32);
    assert_int_equal(tr_model_ws_fallbacks(a.ws), 0);
    ss_free(gb);
    ss_free(eb);
    s_fix_free(&a);
    s_fix_free(&b);
}

static void test_paths_match_portable(void **state)
{
    (void)state;
    for (size_t p = 0; p < sizeof(s_paths) / sizeof(s_paths[0]); p++)
        s_path_vs_portable(s_paths[p].precision, s_paths[p].gemm);
    s_path_vs_portable(TR_MODEL_PREC_BF16, TR_MODEL_GEMM_AUTO);
}

/* Dispatch: a portable model never runs bf16 or oneDNN whatever it asks for;
 * precision and gemm out of range are refused with a message. */
static void test_path_dispatch(void **state)
{
    (void)state;
    struct tr_model_conf c = s_default;
    char how[160], err[128] = "";
    c.precision = TR_MODEL_PREC_BF16;
    c.gemm = TR_MODEL_GEMM_DNNL;
    c.portable = 1;
    tr_model_t *m = tr_model_new(&c, NULL, 0);
    assert_false(tr_model_bf16(m));
    tr_model_describe(m, how, sizeof how);
    assert_non_null(strstr(how, "products fp32: blas"));
    tr_model_destroy(&m);
    c.portable = 0;
    c.gemm = TR_MODEL_GEMM_BLAS;    /* OpenBLAS has no bf16: fp32 */
    m = tr_model_new(&c, NULL, 0);
    assert_false(tr_model_bf16(m));
    tr_model_destroy(&m);
    c.gemm = 3;
    assert_null(tr_model_new(&c, err, sizeof err));
    assert_non_null(strstr(err, "gemm = 3"));
    c.gemm = 0;
    c.precision = 3;
    assert_null(tr_model_new(&c, err, sizeof err));
    assert_non_null(strstr(err, "precision = 3"));
}

int main(void)
{
    tr_model_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_default),
        cmocka_unit_test(test_layout_first_order),
        cmocka_unit_test(test_components_cover_arena),
        cmocka_unit_test(test_invalid_shapes),
        cmocka_unit_test(test_init_deterministic),
        cmocka_unit_test(test_loss_by_hand),
        cmocka_unit_test(test_loss_extreme),
        cmocka_unit_test(test_grad_linear),
        cmocka_unit_test(test_grad_deep),
        cmocka_unit_test(test_grad_odd_dim),
        cmocka_unit_test(test_grad_real_inputs),
        cmocka_unit_test(test_grad_dim24),
        cmocka_unit_test(test_grad_no_dense),
        cmocka_unit_test(test_first_order_by_hand),
        cmocka_unit_test(test_grad_first_order),
        cmocka_unit_test(test_grad_float_fd),
        cmocka_unit_test(test_batch_is_mean),
        cmocka_unit_test(test_forward_copies_inputs),
        cmocka_unit_test(test_simd_matches_portable),
        cmocka_unit_test(test_simd_interaction_shapes),
        cmocka_unit_test(test_step_needs_no_history),
        cmocka_unit_test(test_forward_probs_same_bits),
        cmocka_unit_test(test_forward_rows_same_bits),
        cmocka_unit_test(test_score_rows_same_bits),
        cmocka_unit_test(test_score_batch_split),
        cmocka_unit_test(test_grad_every_path),
        cmocka_unit_test(test_paths_match_portable),
        cmocka_unit_test(test_path_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
