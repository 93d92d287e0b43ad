/* tr_eval.c - quality metrics: logloss, NE, AUC, calibration.
 *
 * DESIGN: the exact accumulator keeps running sums for logloss and the means,
 * and one uint64 per row for AUC: the prediction mapped to an order-preserving
 * 32-bit key in the high half, the label in bit 0. At result time an LSD
 * radix sort on the high half (3 passes of 11 bits) orders the rows; one pass
 * over groups of equal predictions gives the tie-aware rank sum exactly in
 * integer arithmetic. */
#include "tr_eval.h"

#include <math.h>
#include <string.h>

#include "ss_assert.h"
#include "ss_mem.h"

struct tr_eval {
    uint64_t *rows;             /* (pred key << 32) | label bit, one per row */
    size_t n;                   /* rows stored */
    size_t cap;                 /* rows allocated */
    uint64_t n_nan;             /* rows whose prediction is NaN */
    struct tr_eval_prog sums;   /* running sums for logloss and means */
};

double tr_eval_entropy(double p)
{
    if (p <= 0.0 || p >= 1.0)
        return 0.0;
    return -(p * log(p) + (1.0 - p) * log1p(-p));
}

double tr_eval_bce(float pred, float label)
{
    double q = pred;
    if (q < TR_EVAL_CLIP)
        q = TR_EVAL_CLIP;
    else if (q > 1.0 - TR_EVAL_CLIP)
        q = 1.0 - TR_EVAL_CLIP;
    /* NaN fails both tests above and propagates. */
    return label > 0.5f ? -log(q) : -log1p(-q);
}

/* ---- progressive accumulator ---- */

void tr_eval_prog_init(struct tr_eval_prog *self)
{
    ss_assert(self);
    memset(self, 0, sizeof(*self));
}

void tr_eval_prog_add(struct tr_eval_prog *self, float pred, float label)
{
    self->rows++;
    self->positives += label > 0.5f;
    self->loss_sum += tr_eval_bce(pred, label);
    self->pred_sum += pred;
}

void tr_eval_prog_add_batch(struct tr_eval_prog *self, const float *pred, const float *label,
                            size_t n)
{
    ss_assert(self && ((pred && label) || n == 0));
    for (size_t i = 0; i < n; i++)
        tr_eval_prog_add(self, pred[i], label[i]);
}

void tr_eval_prog_merge(struct tr_eval_prog *self, const struct tr_eval_prog *other)
{
    ss_assert(self && other);
    self->rows += other->rows;
    self->positives += other->positives;
    self->loss_sum += other->loss_sum;
    self->pred_sum += other->pred_sum;
}

void tr_eval_prog_delta(const struct tr_eval_prog *now, const struct tr_eval_prog *before,
                        struct tr_eval_prog *out)
{
    ss_assert(now && before && out);
    ss_assert(now->rows >= before->rows && now->positives >= before->positives);
    out->rows = now->rows - before->rows;
    out->positives = now->positives - before->positives;
    out->loss_sum = now->loss_sum - before->loss_sum;
    out->pred_sum = now->pred_sum - before->pred_sum;
}

void tr_eval_prog_result(const struct tr_eval_prog *self, struct tr_eval_result *out)
{
    ss_assert(self && out);
    memset(out, 0, sizeof(*out));
    out->rows = self->rows;
    out->positives = self->positives;
    out->auc = NAN;
    if (self->rows == 0) {
        out->logloss = out->ne = out->calibration = out->base_rate = out->mean_pred = NAN;
        return;
    }
    double n = (double)self->rows;
    out->logloss = self->loss_sum / n;
    out->base_rate = (double)self->positives / n;
    out->mean_pred = self->pred_sum / n;
    double h = tr_eval_entropy(out->base_rate);
    out->ne = h > 0.0 ? out->logloss / h : NAN;
    out->calibration = self->positives ? out->mean_pred / out->base_rate : NAN;
}

/* ---- exact accumulator ---- */

tr_eval_t *tr_eval_new(size_t capacity_hint)
{
    tr_eval_t *self = ss_calloc(1, sizeof(*self));
    self->cap = capacity_hint ? capacity_hint : 1024;
    self->rows = ss_malloc(self->cap * sizeof(*self->rows));
    return self;
}

void tr_eval_destroy(tr_eval_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ss_free((*self_p)->rows);
    ss_free(*self_p);
    *self_p = NULL;
}

void tr_eval_reset(tr_eval_t *self)
{
    ss_assert(self);
    self->n = 0;
    self->n_nan = 0;
    tr_eval_prog_init(&self->sums);
}

static void s_reserve(tr_eval_t *self, size_t more)
{
    if (self->n + more <= self->cap)
        return;
    size_t cap = self->cap * 2;
    if (cap < self->n + more)
        cap = self->n + more;
    self->rows = ss_realloc(self->rows, cap * sizeof(*self->rows));
    self->cap = cap;
}

/* Order-preserving 32-bit key of a float (-0 equals +0). */
static inline uint32_t s_key(float x)
{
    uint32_t b;
    if (x == 0.0f)
        x = 0.0f;
    memcpy(&b, &x, sizeof(b));
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

void tr_eval_add(tr_eval_t *self, float pred, float label)
{
    ss_assert(self);
    s_reserve(self, 1);
    self->rows[self->n++] = ((uint64_t)s_key(pred) << 32) | (uint64_t)(label > 0.5f);
    self->n_nan += isnan(pred) != 0;
    tr_eval_prog_add(&self->sums, pred, label);
}

void tr_eval_add_batch(tr_eval_t *self, const float *pred, const float *label, size_t n)
{
    ss_assert(self && ((pred && label) || n == 0));
    s_reserve(self, n);
    for (size_t i = 0; i < n; i++)
        tr_eval_add(self, pred[i], label[i]);
}

void tr_eval_merge(tr_eval_t *self, const tr_eval_t *other)
{
    ss_assert(self && other && self != other);
    s_reserve(self, other->n);
    memcpy(self->rows + self->n, other->rows, other->n * sizeof(*other->rows));
    self->n += other->n;
    self->n_nan += other->n_nan;
    tr_eval_prog_merge(&self->sums, &other->sums);
}

/* Sort v[0..n) by the high 32 bits (LSD radix, 11+11+10 bits). */
static void s_radix_sort(uint64_t *v, size_t n)
{
    uint64_t *tmp = ss_malloc((n ? n : 1) * sizeof(*tmp));
    uint64_t *src = v;
    uint64_t *dst = tmp;
    static const unsigned shift[3] = {32, 43, 54};
    size_t *count = ss_malloc(2048 * sizeof(*count));
    for (int pass = 0; pass < 3; pass++) {
        memset(count, 0, 2048 * sizeof(*count));
        for (size_t i = 0; i < n; i++)
            count[(src[i] >> shift[pass]) & 2047]++;
        size_t sum = 0;
        for (size_t b = 0; b < 2048; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift[pass]) & 2047]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    memcpy(v, src, n * sizeof(*v));
    ss_free(count);
    ss_free(tmp);
}

/* Exact AUC of sorted rows, ties as one half. */
static double s_auc(const uint64_t *v, size_t n, uint64_t positives)
{
    uint64_t negatives = n - positives;
    if (positives == 0 || negatives == 0)
        return NAN;
    unsigned __int128 twice_num = 0;   /* 2 * (pairs ranked right) + tied pairs */
    uint64_t neg_below = 0;
    for (size_t i = 0; i < n;) {
        uint64_t key = v[i] >> 32;
        uint64_t pos = 0;
        uint64_t neg = 0;
        for (; i < n && (v[i] >> 32) == key; i++) {
            pos += v[i] & 1;
            neg += !(v[i] & 1);
        }
        twice_num += (unsigned __int128)pos * (2 * neg_below + neg);
        neg_below += neg;
    }
    return (double)twice_num / (2.0 * (double)positives * (double)negatives);
}

void tr_eval_result(tr_eval_t *self, struct tr_eval_result *out)
{
    ss_assert(self && out);
    tr_eval_prog_result(&self->sums, out);
    if (self->n_nan > 0)
        return;                         /* auc stays NaN */
    s_radix_sort(self->rows, self->n);
    out->auc = s_auc(self->rows, self->n, self->sums.positives);
}

/* The measure keep-best compares: NE, or logloss where NE is undefined. */
static double s_measure(const struct tr_eval_result *r)
{
    int one_label = !(r->base_rate > 0.0 && r->base_rate < 1.0);
    return one_label ? r->logloss : r->ne;
}

int tr_eval_better(const struct tr_eval_result *r, const struct tr_eval_result *best)
{
    double m = s_measure(r);
    if (!isfinite(m))
        return 0;  /* also the first time: !(NaN >= x) once kept a NaN model */
    return !best || !isfinite(s_measure(best)) || m < s_measure(best);
}
