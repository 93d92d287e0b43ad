/* tr_sync_util.h - pieces the ring rules share: snapshot + allreduce mean
 * with per-trainer flags summed alongside (done, in sync), and the relative
 * distance used as replica drift. */
#ifndef TR_SYNC_UTIL_H
#define TR_SYNC_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tr_sync.h"

/* Most flags one allreduce carries after the component. */
#define TR_SYNC_MAX_FLAGS 2

/* Buffers of one averaging group. */
struct tr_sync_avg {
    size_t len;     /* floats in the component */
    float *x;       /* snapshot of w, len */
    float *m;       /* mean, len + TR_SYNC_MAX_FLAGS (then the flags' sums) */
    uint32_t n_summed; /* trainers in the last mean: the ring's size (the live
                        * ones when it re-formed without a dead trainer) */
};

struct tr_sync_avg *tr_sync_avg_new(size_t len);
void tr_sync_avg_destroy(struct tr_sync_avg **a_p);

/* x = snapshot(w); m = mean over the ring of x; sums[j] = sum over the ring
 * of flags[j] for j < n_flags (1..TR_SYNC_MAX_FLAGS; 0/1 flags give
 * exact counts, e.g. of trainers done). The ring is the trainers still in
 * it: a->n_summed says how many (compare counts with it, not with N). m and sums are bitwise identical on
 * every trainer whose call succeeds. Returns 0 or the allreduce error (err
 * names the missing rank); m and sums are then unspecified. */
int tr_sync_avg_mean(struct tr_sync_avg *a, struct tr_sync_env *env, const float *w,
                     const float *flags, size_t n_flags, float *sums, char *err, size_t len);

/* |a - b| / |b| in double (0 when b is 0). */
double tr_sync_rel_dist(const float *a, const float *b, size_t n);

#endif
