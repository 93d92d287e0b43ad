/* tr_split.h - the validation split: which training lines are set aside.
 *
 * With data.valid_fraction f > 0, a line of data.train belongs to the
 * validation split when a 64-bit hash of its bytes (the line without its
 * newline, a trailing carriage return included) falls in the lowest
 * fraction f of the hash range. The rule reads nothing but the line: every
 * trainer, every worker and every rerun of a job agree on it, whatever the
 * byte-range parts (tr_reader.h) or the order of reading, and the two sides
 * are disjoint by construction. Identical lines land on the same side.
 *
 * A struct tr_split is a value (no allocation); any thread. */
#ifndef TR_SPLIT_H
#define TR_SPLIT_H

#include <stddef.h>
#include <stdint.h>

/* Which side of the split a reader keeps. */
enum tr_split_side {
    TR_SPLIT_TRAIN = 0,            /* the lines that train (validation lines skipped) */
    TR_SPLIT_VALID = 1,            /* only the validation lines */
};

struct tr_split {
    uint64_t threshold;            /* a line whose hash is below this is validation;
                                    * 0: no split (every line trains) */
};

/* The split of fraction f, 0 <= f < 1 (0: none). */
void tr_split_init(struct tr_split *s, double fraction);

/* 1 when the line (len bytes, no newline) belongs to the validation split. */
int tr_split_is_valid(const struct tr_split *s, const char *line, size_t len);

/* Lines tr_split_is_valid4 judges at once. */
#define TR_SPLIT_LANES 4

/* out[i] = tr_split_is_valid(s, lines[i], lens[i]) for the TR_SPLIT_LANES
 * lines, the same verdicts: the byte hash is a chain of dependent
 * multiplies, one per byte, so hashing the lines side by side runs several
 * chains at once (about 2.7 times the bytes per second of one at a time).
 * Borrows the lines for the call. */
void tr_split_is_valid4(const struct tr_split *s, const char *const lines[TR_SPLIT_LANES],
                        const size_t lens[TR_SPLIT_LANES], int out[TR_SPLIT_LANES]);

#endif
