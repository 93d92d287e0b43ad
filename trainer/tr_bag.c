/* tr_bag.c - sum-pooling of multi-valued categorical fields. */
#include "tr_bag.h"

#include <string.h>

#include "ss_assert.h"
#include "ss_mem.h"

void tr_bag_pool(const uint32_t *offs, const float *weights, size_t n_pos,
                 const float *const *vrow, uint32_t dim, float *out)
{
    ss_assert(offs && (weights || n_pos == 0) && (vrow || n_pos == 0) && (out || n_pos == 0));
    for (size_t p = 0; p < n_pos; p++, out += dim) {
        uint32_t i = offs[p], end = offs[p + 1];
        if (end == i + 1 && weights[i] == 1.0f) {
            ss_copy_floats(out, vrow[i], dim);  /* one value: its row, exactly */
            continue;
        }
        memset(out, 0, dim * sizeof(float));
        for (; i < end; i++) {
            const float *r = vrow[i];
            float w = weights[i];
            for (uint32_t d = 0; d < dim; d++)
                out[d] += w * r[d];
        }
    }
}

void tr_bag_spread(const uint32_t *offs, const float *weights, size_t n_pos, const float *grad,
                   uint32_t dim, float *const *vgrad)
{
    ss_assert(offs && (weights || n_pos == 0) && (grad || n_pos == 0) && (vgrad || n_pos == 0));
    for (size_t p = 0; p < n_pos; p++, grad += dim) {
        for (uint32_t i = offs[p]; i < offs[p + 1]; i++) {
            float *g = vgrad[i], w = weights[i];
            for (uint32_t d = 0; d < dim; d++)
                g[d] += w * grad[d];
        }
    }
}
