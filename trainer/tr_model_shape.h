/* tr_model_shape.h - the dense model's shape without its math: checking a
 * tr_model_conf and laying out its parameter arena (tr_model.h describes both).
 *
 * tr_model builds on it; tools that only need the arena's size or layout (the
 * model-file export in shadow-ctl) use it alone, so they link no BLAS or oneDNN
 * and do not load them at start-up.
 *
 * Thread: pure functions; any thread. */
#ifndef TR_MODEL_SHAPE_H
#define TR_MODEL_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "tr_model.h"

#define TR_MODEL_MAX_LAYERS (2 * TR_MODEL_MAX_MLP)

/* Everything the shape fixes (caller-allocated). */
struct tr_model_shape {
    uint32_t n_layers;              /* n_bottom + n_top */
    uint32_t n_vec;                 /* vectors in the interaction: 1 + n_sparse */
    uint32_t n_pairs;               /* n_vec * (n_vec - 1) / 2 */
    uint32_t top_in;                /* dim + n_pairs */
    uint32_t row_dim;               /* floats per embedding input row: dim + first_order */
    uint32_t max_width;             /* widest layer input or output */
    size_t lin_off;                 /* first linear weight (first_order), else n_params */
    size_t n_params;                /* floats in the arena */
    size_t bottom_len;              /* floats of the bottom MLP (arena prefix) */
    struct tr_model_layer_info layers[TR_MODEL_MAX_LAYERS]; /* bottom, then top */
};

/* Check conf (the limits and rules of tr_model.h) and fill *out with its layout.
 * Returns 0, or SS_E_CONFIG with an explanation in err (if err is not NULL),
 * e.g. "bottom[1] = 32 must equal dim = 16"; *out is then undefined. */
int tr_model_shape_of(const struct tr_model_conf *conf, struct tr_model_shape *out, char *err,
                      size_t err_len);

#endif
