/* tr_bag.h - sum-pooling of multi-valued categorical fields ("embedding bags").
 *
 * A batch's categorical values come in CSR form (struct tr_rows in
 * tr_parse.h): position p (= example b * n_fields + field f) holds the
 * values offs[p] .. offs[p + 1] - 1, value i with weight weights[i]. The
 * model takes one embedding input row per position: the weighted sum of its
 * values' rows. A position with one value of weight 1 is that value's row,
 * bit for bit (the Criteo case). Backward, every value's row gets its
 * position's gradient times the value's weight.
 *
 * Rows are dim floats (first-order weight included: it is pooled the same
 * way, so the logit's first-order term of a field is sum_i w_i u_i).
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

/* vgrad[i] += weights[i] * grad_p for every value i of every position p, in
 * position then value order (several values may share one vgrad row: a key
 * seen twice sums its gradients). grad [n_pos * dim]. */
void tr_bag_spread(const uint32_t *offs, const float *weights, size_t n_pos, const float *grad,
                   uint32_t dim, float *const *vgrad);

#endif
