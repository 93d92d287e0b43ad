/* tr_sync_util.h - pieces the ring rules share: snapshot + allreduce mean
 * with the done flag, and the relative distance used as replica drift. */
#ifndef TR_SYNC_UTIL_H
#define TR_SYNC_UTIL_H

#include <stddef.h>

#include "tr_sync.h"

/* Buffers of one averaging group. */
struct tr_sync_avg {
    size_t len;     /* floats in the component */
    float *x;       /* snapshot of w, len */
    float *m;       /* mean, len + 1 (the last element carries the done flags) */
};

struct tr_sync_avg *tr_sync_avg_new(size_t len);
void tr_sync_avg_destroy(struct tr_sync_avg **a_p);

/* x = snapshot(w); m = mean over the ring of x; *done_sum = trainers done.
 * Returns 0 or the allreduce error (err names the missing rank). */
int tr_sync_avg_mean(struct tr_sync_avg *a, struct tr_sync_env *env, const float *w, float done,
                     float *done_sum, char *err, size_t len);

/* |a - b| / |b| in double (0 when b is 0). */
double tr_sync_rel_dist(const float *a, const float *b, size_t n);

#endif
