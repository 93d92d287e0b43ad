/* tr_jobckpt.h - one trainer's part of a job checkpoint: the file it writes
 * when the job is stopped (SIGTERM) or every job.checkpoint_interval_s, and
 * reads back on a resume.
 *
 * A job checkpoint is the folder RUN_DIR/jobckpt: every PS's checkpoint
 * (embeddings with their optimizer state; EASGD's center), one
 * trainer-R.state per trainer (this module), and MANIFEST (the save id, the
 * counts of trainers and shards, the examples trained). Like the output
 * model it is written into jobckpt.new-ID and replaces jobckpt in one step
 * once every part is written (tr_train_ckpt.c).
 *
 * trainer-R.state holds what the trainer needs to go on where it stopped:
 * the dense replica w and the dense optimizer's state (Adagrad's
 * accumulators), the lr warm-up and iteration counts, the training time,
 * the evaluation history that decides which model is kept (best NE, its
 * epoch, evaluations without gain), the segment it stopped in and that
 * segment's trainer.eval_every_examples budget left, for each worker its
 * place in its input part (tr_worker_pos: reader offset, epochs, counters), and the sync rules'
 * own state (tr_shadow_state: BMUF's global model, block momentum and
 * target), and the latency histograms (each worker's PS wait, the sync
 * rounds'), so that a resumed trainer's histograms go on from their counts
 * as its counters do. The checkpoint is taken after the segment's final sync, so MA
 * keeps nothing more (the replicas are equal) and EASGD's center is in the
 * sync PSs' files.
 *
 * The file is checked whole (magic, layout sizes, shape, checksum) before
 * any of it is used; it is read by the build that wrote it (the layout
 * sizes must match). States of the formats before are still read: format 2
 * (magic SSJOBTR2, before the keep-best state was carried whole) with kb
 * from the fixed part's old_ fields (no save id, nothing carried), and
 * format 1 (SSJOBTR1, before the histograms) likewise, with n_hists 0. A
 * field that takes the place of padding keeps the layout (and the magic)
 * when zero means what the older builds did: kept_current in format 2. */
#ifndef TR_JOBCKPT_H
#define TR_JOBCKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ss_metrics.h"
#include "tr_eval.h"
#include "tr_keepbest.h"
#include "tr_worker.h"

/* Exit status of a trainer (and of shadow-launch) that stopped after saving
 * a job checkpoint: resume it with shadow-launch --resume RUN_DIR
 * (EX_TEMPFAIL of sysexits.h: try again later). */
#define TR_EXIT_CHECKPOINTED 75

/* Exit status of a trainer that stopped on SIGTERM without writing a job
 * checkpoint because trainers had been lost (job.allow_trainer_loss): one
 * now would lack their states and could not be resumed, so the last
 * complete one (if any) stays as it was. shadow-launch tells the user. */
#define TR_EXIT_STOPPED_KEPT 76

/* The trainer's state, apart from the arrays. Plain data. */
struct tr_jobckpt_fixed {
    uint32_t rank, n_ranks;        /* this trainer among all */
    uint32_t n_workers;            /* trainer.workers (the input split) */
    uint32_t has_acc;              /* acc follows w */
    uint64_t n_params;             /* floats in w */
    uint64_t shape_hash;           /* the model shape (as dense.bin's) */
    int64_t input_bytes;           /* size of data.train when written */
    uint64_t save_id;              /* the job checkpoint's save */
    uint64_t examples_done;        /* tr_shared.examples_done (lr warm-up) */
    uint64_t iterations;           /* tr_shared.iterations */
    int64_t examples_left;         /* trainer.max_examples budget left, <0: none */
    int64_t seg_end;               /* the segment a resume goes on in (tr_train_run's
                                    * end): the one it was taken in, or the next one
                                    * when taken after that one's evaluation */
    int64_t segment_left;          /* trainer.eval_every_examples left in it, <0: none */
    uint32_t n_ckpts;              /* periodic job checkpoints taken before this one */
    /* The old_ fields: the keep-best state as formats 1 and 2 held it, read
     * into tr_jobckpt.kb; format 3 writes them as zero and holds kb whole. */
    uint32_t old_kept_current;     /* kb.own.kept_current (format 2; padding, zero, before:
                                    * a state of then reads 0, and the end restores the
                                    * kept set first: always right, one restore more) */
    uint64_t train_ns;             /* training time so far */
    uint64_t epochs_done;          /* epochs every worker had completed */
    uint32_t old_n_evals;          /* kb.own.n_evals */
    uint32_t old_evals_since_best; /* kb.own.evals_since_best */
    uint64_t old_best_epoch;       /* kb.own.best_epoch */
    uint32_t old_have_eval;        /* kb.own.have_eval */
    uint32_t old_saved;            /* kb.own.saved */
    struct tr_eval_result old_best; /* kb.own.best */
    uint64_t n_sync;               /* floats of sync rule state (tr_shadow_state) */
    uint32_t have_test;            /* test holds an evaluation (0 with a validation
                                    * split: data.eval is scored once, at the run's end,
                                    * after the last job checkpoint) */
    uint32_t n_test_scorings;      /* times data.eval was scored (0 with a split) */
    struct tr_eval_result test;    /* unused with a split (the end scores the model kept:
                                    * a resume restores it first, tr_modelset.c) */
};

/* The trainer's keep-best state (tr_keepbest.h), whole: its own and what a
 * leader last sent it, so that a resumed job chooses, restores and takes
 * over as the stopped one would have. */
struct tr_jobckpt_kb {
    struct tr_keepbest own;        /* what chose the model kept (the leader's; with sync
                                    * none each trainer's own history); own.kept_current:
                                    * the model held at this checkpoint (w here and the
                                    * PSs' files of this checkpoint) is the one kept in the
                                    * model folder, as of the last evaluation, so a resumed
                                    * job that trains no more scores data.eval on it
                                    * without a RESTORE */
    struct tr_keepbest carried;    /* the state the leader sent in the last vote (a
                                    * trainer that does not lead), valid with have_carried:
                                    * the one it goes on from when it takes over */
    int have_carried;              /* carried holds one */
    int led;                       /* this trainer has led (own is its own history, or the
                                    * one it took over) */
};

struct tr_jobckpt {
    struct tr_jobckpt_fixed f;     /* the state */
    struct tr_jobckpt_kb kb;       /* the keep-best state (formats 1-2: own from f's old_
                                    * fields, no save id; nothing carried) */
    struct tr_worker_pos *workers; /* f.n_workers entries */
    float *w;                      /* f.n_params floats */
    float *acc;                    /* f.n_params floats, or NULL */
    float *sync;                   /* f.n_sync floats (BMUF's g, D, t), or NULL */
    uint32_t n_hists;              /* latency histograms in hists; 0: none (a state
                                    * written before they were kept) */
    uint64_t *hists;               /* n_hists * SS_HIST_VALUES: ss_hist_get() of each
                                    * (tr_train_ckpt.c: each worker's PS wait, then the sync
                                    * rounds'), or NULL */
};

/* Write st to path atomically (PATH.tmp, fsync, rename), in format 3 (the
 * f.old_ fields as zero). Borrows st. Returns 0, SS_E_NOSPC or SS_E_IO with
 * err naming the file. */
int tr_jobckpt_write(const char *path, const struct tr_jobckpt *st, char *err, size_t err_len);

/* Read path into st (allocates its arrays; free with tr_jobckpt_free()), of
 * format 3, 2 or 1. Returns 0, SS_E_IO (cannot read), or SS_E_CORRUPT (not
 * a trainer state of this build, truncated, its checksum does not match, or
 * a keep-best state of another format), with err. */
int tr_jobckpt_read(const char *path, struct tr_jobckpt *st, char *err, size_t err_len);

/* Free the arrays tr_jobckpt_read() allocated and zero st. */
void tr_jobckpt_free(struct tr_jobckpt *st);

#endif
