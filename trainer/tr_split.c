/* tr_split.c - the validation split: a hash of each training line.
 *
 * DESIGN: the hash is ss_hash_bytes (FNV-1a folded through ss_mix64). One
 * FNV-1a step per byte waits on the previous step's multiply, so one line
 * is hashed at the multiply's latency, not at the core's throughput;
 * tr_split_is_valid4 runs four lines' chains in one loop, the same
 * arithmetic on each, and test_tr_split checks it against ss_hash_bytes. */
#include "tr_split.h"

#include <math.h>

#include "ss_assert.h"
#include "ss_hash.h"

/* Seed of the line hash: fixed, so that the split is the same in every job
 * and release; apart from the seeds the key hashing uses ("valid" in
 * ASCII). */
#define S_SPLIT_SEED 0x76616c6964ull

/* FNV-1a 64's offset basis and prime, as ss_hash_bytes uses them. */
#define S_FNV_BASIS 0xcbf29ce484222325ull
#define S_FNV_PRIME 0x100000001b3ull

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

/* h after FNV-1a steps over p[from, to). */
static uint64_t s_fnv_tail(uint64_t h, const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        h = (h ^ p[i]) * S_FNV_PRIME;
    return h;
}

void tr_split_is_valid4(const struct tr_split *s, const char *const lines[TR_SPLIT_LANES],
                        const size_t lens[TR_SPLIT_LANES], int out[TR_SPLIT_LANES])
{
    const unsigned char *a = (const void *)lines[0], *b = (const void *)lines[1];
    const unsigned char *c = (const void *)lines[2], *d = (const void *)lines[3];
    uint64_t h0 = S_FNV_BASIS ^ S_SPLIT_SEED, h1 = h0, h2 = h0, h3 = h0;
    size_t m = lens[0];
    for (int k = 1; k < TR_SPLIT_LANES; k++)
        m = lens[k] < m ? lens[k] : m;
    if (!s->threshold) {
        for (int k = 0; k < TR_SPLIT_LANES; k++)
            out[k] = 0;
        return;
    }
    for (size_t i = 0; i < m; i++) {  /* four independent chains, named so they stay in registers */
        h0 = (h0 ^ a[i]) * S_FNV_PRIME;
        h1 = (h1 ^ b[i]) * S_FNV_PRIME;
        h2 = (h2 ^ c[i]) * S_FNV_PRIME;
        h3 = (h3 ^ d[i]) * S_FNV_PRIME;
    }
    out[0] = ss_mix64(s_fnv_tail(h0, a, m, lens[0])) < s->threshold;
    out[1] = ss_mix64(s_fnv_tail(h1, b, m, lens[1])) < s->threshold;
    out[2] = ss_mix64(s_fnv_tail(h2, c, m, lens[2])) < s->threshold;
    out[3] = ss_mix64(s_fnv_tail(h3, d, m, lens[3])) < s->threshold;
}
