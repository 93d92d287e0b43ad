/* ss_super.h - the supervisor of a launched job: starts its PSs and
 * trainers, waits for them, and applies the job's rules to whatever ends.
 *
 * scripts/shadow-launch builds, for every process, its command line and
 * hands the lot to shadow-super (tools/super_main.c), which puts the --exec
 * mode's ssh or srun around each (common/ss_backend.h: one "spawn this argv"
 * interface for every backend), fills an ss_super and calls ss_super_run().
 * The rules live here and nowhere else:
 *
 * - start-up: the PSs first, each ready ("ready:" in its log) within
 *   ready_timeout_ms (of its start or its last "restoring:" line); then the
 *   trainers;
 * - a trainer's end: 0 finished; 75 (76) a job checkpoint written (not
 *   written after a trainer loss) when SIGTERM asked for one; 141 with
 *   --out - the reader closed standard output; 255 over ssh its host lost;
 *   anything else ends the job, unless the trainer-loss rule lets it go on;
 * - the trainer-loss rule: job.allow_trainer_loss, a trainer still running
 *   or finished well, the ring formed, and a majority of the ring left;
 * - a PS's end: restarted (at most max_ps_restarts times in all) from its
 *   recovery checkpoint, or the job checkpoint the job resumed from, or
 *   empty; a sync PS always empty (the trainers re-seed it); its host lost
 *   over ssh ends the job;
 * - signals: SIGTERM asks the trainers for a job checkpoint (within
 *   ckpt_timeout_s of SIGTERM or of the last "working:" line a trainer
 *   logged), a second SIGTERM or SIGINT stops everything at once;
 *   with eval_only SIGTERM stops at once too;
 * - the end: an orderly shutdown of every PS; on a failure every process is
 *   stopped (SIGTERM, then SIGKILL) before ss_super_run() returns.
 *
 * Signals reach the loop as bytes (the signal number) on sig_fd, which the
 * caller's handlers write (a self-pipe); a test writes them itself.
 *
 * Not thread-safe: one thread fills and runs a supervisor. */
#ifndef SS_SUPER_H
#define SS_SUPER_H

#include <stddef.h>
#include <sys/types.h>

#include "ss_backend.h"

#define SS_SUPER_MSG_MAX 1024   /* longest failure message */

/* Words the supervisor reads in the logs, written where they are made:
 * a PS's line each second while it reads a saved shard at start (its
 * start-up wait starts again at each), and the text of a PS's "still
 * working" reply to a CHECKPOINT or RESTORE, which the trainer logs (the
 * SIGTERM job checkpoint's wait starts again at each). */
#define SS_SUPER_RESTORING_WORD "restoring:"
#define SS_SUPER_WORKING_WORD "working:"

/* The command lines of one process (ss_super_proc.argv). */
enum ss_super_argv {
    SS_SUPER_START,      /* start it */
    SS_SUPER_EMPTY,      /* PS: start it again with empty rows */
    SS_SUPER_RECOVERY,   /* PS: again from its recovery checkpoint */
    SS_SUPER_RESUME,     /* PS: again from the job checkpoint the job resumed from */
    SS_SUPER_AGE,        /* PS: print its recovery checkpoint's age in s (nothing: none) */
    SS_SUPER_SHUTDOWN,   /* PS: ask it to shut down (shadow-ctl shutdown) */
    SS_SUPER_N_ARGV
};

/* How a trainer's end counts (ss_super_trainer_end()). */
enum ss_super_end {
    SS_SUPER_END_OK,     /* finished */
    SS_SUPER_END_CKPT,   /* wrote its part of the job checkpoint asked for */
    SS_SUPER_END_KEPT,   /* stopped without one after a trainer loss */
    SS_SUPER_END_PIPE,   /* the reader of --out - closed it */
    SS_SUPER_END_SAVE,   /* could not save the output model (exit 74, trainer/tr_train.h's
                          * TR_EXIT_SAVE_FAILED): the job ends naming it, never a loss */
    SS_SUPER_END_NODATA, /* cannot read its data on its host (exit 66, TR_EXIT_NO_INPUT):
                          * the same */
    SS_SUPER_END_FAIL    /* failed: the trainer-loss rule decides */
};

/* Where a PS restarts from (ss_super_restart_from()). */
enum ss_super_from {
    SS_SUPER_FROM_EMPTY = SS_SUPER_EMPTY,
    SS_SUPER_FROM_RECOVERY = SS_SUPER_RECOVERY,
    SS_SUPER_FROM_RESUME = SS_SUPER_RESUME
};

/* One process. The caller fills the fields above pid; strings and argv are
 * borrowed for the supervisor's life. */
struct ss_super_proc {
    int is_ps;                         /* a PS (else a trainer) */
    const char *role;                  /* "embedding", "sync" or "trainer" */
    int index;                         /* shard or rank */
    int host;                          /* index into ss_super_job.hosts */
    const char *log;                   /* its output is appended here */
    const char *in;                    /* its standard input (a path) */
    int out_fd;                        /* >= 0: its standard output (then only stderr to log) */
    const char *ctl;                   /* remote trainer: its control pipe ("TERM" lines), or NULL */
    char *const *argv[SS_SUPER_N_ARGV]; /* NULL-terminated command lines, or NULL */
    pid_t pid;                         /* running: its pid (else 0) */
    int done;                          /* trainer: its end was counted */
};

/* The job's rules and places. Strings borrowed. */
struct ss_super_job {
    const struct ss_backend *backend; /* the --exec mode's row (ss_backend.h; NULL: local):
                               * whether SIGTERM goes through a trainer's control pipe,
                               * the exit status of a lost host, how long a stop waits */
    int n_trainers;           /* cluster.trainers.count (the ring's size) */
    int allow_loss;           /* job.allow_trainer_loss, resolved */
    int max_ps_restarts;      /* job.max_ps_restarts */
    int eval_only;            /* --eval-only or --predict: SIGTERM stops at once */
    int predict_stdout;       /* --out -: exit 141 of a trainer is the reader's doing */
    int resumed;              /* --resume: a PS may restart from the job checkpoint */
    int named_hosts;          /* --hosts: messages name the trainer's host */
    int quiet;                /* do not echo trainer 0's progress */
    const char *run_dir;      /* RUN_DIR (ps-restarts.jsonl, trainers-lost.jsonl) */
    const char *logs;         /* RUN_DIR/logs */
    const char *jobckpt;      /* RUN_DIR/jobckpt */
    const char *const *hosts; /* host names for messages, by host index */
    size_t n_hosts;
    const char *const *ready_msg; /* lines printed once the PSs are ready */
    size_t n_ready_msg;
    int keep_fd;              /* >= 0: a descriptor every process inherits (the run lock) */
    int die_with_super;       /* local: each process gets SIGKILL when the supervisor dies
                               * (PR_SET_PDEATHSIG; remote ones stop when their stdin closes) */
    char *const *shutdown_all; /* one command that asks every running PS to shut down at once,
                                * run instead of each PS's SS_SUPER_SHUTDOWN (a local job: one
                                * shadow-ctl, not one per PS); NULL: each PS's own */
    int ready_timeout_ms;     /* a PS's start-up (30000) */
    int ckpt_timeout_s;       /* the trainers' job checkpoint after SIGTERM (120) */
    int poll_ms;              /* the watch loop's period (200) */
};

/* What happened: the launcher's input for what it does next. */
struct ss_super_outcome {
    int rc;                        /* 0: the job ran to its end; else the exit status to die with */
    int trainers_failed;           /* the job ended in the watch loop (result files are ours) */
    int n_ok, n_ckpt, n_kept, n_lost; /* trainers finished, checkpointed, kept, lost */
    int n_restarts;                /* PS restarts */
    char failed[SS_SUPER_MSG_MAX]; /* why the job ended (rc != 0) */
    char lost_text[SS_SUPER_MSG_MAX]; /* "trainer R was lost at S s (T, exit X)", ... */
    char ckpt_old_id[128];         /* the job checkpoint's save_id when SIGTERM came */
    unsigned char host_lost[256];  /* 1: host i was lost (not gathered); first 256 hosts */
};

typedef struct ss_super ss_super_t;

/* A supervisor of the processes procs[0..n) (PSs first, in start order,
 * then trainers by rank) under job, reading signal numbers from sig_fd (-1:
 * none). Borrows everything. Returns it, or NULL when the arguments are
 * inconsistent (err says why). Caller destroys. */
ss_super_t *ss_super_new(const struct ss_super_job *job, struct ss_super_proc *procs, size_t n,
                         int sig_fd, char *err, size_t err_len);

/* Free self and set *self_p to NULL; NULL is fine. Stops nothing. */
void ss_super_destroy(ss_super_t **self_p);

/* Run the job: start, watch, restart, stop, as the top of this file says.
 * Prints what a user sees (stdout: progress; stderr: restarts, losses,
 * failures) with the prefix "shadow-launch: ". Fills out. Returns 0 when
 * the outcome is filled (out->rc says how the job went), or a negative
 * SS_E* code when the supervisor itself could not go on (then every process
 * it started is stopped). */
int ss_super_run(ss_super_t *self, struct ss_super_outcome *out);

/* The rules alone, as ss_super_run() applies them (pure: for tests). */

/* How a trainer's exit status rc counts: ckpt_asked (SIGTERM was passed on)
 * and predict_stdout as in ss_super_job. */
enum ss_super_end ss_super_trainer_end(int rc, int ckpt_asked, int predict_stdout);

/* Whether the job may go on without one more failed trainer: allow_loss,
 * left (trainers still running), n_ok (finished), n_trainers and n_lost
 * (lost before this one), ring_formed. Returns 1, or 0 with why (a
 * sentence to follow "<the failure>") in why. */
int ss_super_may_lose(int allow_loss, int left, int n_ok, int n_trainers, int n_lost,
                      int ring_formed, char *why, size_t why_len);

/* Where a dead PS of role restarts from: a sync PS empty; else its recovery
 * checkpoint when it has one (has_recovery), else the job checkpoint when
 * the job was resumed, else empty. */
enum ss_super_from ss_super_restart_from(const char *role, int has_recovery, int resumed);

/* job.allow_trainer_loss resolved: "true" 1, "false" 0, "auto" the sync
 * rules' lose_trainer trait (common/ss_sync.h: every shadow rule, s-*).
 * Returns 1, 0, or -1 for another word. */
int ss_super_allow_loss(const char *cfg, int lose_trainer);

/* Whether a PS may be restarted after n_restarts restarts under max.
 * Returns 1 or 0. */
int ss_super_may_restart(int n_restarts, int max);

/* ------------------------------------------------------------ the end
 * Once the processes have ended (ss_super_run) and the hosts' run
 * directories are gathered, what the job's exit is. */

/* How a job ends (the documented exit statuses: 0, 75, 1). */
enum ss_super_verdict {
    SS_SUPER_REPORT,      /* the trainers finished (or were lost under the rule): 0 */
    SS_SUPER_SAVED,       /* SIGTERM's job checkpoint is complete: 75 */
    SS_SUPER_UNSAVED,     /* it was not completed: 1 */
    SS_SUPER_KEPT,        /* SIGTERM after a trainer loss: none written, the
                           * job's last complete one is kept to go on from: 75 */
    SS_SUPER_KEPT_NONE    /* the same with none of this job to go on from: 1 */
};

/* The job checkpoint in a folder as the launcher finds it. */
struct ss_super_ckpt {
    char id[128];         /* its MANIFEST's save_id ("": no MANIFEST) */
    char examples[32];    /* its MANIFEST's examples */
    int complete;         /* every file MANIFEST names is there, not empty */
    char missing[512];    /* " NAME" per missing file (" MANIFEST" when none) */
};

/* The value of "KEY VALUE" in dir/MANIFEST (a job checkpoint's or a model
 * save's) into val: empty when there is no such line or no file. */
void ss_super_manifest(const char *dir, const char *key, char *val, size_t len);

/* Read the job checkpoint folder dir into ck (MANIFEST's trainers,
 * embedding_shards and sync_shards name trainer-R.state, embedding-K.ckpt
 * and sync-K.ckpt). Never fails: a missing folder is an incomplete one. */
void ss_super_ckpt_read(const char *dir, struct ss_super_ckpt *ck);

/* Whether ck is a job checkpoint of this job to go on from: complete, and
 * written by this launch (its id not start_id, the one there before it) or
 * the one it resumed from. */
int ss_super_resumable(const struct ss_super_ckpt *ck, const char *start_id, int resumed);

/* Whether the job checkpoint in jobckpt can be resumed by this job of
 * n_trainers trainers: a MANIFEST, the same trainer count (the PSs may be
 * re-sharded: server/ps_ckpt_set.h), every file it names (ss_super_ckpt_read()).
 * Returns 0, or -1 with the launcher's message in msg (logs: where the
 * failed checkpoint's logs are). */
int ss_super_resume_check(const char *jobckpt, int n_trainers, const char *logs, char *msg,
                          size_t len);

/* The job's end from the outcome o (n_run trainers ran), the job checkpoint
 * ck as it is now, start_id and resumed as for ss_super_resumable(). A
 * SIGTERM's job checkpoint is saved when every trainer not lost wrote its
 * part and ck is a new, complete one (not o->ckpt_old_id). */
enum ss_super_verdict ss_super_verdict(const struct ss_super_outcome *o, int n_run,
                                       const struct ss_super_ckpt *ck, const char *start_id,
                                       int resumed);

#endif
