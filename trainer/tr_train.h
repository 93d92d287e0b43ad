/* tr_train.h - one trainer process: the dense replica, its worker threads,
 * progress reporting, evaluation, saving the model.
 *
 * The dense parameters live in one flat 64-byte aligned arena (w) that the
 * model's layers view by offset; workers update it Hogwild-style and the
 * shadow thread (when sync is on) reads and writes it through tr_hogwild.
 *
 * The object's jobs live in one file each (the loop, its reports, the job
 * checkpoint, the model set, scoring): tr_train_int.h lists them. */
#ifndef TR_TRAIN_H
#define TR_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "tr_eval.h"

typedef struct tr_train tr_train_t;

/* Build the trainer the cluster's identity names (a trainer rank): model
 * shape from cfg, dense arena initialized from job.seed (identical on every
 * trainer); checks that every PS and trainer host name resolves. Borrows
 * cfg and cluster for the trainer's life. Returns NULL with err. */
tr_train_t *tr_train_new(const struct ss_cfg *cfg, const ss_cluster_t *cluster, char *err,
                         size_t err_len);
void tr_train_destroy(tr_train_t **self_p);

/* How tr_train_run() ends. */
struct tr_run_opts {
    const char *model_dir;         /* where trainer 0 keeps the output model */
    int no_eval;                   /* do not score data.eval */
    volatile sig_atomic_t *checkpoint; /* set (by SIGTERM) to stop with a job checkpoint, or NULL */
    const char *jobckpt_dir;       /* where the job checkpoint goes (RUN_DIR/jobckpt) */
};

/* Train on data.train with trainer.workers threads until the data (times
 * trainer.epochs) or trainer.max_examples is used up, printing progress
 * every metrics.interval_s and appending it to RUN_DIR/metrics-trainer-R.jsonl.
 * Training runs in segments of trainer.eval_every epochs (all epochs when 0).
 * Each segment ends at a barrier of all trainers: workers done, pushes
 * acknowledged, final sync done. Then the model every trainer holds (the
 * center, the average; with sync none each its own replica) is scored on
 * data.eval by trainer 0 (by every trainer for none), kept in
 * opts->model_dir by trainer 0 when it is the best so far, and the run stops
 * early after trainer.patience evaluations without gain. Stops when *stop is
 * set. With job.checkpoint_interval_s, every that many seconds all trainers
 * stop at a batch boundary together, write a job checkpoint into
 * opts->jobckpt_dir (as on opts->checkpoint) and train on from where they
 * stopped; one that fails is logged and counted, and training goes on.
 * Returns 0 or the first error (err). */
int tr_train_run(tr_train_t *self, const struct tr_run_opts *opts, volatile sig_atomic_t *stop,
                 char *err, size_t err_len);

/* Before tr_train_run(): go on from the job checkpoint in dir (its
 * trainer-R.state, tr_jobckpt.h): the dense model and optimizer state, the
 * counters, the keep-best state (its own, with the kept save's id, and the
 * one the leader last sent), and each worker's place in its input.
 * Refuses (SS_E_CONFIG, err says why) a state of another trainer count,
 * trainer.workers, model shape or data.train size; SS_E_IO or SS_E_CORRUPT
 * for a file that cannot be read or checked. The PSs must have been
 * restored from the same folder. Main thread. */
int tr_train_resume(tr_train_t *self, const char *dir, char *err, size_t len);

/* 1 when tr_train_run() ended with a job checkpoint (opts->checkpoint was
 * set; every trainer stopped at a batch boundary and wrote its state): the
 * process should exit with TR_EXIT_CHECKPOINTED. */
int tr_train_checkpointed(const tr_train_t *self);

/* 1 when tr_train_run() ended on SIGTERM without a job checkpoint because
 * trainers had been lost (job.allow_trainer_loss): none was written, the
 * last complete one stays; the process should exit with
 * TR_EXIT_STOPPED_KEPT. */
int tr_train_stopped_kept(const tr_train_t *self);

/* 1 when the last save of the output model failed (a full disk, a folder
 * that cannot be written: tr_train_run() returned its error): the process
 * should exit with TR_EXIT_SAVE_FAILED. */
int tr_train_save_failed(const tr_train_t *self);

/* Exit status of a trainer whose training ended but whose output model
 * could not be saved (EX_IOERR of sysexits.h). Not a lost trainer: the
 * launcher ends the job naming the failure, never under
 * job.allow_trainer_loss. */
#define TR_EXIT_SAVE_FAILED 74

/* Exit status of a trainer that cannot read its data.train or data.valid at
 * the start (EX_NOINPUT of sysexits.h: a file missing on its host). Not a
 * lost trainer either. */
#define TR_EXIT_NO_INPUT 66

/* Score data.eval with the current dense model. Returns 0 or an error. */
int tr_train_evaluate(tr_train_t *self, struct tr_eval_result *out, char *err, size_t err_len);

/* Exit status of shadow-trainer --predict - when its standard output's
 * reader closed it early (as a shell reports a process killed by SIGPIPE:
 * 128 + 13), so that `| head` is told apart from a failure. */
#define TR_EXIT_PIPE 141

/* Batch prediction (shadow-trainer --predict). */
struct tr_predict_opts {
    const char *out;               /* the output file (tr_predict.h); with out_fd, a name
                                    * for messages ("standard output") */
    int keep_bad;                  /* a "nan" line for each bad input line */
    volatile sig_atomic_t *stop;   /* set (by a signal) to stop and write nothing, or NULL */
    int out_fd;                    /* >= 0: stream the predictions to this descriptor
                                    * (borrowed) instead of writing out; -1: the file */
    const char *tmp_dir;           /* with out_fd: where the temporary parts go */
};

/* What tr_train_predict() scored. */
struct tr_predict_result {
    uint64_t rows;                 /* examples scored = predictions written */
    uint64_t bad_lines;            /* input lines skipped as bad */
    uint64_t headers;              /* csv header lines skipped (no output line) */
    uint64_t lines_written;        /* output lines: rows, plus bad_lines with keep_bad */
    double wall_s;                 /* from start to the output's rename */
    struct tr_eval_result eval;    /* metrics of the predictions against the labels
                                    * (meaningless without data.labels) */
    char first_bad[1536];          /* "PATH:LINE: why" of the first bad line, or "" */
    int reader_closed;             /* stream: set, also on failure, when the output's reader
                                    * closed it (EPIPE) */
};

/* Score data.eval with the current dense model (the PSs serving the same
 * embeddings) and write one predicted click probability per input line, in
 * input order, to opts->out (tr_predict.h: parts per worker, joined, renamed
 * in one step), or with opts->out_fd streamed to that descriptor in input
 * order as the workers score (the same bytes). The data.max_bad_fraction
 * rule of the evaluation applies. Returns 0, SS_E_STOPPED when *opts->stop
 * was set, or an error with err; then opts->out is untouched (a stream:
 * holds a prefix, and err says how many lines) and no temporary file is
 * left. Main thread. */
int tr_train_predict(tr_train_t *self, const struct tr_predict_opts *opts,
                     struct tr_predict_result *out, char *err, size_t err_len);

/* Save the output model as one set into dir: dense.bin, every PS's
 * checkpoint (ROLE-K.ckpt) and MANIFEST, all written into DIR.new-ID first,
 * which then replaces dir in one step. On failure dir is untouched and err
 * names the part that failed (a full disk: "No space left on device" and the
 * file; a PS's own error reply). Returns 0, SS_E_NOSPC, SS_E_IO, or the PS
 * request's error. Main thread, workers stopped. */
int tr_train_save(tr_train_t *self, const char *dir, char *err, size_t err_len);

/* Ask every PS of the job (the sync PSs only where EASGD uses them) to
 * checkpoint into folder dir with save id save_id (dir NULL: each PS's
 * checkpoint folder). A dir inside job.run_dir is sent relative to it, so
 * each PS writes into its own host's run directory. Returns 0 or the first
 * failure, with err naming the PS and carrying its reply. Main thread. */
int tr_train_checkpoint_ps(tr_train_t *self, uint64_t save_id, const char *dir, char *err,
                           size_t err_len);

/* Load the dense model from DIR/dense.bin; checks shape and checksum. */
int tr_train_load(tr_train_t *self, const char *dir, char *err, size_t err_len);

/* Write RUN_DIR/result-trainer-R.json and print the human summary. After
 * tr_train_run() the evaluation is the output model's (eval NULL); after
 * tr_train_load() pass the evaluation made of it. */
int tr_train_write_result(tr_train_t *self, const struct tr_eval_result *eval, char *err,
                          size_t err_len);

/* Scrape callback for ss_metrics_new() (arg: the trainer): examples,
 * throughput, train and eval NE, sync rounds, gap, drift, latency, CPU.
 * Counters as of this moment (the workers' slots summed); throughput and
 * sync figures as of the last progress line (metrics.interval_s), eval as of
 * the last evaluation. Safe on the HTTP thread at any time while self exists. */
struct ss_mw;
void tr_train_metrics(void *arg, struct ss_mw *w);

/* The STATS reply of the admin endpoint: this trainer's figures now (the
 * same snapshot as tr_train_metrics: counters summed over the workers this
 * moment, throughput and sync as of the last progress line) as one JSON
 * object of at most max bytes. Caller owns the text: ss_free(). Any thread
 * while self exists. */
char *tr_train_stats_json(tr_train_t *self, size_t max);

/* tr_train_stats_json() for tr_admin (arg: the trainer). */
char *tr_train_stats_fn(void *arg, size_t max);

/* The trainer's ZeroMQ context (where its ZAP handler answers when
 * security.curve is on) and its CURVE keys, for the process's other servers
 * (the admin endpoint). Valid while self lives. */
void *tr_train_zctx(tr_train_t *self);
const struct ss_curve *tr_train_curve(const tr_train_t *self);

#endif
