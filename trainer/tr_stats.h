/* tr_stats.h - every figure a trainer reports, declared once, and the
 * figures published for the threads that read them while training runs.
 *
 * TR_STATS is the table: one row per figure (JSON key, Prometheus name,
 * scale, kind, where it appears, help). The progress line, the rows of
 * metrics-trainer-R.jsonl, result-trainer-R.json, the admin endpoint's STATS
 * reply and the Prometheus scrape are all snapshots of it (ss_stats.h);
 * docs/metrics.md lists it.
 *
 * A tr_stats_t holds what the main thread publishes for the metrics (HTTP)
 * and admin threads besides the workers' counter slots: the figures of the
 * last progress line, the last evaluation and validation, the job
 * checkpoint counts. Its lock is taken for each set and each snapshot and
 * never held across anything else (a leaf in tr_main.c's lock order).
 *
 * Thread: tr_stats_new() and tr_stats_destroy() on the main thread; the
 * setters on the main thread; tr_stats_snap() and tr_stats_sync_name() on
 * any thread while the object exists. */
#ifndef TR_STATS_H
#define TR_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ss_stats.h"
#include "tr_eval.h"
#include "tr_shadow.h"
#include "tr_worker.h"

/* Where a trainer figure appears (the row's `where` bits; docs/metrics.md). */
enum {
    TR_IN_PROGRESS = 1u << 0,  /* a progress row of metrics-trainer-R.jsonl */
    TR_IN_EVAL = 1u << 1,      /* an evaluation row of metrics-trainer-R.jsonl */
    TR_IN_RESULT = 1u << 2,    /* result-trainer-R.json */
    TR_IN_STATS = 1u << 3,     /* the admin endpoint's STATS reply (shadow-ctl stats) */
};
/* Every figure of a trainer, once: JSON key, Prometheus name (NULL: JSON
 * only), Prometheus scale (0: 1), kind, where (P, E, R, S: TR_IN_PROGRESS, TR_IN_EVAL,
 * TR_IN_RESULT, TR_IN_STATS, defined where the table is expanded), help. The order is the order
 * of the JSON fields: scripts/shadow-plot reads t, eps, train_ne in that
 * order and sync_rounds_per_min right before sync_gap in progress rows;
 * test_train_output.sh "examples" right before "eval_ne" in eval rows. */
#define TR_STATS(X)                                                                        \
    X(rank, NULL, 0, INFO, P | E | R | S, "trainer rank")                                \
    X(t, NULL, 0, INFO, P | E, "seconds since training started")                         \
    X(epoch, NULL, 0, INFO, E, "epochs trained by the model scored")                      \
    X(examples, "shadowsync_trainer_examples_total", 0, COUNTER, P | E | R | S,           \
      "examples trained")                                                                 \
    X(batches, "shadowsync_trainer_batches_total", 0, COUNTER, S, "batches trained")     \
    X(eps, "shadowsync_trainer_examples_per_second", 0, GAUGE, P | R | S,                 \
      "examples/s: over the last progress interval (result: over the training time)")    \
    X(wall_s, NULL, 0, INFO, R, "training time: the workers' segments")                  \
    X(train_ne, "shadowsync_trainer_train_ne", 0, GAUGE, P | R | S,                       \
      "progressive normalized entropy of training")                                      \
    X(train_logloss, NULL, 0, GAUGE, P | S, "progressive logloss of training")           \
    X(bad_lines, "shadowsync_trainer_bad_lines_total", 0, COUNTER, P | R | S,             \
      "input lines skipped as bad")                                                       \
    X(lines, NULL, 0, INFO, S, "input lines read (good, bad and headers)")               \
    X(input_bytes, "shadowsync_trainer_input_bytes_total", 0, COUNTER, S,                 \
      "input bytes read")                                                                 \
    X(ps_wait_s, "shadowsync_trainer_ps_wait_seconds_total", 0, COUNTER, P | R | S,       \
      "workers' time waiting for embedding PS replies")                                  \
    X(compute_s, "shadowsync_trainer_compute_seconds_total", 0, COUNTER, P | R | S,       \
      "workers' time in forward, backward and update")                                   \
    X(keys_unique_ratio, NULL, 0, INFO, R | S,                                            \
      "keys looked up after de-duplication per batch / before")                          \
    X(pushes_over_capacity, "shadowsync_trainer_capacity_refusals_total", 0, COUNTER,     \
      R | S, "pushes a full PS refused in part (tables.capacity_rows)")                  \
    X(lookup_retries, "shadowsync_trainer_lookup_retries_total", 0, COUNTER, R | S,       \
      "lookups sent again to a PS that did not answer")                                  \
    X(pushes_unconfirmed, "shadowsync_trainer_pushes_unconfirmed_total", 0, COUNTER,      \
      R | S, "pushes a PS never acknowledged")                                           \
    X(epochs_done, NULL, 0, INFO, R | S, "epochs trained")                               \
    X(evals, "shadowsync_trainer_evaluations_total", 0, COUNTER, R | S,                   \
      "evaluations of the output model")                                                 \
    X(stopped_early, NULL, 0, INFO, R, "trainer.patience ended the run")                 \
    X(sync_algorithm, NULL, 0, INFO, R | S, "sync.algorithm (or the groups')")           \
    X(output_model, NULL, 0, INFO, R, "center, average or replica")                      \
    X(model_saved, NULL, 0, INFO, R,                                                     \
      "the model folder holds the output model (the model kept)")                        \
    X(model_epoch, NULL, 0, INFO, R,                                                     \
      "epochs trained by the model in the model folder (absent when none was saved): "   \
      "below best_epoch when the output model's save failed after an earlier one's")     \
    X(error, NULL, 0, INFO, R,                                                           \
      "why saving the output model failed (absent when it did not); the job fails, "     \
      "and its result.json carries it too")                                              \
    X(ring_size, NULL, 0, INFO, R, "trainers in the ring at the end")                    \
    X(ring_changes, NULL, 0, INFO, R, "times the ring re-formed")                        \
    X(ring_reform_ms, NULL, 0, INFO, R, "time the ring spent re-forming")                \
    X(ring_handshakes_failed, NULL, 0, INFO, R,                                         \
      "CURVE: connections to this trainer's ring endpoint that failed their "            \
      "handshake (no CURVE, another server key, a refused key)")                         \
    X(sync_rounds, "shadowsync_trainer_sync_rounds_total", 0, COUNTER, P | R | S,         \
      "shadow sync rounds done")                                                          \
    X(sync_failed_rounds, "shadowsync_trainer_sync_failed_rounds_total", 0, COUNTER,      \
      R | S, "sync rounds that failed")                                                   \
    X(sync_reseeds, NULL, 0, INFO, R, "sync PS shards re-seeded")                        \
    X(sync_final_ok, NULL, 0, INFO, R, "the final sync completed")                       \
    X(sync_rounds_per_min, "shadowsync_trainer_sync_rounds_per_minute", 0, GAUGE,         \
      P | R | S, "sync rounds per minute of training")                                   \
    X(sync_gap, "shadowsync_trainer_sync_gap", 0, GAUGE, P | R | S,                       \
      "mean worker iterations between rounds")                                           \
    X(sync_latency_p50_ms, "shadowsync_trainer_sync_latency_p50_seconds", 1e-3, GAUGE,    \
      P | R | S, "median sync round time")                                               \
    X(sync_latency_p99_ms, "shadowsync_trainer_sync_latency_p99_seconds", 1e-3, GAUGE,    \
      P | R | S, "99th percentile sync round time")                                      \
    X(sync_drift, "shadowsync_trainer_sync_drift", 0, GAUGE, P | R | S,                   \
      "relative distance of the replica from the synced model")                          \
    X(sync_cpu_s, "shadowsync_trainer_sync_cpu_seconds_total", 0, COUNTER, R | S,         \
      "CPU time of the shadow thread's rounds")                                          \
    X(sync_ring_bytes_sent, NULL, 0, INFO, R, "payload bytes sent on the ring")          \
    X(sync_ring_bytes_received, NULL, 0, INFO, R, "payload bytes accepted from the ring") \
    X(best_epoch, NULL, 0, INFO, R, "epochs trained by the output model")                \
    X(eval_rows, NULL, 0, INFO, R | S, "rows of the last evaluation")                    \
    X(eval_ne, "shadowsync_trainer_eval_ne", 0, GAUGE, E | R | S,                         \
      "normalized entropy of the evaluation")                                            \
    X(eval_auc, "shadowsync_trainer_eval_auc", 0, GAUGE, E | R | S, "AUC of the evaluation") \
    X(eval_logloss, NULL, 0, GAUGE, E | R | S, "logloss of the evaluation")              \
    X(eval_calibration, NULL, 0, INFO, R | S, "mean prediction / mean label")            \
    X(valid_rows, NULL, 0, INFO, R | S,                                                 \
      "rows of the last validation (data.valid or data.valid_fraction)")                 \
    X(valid_ne, "shadowsync_trainer_valid_ne", 0, GAUGE, E | R | S,                       \
      "normalized entropy of the validation split (result: of the kept model; it "       \
      "chose it)")                                                                       \
    X(valid_auc, NULL, 0, GAUGE, E | R | S, "AUC of the validation split")               \
    X(valid_logloss, NULL, 0, GAUGE, E | R | S, "logloss of the validation split")       \
    X(valid_calibration, NULL, 0, INFO, R | S, "validation: mean prediction / mean label") \
    X(selected_on, NULL, 0, INFO, R,                                                      \
      "what keep-best and patience read: `data.valid`, `data.valid_fraction`, or "       \
      "`data.eval` (no validation split: the eval figures are biased low); absent "      \
      "when nothing was chosen")                                                         \
    X(eval_scorings, NULL, 0, INFO, R,                                                  \
      "times data.eval was scored (with a validation split: once, at the end, on the "   \
      "model kept)")                                                                     \
    X(best, NULL, 0, INFO, E, "the best model so far (kept)")                             \
    X(cpu_s, "shadowsync_trainer_cpu_seconds", 0, GAUGE, R | S,                           \
      "CPU time of the trainer process")                                                 \
    X(cpu_workers_s, NULL, 0, INFO, R, "CPU time of the training workers")               \
    X(cpu_shadow_s, NULL, 0, INFO, R, "CPU time of the shadow thread's rounds")          \
    X(cpu_zmq_io_s, NULL, 0, INFO, R, "CPU time of the ZeroMQ I/O thread")               \
    X(cpu_other_s, NULL, 0, INFO, R, "CPU time of the rest (main, evaluation)")          \
    X(dense_params, NULL, 0, INFO, R | S, "dense parameters of the model")                \
    X(job_checkpoints, "shadowsync_trainer_job_checkpoints_total", 0, COUNTER, R | S,     \
      "periodic job checkpoints taken (job.checkpoint_interval_s; counted on from a "    \
      "resumed job's checkpoint)")                                                       \
    X(job_checkpoint_failures, "shadowsync_trainer_job_checkpoint_failures_total", 0,     \
      COUNTER, R | S,                                                                    \
      "periodic job checkpoints that failed (the previous one is kept, training "        \
      "goes on)")                                                                        \
    X(job_checkpoint_pause_s, "shadowsync_trainer_job_checkpoint_last_pause_seconds", 0,  \
      GAUGE, R | S,                                                                      \
      "training time the last periodic job checkpoint took from this trainer's "         \
      "workers: from its drain to every worker's first batch after the restart")         \
    X(job_checkpoint_pause_total_s, "shadowsync_trainer_job_checkpoint_pause_seconds_total", \
      0, COUNTER, R | S,                                                                 \
      "the same, summed over this run's periodic job checkpoints")

/* The figures' ids: TR_S_rank, TR_S_t, ... in table order; TR_N_STATS of them. */
enum {
#define TR_ID(key, prom, scale, kind, where, help) TR_S_##key,
    TR_STATS(TR_ID)
#undef TR_ID
    TR_N_STATS
};

typedef struct tr_stats tr_stats_t;

/* The published figures of trainer rank, whose model has n_params dense
 * parameters: none yet (sync rules "none"). Caller owns the result: free
 * with tr_stats_destroy(). */
tr_stats_t *tr_stats_new(uint32_t rank, size_t n_params);

/* Free self (NULL is fine) and set *self_p to NULL. No other thread may use
 * it any more. */
void tr_stats_destroy(tr_stats_t **self_p);

/* Publish a progress step: examples/s over the last interval, epochs
 * trained, and the sync figures (NULL: no shadow sync). Borrows sync. */
void tr_stats_set_progress(tr_stats_t *self, double eps, uint64_t epochs,
                           const struct tr_shadow_stats *sync);

/* Publish the sync rules' name (borrowed: it must outlive self, as
 * tr_shadow_name()'s does; "none" without sync). */
void tr_stats_set_sync_name(tr_stats_t *self, const char *name);

/* The sync rules' name as last published. Lives as long as self. */
const char *tr_stats_sync_name(tr_stats_t *self);

/* Publish r, an evaluation of what (TR_WORKER_EVAL: data.eval;
 * TR_WORKER_VALID: the validation split), and the evaluations so far. */
void tr_stats_set_eval(tr_stats_t *self, int what, const struct tr_eval_result *r,
                       uint32_t n_evals);

/* Publish the periodic job checkpoints committed and failed. */
void tr_stats_set_ckpts(tr_stats_t *self, uint32_t n_ckpts, uint32_t n_failures);

/* Publish the last periodic job checkpoint's pause of the workers and the
 * sum of all of them, in seconds. */
void tr_stats_set_ckpt_pause(tr_stats_t *self, double last_s, double total_s);

/* Print the table as docs/metrics.md's "Trainers" rows, one a line
 * (`shadow-trainer --list-metrics`; test_docs_metrics compares them). Any
 * thread; needs no tr_stats_t. */
void tr_stats_list_metrics(FILE *out);

/* The figures every output shares into sn (storage v, TR_N_STATS values):
 * the counters of now (a sum over workers), train NE and logloss from its
 * loss sums, and what was published last. Borrows now; sn points into v. */
void tr_stats_snap(tr_stats_t *self, const struct tr_worker_counts *now, struct ss_snap *sn,
                   struct ss_val *v);

/* The sync figures of y that every output shares (rounds, rate, gap,
 * latency, drift, CPU) into sn. Borrows y. */
void tr_stats_snap_sync(struct ss_snap *sn, const struct tr_shadow_stats *y);

/* The evaluation ev (NULL: none) into sn, replacing the last published one. */
void tr_stats_snap_eval(struct ss_snap *sn, const struct tr_eval_result *ev);

/* The validation ev (NULL: none) into sn, replacing the last published one. */
void tr_stats_snap_valid(struct ss_snap *sn, const struct tr_eval_result *ev);

/* The figures of sn for the outputs in mask (TR_IN_*), as one JSON line of
 * f, flushed. */
void tr_stats_write_row(FILE *f, const struct ss_snap *sn, unsigned mask);

#endif
