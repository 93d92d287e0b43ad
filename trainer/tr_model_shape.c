/* tr_model_shape.c - checking a model shape and laying out its arena (no math).
 *
 * DESIGN: split from tr_model.c so that code which only sizes an arena (the
 * model-file export) does not pull in tr_gemm and with it OpenBLAS and oneDNN,
 * whose loading cost each shadow-ctl call milliseconds. tr_model_new checks and
 * lays out through this file, so both agree by construction. */
#include "tr_model_shape.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_err.h"

/* Write a formatted message into err when the caller gave room for one. */
__attribute__((format(printf, 3, 4))) static void s_err(char *err, size_t err_len,
                                                        const char *fmt, ...)
{
    va_list ap;
    if (!err || !err_len)
        return;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Check one MLP's widths; name is "bottom" or "top". Returns 0 or -1 with err. */
static int s_check_mlp(const char *name, uint32_t n, const uint32_t *width, char *err,
                       size_t err_len)
{
    if (n < 1 || n > TR_MODEL_MAX_MLP) {
        s_err(err, err_len, "n_%s = %u must be in 1..%u", name, n, TR_MODEL_MAX_MLP);
        return -1;
    }
    for (uint32_t k = 0; k < n; k++) {
        if (width[k] < 1 || width[k] > TR_MODEL_MAX_WIDTH) {
            s_err(err, err_len, "%s[%u] = %u must be in 1..%u", name, k, width[k],
                  TR_MODEL_MAX_WIDTH);
            return -1;
        }
    }
    return 0;
}

/* Validate the shape. Returns 0, or -1 with an explanation in err. */
static int s_check_conf(const struct tr_model_conf *c, char *err, size_t err_len)
{
    if (c->n_dense > TR_MODEL_MAX_DENSE) {
        s_err(err, err_len, "n_dense = %u must be in 0..%u", c->n_dense, TR_MODEL_MAX_DENSE);
        return -1;
    }
    if (c->n_sparse > TR_MODEL_MAX_SPARSE) {
        s_err(err, err_len, "n_sparse = %u must be at most %u", c->n_sparse,
              TR_MODEL_MAX_SPARSE);
        return -1;
    }
    if (c->dim < 1 || c->dim > TR_MODEL_MAX_DIM) {
        s_err(err, err_len, "dim = %u must be in 1..%u", c->dim, TR_MODEL_MAX_DIM);
        return -1;
    }
    if (s_check_mlp("bottom", c->n_bottom, c->bottom, err, err_len) < 0
        || s_check_mlp("top", c->n_top, c->top, err, err_len) < 0)
        return -1;
    if (c->bottom[c->n_bottom - 1] != c->dim) {
        s_err(err, err_len, "bottom[%u] = %u must equal dim = %u", c->n_bottom - 1,
              c->bottom[c->n_bottom - 1], c->dim);
        return -1;
    }
    if (c->top[c->n_top - 1] != 1) {
        s_err(err, err_len, "top[%u] = %u must be 1 (the logit)", c->n_top - 1,
              c->top[c->n_top - 1]);
        return -1;
    }
    if (c->first_order > 1) {
        s_err(err, err_len, "first_order = %u must be 0 or 1", c->first_order);
        return -1;
    }
    if (c->precision > TR_MODEL_PREC_AUTO || c->gemm > TR_MODEL_GEMM_DNNL) {
        s_err(err, err_len, "precision = %u must be 0..2 and gemm = %u 0..2", c->precision,
              c->gemm);
        return -1;
    }
    return 0;
}

/* Lay the layers out in the arena: W then bias, bottom first, no padding. */
static void s_layout(const struct tr_model_conf *c, struct tr_model_shape *s)
{
    size_t off = 0;
    uint32_t n_in = c->n_dense;
    s->max_width = s->top_in > c->n_dense ? s->top_in : c->n_dense;
    for (uint32_t k = 0; k < s->n_layers; k++) {
        struct tr_model_layer_info *l = &s->layers[k];
        int is_top = k >= c->n_bottom;
        l->n_in = k == c->n_bottom ? s->top_in : n_in;
        l->n_out = is_top ? c->top[k - c->n_bottom] : c->bottom[k];
        l->relu = k + 1 < s->n_layers;
        l->w_off = off;
        l->b_off = off + (size_t)l->n_out * l->n_in;
        off = l->b_off + l->n_out;
        if (k + 1 == c->n_bottom)
            s->bottom_len = off;
        if (l->n_out > s->max_width)
            s->max_width = l->n_out;
        n_in = l->n_out;
    }
    s->lin_off = off;
    if (c->first_order)
        off += c->n_dense;
    s->n_params = off;
}

int tr_model_shape_of(const struct tr_model_conf *conf, struct tr_model_shape *out, char *err,
                      size_t err_len)
{
    ss_assert(conf && out);
    if (s_check_conf(conf, err, err_len) < 0)
        return SS_E_CONFIG;
    memset(out, 0, sizeof *out);
    out->n_layers = conf->n_bottom + conf->n_top;
    out->n_vec = 1 + conf->n_sparse;
    out->n_pairs = out->n_vec * (out->n_vec - 1) / 2;
    out->top_in = conf->dim + out->n_pairs;
    out->row_dim = conf->dim + conf->first_order;
    s_layout(conf, out);
    return 0;
}
