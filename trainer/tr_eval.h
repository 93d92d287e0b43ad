/* tr_eval.h - quality metrics: logloss, NE, AUC, calibration.
 *
 * Definitions (n rows, prediction q_i, label y_i in {0, 1}):
 *   logloss     = mean of -(y log q + (1-y) log(1-q)), q clipped to
 *                 [TR_EVAL_CLIP, 1 - TR_EVAL_CLIP];
 *   base_rate p = mean label (click rate of the scored set);
 *   NE          = logloss / -(p log p + (1-p) log(1-p)); 1.0 for a constant
 *                 predictor at p, lower is better. NaN when p is 0 or 1 (the
 *                 base-rate entropy is 0: NE is undefined) or n is 0;
 *   AUC         = probability that a random positive scores above a random
 *                 negative, ties counting one half (exact: sort and rank
 *                 sum). NaN without both classes or if a prediction is NaN;
 *   calibration = mean prediction / mean label; NaN when no positives.
 * A NaN prediction makes logloss and NE NaN too (a diverged model must not
 * look fine). Labels above 0.5 count as positive.
 *
 * Two accumulators:
 *   tr_eval_t       exact, for held-out evaluation: stores 8 bytes per row
 *                   (for AUC), sorts with a radix sort at result time;
 *   tr_eval_prog    progressive train metrics: running sums only, no
 *                   storage, no AUC; embedded in per-thread structs.
 * Thread: an accumulator belongs to one thread; combine workers' with the
 * merge functions after they stop adding. */
#ifndef TR_EVAL_H
#define TR_EVAL_H

#include <stddef.h>
#include <stdint.h>

/* Predictions are clipped to [TR_EVAL_CLIP, 1 - TR_EVAL_CLIP] for logloss. */
#define TR_EVAL_CLIP 1e-7

/* Metrics of a scored set (see the definitions above). */
struct tr_eval_result {
    uint64_t rows;          /* rows scored */
    uint64_t positives;     /* rows with label 1 */
    double logloss;         /* mean clipped binary cross-entropy */
    double ne;              /* normalized entropy; NaN if base_rate is 0 or 1 */
    double auc;             /* exact AUC with ties as 1/2; NaN if undefined */
    double calibration;     /* mean_pred / base_rate; NaN if no positives */
    double base_rate;       /* mean label; NaN if rows is 0 */
    double mean_pred;       /* mean prediction; NaN if rows is 0 */
};

typedef struct tr_eval tr_eval_t;

/* Create an empty exact accumulator with room for capacity_hint rows (it
 * grows as needed). Caller owns it; free with tr_eval_destroy(). */
tr_eval_t *tr_eval_new(size_t capacity_hint);

/* Free the accumulator and set *self_p to NULL. Accepts NULL. */
void tr_eval_destroy(tr_eval_t **self_p);

/* Forget all rows (keeps the memory). */
void tr_eval_reset(tr_eval_t *self);

/* Score one row: prediction pred (probability), label 0 or 1. */
void tr_eval_add(tr_eval_t *self, float pred, float label);

/* Score n rows. Borrows pred and label for the call. */
void tr_eval_add_batch(tr_eval_t *self, const float *pred, const float *label, size_t n);

/* Add all rows of other to self (other is unchanged). */
void tr_eval_merge(tr_eval_t *self, const tr_eval_t *other);

/* Compute the metrics of all rows added so far into out. Sorts the stored
 * rows in place (hence not const); adding more rows afterwards is fine.
 * O(n) time with a radix sort, 8 bytes per row of scratch. */
void tr_eval_result(tr_eval_t *self, struct tr_eval_result *out);

/* Whether r is a better model than best (NULL: none kept yet), for
 * keep-best: a lower NE, or a lower logloss where NE is undefined (an eval
 * set of one label only). A result whose measure is NaN or infinite (a
 * diverged model) is never better, also when nothing is kept yet. Pure. */
int tr_eval_better(const struct tr_eval_result *r, const struct tr_eval_result *best);

/* Progressive (running-sum) accumulator. Caller-allocated; fields are
 * touched only through the functions below. */
struct tr_eval_prog {
    uint64_t rows;          /* rows scored */
    uint64_t positives;     /* rows with label 1 */
    double loss_sum;        /* sum of clipped BCE */
    double pred_sum;        /* sum of predictions */
};

/* Start empty. */
void tr_eval_prog_init(struct tr_eval_prog *self);

/* Score one row (before learning it, for progressive validation). */
void tr_eval_prog_add(struct tr_eval_prog *self, float pred, float label);

/* Score n rows. Borrows pred and label. */
void tr_eval_prog_add_batch(struct tr_eval_prog *self, const float *pred, const float *label,
                            size_t n);

/* self += other. */
void tr_eval_prog_merge(struct tr_eval_prog *self, const struct tr_eval_prog *other);

/* out = now - before: the rows scored between two snapshots of the same
 * accumulator (for windowed train NE). */
void tr_eval_prog_delta(const struct tr_eval_prog *now, const struct tr_eval_prog *before,
                        struct tr_eval_prog *out);

/* Metrics of the running sums into out (auc is NaN: not tracked). */
void tr_eval_prog_result(const struct tr_eval_prog *self, struct tr_eval_result *out);

/* Binary entropy -(p log p + (1-p) log(1-p)) in nats; 0 at p = 0 or 1. */
double tr_eval_entropy(double p);

/* Clipped BCE of one row, in nats (the per-row term of logloss). */
double tr_eval_bce(float pred, float label);

#endif
