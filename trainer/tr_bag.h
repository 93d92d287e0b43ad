/* tr_bag.h - pooling of multi-valued categorical fields ("embedding bags").
 *
 * A batch's categorical values come in CSR form (struct tr_rows in
 * tr_parse.h): position p (= example b * n_fields + field f) holds the
 * values offs[p] .. offs[p + 1] - 1, value i with weight weights[i]. The
 * model takes one embedding input row per position: a weighted sum of its
 * values' rows. A position with one value of weight 1 is that value's row,
 * bit for bit (the Criteo case). Backward, every value's row gets its
 * position's gradient times the value's weight.
 *
 * Pooling modes (model.pooling, model.field_pooling; enum ss_pooling):
 *   sum    out_p = sum_i w_i r_i (the weights as given)
 *   mean   out_p = sum_i w_i r_i / n_p, n_p the number of values: the mean
 *          of the weighted rows (with weights of 1, the plain mean). Not
 *          divided by sum_i w_i: that drops the weights' scale (a lone value
 *          of weight 7 would be its row), and on libffm rows whose dense
 *          items weigh log(1 + x) it measured unstable where n_p was not
 *          (docs/quality.md).
 *   sqrtn  out_p = sum_i w_i r_i / sqrt(sum_i w_i^2) (TensorFlow's "sqrtn"
 *          combiner; with weights of 1, divided by sqrt(n_p))
 * Each mode is a sum with effective weights e_i = w_i / norm_p, and the
 * norm depends on the weights only, not on the rows: tr_bag_scale() turns
 * the weights into effective weights once per batch and tr_bag_pool() /
 * tr_bag_spread() use those, so forward and backward agree by construction
 * (d out_p / d r_i = e_i). sum needs no scaling: its caller passes the
 * weights themselves, on the same tuned path as before. A lone value of
 * weight 1 is its row, bit for bit, in every mode; under sqrtn so is a lone
 * value of any positive weight (e = 1 exactly). A position without values
 * pools to zeros; a norm of 0 (no values, or only weights of 0) gives
 * effective weights of 0, never a division by 0.
 *
 * Rows are dim floats (first-order weight included: it is pooled the same
 * way, so the logit's first-order term of a field is sum_i e_i u_i).
 *
 * Thread: pure functions on the caller's buffers; any thread. */
#ifndef TR_BAG_H
#define TR_BAG_H

#include <stddef.h>
#include <stdint.h>

/* out [n_pos * dim]: out_p = sum over p's values i of weights[i] * vrow[i]
 * (dim floats each), summed in value order; a position without values gets
 * zeros. Borrows everything for the call. */
void tr_bag_pool(const uint32_t *offs, const float *weights, size_t n_pos,
                 const float *const *vrow, uint32_t dim, float *out);

/* 1 when position p of offs pools to its one value's row exactly (one value
 * of weight 1: tr_bag_pool copies it), so a reader may take that row where
 * it lies instead of a pooled copy. */
static inline int tr_bag_plain(const uint32_t *offs, const float *weights, size_t p)
{
    return offs[p + 1] == offs[p] + 1 && weights[offs[p]] == 1.0f;
}

/* vgrad[i] += weights[i] * grad_p for every value i of every position p, in
 * position then value order (several values may share one vgrad row: a key
 * seen twice sums its gradients). grad [n_pos * dim]. */
void tr_bag_spread(const uint32_t *offs, const float *weights, size_t n_pos, const float *grad,
                   uint32_t dim, float *const *vgrad);

/* Effective weights of n_pos positions for tr_bag_pool()/tr_bag_spread():
 * eff[i] = weights[i] / norm_p, where position p's mode is
 * mode[p % n_fields] (enum ss_pooling: sum norm 1, mean the count of p's
 * values, sqrtn sqrt(sum w^2) summed in double); a norm of 0 gives eff 0.
 * eff [offs[n_pos]] may not alias weights. Borrows everything. */
void tr_bag_scale(const uint32_t *offs, const float *weights, size_t n_pos, const uint8_t *mode,
                  uint32_t n_fields, float *eff);

#endif
