/* tr_worker.h - one Hogwild worker thread of a trainer (or an eval thread).
 *
 * A worker owns its reader part, its embedding client, its model scratch
 * and its batch buffers. In training mode it reads a batch, looks the rows
 * up, runs forward and backward, applies the dense gradient in place to the
 * trainer's shared replica (no lock: Hogwild, see tr_hogwild.h) and pushes
 * the row gradients. In eval mode it scores batches into a tr_eval.
 *
 * Counters: each worker writes its own counter slot (ss_stats.h: a padded
 * line of relaxed atomics, TR_COUNTERS below) once per batch, with no lock;
 * a training worker's slot is its index in shared->ctrs, which outlives the
 * workers, so the metrics and admin threads can sum it at any time; likewise
 * its PS-wait histogram, shared->ps_wait_hist[index], one add per batch.
 * The main thread reads a worker through tr_worker_snapshot(), whose input
 * line counts come straight from the reader's atomics (exact at every
 * moment, not as of the last batch). A per-worker mutex guards only the rare fields
 * (finished, rc, err), taken when the thread starts and ends. */
#ifndef TR_WORKER_H
#define TR_WORKER_H

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_metrics.h"
#include "ss_stats.h"
#include "tr_allreduce.h"
#include "tr_eval.h"
#include "tr_model.h"
#include "tr_reader.h"

typedef struct tr_worker tr_worker_t;
struct tr_client_group;

/* An eval worker scores its batches in products of this many rows (the last
 * padded): a whole number of the BLAS's row tiles (8 or 16 floats on x86),
 * so that a row's prediction does not depend on its place in the input
 * (tr_worker.c, s_score). */
#define TR_WORKER_SCORE_ROWS 16u

/* An eval worker reads and looks up this many rows at a time where the
 * limits allow (tr_worker_score_batch), trainer.batch_size where that is
 * larger: fewer requests and fewer keys per scored row (a key shared by
 * rows of one batch is looked up once), the same predictions (each row's
 * is its own, s_score). */
#define TR_WORKER_SCORE_BATCH 1024u

/* Values per field tr_worker_score_batch allows for (multi-valued fields):
 * the limits must leave room for this many per field and row. */
#define TR_WORKER_SCORE_VALUES 8u

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
                                    * had ended (every read example is trained); a
                                    * restart goes on from the reader's place */
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
    ss_ctrs_t *ctrs;               /* training workers' counter slots (slot = index), or
                                    * NULL: each worker keeps its own */
    struct ss_hist *ps_wait_hist;  /* training workers' PS-wait histograms, one per slot
                                    * of ctrs (ss_hists_new), or NULL: none kept. A
                                    * worker adds its batch's wait_ns once per batch */
    struct tr_client_group *clients[2]; /* the embedding clients' groups of the training
                                    * [0] and eval [1] workers (tr_client.h): made by
                                    * the first tr_worker_new() of the kind, freed by
                                    * its last tr_worker_destroy(); NULL when none */
    int clients_refs[2];           /* workers of each kind that hold clients[i] */
    struct ss_hist sync_round_hist;/* shadow sync rounds' durations (tr_shadow adds
                                    * each completed round); zeroed: empty */
    atomic_ullong iterations;      /* batches trained by all workers */
    atomic_ullong examples_done;   /* examples trained by all workers (lr warm-up) */
    struct tr_valid_cache *valid_cache; /* the validation lines (of data.train's split
                                    * or of data.valid) kept between scorings
                                    * (tr_valid_cache.h): made by the first scoring
                                    * worker of the validation input, main thread; the
                                    * owner of the struct frees it; NULL: none yet */
};

/* The counters of a worker's slot, listed once: TR_C_<name> is the column.
 * Counts are added per batch (examples, batches, ps_wait_ns, compute_ns) or
 * at the thread's end (cpu_ns and the client's counts); the others are the
 * worker's running figures, set per batch: the reader's counts, the
 * progressive loss sums (prog_loss_sum and prog_pred_sum hold doubles:
 * ss_ctrs_sum_f64) and epochs_done (not meaningful summed: see
 * tr_worker_counts). */
#define TR_COUNTERS(X)                                                                   \
    X(examples) X(batches) X(ps_wait_ns) X(compute_ns) X(lines) X(bad_lines) X(headers) \
    X(bytes_read) X(prog_rows) X(prog_positives) X(prog_loss_sum) X(prog_pred_sum)      \
    X(epochs_done) X(cpu_ns) X(lookup_retries) X(pushes_unconfirmed) X(keys_total)       \
    X(keys_unique) X(pushes_full)

enum {
#define TR_C_ID(name) TR_C_##name,
    TR_COUNTERS(TR_C_ID)
#undef TR_C_ID
    TR_N_COUNTERS
};

/* Counters of one worker (tr_worker_snapshot) or of several (summed). */
struct tr_worker_counts {
    uint64_t c[TR_N_COUNTERS];     /* TR_C_* (the two doubles are in prog) */
    struct tr_eval_prog prog;      /* progressive train loss sums */
    uint32_t n;                    /* workers in it (1 for a snapshot) */
    uint64_t epochs_done;          /* completed passes (of a sum: the fewest) */
    int finished;                  /* the thread has left its loop (sum: how many) */
    int cut;                       /* it left because of sh->drain, with data and budget
                                    * left in the segment (sum: how many) */
    uint64_t finished_ns;          /* ss_now_ns() when it left (sum: the latest) */
    int back;                      /* since its last start the thread trained a batch, or
                                    * left without one (sum: how many) */
    uint64_t back_ns;              /* ss_now_ns() of that: its first batch trained, else
                                    * when it left (sum: the latest) */
    int rc;                        /* 0 or the error that stopped it (sum: the first) */
    char err[512];                 /* what went wrong */
};

/* Zero out (an empty sum). */
void tr_worker_counts_init(struct tr_worker_counts *c);

/* sum += c: counters and loss sums added, the rest as tr_worker_counts says. */
void tr_worker_counts_add(struct tr_worker_counts *sum, const struct tr_worker_counts *c);

/* out = the counters of every slot of ctrs (a TR_N_COUNTERS set), summed:
 * what the training workers have published so far. Any thread. */
void tr_worker_counts_of(const ss_ctrs_t *ctrs, struct tr_worker_counts *out);

/* What a worker reads (tr_worker_new's eval): data.train to train on (its
 * training side when data.valid_fraction is set), data.eval to score, or
 * the validation split to score (data.valid, else the validation side of
 * data.train: tr_split.h). */
enum { TR_WORKER_TRAIN = 0, TR_WORKER_EVAL = 1, TR_WORKER_VALID = 2 };

/* Create worker `index` of `n` over files; eval: TR_WORKER_EVAL or
 * TR_WORKER_VALID score into its own tr_eval instead of training (0, or
 * TR_WORKER_TRAIN, trains). Returns NULL with err. Main thread. */
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

/* Make an eval worker also write its predictions, in input order, to out
 * (its part of a tr_predict.h output; borrowed until the worker is joined):
 * one line per example, and with keep_bad a "nan" line for each bad line
 * where it was (tr_predict.h). A write error stops the worker with it.
 * Main thread, before tr_worker_start(). */
void tr_worker_set_output(tr_worker_t *self, FILE *out, int keep_bad);

/* A training worker's running sum of the dense model after each of its
 * batches in the tail of its latest epoch (model.dense_average; a new
 * epoch's tail starts a new sum): adds it into sum (n_params floats) and
 * returns how many models it holds; both start again from zero. Main
 * thread, while the worker's thread is not running. */
uint64_t tr_worker_take_average(tr_worker_t *self, float *sum);

/* Rows an eval worker reads and looks up at a time under cfg:
 * TR_WORKER_SCORE_BATCH, halved while a round of every worker's lookups
 * (trainer.workers batches of TR_WORKER_SCORE_VALUES values per field) would
 * pass half of limits.max_keys_per_request or of limits.max_message_bytes in
 * its reply; never below trainer.batch_size. Pure. */
uint32_t tr_worker_score_batch(const struct ss_cfg *cfg);

/* The eval accumulator of an eval worker (after join). */
tr_eval_t *tr_worker_eval(tr_worker_t *self);

/* model.adagrad_floor's gamma for a step after examples_done examples of this
 * trainer: gamma itself when fade_examples is 0 (model.adagrad_floor_examples
 * off), else gamma * (1 - examples_done / fade_examples), 0 from fade_examples
 * on. Any thread. */
float tr_worker_floor_gamma(double gamma, int64_t fade_examples, uint64_t examples_done);

/* Dense learning rate for a batch of n examples after examples_done examples of
 * this trainer (model.warmup_examples): lr * min(1, (examples_done + n) /
 * warmup_examples), so the ramp starts near 0 and reaches lr once warmup_examples
 * examples are trained; lr itself when warmup_examples is 0. Any thread. */
float tr_worker_dense_lr(double lr, int64_t warmup_examples, uint64_t examples_done,
                         uint32_t n);

#endif
