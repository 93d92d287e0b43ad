/* tr_hogwild.h - the racy in-place kernels on shared dense parameters (Hogwild).
 *
 * This module is the ONLY place where threads read and write the shared dense
 * arena without locks: the workers' optimizer steps, and the shadow thread's
 * snapshot and write-back. Races are by design (Hogwild: lost or torn float
 * updates are tolerated by SGD). Each kernel is a plain vectorizable loop (no
 * per-float atomics, they stop SIMD), marked "Hogwild: racy by design" and
 * excluded from ThreadSanitizer (no_sanitize("thread")); everything else in the
 * trainer must be race-free.
 *
 * Every kernel works on n floats. Its arrays must not overlap each other
 * (restrict); the shared one (w) may be read and written by other threads
 * through these kernels at the same time. Thread: any, concurrently. */
#ifndef TR_HOGWILD_H
#define TR_HOGWILD_H

#include <stddef.h>

/* SGD step in place with L2 weight decay: w -= lr * (g + l2 * w). */
void tr_hogwild_sgd(float *restrict w, const float *restrict g, size_t n, float lr, float l2);

/* Adagrad step in place with L2 weight decay: d = g + l2 * w; acc += d * d;
 * w -= lr * d / (sqrt(acc) + eps). acc is per-parameter state of the same size
 * as w (shared like w). l2 = 0 gives plain SGD / Adagrad, bit for bit. */
void tr_hogwild_adagrad(float *restrict w, float *restrict acc, const float *restrict g,
                        size_t n, float lr, float eps, float l2);

/* Adagrad step as tr_hogwild_adagrad with a floor under each accumulator in
 * the denominator: d = g + l2 * w; acc += d * d;
 * w -= lr * d / (sqrt(max(acc, floor)) + eps), where the max keeps a NaN
 * acc and a NaN floor floors nothing. floor = 0 gives tr_hogwild_adagrad's
 * results bit for bit (acc is never negative), NaN accumulators included.
 * Returns the sum of the n accumulators as this step left them (float lanes,
 * then a double: for the next step's floor, not an exact sum). */
double tr_hogwild_adagrad_floor(float *restrict w, float *restrict acc,
                                const float *restrict g, size_t n, float lr, float eps,
                                float l2, float acc_min);

/* One tensor of the dense arena: floats [off, off + n). */
struct tr_hogwild_tensor {
    size_t off;
    size_t n;
};

/* model.adagrad_floor: the dense Adagrad step of tr_hogwild_adagrad_floor on
 * each of the n_tensors tensors (disjoint, together any part of the arena),
 * the floor of tensor t being gamma * mean[t]; then mean[t] = the mean of its
 * accumulators as this step left them, for the next call. mean is the
 * caller's (n_tensors floats, zeroed at first: no floor on the first step),
 * so the floor is one step stale, and with other workers' steps between, a
 * few. gamma = 0 gives tr_hogwild_adagrad's results bit for bit (a NaN mean
 * too: its floor is NaN, which floors nothing). Floats of the arena outside
 * every tensor are not touched. */
void tr_hogwild_adagrad_tensors(float *w, float *acc, const float *g,
                                const struct tr_hogwild_tensor *tensors, size_t n_tensors,
                                float *mean, float lr, float eps, float l2, float gamma);

/* Snapshot of the live arena: dst = w (dst is private to the caller). */
void tr_hogwild_snapshot(float *restrict dst, const float *restrict w, size_t n);

/* sum += w (a running sum of the live arena, sum private to the caller). */
void tr_hogwild_accumulate(float *restrict sum, const float *restrict w, size_t n);

/* w += delta. */
void tr_hogwild_add(float *restrict w, const float *restrict delta, size_t n);

/* Delta write-back: w += target - x, where x is the snapshot the round started
 * from; the workers' progress made since the snapshot is kept. */
void tr_hogwild_add_diff(float *restrict w, const float *restrict target,
                         const float *restrict x, size_t n);

/* w -= d (EASGD: the elastic pull towards the center). */
void tr_hogwild_sub(float *restrict w, const float *restrict d, size_t n);

/* w = src (overwrite mode: drops the workers' progress made during the round). */
void tr_hogwild_overwrite(float *restrict w, const float *restrict src, size_t n);

#endif
