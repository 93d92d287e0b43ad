/* tr_split.c - the validation split: a hash of each training line. */
#include "tr_split.h"

#include <math.h>

#include "ss_assert.h"
#include "ss_hash.h"

/* Seed of the line hash: fixed, so that the split is the same in every job
 * and release; apart from the seeds the key hashing uses ("valid" in
 * ASCII). */
#define S_SPLIT_SEED 0x76616c6964ull

void tr_split_init(struct tr_split *s, double fraction)
{
    ss_assert(s && fraction >= 0 && fraction < 1);
    /* 2^64 * fraction, computed in long double steps to stay exact for
     * small fractions; fraction < 1 keeps it below 2^64 */
    s->threshold = fraction > 0 ? (uint64_t)ldexpl((long double)fraction, 64) : 0;
    if (fraction > 0 && s->threshold == 0)
        s->threshold = 1;
}

int tr_split_is_valid(const struct tr_split *s, const char *line, size_t len)
{
    return s->threshold && ss_hash_bytes(line, len, S_SPLIT_SEED) < s->threshold;
}
