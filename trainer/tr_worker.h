/* tr_worker.h - one Hogwild worker thread of a trainer (or an eval thread).
 *
 * A worker owns its reader part, its embedding client, its model scratch
 * and its batch buffers. In training mode it reads a batch, looks the rows
 * up, runs forward and backward, applies the dense gradient in place to the
 * trainer's shared replica (no lock: Hogwild, see tr_hogwild.h) and pushes
 * the row gradients. In eval mode it scores batches into a tr_eval. Counters
 * are read by the main thread through tr_worker_snapshot() (a per-worker
 * mutex taken once per batch; the input line counts come straight from the
 * reader's atomics, exact at every moment). */
#ifndef TR_WORKER_H
#define TR_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "tr_allreduce.h"
#include "tr_eval.h"
#include "tr_model.h"
#include "tr_reader.h"

typedef struct tr_worker tr_worker_t;

/* What every worker of a trainer shares; owned by the trainer. */
struct tr_shared {
    const struct ss_cfg *cfg;      /* job config */
    const ss_cluster_t *cluster;   /* membership: PS endpoints, shard count, ring */
    const tr_model_t *model;       /* shape, immutable */
    float *w;                      /* dense replica, Hogwild-shared */
    float *acc;                    /* Adagrad accumulators (or NULL for SGD) */
    void *zctx;                    /* ZeroMQ context */
    const struct ss_curve *curve;  /* CURVE keys (ss_auth.h), NULL or off: plain sockets */
    uint32_t rank, n_ranks;        /* this trainer among all */
    atomic_int stop;               /* set to stop every worker */
    atomic_int drain;              /* set by main for a job checkpoint: read no new
                                    * batch, train those read, leave as if the data
                                    * had ended (every read example is trained) */
    atomic_llong examples_left;    /* trainer.max_examples budget, <0: none */
    atomic_llong segment_left;     /* examples left in this segment, <0: none */
    uint64_t epoch_end;            /* workers stop when they have done this many
                                    * epochs (set by main before it starts them) */
    tr_allreduce_t *ring;          /* the trainers' ring (main thread between
                                    * segments, the shadow thread during one) */
    /* iteration hook for the foreground sync baselines: called by the worker
     * after every batch with its own iteration count; may block */
    void (*on_iteration)(void *arg, uint32_t worker, uint64_t iteration);
    void *on_iteration_arg;        /* its argument */
    /* called by a worker when it leaves its training loop (fr-* gate) */
    void (*on_worker_done)(void *arg, uint32_t worker);
    atomic_ullong iterations;      /* batches trained by all workers */
    atomic_ullong examples_done;   /* examples trained by all workers (lr warm-up) */
};

/* Counters of one worker, copied out by tr_worker_snapshot(). */
struct tr_worker_counts {
    uint64_t examples;             /* examples trained (or scored) */
    uint64_t batches;              /* iterations */
    uint64_t epochs_done;          /* completed passes */
    uint64_t lines, bad_lines;     /* reader counts (exact when read) */
    uint64_t headers;              /* csv header lines skipped */
    uint64_t bytes_read;           /* reader bytes */
    uint64_t ps_wait_ns;           /* time waiting for the PSs */
    uint64_t compute_ns;           /* forward+backward+update time */
    uint64_t cpu_ns;               /* CPU time of the worker's threads (all segments) */
    uint64_t lookup_retries;       /* lookups sent again to a PS that did not answer */
    uint64_t pushes_unconfirmed;   /* pushes a PS never acknowledged */
    struct tr_eval_prog prog;      /* progressive train loss sums */
    uint64_t keys_total;           /* keys looked up before de-duplication (at exit) */
    uint64_t keys_unique;          /* after de-duplication per batch (at exit) */
    uint64_t pushes_full;          /* pushes a full shard partly refused (at exit) */
    int finished;                  /* the thread has left its loop */
    uint64_t finished_ns;          /* ss_now_ns() when it left (valid if finished) */
    int rc;                        /* 0 or the error that stopped it */
    char err[512];                 /* what went wrong */
};

/* Create worker `index` of `n` over files; eval: score into its own
 * tr_eval instead of training. Returns NULL with err. Main thread. */
tr_worker_t *tr_worker_new(struct tr_shared *shared, uint32_t index, uint32_t n, int eval,
                           char *err, size_t err_len);
void tr_worker_destroy(tr_worker_t **self_p);

/* Start the thread. A training worker runs until sh->epoch_end epochs are
 * done (or its data, budget or sh->stop ends it); it can then be started
 * again for the next segment and goes on where it stopped, its counters
 * cumulative. Returns 0 or SS_E_NOMEM. */
int tr_worker_start(tr_worker_t *self);

/* Join the thread (it stops at the end of its data or when shared->stop). */
void tr_worker_join(tr_worker_t *self);

/* Copy the counters (thread-safe). */
void tr_worker_snapshot(tr_worker_t *self, struct tr_worker_counts *out);

/* Where a training worker is in its input: what a job checkpoint keeps. */
struct tr_worker_pos {
    uint64_t reader_pos;           /* tr_reader_tell() of its part */
    uint64_t epochs_done;          /* passes completed */
    uint64_t iteration;            /* batches trained (foreground sync's count) */
    struct tr_worker_counts counts;/* its counters, reader counts included */
};

/* Copy the worker's place and counters into out. Main thread, while the
 * worker's thread is not running (after a drain: every example read is
 * trained). */
void tr_worker_get_pos(tr_worker_t *self, struct tr_worker_pos *out);

/* Put a new worker of the same part where pos says (a resumed job): its
 * reader, epoch and iteration count, and counters that go on from pos's.
 * Returns 0 or an error (the reader cannot seek there) with err. Main
 * thread, before the first tr_worker_start(). */
int tr_worker_set_pos(tr_worker_t *self, const struct tr_worker_pos *pos, char *err,
                      size_t err_len);

/* Copy the first bad input line the worker met into out; 1, or 0 if none.
 * Main thread, while the worker's thread is not running. */
int tr_worker_first_bad(const tr_worker_t *self, struct tr_reader_bad *out);

/* The eval accumulator of an eval worker (after join). */
tr_eval_t *tr_worker_eval(tr_worker_t *self);

/* Dense learning rate for a batch of n examples after examples_done examples of
 * this trainer (model.warmup_examples): lr * min(1, (examples_done + n) /
 * warmup_examples), so the ramp starts near 0 and reaches lr once warmup_examples
 * examples are trained; lr itself when warmup_examples is 0. Any thread. */
float tr_worker_dense_lr(double lr, int64_t warmup_examples, uint64_t examples_done,
                         uint32_t n);

#endif
