/* tr_spike.h - the dense spike rule (model.dense_skip_ratio): a batch whose
 * dense gradient is far larger than the trainer's recent ones does not update
 * the dense model (docs/quality.md, "The seed spread").
 *
 * A struct tr_spike is the trainer's window of its last TR_SPIKE_WINDOW batch
 * norms, shared by its workers (in struct tr_shared). Its fields are atomics:
 * workers record and read it concurrently without a lock; a read may miss a
 * norm another worker is recording (a window is a sample anyway), never tear
 * one. All zero is an empty window (memset or = {0}). Thread: any. */
#ifndef TR_SPIKE_H
#define TR_SPIKE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TR_SPIKE_WINDOW 16u  /* batch norms kept, the trainer's last */
#define TR_SPIKE_MIN 8u      /* norms the window holds before a batch can be a spike */

struct tr_spike {
    _Atomic float norm[TR_SPIKE_WINDOW]; /* ring of batch norms; 0: slot not yet written */
    atomic_ullong n;                     /* norms recorded since the start */
    atomic_ullong skipped;               /* batches tr_spike_check called spikes */
};

/* The L2 norm of g[0..n) (summed in double). */
double tr_spike_norm(const float *g, size_t n);

/* Record norm in the window and say whether its batch is a spike (counted in
 * self->skipped): norm is at least ratio times the median of the (nonzero)
 * norms the window held before it, and it held at least TR_SPIKE_MIN. A
 * spike's norm is recorded too, so a lasting rise of the norms becomes the
 * window's median within half a window. ratio <= 0 records nothing and
 * returns 0. Returns 1 (spike) or 0. */
int tr_spike_check(struct tr_spike *self, double norm, double ratio);

#endif
