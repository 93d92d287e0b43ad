/* tr_train_int.h - PRIVATE to the files of the trainer object (tr_train.h).
 *
 * One trainer is one object, tr_train_t, whose jobs live in one file each:
 *   tr_train.c         its life (new, destroy) and the training run: the
 *                      segment loop, the barriers that end a segment, the
 *                      vote on going on, dense averaging, the input checks;
 *   tr_train_report.c  what it reports: the progress line, the JSONL rows,
 *                      result-trainer-R.json, the metrics scrape and the
 *                      STATS reply (the figures are tr_stats.h's table);
 *   tr_train_ckpt.c    the job checkpoint (periodic and on SIGTERM) and the
 *                      resume from one (the file is tr_jobckpt.h's);
 *   tr_modelset.c      the model set: keep-best between segments, the saved
 *                      model folder (dense.bin, the PSs' files, MANIFEST),
 *                      the requests that make every PS checkpoint, loading;
 *   tr_predict.c       scoring with the current model: the evaluations,
 *                      eval-only and batch prediction (and its output).
 * This header is what they share: the object's fields and the functions one
 * file calls in another. Nothing else includes it; the API is tr_train.h.
 *
 * Thread: everything here runs on the main thread unless it says otherwise
 * (the report functions for the metrics and admin threads do). */
#ifndef TR_TRAIN_INT_H
#define TR_TRAIN_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "ss_auth.h"
#include "ss_cfg.h"
#include "ss_cluster.h"
#include "tr_allreduce.h"
#include "tr_eval.h"
#include "tr_jobckpt.h"
#include "tr_keepbest.h"
#include "tr_model.h"
#include "tr_shadow.h"
#include "tr_stats.h"
#include "tr_train.h"
#include "tr_worker.h"

struct tr_train {
    const struct ss_cfg *cfg;      /* borrowed */
    const ss_cluster_t *cluster;   /* borrowed: endpoints, identity, shard map */
    uint32_t rank;                 /* this trainer */
    tr_model_t *model;             /* shape */
    size_t n_params;               /* floats in w */
    struct tr_shared shared;       /* what workers share */
    struct ss_curve curve;         /* CURVE keys: server (allreduce) and client */
    ss_auth_t *auth;               /* ZAP handler of the allreduce ROUTER, CURVE only */
    int64_t input_bytes;           /* this trainer's share of the input, all epochs */
    double wall_s;                 /* training time: workers' segments, no barrier or eval */
    struct tr_worker_counts total; /* summed at the end of training */
    struct tr_eval_result train;   /* progressive train metrics at the end */
    tr_shadow_t *shadow;           /* dense sync, NULL for sync none */
    struct tr_shadow_stats sync;   /* sync figures at the end */
    tr_allreduce_t *ring;          /* all trainers: barriers (and the ring rules) */
    FILE *jsonl;                   /* metrics-trainer-R.jsonl, or NULL */
    uint64_t t0_ns;                /* training clock start */
    uint64_t train_ns;             /* time the workers ran, summed over segments */
    /* the output model and its evaluation */
    const char *model_dir;         /* borrowed: where the output model goes */
    int scores;                    /* this trainer scores the output model */
    struct tr_keepbest kb;         /* what chose the model in model_dir (tr_keepbest.h):
                                    * the best evaluation (validation with has_valid, else
                                    * eval), its epoch and save, whether the save succeeded
                                    * and the model held now is it (leader only), the
                                    * evaluations and those without gain. The one home of
                                    * that state: the vote and the job checkpoint carry it */
    int has_valid;                 /* a validation split is set (data.valid or
                                    * data.valid_fraction): selection reads it */
    int selects;                   /* the run scores between segments and keeps the best */
    int have_test;                 /* test holds an evaluation (has_valid) */
    struct tr_eval_result test;    /* data.eval of the model in model_dir (has_valid) */
    uint32_t n_test_scorings;      /* times data.eval was scored during the run */
    int test_plan;                 /* how test was scored (enum tr_test_plan; TR_TEST_SKIP:
                                    * not yet, or not by this run: tr_train_final_test) */
    struct tr_eval_result last_eval; /* this trainer's last evaluation (sync none: a new
                                    * leader compares it with the lost leader's best) */
    /* the leader's keep-best state, sent in every vote (tr_keepbest.h) */
    int led;                       /* this trainer has led (its keep-best state is its own) */
    int have_carried;              /* carried holds a leader's state, */
    struct tr_keepbest carried;    /* the last one received in a vote */
    float *w_live;                 /* model.dense_average: the model training goes on
                                    * from while w holds the average being scored */
    int averaged;                  /* w holds the average, w_live the model */
    uint64_t epochs_done;          /* epochs trained */
    int stopped_early;             /* trainer.patience ended the run */
    char save_error[1024];         /* why the last save of the output model failed, "" when
                                    * it did not: the result file carries it */
    char test_error[1024];         /* why the model kept could not be restored to score
                                    * data.eval, "": the result file carries it too */
    /* job checkpoint and resume (tr_jobckpt.h) */
    volatile sig_atomic_t *ckpt_req; /* borrowed: set (SIGTERM) to stop with a job checkpoint */
    const char *jobckpt_dir;       /* borrowed: where the job checkpoint goes */
    int draining;                  /* the workers were told to stop at a batch boundary */
    int checkpointed;              /* the run ended with a job checkpoint */
    int stopped_kept;              /* it ended on SIGTERM without one: trainers lost */
    uint64_t drain_ns;             /* when draining was set */
    uint64_t ckpt_interval_ns;     /* job.checkpoint_interval_s, 0: none */
    uint64_t ckpt_next_ns;         /* when the next periodic job checkpoint is due, 0: none */
    uint64_t ckpt_last_id;         /* save id of the last job checkpoint committed, 0: none */
    uint32_t n_ckpts;              /* periodic job checkpoints committed */
    uint32_t n_ckpt_failures;      /* periodic job checkpoints that failed */
    double ckpt_pause_s;           /* the last one's pause of the workers */
    int pause_open;                /* a committed periodic one whose pause has not ended:
                                    * its workers are not all training again */
    uint64_t pause_stop_ns;        /* its workers' stop (the drain), */
    uint64_t pause_save_ns;        /* the start of its save, */
    uint64_t pause_commit_ns;      /* its commit */
    uint64_t pause_examples;       /* its examples (all trainers) */
    double ckpt_pause_total_s;     /* every one's */
    int resumed;                   /* resume holds the state to go on from */
    struct tr_jobckpt resume;      /* the state read by tr_train_resume() */
    uint64_t resumed_examples;     /* examples this trainer had trained before */
    int64_t train_bytes;           /* size of data.train (a resume checks it is the same) */
    ss_ctrs_t *ctrs;               /* the training workers' counter slots (tr_worker.h) */
    tr_stats_t *stats;             /* what the metrics and admin threads read besides ctrs:
                                    * published with each progress line and evaluation */
    uint64_t last_print_ns;        /* last progress line on stderr */
};

/* What the trainers voted after a segment (every trainer gets the same). */
struct tr_ckpt_vote {
    int term;                      /* some trainer was asked (SIGTERM) to stop with one */
    int periodic;                  /* some trainer's timer said a periodic one is due */
    int cut;                       /* some trainer's drain cut the segment short */
};

/* Where a job checkpoint leaves the trainer: the segment a resume goes on in
 * and that segment's trainer.eval_every_examples budget left. */
struct tr_ckpt_at {
    int64_t seg_end;               /* tr_train_run's end */
    int64_t segment_left;          /* < 0: none */
};

/* ---- tr_train.c */

/* The name of the input what scores (TR_WORKER_EVAL or TR_WORKER_VALID), for
 * messages and the result's selected_on. */
const char *tr_train_input_name(const struct ss_cfg *cfg, int what);

/* Sum the counters of n workers (NULL entries skipped) into sum; returns
 * how many have finished. */
int tr_train_sum(tr_worker_t **workers, uint32_t n, struct tr_worker_counts *sum);

/* Join the n workers (NULL entries skipped). */
void tr_train_join_workers(tr_worker_t **workers, uint32_t n);

/* 1 when this trainer's timer says a periodic job checkpoint is due at now. */
int tr_train_ckpt_due(const tr_train_t *self, uint64_t now);

/* Wait until every trainer has called this with the same n and sum v over
 * them in place (trainer.barrier_timeout_s). Returns 0 or an error (err). */
int tr_train_barrier(tr_train_t *self, float *v, size_t n, char *err, size_t len);

/* tr_train_barrier() for n (at most 8) 64-bit counts, summed exactly. */
int tr_train_barrier_u64(tr_train_t *self, uint64_t *v, size_t n, char *err, size_t len);

/* 1 for the trainer that scores and saves the shared model: rank 0, or the
 * lowest rank left once the ring re-formed without it. */
int tr_train_leader(const tr_train_t *self);

/* "PATH:LINE: why" of the first bad line the workers met into out. Returns
 * 1, or 0 when they met none. */
int tr_train_first_bad(tr_worker_t **workers, uint32_t n, char *out, size_t len);

/* Fail (SS_E_CONFIG, err) when the input what gave no example or more bad
 * lines than data.max_bad_fraction; tot: examples, lines, bad lines,
 * headers; result names what was not done. Returns 0 otherwise. */
int tr_train_judge_input(const struct ss_cfg *cfg, const char *what, const uint64_t tot[4],
                         tr_worker_t **workers, uint32_t n, const char *result, char *err,
                         size_t len);

/* ---- tr_train_report.c */

/* Open RUN_DIR/metrics-trainer-R.jsonl for writing, or NULL (logged). */
FILE *tr_train_open_jsonl(const tr_train_t *self);

/* Publish the figures of a progress step (now, against prev dt seconds
 * before; t: the run's age), then print one progress line and one JSONL row
 * to jsonl (NULL: none); final: 1 for the last line, -1 for a JSONL row
 * only. */
void tr_train_progress(tr_train_t *self, const struct tr_worker_counts *now,
                       const struct tr_worker_counts *prev, double t, double dt, FILE *jsonl,
                       int final);

/* Publish r, an evaluation of what (TR_WORKER_EVAL or TR_WORKER_VALID). */
void tr_train_publish_eval(tr_train_t *self, int what, const struct tr_eval_result *r);

/* One evaluation row of the JSONL file for what; best: the model is kept. */
void tr_train_jsonl_eval(tr_train_t *self, int what, int best);

/* ---- tr_train_ckpt.c */

/* End the pause of the last periodic job checkpoint once every one of the n
 * workers trains again (now: their sum): log and publish it. */
void tr_train_pause_end(tr_train_t *self, const struct tr_worker_counts *now, uint32_t n);

/* After a segment: what every trainer voted on job checkpoints (out).
 * Returns 0 or the barrier's error. */
int tr_train_vote_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             struct tr_ckpt_vote *out, char *err, size_t len);

/* The job checkpoint SIGTERM asked for (or none when trainers were lost).
 * Returns 0, or an error when it failed. */
int tr_train_stop_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                             const struct tr_ckpt_at *at, char *err, size_t len);

/* A periodic job checkpoint; training goes on (t_stop: when the workers
 * were stopped for it). Returns 0, or a barrier's error. */
int tr_train_periodic_checkpoint(tr_train_t *self, tr_worker_t **workers, uint32_t n,
                                 const struct tr_ckpt_at *at, uint64_t t_stop, char *err,
                                 size_t len);

/* ---- tr_modelset.c */

/* Hash of the model shape, as dense.bin and trainer-R.state record it. */
uint64_t tr_train_shape_hash(const tr_train_t *self);

/* A save id: one per save, the same in every file of the save. */
uint64_t tr_train_new_save_id(void);

/* After save save_id in folder dir was committed: every PS drops its files
 * of earlier saves beside it. Failures are logged, not returned. */
void tr_train_ps_drop_earlier(tr_train_t *self, uint64_t save_id, const char *dir);

/* Score the model every trainer now holds and keep it in model_dir when it
 * is the best so far; *stop_vote: 1 when trainer.patience evaluations
 * brought no gain; last: no segment follows. Returns 0 or an error. */
int tr_train_evaluate_segment(tr_train_t *self, int last, float *stop_vote, char *err,
                              size_t len);

/* With a validation split, at the run's end (every trainer has stopped
 * training) or after a failed save of the model kept: score data.eval once,
 * on the model kept, restoring it on every PS and in the dense replica
 * first when it is not the one held now (tr_eval_test_plan); the leader
 * only, a no-op elsewhere or when scored already. Returns 0 or an error. */
int tr_train_final_test(tr_train_t *self, char *err, size_t len);

/* With sync none, on taking over in the vote after this trainer validated its
 * own replica: compare that validation (last_eval) with the adopted best and
 * keep (save) the replica when it is better, as tr_train_evaluate_segment
 * would have. Returns 0 or an error. */
int tr_train_reconsider(tr_train_t *self, int last, float *stop_vote, char *err, size_t len);

/* ---- tr_predict.c */

/* Score what (TR_WORKER_EVAL: data.eval; TR_WORKER_VALID: the validation
 * split) with the current dense model into out. Returns 0 or an error. */
int tr_train_score(tr_train_t *self, int what, struct tr_eval_result *out, char *err,
                   size_t err_len);

#endif
