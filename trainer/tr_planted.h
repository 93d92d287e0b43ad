/* tr_planted.h - a planted click model that writes Criteo-format data.
 *
 * The model is a fixed function of a 64-bit seed:
 *   - categorical field f (C1..C26) draws a Zipf(TR_PLANTED_ZIPF_S) rank id
 *     in [0, vocab_f) (vocabularies from 3 to 1e6; an alias table for the
 *     4096 most frequent ids, an inverse CDF for the tail), or is
 *     missing with a per-field rate; id k is written as the 8 lowercase hex
 *     digits of a fixed per-field 32-bit permutation of k;
 *   - dense I1..I13 are nonnegative heavy-tailed counts (Lomax quantiles), or
 *     missing with a per-column rate;
 *   - logit = bias + sum_f w_f(id_f) + sum over a few field pairs (a, b) of
 *     u_ab(min(id_a, 15), min(id_b, 15)) + sum_j v_j (log(1 + I_j) - mean_j)
 *     (v_j replaced by a per-column weight when I_j is missing; a missing
 *     categorical value has its own weight too). The weights are about
 *     N(0, sigma) and derived from the seed; an id's weight shrinks like
 *     30 / id for rare ids (as in real logs, where rare values carry little
 *     learnable signal): a model trained on about a million rows can get
 *     within 10% of the Bayes-optimal NE; bias is set so that the click
 *     rate is TR_PLANTED_BASE_RATE;
 *   - label ~ Bernoulli(sigmoid(logit)).
 * Rows come from numbered streams (train, eval, ...): the same model with
 * independent samples. Same seed and stream give the same bytes.
 *
 * Thread: the model is immutable after tr_planted_new(); any number of
 * threads may sample from it, each with its own rng state. */
#ifndef TR_PLANTED_H
#define TR_PLANTED_H

#include <stddef.h>
#include <stdint.h>

#include "tr_reader.h"

#define TR_PLANTED_ZIPF_S 1.1           /* Zipf exponent of every field */
#define TR_PLANTED_BASE_RATE 0.25       /* target click rate */
#define TR_PLANTED_LINE_MAX 512         /* bytes one formatted line can take */

/* Sample streams. */
#define TR_PLANTED_STREAM_TRAIN 0u
#define TR_PLANTED_STREAM_EVAL 1u

typedef struct tr_planted tr_planted_t;

/* One sampled row. */
struct tr_planted_row {
    uint32_t ids[TR_N_SPARSE];      /* Zipf rank id per field; vocab_f when missing */
    int64_t dense[TR_N_DENSE];      /* count >= 0, or -1 when missing */
    double prob;                    /* true click probability */
    float label;                    /* 0 or 1 */
};

/* Counters of written rows. */
struct tr_planted_stats {
    uint64_t rows;          /* rows written */
    uint64_t positives;     /* rows with label 1 */
    uint64_t bytes;         /* bytes written */
    double logloss_sum;     /* sum of the BCE of the true probability */
};

/* Build the model of seed (about 2 MB of tables; a few ms). Caller owns
 * it; free with tr_planted_destroy(). Any thread. */
tr_planted_t *tr_planted_new(uint64_t seed);

/* Free the model, set *self_p to NULL. Accepts NULL. */
void tr_planted_destroy(tr_planted_t **self_p);

/* Vocabulary size of categorical field f (0..25). */
uint32_t tr_planted_vocab(const tr_planted_t *self, uint32_t field);

/* Probability that field draws id when not missing (ids below 4096 follow
 * (id + 1)^-s exactly, the tail the continuous law x^-s with x = id + 1). */
double tr_planted_zipf_prob(const tr_planted_t *self, uint32_t field, uint32_t id);

/* Bias of the logit chosen for TR_PLANTED_BASE_RATE. */
double tr_planted_bias(const tr_planted_t *self);

/* The 32-bit value written (as 8 hex digits) for id of field. A bijection
 * on 32 bits per field, so distinct ids stay distinct. */
uint32_t tr_planted_hex(const tr_planted_t *self, uint32_t field, uint32_t id);

/* Initial rng state of stream number stream. */
uint64_t tr_planted_stream(const tr_planted_t *self, uint32_t stream);

/* Draw one row with rng state *rng (advanced). */
void tr_planted_sample(const tr_planted_t *self, uint64_t *rng, struct tr_planted_row *row);

/* Write row as one Criteo TSV line with newline into buf (at least
 * TR_PLANTED_LINE_MAX bytes). Returns the bytes written. */
size_t tr_planted_format(const tr_planted_t *self, const struct tr_planted_row *row, char *buf);

/* Write n_rows rows of stream to fd and add the counts to *st (zero it
 * first). Rows are formatted into two 4 MiB buffers; a helper thread, started
 * and joined inside the call, write()s one while the caller fills the other.
 * Returns 0, or SS_E_IO with errno set by the failing write() (st->bytes
 * counts what was written before it). */
int tr_planted_write(const tr_planted_t *self, uint32_t stream, uint64_t n_rows, int fd,
                     struct tr_planted_stats *st);

/* Base rate positives/rows of st (NaN without rows). */
double tr_planted_base_rate(const struct tr_planted_stats *st);

/* Bayes-optimal NE of what was written: mean logloss of the true
 * probabilities on the written labels divided by the base-rate entropy
 * (NaN when the base rate is 0 or 1). */
double tr_planted_bayes_ne(const struct tr_planted_stats *st);

#endif
