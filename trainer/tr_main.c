/* tr_main.c - shadow-trainer: one trainer process of a ShadowSync job.
 *
 * Threads:
 *   main        parses arguments, loads the config, builds the trainer,
 *               prints progress every metrics.interval_s, evaluates, saves;
 *               with --predict - it alone writes standard output, copying
 *               the scoring workers' parts there (tr_predict.h).
 *   worker-0..W trainer.workers Hogwild threads. Each owns its reader part,
 *               its embedding client and its scratch; the clients share one
 *               group (tr_client.h) whose DEALER per embedding shard moves
 *               between them under the group's lock; all share the dense
 *               replica w and (Adagrad) its
 *               accumulators, which they update in place WITHOUT a lock
 *               (tr_hogwild.c is the only code that writes them racily).
 *   eval-0..W   after training, the same threads' code in scoring mode.
 *   shadow      the shadow thread (tr_shadow.h): background sync rounds.
 *   zap         with security.curve on or security.token_file set, the ZAP
 *               handler (ss_auth.h) that admits the listed keys (or the job
 *               token) to this trainer's allreduce and admin endpoints; it
 *               owns its REP socket and only reads immutable key lists.
 *   admin       with cluster.trainer_admin set, the admin endpoint
 *               (tr_admin.h): owns its ROUTER, answers shadow-ctl's PING,
 *               STATS (reads the workers' counter slots and, under
 *               tr_stats.lock, the last progress figures) and CONFIG.
 *   metrics     with metrics.port set, libmicrohttpd's thread: the same
 *               snapshot as Prometheus text.
 * Locks:
 *   tr_worker.lock  one per worker, guards its finished/rc/err; taken when the
 *                   worker starts and ends, and by the main thread to read.
 *                   Counters need no lock (per-worker slots, ss_stats.h).
 *   tr_stats.lock   the figures of the last progress line and evaluation;
 *                   main thread writes, admin and metrics threads read.
 *   tr_client_group.lock  one per group of workers (training, eval): the
 *                   open round, the rounds' states and who uses the sockets
 *                   (never held while a socket waits).
 *   Never nested.
 * Signals: SIGTERM and SIGINT only set flags (s_on_signal); any thread that
 * does not block them may run the handler. They are held from the start
 * until the handlers are in (ss_sigstart.h), so OpenBLAS's pool threads,
 * created meanwhile, never take them; the threads above start later and
 * take them as before. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ss_cfg.h"
#include "ss_cluster.h"
#include "ss_err.h"
#include "ss_log.h"
#include "ss_mem.h"
#include "ss_metrics.h"
#include "ss_sigstart.h"
#include "ss_version.h"
#include "tr_admin.h"
#include "tr_blas.h"
#include "tr_jobckpt.h"
#include "tr_stats.h"
#include "tr_reader.h"
#include "tr_train.h"

static volatile sig_atomic_t s_stop;       /* SIGINT, or a second SIGTERM: stop now */
static volatile sig_atomic_t s_checkpoint; /* SIGTERM: stop with a job checkpoint */

/* SIGTERM and SIGINT are held from before anything runs (OpenBLAS's
 * constructor, the re-execution of tr_blas_fix_core()) until the handlers
 * are in: one that comes earlier is taken as one that comes later
 * (ss_sigstart.h): a SIGTERM before training stops with a job checkpoint at
 * the first batch boundary (exit 75). */
SS_SIGSTART_HOLD_AT_LOAD;

static void s_on_signal(int sig)
{
    if (sig == SIGTERM && !s_checkpoint)
        s_checkpoint = 1;
    else
        s_stop = 1;
}

/* --predict's SIGTERM and SIGINT: stop, writing nothing. */
static void s_on_stop(int sig)
{
    (void)sig;
    s_stop = 1;
}

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: shadow-trainer -c JOB.yaml --rank R [options]\n"
            "       shadow-trainer -c JOB.yaml --eval-only --model DIR [options]\n"
            "       shadow-trainer -c JOB.yaml --predict FILE --model DIR [options]\n"
            "\n"
            "Train the job's model on trainer R's part of data.train, then evaluate on\n"
            "data.eval. Needs the job's embedding PSs running (scripts/shadow-launch\n"
            "starts everything for you).\n"
            "\n"
            "  -c, --config FILE    job file (YAML)\n"
            "  -r, --rank R         this trainer's index in cluster.trainers\n"
            "  -b, --bind WHERE     what its allreduce endpoint binds: '*', an interface,\n"
            "                       an IP, a host name of this machine, or a whole endpoint\n"
            "                       tcp://HOST:PORT; default cluster.bind, else the host of\n"
            "                       cluster.trainers[R] (peers connect to that one)\n"
            "  -s, --set KEY=VALUE  override a job-file key (repeatable), e.g.\n"
            "                       --set trainer.workers=4 --set data.eval=my.tsv\n"
            "      --eval-only      do not train: load the dense model from --model DIR\n"
            "                       and score data.eval (the PSs must serve the same\n"
            "                       embeddings, e.g. restored with shadow-ps --restore)\n"
            "      --predict FILE   --eval-only that also writes one predicted click\n"
            "                       probability per line of data.eval to FILE, in input\n"
            "                       order (%%.9g: reads back as the same float); a bad\n"
            "                       line gets 'nan'; headers get no line. FILE appears\n"
            "                       complete or not at all. Input without labels: set\n"
            "                       data.labels=false (no metrics then). SIGTERM or\n"
            "                       SIGINT: stop, FILE untouched, no temporary file left\n"
            "      --predict -      the same, streamed to standard output in input order\n"
            "                       as the workers score (the same bytes as FILE; every\n"
            "                       other message goes to standard error). A failure\n"
            "                       leaves a prefix there: check the exit status. A\n"
            "                       reader that closes it early (| head) stops scoring:\n"
            "                       exit status 141. Temporary parts in job.run_dir,\n"
            "                       nameless (nothing is left behind)\n"
            "      --skip-bad       with --predict: write nothing for a bad line (one\n"
            "                       output line per example; alignment with the input\n"
            "                       lines is lost when there are bad lines)\n"
            "  -m, --model DIR      model directory (default RUN_DIR/model)\n"
            "      --resume DIR     go on from the job checkpoint in DIR (its\n"
            "                       trainer-R.state; the PSs restored from DIR)\n"
            "      --no-eval        skip the evaluation after training\n"
            "      --list-metrics   print every figure the trainer reports (progress,\n"
            "                       result, stats, /metrics) as docs/metrics.md lists it,\n"
            "                       and exit\n"
            "  -h, --help           this text\n"
            "      --version        print the version and git revision\n"
            "\n"
            "Writes RUN_DIR/metrics-trainer-R.jsonl (progress) and\n"
            "RUN_DIR/result-trainer-R.json; trainer 0 saves the model to RUN_DIR/model.\n"
            "When that save fails (a full disk, a folder it cannot write) the trainer\n"
            "writes its result with the error and exits with status 74; when data.train\n"
            "or data.valid cannot be read at the start, it exits with status 66.\n"
            "\n"
            "SIGTERM: every trainer stops at a batch boundary, the job checkpoint is\n"
            "written to RUN_DIR/jobckpt (all trainers' states and the PSs'), and the\n"
            "trainer exits with status 75 (a second SIGTERM, or SIGINT: stop at once,\n"
            "status 1). scripts/shadow-launch --resume RUN_DIR goes on from there.\n"
            "After trainers were lost (job.allow_trainer_loss) a SIGTERM writes no job\n"
            "checkpoint (it could not be resumed) and leaves the last complete one as\n"
            "it was: the trainer exits with status 76.\n"
            "With job.checkpoint_interval_s set, the trainers take the same job\n"
            "checkpoint every that many seconds and train on (for a resume after a crash).\n");
}

struct tr_args {
    const char *config;     /* -c */
    long rank;              /* -r */
    int eval_only;          /* --eval-only */
    int no_eval;            /* --no-eval */
    const char *model;      /* -m */
    const char *bind;       /* -b */
    const char *resume;     /* --resume */
    const char *predict;    /* --predict FILE (implies eval_only) */
    int skip_bad;           /* --skip-bad */
    int pred_fd;            /* --predict -: the predictions' descriptor (s_stream_stdout),
                             * else -1 */
    const char **sets;      /* -s values */
    size_t n_sets;          /* count */
};

static int s_parse_args(int argc, char **argv, struct tr_args *a)
{
    a->pred_fd = -1;
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"rank", required_argument, 0, 'r'},
        {"set", required_argument, 0, 's'},    {"eval-only", no_argument, 0, 'E'},
        {"no-eval", no_argument, 0, 'n'},      {"model", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {"bind", required_argument, 0, 'b'},   {"resume", required_argument, 0, 'R'},
        {"predict", required_argument, 0, 'P'}, {"skip-bad", no_argument, 0, 'K'},
        {"list-metrics", no_argument, 0, 'M'},  {0, 0, 0, 0}};
    int c;
    char *end;
    a->sets = ss_calloc((size_t)argc, sizeof *a->sets);
    while ((c = getopt_long(argc, argv, "c:r:s:m:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->config = optarg; break;
        case 's': a->sets[a->n_sets++] = optarg; break;
        case 'E': a->eval_only = 1; break;
        case 'n': a->no_eval = 1; break;
        case 'm': a->model = optarg; break;
        case 'b': a->bind = optarg; break;
        case 'R': a->resume = optarg; break;
        case 'P': a->predict = optarg; a->eval_only = 1; break;
        case 'K': a->skip_bad = 1; break;
        case 'h': return 1;
        case 'V': return 3;
        case 'M': return 4;
        case 'r':
            a->rank = strtol(optarg, &end, 10);
            if (*end || a->rank < 0) {
                fprintf(stderr, "shadow-trainer: --rank needs a number >= 0, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        default: return 2;
        }
    }
    if (!a->config) {
        fprintf(stderr, "shadow-trainer: -c JOB.yaml is required (see --help)\n");
        return 2;
    }
    if (a->skip_bad && !a->predict) {
        fprintf(stderr, "shadow-trainer: --skip-bad goes with --predict FILE\n");
        return 2;
    }
    if (a->predict && (a->resume || a->no_eval)) {
        fprintf(stderr, "shadow-trainer: --predict scores a saved model: no --resume or "
                "--no-eval with it\n");
        return 2;
    }
    return 0;
}

/* What needs labels: training, and metrics alone (--eval-only without
 * --predict). Returns 0, or 1 after saying so. */
static int s_check_labels(const struct ss_cfg *cfg, const struct tr_args *a)
{
    if (cfg->data.labels || a->predict)
        return 0;
    if (a->eval_only)
        fprintf(stderr, "shadow-trainer: data.labels is false: --eval-only has no labels to "
                "score against; write predictions with --predict FILE instead\n");
    else
        fprintf(stderr, "shadow-trainer: data.labels is false: training needs labelled data "
                "(data.labels: false is for scoring with --predict FILE only)\n");
    return 1;
}

/* --predict -: keep standard output for the predictions alone: a copy of
 * it (close-on-exec) carries them, and descriptor 1 becomes standard error,
 * so that any other printf (the summary, a library's) cannot mix in.
 * Returns 0, or 1 after saying why. */
static int s_stream_stdout(struct tr_args *a)
{
    a->pred_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (a->pred_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        fprintf(stderr, "shadow-trainer: --predict -: cannot set standard output apart for "
                "the predictions: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* --predict: score data.eval with the loaded model into a->predict, print the
 * summary and return the metrics (NaN without labels) for the result file.
 * Returns TR_EXIT_PIPE when the reader of the streamed output closed it. */
static int s_predict(tr_train_t *tr, const struct ss_cfg *cfg, const struct tr_args *a,
                     struct tr_eval_result *ev, char *err, size_t len)
{
    int stream = a->pred_fd >= 0;
    struct tr_predict_opts o = {stream ? "standard output" : a->predict, !a->skip_bad, &s_stop,
                                a->pred_fd, cfg->run_dir};
    struct tr_predict_result r;
    struct sigaction sa = {0};
    sa.sa_handler = s_on_stop;  /* no job checkpoint to make: SIGTERM stops too */
    sigaction(SIGTERM, &sa, NULL);
    if (s_checkpoint)  /* a SIGTERM while the model was loading */
        s_stop = 1;
    int rc = tr_train_predict(tr, &o, &r, err, len);
    if (stream)
        close(a->pred_fd);  /* the end of the stream for its reader, now */
    if (rc && r.reader_closed)
        return TR_EXIT_PIPE;
    if (rc)
        return rc;
    *ev = r.eval;
    printf("trainer 0 predict: %llu predictions in %.2f s (%.0f predictions/s), mean %.6f, "
           "%llu line(s) written to %s\n", (unsigned long long)r.rows, r.wall_s,
           r.wall_s > 0 ? (double)r.rows / r.wall_s : 0.0, r.eval.mean_pred,
           (unsigned long long)r.lines_written, o.out);
    if (r.bad_lines)
        printf("trainer 0 predict: %llu bad line(s) %s; the first: %s\n",
               (unsigned long long)r.bad_lines, a->skip_bad ? "skipped (no output line)"
                                                           : "written as nan", r.first_bad);
    if (r.headers)
        printf("trainer 0 predict: %llu header line(s) skipped (no output line)\n",
               (unsigned long long)r.headers);
    if (cfg->data.labels) {
        printf("trainer 0 predict eval: rows %llu  logloss %.6f  NE %.4f  AUC %.4f  "
               "calibration %.3f  mean prediction %.6f\n", (unsigned long long)ev->rows,
               ev->logloss, ev->ne, ev->auc, ev->calibration, ev->mean_pred);
    } else {
        /* no labels: the loss figures would be against all-zero labels */
        ev->logloss = ev->ne = ev->auc = ev->calibration = ev->base_rate = NAN;
        ev->positives = 0;
    }
    fflush(stdout);
    return 0;
}

/* Check that the training (and validation) data can be read, as the reader
 * will expand it (a file missing on this host, a folder, a glob matching
 * nothing), before the trainer joins the job. Returns 0, or 1 with the key
 * and the reader's own words logged. */
static int s_check_data(const struct ss_cfg *cfg)
{
    const struct {
        const char *key;
        const struct ss_str_list *l;
    } keys[] = {{"data.train", &cfg->train_files}, {"data.valid", &cfg->valid_files}};
    char err[SS_CFG_MAX_STR + 256];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t i = 0; i < keys[k].l->n; i++) {
            const char *pat = keys[k].l->v[i];
            if (tr_reader_check_inputs(&pat, 1, 0, err, sizeof err) != 0) {
                SS_LOG(SS_LOG_ERROR, "%s: %s (exit status %d: this trainer's data)",
                       keys[k].key, err, TR_EXIT_NO_INPUT);
                return 1;
            }
        }
    return 0;
}

/* Train (scoring and keeping the output model on the way), or load and
 * score a saved model; then write the result. */
static int s_run(tr_train_t *tr, const struct ss_cfg *cfg, const struct tr_args *a)
{
    char err[1024] = "", model_dir[SS_CFG_MAX_STR * 2], jobckpt[SS_CFG_MAX_STR * 2];
    struct tr_eval_result ev;
    int rc;
    if (a->model)
        snprintf(model_dir, sizeof model_dir, "%s", a->model);
    else
        snprintf(model_dir, sizeof model_dir, "%s/model", cfg->run_dir);
    snprintf(jobckpt, sizeof jobckpt, "%s/jobckpt", cfg->run_dir);
    if (!a->eval_only) {
        struct tr_run_opts o = {model_dir, a->no_eval, &s_checkpoint, jobckpt};
        if (a->resume && (rc = tr_train_resume(tr, a->resume, err, sizeof err)) != 0) {
            SS_LOG(SS_LOG_ERROR, "cannot resume: %s", err);
            return rc;
        }
        if ((rc = tr_train_run(tr, &o, &s_stop, err, sizeof err)) != 0) {
            SS_LOG(SS_LOG_ERROR, "%s", err);
            return tr_train_save_failed(tr) ? TR_EXIT_SAVE_FAILED : rc;
        }
        if (tr_train_checkpointed(tr)) {
            SS_LOG(SS_LOG_INFO, "stopped with a job checkpoint in %s (exit %d); resume with "
                   "shadow-launch --resume %s", jobckpt, TR_EXIT_CHECKPOINTED, cfg->run_dir);
            return TR_EXIT_CHECKPOINTED;
        }
        if (tr_train_stopped_kept(tr)) {
            SS_LOG(SS_LOG_INFO, "stopped without a job checkpoint (exit %d): trainers were "
                   "lost; the last complete one in %s, if any, is as it was",
                   TR_EXIT_STOPPED_KEPT, jobckpt);
            return TR_EXIT_STOPPED_KEPT;
        }
    } else if ((rc = tr_train_load(tr, model_dir, err, sizeof err)) != 0 ||
               (rc = a->predict ? s_predict(tr, cfg, a, &ev, err, sizeof err)
                                : tr_train_evaluate(tr, &ev, err, sizeof err)) != 0) {
        if (rc == TR_EXIT_PIPE)  /* the reader had what it wanted: not an error */
            SS_LOG(SS_LOG_WARN, "%s; exit status %d", err, TR_EXIT_PIPE);
        else
            SS_LOG(SS_LOG_ERROR, "%s", err);
        return rc;
    }
    if ((rc = tr_train_write_result(tr, a->eval_only ? &ev : NULL, err, sizeof err)) != 0)
        SS_LOG(SS_LOG_ERROR, "%s", err);
    return rc;
}

int main(int argc, char **argv)
{
    struct tr_args a = {0};
    struct ss_cfg *cfg = ss_calloc(1, sizeof *cfg);
    char err[1024] = "", role[32];
    tr_train_t *tr = NULL;
    ss_cluster_t *cluster = NULL;
    ss_metrics_t *metrics = NULL;
    tr_admin_t *admin = NULL;
    int rc;

    /* may re-execute this program: before anything else (SIGTERM and SIGINT
     * stay held through it) */
    tr_blas_fix_core(argv);
    tr_model_blas_no_pool();  /* OpenBLAS's idle pool thread: gone */
    rc = s_parse_args(argc, argv, &a);

    if (rc == 4) {
        tr_stats_list_metrics(stdout);
        rc = 0;
        goto out;
    }
    if (rc) {
        rc = ss_version_or_usage(rc, "shadow-trainer", s_usage);
        goto out;
    }
    rc = 1;
    if (a.predict && strcmp(a.predict, "-") == 0 && s_stream_stdout(&a) != 0)
        goto out;
    if (ss_cfg_load(cfg, a.config, a.sets, a.n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "shadow-trainer: %s\n", err);
        goto out;
    }
    struct ss_cluster_id me = {SS_CLUSTER_TRAINER, (uint32_t)a.rank};
    /* --eval-only binds nothing: it may run on any host */
    const char *bind = a.eval_only ? ss_cluster_no_bind : a.bind;
    if (a.rank > UINT32_MAX || !(cluster = ss_cluster_new(cfg, &me, bind, err, sizeof err))) {
        fprintf(stderr, "shadow-trainer: %s\n", err[0] ? err : "--rank is too large");
        goto out;
    }
    if (s_check_labels(cfg, &a))
        goto out;
    if (!a.eval_only && cfg->train_files.n == 0) {
        fprintf(stderr, "shadow-trainer: no training data: set data.train in %s or "
                "--set data.train=FILE\n", a.config);
        goto out;
    }
    snprintf(role, sizeof role, "trainer-%ld", a.rank);
    ss_log_init(role, ss_log_parse_level(cfg->log_level));
    ss_cfg_log(cfg);  /* the effective config, for the log */
    if (!a.eval_only && s_check_data(cfg) != 0) {
        rc = TR_EXIT_NO_INPUT;
        goto out;
    }
    {
        char blas[256];
        tr_blas_describe(blas, sizeof blas);
        SS_LOG(SS_LOG_INFO, "dense math: %s", blas);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = s_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    ss_sigstart_release();  /* one that came since the start is taken now */
    tr = tr_train_new(cfg, cluster, err, sizeof err);
    if (!tr) {
        SS_LOG(SS_LOG_ERROR, "%s", err);
        goto out;
    }
    int port = ss_cluster_metrics_port(cluster);
    if (port) {
        char labels[128];
        snprintf(labels, sizeof labels, "job=\"%s\",role=\"trainer\",rank=\"%ld\"",
                 cfg->job_name, a.rank);
        metrics = ss_metrics_new(ss_cluster_bind_endpoint(cluster), port, labels,
                                 tr_train_metrics, tr, err, sizeof err);
        if (!metrics) {
            SS_LOG(SS_LOG_ERROR, "%s", err);
            goto out;
        }
        const char *mh = ss_metrics_host(metrics);
        SS_LOG(SS_LOG_INFO, "metrics: http://%s:%d/metrics%s", strcmp(mh, "*") ? mh : "localhost",
               port, strcmp(mh, "*") ? "" : " (every interface)");
    }
    if (ss_cluster_admin_bind_endpoint(cluster)) {
        struct tr_admin_conf ac = {tr_train_zctx(tr), cluster, cfg, tr_train_curve(tr),
                                   tr_train_stats_fn, tr};
        if (!(admin = tr_admin_new(&ac, err, sizeof err))) {
            SS_LOG(SS_LOG_ERROR, "%s", err);
            goto out;
        }
        ss_auth_warn_plain_bind(ss_cluster_admin_bind_endpoint(cluster), cfg->security.curve,
                                "trainer admin");
        SS_LOG(SS_LOG_INFO, "admin: %s (shadow-ctl -t trainer:%ld)",
               ss_cluster_admin_endpoint(cluster, (size_t)a.rank), a.rank);
    }
    rc = s_run(tr, cfg, &a);
    rc = rc == TR_EXIT_CHECKPOINTED || rc == TR_EXIT_STOPPED_KEPT || rc == TR_EXIT_PIPE ||
                 rc == TR_EXIT_SAVE_FAILED ? rc
         : rc ? 1 : 0;
out:
    tr_admin_destroy(&admin);
    ss_metrics_destroy(&metrics);
    tr_train_destroy(&tr);
    ss_cluster_destroy(&cluster);
    ss_free(a.sets);
    ss_free(cfg);
    return rc;
}
